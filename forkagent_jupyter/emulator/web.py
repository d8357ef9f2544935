"""The web server tools, served offline: `web_search` and `web_fetch` over a small corpus.

When a reply holds a `server_tool_use` block for a server tool the request declares
(`{"type": "web_search_20250305", "name": "web_search", ...}`, `web_fetch_20250910`), the
emulator runs it as the API would and puts its result block right after it:

* `web_search` answers `web_search_tool_result` with up to `max_results` pages of the corpus
  whose title or text holds a word of the query (`web_search_result`: url, title, page_age,
  `encrypted_content`), honouring `allowed_domains` / `blocked_domains` and `max_uses`
  (`web_search_tool_result_error` with `max_uses_exceeded`);
* `web_fetch` answers `web_fetch_tool_result` with the page as a text `document`
  (`web_fetch_result`), or a `web_fetch_tool_result_error` (`url_not_allowed` outside the
  allowed domains or inside blocked ones, `url_not_accessible` for a page the corpus lacks,
  `max_uses_exceeded`).

A reply that ends with a server result gets the model's text after it (what it read: the
titles and addresses found, or the page's text), so the offline model needs to decide only
what to search for or fetch. The usage says the calls (`server_tool_use`:
`web_search_requests`, `web_fetch_requests`) and bills what was fetched as input tokens, as
the API does (a search costs $10 per 1,000 on top: `messages_api.usage.WEB_SEARCH_USD`).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .brains import Reply

__all__ = ["DEFAULT_PAGES", "WebCorpus", "WebPage", "WebUse"]


@dataclass(frozen=True)
class WebPage:
    url: str
    title: str
    text: str
    page_age: str | None = None

    @property
    def host(self) -> str:
        return (urlsplit(self.url).hostname or "").lower()


DEFAULT_PAGES = (
    WebPage(
        "https://docs.example.org/frames/groupby.html",
        "Grouping rows: split, apply, combine",
        "A group-by splits a table into groups of rows that share a key, applies a function "
        "to each group (a sum, a mean, a count) and combines the results into a new table. "
        "Missing keys form no group unless asked for.",
        "March 3, 2026",
    ),
    WebPage(
        "https://docs.example.org/frames/merge.html",
        "Joining tables on keys",
        "A merge joins two tables on one or more key columns: inner keeps the keys found in "
        "both, left keeps every row of the left table, outer keeps all keys.",
        "March 3, 2026",
    ),
    WebPage(
        "https://field-notes.example.net/penguins/bill-length",
        "Bill length of three penguin species",
        "Across three islands, Gentoo and Chinstrap penguins have longer bills than Adelie "
        "penguins; bill depth separates Gentoo from the other two.",
        "July 19, 2025",
    ),
    WebPage(
        "https://blog.example.com/2026/prompt-caching",
        "Prompt caching, measured",
        "Caching a long shared prefix cut the input cost of a fan-out of sixteen workers to "
        "about a sixth: the first request writes the prefix, the others read it.",
        "October 2, 2026",
    ),
)


@dataclass
class WebUse:
    """What the server tools did in one response."""

    web_search_requests: int = 0
    web_fetch_requests: int = 0
    fetched_text: list[str] = field(default_factory=list)


@dataclass
class WebCorpus:
    """The pages the emulator's web knows (replace `pages` in a test for its own)."""

    pages: list[WebPage] = field(default_factory=lambda: list(DEFAULT_PAGES))
    max_results: int = 5

    def page(self, url: str) -> WebPage | None:
        want = url.rstrip("/")
        return next((p for p in self.pages if p.url.rstrip("/") == want), None)

    def search(
        self, query: str, allowed: Sequence[str] | None, blocked: Sequence[str] | None
    ) -> list[WebPage]:
        words = [w for w in re.findall(r"[a-z0-9]+", query.lower()) if len(w) > 2]
        hits = []
        for page in self.pages:
            if not _domain_ok(page.host, allowed, blocked):
                continue
            hay = f"{page.title} {page.text}".lower()
            score = sum(hay.count(w) for w in words)
            if score:
                hits.append((-score, page.url, page))
        return [page for _s, _u, page in sorted(hits)][: self.max_results]

    def serve(
        self, reply: Reply, body: Mapping[str, Any], new_id: Callable[[], str]
    ) -> tuple[Reply, WebUse]:
        """`reply` with each server tool call answered (see the module doc)."""
        tools = {
            str(t.get("name")): t
            for t in body.get("tools") or []
            if isinstance(t, Mapping)
            and str(t.get("type", "")).startswith(("web_search_", "web_fetch_"))
        }
        use = WebUse()
        out: list[dict[str, Any]] = []
        last_result: dict[str, Any] | None = None
        for block in reply.blocks():
            if block.get("type") != "server_tool_use" or block.get("name") not in tools:
                out.append(block)
                if block.get("type") == "text":
                    last_result = None
                continue
            if not block.get("id"):
                rest = {k: v for k, v in block.items() if k not in ("type", "id")}
                block = {"type": "server_tool_use", "id": new_id(), **rest}
            out.append(block)
            spec = tools[str(block["name"])]
            if block["name"] == "web_search":
                last_result = self._search(block, spec, use)
            else:
                last_result = self._fetch(block, spec, use)
            out.append(last_result)
        if last_result is not None:
            out.append({"type": "text", "text": _summary(last_result)})
        return Reply(tuple(out), reply.stop_reason, reply.stop_details), use

    def _search(self, block: Mapping[str, Any], spec: Mapping[str, Any], use: WebUse) -> Any:
        limit = spec.get("max_uses")
        tool_use_id = block["id"]
        if isinstance(limit, int) and use.web_search_requests >= limit:
            error = {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}
            return {"type": "web_search_tool_result", "tool_use_id": tool_use_id, "content": error}
        use.web_search_requests += 1
        query = str((block.get("input") or {}).get("query", ""))
        pages = self.search(query, spec.get("allowed_domains"), spec.get("blocked_domains"))
        results = [
            {
                "type": "web_search_result",
                "url": p.url,
                "title": p.title,
                "encrypted_content": base64.b64encode(p.text.encode()).decode("ascii"),
                "page_age": p.page_age,
            }
            for p in pages
        ]
        use.fetched_text += [f"{p.title} {p.text}" for p in pages]
        return {"type": "web_search_tool_result", "tool_use_id": tool_use_id, "content": results}

    def _fetch(self, block: Mapping[str, Any], spec: Mapping[str, Any], use: WebUse) -> Any:
        tool_use_id = block["id"]

        def error(code: str) -> dict[str, Any]:
            content = {"type": "web_fetch_tool_result_error", "error_code": code}
            return {"type": "web_fetch_tool_result", "tool_use_id": tool_use_id, "content": content}

        limit = spec.get("max_uses")
        if isinstance(limit, int) and use.web_fetch_requests >= limit:
            return error("max_uses_exceeded")
        use.web_fetch_requests += 1
        url = str((block.get("input") or {}).get("url", ""))
        host = (urlsplit(url).hostname or "").lower()
        if not _domain_ok(host, spec.get("allowed_domains"), spec.get("blocked_domains")):
            return error("url_not_allowed")
        page = self.page(url)
        if page is None:
            return error("url_not_accessible")
        use.fetched_text.append(page.text)
        document = {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": page.text},
            "title": page.title,
        }
        content = {
            "type": "web_fetch_result",
            "url": page.url,
            "content": document,
            "retrieved_at": "2026-11-25T12:00:00Z",
        }
        return {"type": "web_fetch_tool_result", "tool_use_id": tool_use_id, "content": content}


def _domain_ok(host: str, allowed: Any, blocked: Any) -> bool:
    def hit(domains: Any) -> bool:
        return any(
            host == str(d).lower() or host.endswith("." + str(d).lower()) for d in domains or ()
        )

    if allowed and not hit(allowed):
        return False
    return not hit(blocked)


def _summary(result: Mapping[str, Any]) -> str:
    content = result.get("content")
    if isinstance(content, list):
        if not content:
            return "The search found nothing."
        lines = [f"- {r['title']} ({r['url']})" for r in content]
        return "The search found:\n" + "\n".join(lines)
    if isinstance(content, Mapping) and content.get("type") == "web_fetch_result":
        doc = content.get("content") or {}
        text = str((doc.get("source") or {}).get("data", ""))
        return f"{doc.get('title', '')}\n\n{text[:2000]}"
    code = content.get("error_code") if isinstance(content, Mapping) else "unavailable"
    return f"The web tool failed: {code}."
