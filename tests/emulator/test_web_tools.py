"""The web_search and web_fetch server tools, served offline from the emulator's corpus, read
by the real SDK (non-streaming and streaming): result blocks, usage, price, domain filters."""

from __future__ import annotations

from typing import Any

import anthropic

from forkagent_jupyter.messages_api.usage import WEB_SEARCH_USD, Usage, cost_usd

MODEL = "claude-sonnet-5-5"
SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}


def ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def test_search_result_blocks_usage_and_price(
    emulator: Any, sync_client: anthropic.Anthropic
) -> None:
    message = sync_client.messages.create(
        model=MODEL,
        max_tokens=1024,
        tools=[SEARCH],  # type: ignore[list-item]
        messages=ask("<web-search-query>group rows by a key</web-search-query>"),
    )
    kinds = [b.type for b in message.content]
    assert kinds == ["server_tool_use", "web_search_tool_result", "text"]
    use, result, _text = message.content
    assert use.type == "server_tool_use" and use.id.startswith("srvtoolu_")
    assert use.input == {"query": "group rows by a key"}
    assert result.type == "web_search_tool_result" and result.tool_use_id == use.id
    assert isinstance(result.content, list)
    assert next(r.url for r in result.content) == "https://docs.example.org/frames/groupby.html"
    assert message.usage.server_tool_use is not None
    assert message.usage.server_tool_use.web_search_requests == 1
    assert message.usage.server_tool_use.web_fetch_requests == 0
    [entry] = emulator.ledger.entries()
    tokens = cost_usd(Usage.from_api({**entry.usage, "server_tool_use": None}), MODEL)
    assert entry.cost_usd == tokens + WEB_SEARCH_USD


def test_fetch_streamed_and_domain_filters(sync_client: anthropic.Anthropic) -> None:
    url = "https://blog.example.com/2026/prompt-caching"
    fetch = {"type": "web_fetch_20250910", "name": "web_fetch", "allowed_domains": ["example.com"]}
    with sync_client.messages.stream(
        model=MODEL,
        max_tokens=1024,
        tools=[fetch],  # type: ignore[list-item]
        messages=ask(f"<web-fetch-url>{url}</web-fetch-url>"),
    ) as stream:
        message = stream.get_final_message()
    _use, result, text = message.content
    assert result.type == "web_fetch_tool_result"
    assert result.content.type == "web_fetch_result" and result.content.url == url
    assert "first request writes the prefix" in text.text  # type: ignore[union-attr]
    assert message.usage.server_tool_use is not None
    assert message.usage.server_tool_use.web_fetch_requests == 1
    # a host outside allowed_domains, and a page the corpus lacks
    for target, code in [
        ("https://field-notes.example.net/penguins/bill-length", "url_not_allowed"),
        ("https://example.com/nothing-here", "url_not_accessible"),
    ]:
        message = sync_client.messages.create(
            model=MODEL,
            max_tokens=1024,
            tools=[fetch],  # type: ignore[list-item]
            messages=ask(f"<web-fetch-url>{target}</web-fetch-url>"),
        )
        result = message.content[1]
        assert result.type == "web_fetch_tool_result"
        assert result.content.type == "web_fetch_tool_result_error"
        assert result.content.error_code == code
