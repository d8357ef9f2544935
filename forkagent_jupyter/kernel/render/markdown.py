"""Model text shown as Markdown, safely.

JupyterLab renders a kernel's `text/markdown` output as trusted: raw HTML in it is not
sanitized, so a model answer carrying `<img src=x onerror=...>` (say, an instruction planted in
the data the model read) would run script in the page, with the user's server token at hand.
Model text is therefore rendered here, to HTML with raw HTML escaped and unsafe links dropped
(markdown-it: CommonMark, tables, line breaks kept), and shown as `text/html`, which every
frontend prefers to Markdown; the Markdown source and plain text stay in the bundle for the
rest. The same HTML goes into widget cards, which set it as the page's HTML as it is.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

__all__ = ["SafeMarkdown", "code_span", "fenced", "markdown_bundle", "markdown_html"]


@functools.cache
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False, "breaks": True}).enable("table")


def fenced(text: str, info: str = "") -> str:
    """`text` as a Markdown code block whose fence is longer than any run of backticks in it,
    so a result that holds its own ``` blocks stays inside (CommonMark closes a block only at a
    fence at least as long as the opening one)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def code_span(text: str) -> str:
    """`text` as inline Markdown code, delimited by more backticks than it holds (padded with
    a space when it starts or ends with one)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def markdown_html(text: str) -> str:
    """`text` (Markdown from a model) as HTML: tables, code, emphasis; never raw HTML."""
    return str(_parser().render(text))


def markdown_bundle(text: str, footer_html: str = "", footer_text: str = "") -> dict[str, str]:
    """A display bundle of model Markdown; `footer_html` is ours (trusted), appended as is;
    `footer_text` is what of it the plain text keeps."""
    return {
        "text/html": markdown_html(text) + footer_html,
        "text/markdown": text + (f"\n\n{footer_html}" if footer_html else ""),
        "text/plain": text + (f"\n\n{footer_text}" if footer_text else ""),
    }


class SafeMarkdown:
    """Like IPython's `Markdown`, for text a model wrote (see the module doc)."""

    def __init__(self, text: str, footer_html: str = "", footer_text: str = "") -> None:
        self.text = text
        self.footer_html = footer_html
        self.footer_text = footer_text

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        return markdown_bundle(self.text, self.footer_html, self.footer_text)
