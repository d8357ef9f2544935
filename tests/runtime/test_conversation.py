"""A parent conversation with tool calls, through the real SDK against the strict emulator."""

from __future__ import annotations

import json
from typing import Any

import pytest

from forkagent_jupyter.messages_api.tokens import ByteTokenizer, flatten
from forkagent_jupyter.messages_api.usage import Usage

pytestmark = pytest.mark.anyio

CODE_TURN = "Compute something.\n\n```python\nx = 6 * 7\nprint('x is', x)\nx + 1\n```"


def assert_valid_history(messages: list[dict[str, Any]]) -> None:
    """Every tool_use is answered in the next message; no empty message; roles alternate."""
    for i, msg in enumerate(messages):
        assert msg["content"], f"message {i} is empty"
        if i:
            assert msg["role"] != messages[i - 1]["role"], f"two {msg['role']} messages at {i}"
        uses = [b["id"] for b in msg["content"] if b.get("type") == "tool_use"]
        if uses:
            nxt = messages[i + 1]["content"]
            answered = [b["tool_use_id"] for b in nxt if b.get("type") == "tool_result"]
            assert answered == uses


def ledger_usage(emulator: Any) -> Usage:
    total = Usage()
    for entry in emulator.ledger.entries():
        total = total + Usage.from_api(entry.usage)
    return total


async def test_multi_turn_with_tools_runs_to_end_turn(emulator: Any, make_session: Any) -> None:
    session = make_session()
    first = await session.ask(CODE_TURN)
    assert first.stop_reason == "end_turn", first.error
    assert [c.name for c in first.tool_calls] == ["Python"]
    assert first.tool_calls[0].result == "x is 42\n43"
    assert "x is 42" in first.text  # the final answer reports the output
    second = await session.ask("Again.\n\n```python\nx * 2\n```")
    assert second.stop_reason == "end_turn"
    assert second.tool_calls[0].result == "84"  # the namespace persisted between turns
    third = await session.ask("Thanks, that is all.")
    assert third.stop_reason == "end_turn" and third.tool_calls == []
    assert_valid_history(session.messages)
    assert len(session.messages) == 10
    # 5 requests; the session's totals are exactly what the emulator billed
    assert len(emulator.ledger.entries()) == 5
    assert session.usage == ledger_usage(emulator)
    assert session.usage == first.usage + second.usage + third.usage


def _breakpoint_tokens(body: dict[str, Any]) -> list[int]:
    """Cumulative token counts at each cache breakpoint of a request body."""
    blocks = flatten(body, ByteTokenizer())
    out, total = [], 0
    for block in blocks:
        total += block.tokens
        if block.cache_control is not None:
            out.append(total)
    return out


async def test_second_turn_reads_first_turns_prefix(emulator: Any, make_session: Any) -> None:
    session = make_session()
    await session.ask(CODE_TURN)
    before = len(emulator.ledger.entries())
    turn = await session.ask("And now?\n\n```python\nx\n```")
    bodies = [r.body for r in emulator.requests if r.path.startswith("/v1/messages")]
    entries = emulator.ledger.entries()
    # the first request of turn 2 reads everything the last request of turn 1 wrote
    expected = max(_breakpoint_tokens(bodies[before - 1]))
    assert entries[before].usage["cache_read_input_tokens"] == expected > 0
    assert turn.usage.cache_read_input_tokens > 0
    # the request bodies never carry more than 4 breakpoints
    assert all(len(_breakpoint_tokens(b)) <= 4 for b in bodies)


async def test_changing_the_tool_list_invalidates_the_cache(
    emulator: Any, make_session: Any
) -> None:
    session = make_session()
    await session.ask(CODE_TURN)
    session.contexts.tools = session.contexts.tools.without(["Grep"])
    turn = await session.ask("Once more.\n\n```python\nx\n```")
    first_of_turn = emulator.ledger.entries()[2]
    assert first_of_turn.usage["cache_read_input_tokens"] == 0
    assert first_of_turn.usage["cache_creation_input_tokens"] > 0
    assert turn.stop_reason == "end_turn"


async def test_history_is_json_and_key_order_is_stable(make_session: Any) -> None:
    session = make_session()
    await session.ask(CODE_TURN)
    dumped = json.dumps(session.messages)
    assert json.loads(dumped) == session.messages
    assert "cache_control" not in dumped  # markers live on request copies only
