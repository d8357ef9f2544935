"""The §6.4 prompt-cache worked examples, through the real SDK (usage as the SDK parses it)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import anyio
import pytest

from forkagent_jupyter.emulator import Emulator, Fault

from .conftest import (
    EPHEMERAL,
    MODEL,
    ONE_HOUR,
    assistant,
    control,
    cumulative,
    expected,
    filler,
    usage_of,
    user,
)

SYSTEM = filler("system", 6000)  # ~1500 tokens: above the 1024 minimum on its own


def text(t: str, **kw: Any) -> dict[str, Any]:
    return {"type": "text", "text": t, **kw}


def create(client: anthropic.Anthropic, body: dict[str, Any]) -> Any:
    return client.messages.create(**body)


def test_growing_conversation_with_automatic_caching(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.script("First answer.", "Second answer.")
    b1: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 100,
        "system": SYSTEM,
        "cache_control": EPHEMERAL,
        "messages": [user("Question one?")],
    }
    r1 = create(sync_client, b1)
    total1 = cumulative(b1)[-1]
    assert usage_of(r1) == expected(read=0, w1h=0, w5m=total1, total=total1)

    b2 = {**b1, "messages": [user("Question one?"), assistant("First answer."), user("Two?")]}
    with sync_client.messages.stream(**b2) as stream:
        r2 = stream.get_final_message()
    cum2 = cumulative(b2)
    assert cum2[1] == total1  # system + User(1): the prefix request 1 wrote
    assert usage_of(r2) == expected(read=total1, w1h=0, w5m=cum2[-1] - total1, total=cum2[-1])
    entries = emulator.ledger.entries()
    assert [e.hit_index for e in entries] == [-1, 1]
    assert [e.breakpoints for e in entries] == [[(1, "5m", total1)], [(3, "5m", cum2[-1])]]


def lookback_body(n: int, marks: set[int]) -> dict[str, Any]:
    blocks = [
        text(filler(f"b{i}", 480), **({"cache_control": EPHEMERAL} if i in marks else {}))
        for i in range(n)
    ]
    return {"model": MODEL, "max_tokens": 50, "messages": [user(blocks)]}


def test_lookback_window_of_twenty_blocks(emulator: Emulator) -> None:
    cum = cumulative(lookback_body(35, set()))
    assert cum[9] >= 1024
    first = anthropic.Anthropic(base_url=emulator.base_url, api_key="workspace-one")
    second = anthropic.Anthropic(base_url=emulator.base_url, api_key="workspace-two")
    for client in (first, second):
        r1 = create(client, lookback_body(10, {9}))
        assert usage_of(r1) == expected(0, 0, cum[9], cum[9])
        r2 = create(client, lookback_body(15, {14}))  # checks 15..1, hits 10
        assert usage_of(r2) == expected(cum[9], 0, cum[14] - cum[9], cum[14])
    # turn 3 with one breakpoint at 35 checks 35..16: misses, rewrites everything
    r3 = create(first, lookback_body(35, {34}))
    assert usage_of(r3) == expected(0, 0, cum[34], cum[34])
    # a second breakpoint at 15 would hit (in a workspace where 35 was never written)
    r3b = create(second, lookback_body(35, {14, 34}))
    assert usage_of(r3b) == expected(cum[14], 0, cum[34] - cum[14], cum[34])
    first.close()
    second.close()


def test_a_timestamp_breakpoint_never_hits(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    for stamp in ("2026-11-22T10:00:00Z", "2026-11-22T10:00:05Z", "2026-11-22T10:00:09Z"):
        body = {
            "model": MODEL,
            "max_tokens": 20,
            "system": [text(SYSTEM), text(f"Now: {stamp}", cache_control=EPHEMERAL)],
            "messages": [user("hello")],
        }
        cum = cumulative(body)
        usage = usage_of(create(sync_client, body))
        assert usage == expected(0, 0, cum[1], cum[-1])


def test_mixed_ttls_and_expiry_on_the_virtual_clock(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 20,
        "system": [text(SYSTEM, cache_control=ONE_HOUR)],
        "messages": [user([text(filler("question", 800), cache_control=EPHEMERAL)])],
    }
    cum = cumulative(body)
    sys_tok, last = cum[0], cum[-1]
    # fresh: 1h write up to the system block, 5m write for the rest
    assert usage_of(create(sync_client, body)) == expected(0, sys_tok, last - sys_tok, last)
    # immediately again: the last breakpoint hits
    assert usage_of(create(sync_client, body)) == expected(last, 0, 0, last)
    # 400 s later the 5m entry expired, the 1h one lives: read(A) + 5m-write(C - A)
    assert control(emulator, "POST", "clock", {"advance": 400})["now"] >= 400
    assert usage_of(create(sync_client, body)) == expected(sys_tok, 0, last - sys_tok, last)
    snapshot = control(emulator, "GET", "cache")
    ttls = sorted((e["ttl"], e["tokens"]) for e in snapshot["entries"])
    assert ttls == [("1h", sys_tok), ("5m", last)]
    # more than an hour later nothing lives
    emulator.clock.advance(3700)
    assert usage_of(create(sync_client, body)) == expected(0, sys_tok, last - sys_tok, last)


def test_read_then_one_hour_then_five_minute_writes(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    tool = {
        "name": "lookup",
        "description": filler("tool", 4400),
        "input_schema": {"type": "object"},
    }
    first = {
        "model": MODEL,
        "max_tokens": 20,
        "tools": [{**tool, "cache_control": ONE_HOUR}],
        "system": SYSTEM,
        "messages": [user("hi")],
    }
    cum = cumulative(first)
    assert usage_of(create(sync_client, first)) == expected(0, cum[0], 0, cum[-1])
    second = {
        **first,
        "system": [text(SYSTEM, cache_control=ONE_HOUR)],
        "messages": [user([text("hi", cache_control=EPHEMERAL)])],
    }
    cum2 = cumulative(second)
    a, b, c = cum2[0], cum2[1], cum2[2]
    assert a == cum[0]
    # A = tools (hit), B = system (highest 1h above A), C = the last message block
    assert usage_of(create(sync_client, second)) == expected(a, b - a, c - b, c)


def test_below_the_minimum_nothing_is_cached(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 20,
        "system": [text("short system", cache_control=EPHEMERAL)],
        "cache_control": EPHEMERAL,
        "messages": [user("hi")],
    }
    total = cumulative(body)[-1]
    for _ in range(2):
        message = create(sync_client, body)
        assert usage_of(message) == expected(0, 0, 0, total)
        assert message.usage.cache_creation_input_tokens == 0  # 0, not None
    assert emulator.cache.snapshot() == []


def tiered_body(**kw: Any) -> dict[str, Any]:
    tool = {
        "name": "lookup",
        "description": filler("tool", 4400),
        "input_schema": {"type": "object"},
        "cache_control": EPHEMERAL,
    }
    body = {
        "model": MODEL,
        "max_tokens": 20,
        "tools": [tool],
        "system": [text(filler("sys", 600), cache_control=EPHEMERAL)],
        "messages": [user([text(filler("msg", 600), cache_control=EPHEMERAL)])],
    }
    body.update(kw)
    return body


def test_tool_choice_keeps_tools_and_system_tools_change_misses_all(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    base = tiered_body()
    cum = cumulative(base)
    assert usage_of(create(sync_client, base)) == expected(0, 0, cum[2], cum[2])
    choice = tiered_body(tool_choice={"type": "auto"})
    assert usage_of(create(sync_client, choice)) == expected(cum[1], 0, cum[2] - cum[1], cum[2])
    changed_tool = {**base["tools"][0], "description": filler("tool", 4400) + " (v2)"}
    tools = tiered_body(tools=[changed_tool])
    cum3 = cumulative(tools)
    assert usage_of(create(sync_client, tools)) == expected(0, 0, cum3[2], cum3[2])


def test_workspaces_and_models_are_isolated(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    body = tiered_body()
    total = cumulative(body)[-1]
    create(sync_client, body)
    other = anthropic.Anthropic(
        base_url=emulator.base_url,
        api_key="test-key",
        default_headers={"anthropic-workspace-id": "wrkspc_2"},
    )
    assert usage_of(create(other, body))["read"] == 0
    assert usage_of(create(sync_client, {**body, "model": "claude-opus-5"}))["read"] == 0
    assert usage_of(create(sync_client, body))["read"] == total
    other.close()


def test_concurrent_identical_requests_both_miss(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    body = tiered_body()
    total = cumulative(body)[-1]
    emulator.faults.ttft = 0.5  # both are in flight before either response starts
    barrier = threading.Barrier(2)

    def one() -> Any:
        barrier.wait()
        return create(sync_client, body)

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: one(), range(2)))
    for message in results:
        assert usage_of(message) == expected(0, 0, total, total)
    emulator.faults.ttft = 0.0
    assert usage_of(create(sync_client, body)) == expected(total, 0, 0, total)


@pytest.mark.anyio
async def test_concurrent_identical_requests_both_miss_async(
    emulator: Emulator, async_client: anthropic.AsyncAnthropic
) -> None:
    body = tiered_body()
    total = cumulative(body)[-1]
    emulator.faults.next(Fault.delay(ttft=0.5), times=2)
    results: list[Any] = []

    async def one() -> None:
        results.append(await async_client.messages.create(**body))

    async with anyio.create_task_group() as tg:
        tg.start_soon(one)
        tg.start_soon(one)
    assert [usage_of(m) for m in results] == [expected(0, 0, total, total)] * 2
    again = await async_client.messages.create(**body)
    assert usage_of(again) == expected(total, 0, 0, total)


def test_max_tokens_zero_prewarms_the_cache(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 0,
        "system": SYSTEM,
        "cache_control": EPHEMERAL,
        "messages": [user("warm up")],
    }
    total = cumulative(body)[-1]
    warm = create(sync_client, body)
    assert warm.content == []
    assert warm.stop_reason == "max_tokens"
    assert warm.usage.output_tokens == 0
    assert usage_of(warm) == expected(0, 0, total, total)
    real = create(sync_client, {**body, "max_tokens": 50})
    assert usage_of(real) == expected(total, 0, 0, total)
    assert emulator.ledger.entries()[0].usage["output_tokens"] == 0


def test_count_tokens_equals_billed_total_and_touches_no_cache(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    bodies = [tiered_body(), tiered_body(tool_choice={"type": "auto"}), lookback_body(12, {11})]
    for body in bodies:
        ct_body = {k: v for k, v in body.items() if k != "max_tokens"}
        before = emulator.cache.snapshot()
        counted = sync_client.messages.count_tokens(**ct_body).input_tokens
        assert emulator.cache.snapshot() == before
        billed = create(sync_client, body).usage
        total = billed.input_tokens + billed.cache_creation_input_tokens
        assert counted == total + billed.cache_read_input_tokens
    assert len(emulator.ledger) == len(bodies)  # count_tokens is not billed
