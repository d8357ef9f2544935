"""SSE event order and payloads, and what the real SDK accumulates from them (sync + async)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from forkagent_jupyter.emulator import Emulator, Reply
from forkagent_jupyter.emulator.sse import StreamOptions
from forkagent_jupyter.messages_api.validation import sign_thinking

from .conftest import MODEL, assistant, user

TOOLS: list[Any] = [
    {
        "name": "get_weather",
        "description": "Weather for a place.",
        "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}},
    }
]
WEATHER_INPUT = {"location": "San Francisco, CA", "units": ["c", "f"], "deep": {"n": 1, "ok": True}}
THINKING = {"type": "enabled", "budget_tokens": 1024}

MIXED = Reply(
    (
        {"type": "thinking", "thinking": "The user wants weather. I should call the tool."},
        {"type": "text", "text": "Let me check the weather for you right now."},
        {"type": "tool_use", "name": "get_weather", "input": WEATHER_INPUT},
        {"type": "tool_use", "name": "get_weather", "input": {"location": "Paris"}},
    )
)


def mixed_kwargs() -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 4096,
        "thinking": THINKING,
        "tools": TOOLS,
        "messages": [user("What is the weather in SF and Paris?")],
    }


def check_mixed(message: Any) -> None:
    kinds = [b.type for b in message.content]
    assert kinds == ["thinking", "text", "tool_use", "tool_use"]
    thinking, text, call1, call2 = message.content
    assert thinking.thinking == MIXED.content[0]["thinking"]
    assert thinking.signature == sign_thinking(thinking.thinking)
    assert text.text == "Let me check the weather for you right now."
    assert call1.name == "get_weather" and call1.input == WEATHER_INPUT
    assert list(call1.input) == list(WEATHER_INPUT)  # key order survives
    assert call2.input == {"location": "Paris"}
    assert call1.id.startswith("toolu_01") and call2.id.startswith("toolu_01")
    assert call1.id != call2.id
    assert message.stop_reason == "tool_use"
    assert message.stop_sequence is None
    assert message.id.startswith("msg_01")
    assert message.model == MODEL


def test_stream_accumulates_the_scripted_message(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.script(MIXED, MIXED)
    with sync_client.messages.stream(**mixed_kwargs()) as stream:
        streamed = stream.get_final_message()
    created = sync_client.messages.create(**mixed_kwargs())
    check_mixed(streamed)
    check_mixed(created)
    assert streamed.usage.output_tokens == created.usage.output_tokens > 1
    assert streamed.usage.input_tokens == created.usage.input_tokens


@pytest.mark.anyio
async def test_async_stream_and_create_accumulate_the_same(
    emulator: Emulator, async_client: anthropic.AsyncAnthropic
) -> None:
    emulator.script(MIXED, MIXED)
    async with async_client.messages.stream(**mixed_kwargs()) as stream:
        texts = [t async for t in stream.text_stream]
        streamed = await stream.get_final_message()
    created = await async_client.messages.create(**mixed_kwargs())
    assert "".join(texts) == "Let me check the weather for you right now."
    assert len(texts) >= 2  # text arrives in several deltas
    check_mixed(streamed)
    check_mixed(created)


def test_echoed_thinking_verifies_and_tool_loop_continues(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.script(MIXED, "It is sunny in both places.")
    first = sync_client.messages.create(**mixed_kwargs())
    results = [
        {"type": "tool_result", "tool_use_id": b.id, "content": "sunny"}
        for b in first.content
        if b.type == "tool_use"
    ]
    history = [*mixed_kwargs()["messages"], assistant(first.to_dict()["content"]), user(results)]
    second = sync_client.messages.create(**{**mixed_kwargs(), "messages": history})
    assert second.content[0].text == "It is sunny in both places."
    assert second.stop_reason == "end_turn"
    assert emulator.violations == []


def raw_events(client: anthropic.Anthropic, **kwargs: Any) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events as sent (name, data), read through the SDK's raw streaming response."""
    with client.messages.with_streaming_response.create(stream=True, **kwargs) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["request-id"].startswith("req_")
        lines = list(response.iter_lines())
    events, name = [], None
    for line in lines:
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            assert name is not None
            data = json.loads(line[len("data: ") :])
            events.append((name, data))
            name = None
    return events


