"""What a worker displays, made safe to show on its card.

A card's output area (an ipywidgets `Output`) renders its outputs as trusted: HTML in them is
not sanitized, its `<script>` and event handlers run, and `application/javascript` runs. A
worker's code is the model's (and what it displays may be data the model read), so script in
its output would run in the page, where the server's token is at hand to run code in the
kernel. A worker's display bundle is therefore cut down to kinds that cannot run script:
`text/plain`, images, `application/json`, `text/latex`, and `text/html` rebuilt from an
allowlist of tags and attributes (tables, text formatting, lists, links to http(s) and
mailto, images from http(s) or data URLs); scripts, styles (which could hide or cover the
page's own buttons), frames, forms, SVG and every `on...` attribute are dropped. Markdown is
rendered as the kernel renders model text (`markdown.py`). A bundle left with nothing says in
its text which kinds were not shown.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from typing import Any

from .markdown import markdown_html

__all__ = ["safe_bundle", "safe_html"]

SAFE_MIMES = frozenset(
    {
        "text/plain",
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "image/svg+xml",  # JupyterLab shows SVG as an <img>: its script does not run
        "application/json",
        "text/latex",
    }
)
_TAGS = frozenset(
    str.split(
        "a abbr b blockquote br caption center cite code col colgroup dd del details dfn div dl dt "
        "em figcaption figure h1 h2 h3 h4 h5 h6 hr i img ins kbd li mark ol p pre q s samp small "
        "span strong sub summary sup table tbody td tfoot th thead tr tt u ul var wbr"
    )
)
_VOID = frozenset({"br", "col", "hr", "img", "wbr"})
_DROP_WITH_CONTENT = frozenset(
    str.split(
        "script style iframe frame frameset object embed applet template noscript svg math "
        "textarea select option title head xmp plaintext noembed noframes"
    )
)
_ATTRS = frozenset(
    str.split(
        "align alt border cellpadding cellspacing class colspan rowspan headers scope title valign "
        "width height href src open start reversed type abbr span"
    )
)
_SAFE_URL = re.compile(r"^(?:https?:|mailto:|#)", re.IGNORECASE)
_SAFE_IMAGE = re.compile(r"^(?:https?:|data:image/(?:png|jpeg|gif|webp);base64,)", re.IGNORECASE)


class _Cleaner(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.open: list[str] = []
        self.dropping = 0  # depth inside an element dropped with its content
        self.dropped_tag: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.dropping:
            if tag in _DROP_WITH_CONTENT:
                self.dropped_tag.append(tag)
                self.dropping += 1
            return
        if tag in _DROP_WITH_CONTENT:
            self.dropped_tag.append(tag)
            self.dropping = 1
            return
        if tag not in _TAGS:
            return
        kept = []
        for name, value in attrs:
            value = value or ""
            if name not in _ATTRS:
                continue
            url = re.sub(r"[\x00-\x20]", "", html.unescape(value))
            if name == "href" and not _SAFE_URL.match(url):
                continue
            if name == "src" and (tag != "img" or not _SAFE_IMAGE.match(url)):
                continue
            kept.append(f' {name}="{html.escape(value, quote=True)}"')
        self.out.append(f"<{tag}{''.join(kept)}>")
        if tag not in _VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID and self.open and self.open[-1] == tag and not self.dropping:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if self.dropping:
            if self.dropped_tag and tag == self.dropped_tag[-1]:
                self.dropped_tag.pop()
                self.dropping -= 1
            return
        if tag in self.open:
            while self.open:
                last = self.open.pop()
                self.out.append(f"</{last}>")
                if last == tag:
                    break

    def handle_data(self, data: str) -> None:
        if not self.dropping:
            self.out.append(html.escape(data, quote=False))

    def result(self) -> str:
        self.close()
        return "".join(self.out) + "".join(f"</{t}>" for t in reversed(self.open))


def safe_html(text: str) -> str:
    """`text` rebuilt from the allowed tags and attributes only (see the module doc)."""
    cleaner = _Cleaner()
    cleaner.feed(text)
    return cleaner.result()


def safe_bundle(data: dict[str, Any]) -> dict[str, Any]:
    """A worker's display bundle as a card may show it (see the module doc)."""
    out = {mime: value for mime, value in data.items() if mime in SAFE_MIMES}
    html_text = data.get("text/html")
    if isinstance(html_text, list):  # nbformat may split it into lines
        html_text = "".join(str(part) for part in html_text)
    if isinstance(html_text, str):
        out["text/html"] = safe_html(html_text)
    elif isinstance(data.get("text/markdown"), str):
        out["text/html"] = markdown_html(data["text/markdown"])
    if not out:
        kinds = ", ".join(sorted(str(m) for m in data)) or "nothing"
        out["text/plain"] = f"[output of type {kinds} not shown on the card: it could run script]"
    return out
