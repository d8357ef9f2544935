"""WebSearch and WebFetch, as Claude Code's agents name them, through the Messages API's
server tools (`web_search`, `web_fetch`).

Each call is one request of its own to the session's model, offering only that server tool,
which the API runs: WebSearch asks for the query (with the call's `allowed_domains` /
`blocked_domains`); WebFetch asks for the one URL, with `allowed_domains` set to that URL's
host, so the request can fetch nothing but the page that was approved, and the model answers
the call's `prompt` from it. The tool's result is the model's text, and for a search the
pages found (title and address). The request's usage (tokens, the fetched page as input
tokens, `$10 per 1,000 searches`) is the calling agent's (`WebAccess.record`).

Both need approval like Bash (a URL can carry data out); `WebFetch(domain:example.com)`
rules match a fetch by its host (`permission_rules`). They change nothing, so they may run in
plan mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ...messages_api.shapes import JSON
from ...messages_api.usage import Usage, cost_usd
from ..events import ModelResponse
from ..model.client import ModelClient, ModelRequest
from .base import InputT, Tool, ToolContext, ToolError

__all__ = ["WebAccess", "WebFetchTool", "WebSearchTool"]

WEB_SEARCH_TOOL = "web_search_20250305"
WEB_FETCH_TOOL = "web_fetch_20250910"
MAX_SEARCHES = 3  # server searches one WebSearch call may make
WEB_MAX_TOKENS = 2048
_SYSTEM = (
    "You look things up on the web for another agent and report what you found, plainly "
    "and briefly, with the addresses of your sources. Use the web tool; do not answer from "
    "memory."
)


@dataclass
class WebAccess:
    """What the web tools need from their session: a model client, the model, and where
    the usage of their requests goes (`record(agent_id, usage, cost_usd)`)."""

    client: ModelClient
    model: str
    record: Callable[[str, Usage, float], None]

    async def ask(self, agent_id: str, tool: dict[str, JSON], text: str) -> ModelResponse:
        request = ModelRequest(
            model=self.model,
            system=[{"type": "text", "text": _SYSTEM}],
            tools=[tool],
            messages=[{"role": "user", "content": [{"type": "text", "text": text}]}],
            max_tokens=WEB_MAX_TOKENS,
        )
        response: ModelResponse | None = None
        async for event in self.client.stream(request):
            if isinstance(event, ModelResponse):
                response = event
        if response is None:
            raise ToolError("The web request ended without an answer.")
        cost = cost_usd(response.usage, response.model, response.service_tier)
        self.record(agent_id, response.usage, cost)
        return response


def _access(ctx: ToolContext) -> WebAccess:
    web = ctx.services.web
    if not isinstance(web, WebAccess):
        raise ToolError("Web access is not available in this session.")
    return web


def _text(response: ModelResponse) -> str:
    return "\n".join(
        str(b.get("text", "")) for b in response.content if b.get("type") == "text"
    ).strip()


def _errors(response: ModelResponse, kind: str) -> list[str]:
    codes = []
    for block in response.content:
        content: object = block.get("content")  # a server tool's error result: an object
        if block.get("type") == kind and isinstance(content, dict) and "error_code" in content:
            codes.append(str(content["error_code"]))
    return codes


def _pages(content: object) -> list[str]:
    """The pages of a web_search_tool_result's content (a list of results; an error result
    holds an object instead: no pages)."""
    if not isinstance(content, list):
        return []
    return [f"- {r.get('title', '')}: {r.get('url', '')}" for r in content]


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WebSearchInput(_Input):
    query: str = Field(min_length=2, description="What to search for.")
    allowed_domains: list[str] | None = Field(
        default=None, description="Only results from these domains (e.g. ['example.org'])."
    )
    blocked_domains: list[str] | None = Field(
        default=None, description="Never results from these domains."
    )


class _WebTool(Tool[InputT]):
    """A tool answered by the model's own web tool: it reads, never changes anything here, so
    it runs beside other calls and in plan mode."""

    concurrency_safe = True
    allowed_in_plan = True


class WebSearchTool(_WebTool[WebSearchInput]):
    name = "WebSearch"
    description = (
        "Search the web. Returns what was found - a short account and the pages (title and "
        "address) - for information newer than your training or facts to check. Narrow it "
        "with allowed_domains or blocked_domains. Fetch a page with WebFetch to read it."
    )
    input_model = WebSearchInput

    def permission_subject(self, args: WebSearchInput) -> str:
        return args.query

    async def run(self, args: WebSearchInput, ctx: ToolContext) -> str:
        web = _access(ctx)
        tool: dict[str, JSON] = {"type": WEB_SEARCH_TOOL, "name": "web_search"}
        tool["max_uses"] = MAX_SEARCHES
        if args.allowed_domains:
            tool["allowed_domains"] = list(args.allowed_domains)
        elif args.blocked_domains:
            tool["blocked_domains"] = list(args.blocked_domains)
        text = f"Search the web for:\n<web-search-query>{args.query}</web-search-query>"
        response = await web.ask(ctx.agent_id, tool, text)
        failed = _errors(response, "web_search_tool_result")
        pages = [
            page
            for b in response.content
            if b.get("type") == "web_search_tool_result"
            for page in _pages(b.get("content"))
        ]
        if not pages and failed:
            raise ToolError(f"The web search failed ({', '.join(failed)}).")
        answer = _text(response) or "(no account)"
        links = "\n".join(pages) if pages else "(no pages found)"
        return f"Web search: {args.query}\n\n{answer}\n\nPages:\n{links}"


class WebFetchInput(_Input):
    url: str = Field(min_length=1, description="The address to fetch (http or https).")
    prompt: str = Field(min_length=1, description="What to find out from the page.")

    @field_validator("url")
    @classmethod
    def _web_address(cls, value: str) -> str:
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http(s) address with a host")
        return value.strip()


class WebFetchTool(_WebTool[WebFetchInput]):
    name = "WebFetch"
    description = (
        "Fetch one web page and answer a question about it: give the url and a prompt saying "
        "what to find out. Returns the answer drawn from the page. Only the page asked for is "
        "fetched."
    )
    input_model = WebFetchInput

    def permission_subject(self, args: WebFetchInput) -> str:
        return args.url

    def describe(self, args: WebFetchInput) -> str:
        return f"WebFetch: {args.url}"

    async def run(self, args: WebFetchInput, ctx: ToolContext) -> str:
        web = _access(ctx)
        host = urlsplit(args.url).hostname or ""
        tool: dict[str, JSON] = {
            "type": WEB_FETCH_TOOL,
            "name": "web_fetch",
            "max_uses": 1,
            "allowed_domains": [host],
        }
        text = (
            f"Fetch this page:\n<web-fetch-url>{args.url}</web-fetch-url>\n"
            f"Then answer from it:\n{args.prompt}"
        )
        response = await web.ask(ctx.agent_id, tool, text)
        failed = _errors(response, "web_fetch_tool_result")
        if failed:
            raise ToolError(f"Could not fetch {args.url} ({', '.join(failed)}).")
        fetched = any(b.get("type") == "web_fetch_tool_result" for b in response.content)
        if not fetched:
            raise ToolError(f"{args.url} was not fetched (the web tool was not used).")
        return _text(response) or "(the page gave no answer)"