def test_event_order_indices_and_usage(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.script(MIXED)
    events = raw_events(sync_client, **mixed_kwargs())
    names = [n for n, _ in events]
    assert all(data["type"] == name for name, data in events)
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"]["output_tokens"] == 1
    assert start["usage"]["input_tokens"] > 0
    assert set(start["usage"]["cache_creation"]) == {
        "ephemeral_5m_input_tokens",
        "ephemeral_1h_input_tokens",
    }
    # per block: start, deltas, stop; indices contiguous from 0
    body = events[1:-2]
    blocks: list[list[tuple[str, dict[str, Any]]]] = []
    for name, data in body:
        if name == "content_block_start":
            assert data["index"] == len(blocks)
            blocks.append([])
        blocks[-1].append((name, data))
        assert data["index"] == len(blocks) - 1
    assert len(blocks) == 4
    for seq in blocks:
        assert seq[0][0] == "content_block_start" and seq[-1][0] == "content_block_stop"
        assert all(n == "content_block_delta" for n, _ in seq[1:-1])
    thinking, text, tool, _ = blocks
    assert thinking[0][1]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    kinds = [d["delta"]["type"] for _, d in thinking[1:-1]]
    assert kinds[-1] == "signature_delta" and kinds.count("signature_delta") == 1
    assert set(kinds[:-1]) == {"thinking_delta"} and len(kinds) >= 3
    assert text[0][1]["content_block"] == {"type": "text", "text": ""}
    assert len(text) >= 4  # several text_delta chunks
    start_block = tool[0][1]["content_block"]
    assert start_block["input"] == {} and start_block["name"] == "get_weather"
    fragments = [d["delta"]["partial_json"] for _, d in tool[1:-1]]
    assert fragments[0] == "" and len(fragments) > 2
    assert json.loads("".join(fragments)) == WEATHER_INPUT
    delta = events[-2][1]
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert delta["usage"]["output_tokens"] > 1
    assert delta["usage"]["input_tokens"] == start["usage"]["input_tokens"]
    assert delta["usage"]["cache_read_input_tokens"] == start["usage"]["cache_read_input_tokens"]


def test_redacted_thinking_and_omitted_display(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    reply = Reply(
        (
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
            {"type": "thinking", "thinking": "secret reasoning"},
            {"type": "text", "text": "Done."},
        )
    )
    emulator.script(reply, reply)
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024, "display": "omitted"},
        "messages": [user("hi")],
    }
    with sync_client.messages.stream(**kwargs) as stream:
        streamed = stream.get_final_message()
    created = sync_client.messages.create(**kwargs)
    for message in (streamed, created):
        redacted, thinking, text = message.content
        assert redacted.type == "redacted_thinking"
        assert redacted.data == "EmwKAhgBEgy3va3pzix/LafPsn4a"
        assert thinking.type == "thinking" and thinking.thinking == ""
        assert thinking.signature == sign_thinking("")
        assert text.type == "text" and text.text == "Done."


def test_ping_and_unknown_events_are_tolerated() -> None:
    options = StreamOptions(ping_every=1, unknown_event_at=2, text_chunk=3)
    with Emulator(strict=True, stream_options=options) as emu:
        emu.script(MIXED, MIXED)
        client = anthropic.Anthropic(base_url=emu.base_url, api_key="k")
        names = [n for n, _ in raw_events(client, **mixed_kwargs())]
        assert names[1] == "ping" and names.count("ping") > 10
        assert names.count("emulator_unknown_event") == 1
        with client.messages.stream(**mixed_kwargs()) as stream:
            seen = [event.type for event in stream]
            message = stream.get_final_message()
        assert "emulator_unknown_event" in seen  # yielded unchanged, accumulation unaffected
        check_mixed(message)
        client.close()
        emu.check()


def test_empty_reply_still_bills_output(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.script(Reply(({"type": "text", "text": ""},)))
    message = sync_client.messages.create(model=MODEL, max_tokens=50, messages=[user("hi")])
    assert message.usage.output_tokens >= 1
    assert message.stop_reason == "end_turn"
