"""Prompt-cache accounting (cache.py): the spec §6.4 worked checks and the TTL rules.

Expected figures are computed by hand from the documented tokenizer (tokens.py docstring):
a tool is 8 + ceil(len(json)/4), a system block 4 + ceil(len(json)/4), a message block
4 + ceil(len(json)/4), plus 3 on the first block of each merged message.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from forkagent_jupyter.messages_api.cache import (
    CachePlan,
    PromptCache,
    VirtualClock,
    breakpoints,
)
from forkagent_jupyter.messages_api.catalog import DEFAULT_CATALOG, ModelInfo
from forkagent_jupyter.messages_api.tokens import count_input_tokens, flatten

OPUS = DEFAULT_CATALOG["claude-opus-5"]  # minimum cacheable prefix: 512
SONNET = DEFAULT_CATALOG["claude-sonnet-5-5"]  # minimum: 1024
E5: dict[str, Any] = {"type": "ephemeral"}
E1H: dict[str, Any] = {"type": "ephemeral", "ttl": "1h"}


def t(s: str) -> int:
    return math.ceil(len(s.encode("utf-8")) / 4)


def j(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def filler(tag: str, n: int) -> str:
    unit = f"<{tag}> the quick brown fox jumps over the lazy dog. "
    return (unit * (n // len(unit) + 1))[:n]


def text(s: str, **kw: Any) -> dict[str, Any]:
    return {"type": "text", "text": s, **kw}


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def msg_tokens(s: str, first: bool) -> int:
    """A text message block by hand: 4 + ceil(json/4) (+3 when it opens its message)."""
    return 4 + t(j(text(s))) + (3 if first else 0)


def sys_tokens(s: str) -> int:
    return 4 + t(j(text(s)))


def tool_tokens(tool: dict[str, Any]) -> int:
    return 8 + t(j({k: v for k, v in tool.items() if k != "cache_control"}))


def usage(plan: CachePlan) -> tuple[int, int, int, int]:
    """(read, 1h write, 5m write, input)."""
    return (
        plan.cache_read_input_tokens,
        plan.ephemeral_1h_input_tokens,
        plan.ephemeral_5m_input_tokens,
        plan.input_tokens,
    )


def run(
    cache: PromptCache, body: dict[str, Any], model: ModelInfo = OPUS, ws: str = "ws"
) -> CachePlan:
    """Plan and commit at once (a request whose response started)."""
    plan = cache.plan(body, workspace=ws, model=model)
    cache.commit(plan)
    return plan


def check_sums(plan: CachePlan, body: dict[str, Any]) -> None:
    assert plan.total_tokens == count_input_tokens(body)
    assert plan.input_tokens + plan.cache_creation_input_tokens + plan.cache_read_input_tokens == (
        plan.total_tokens
    )
    assert plan.cache_creation_input_tokens == (
        plan.ephemeral_5m_input_tokens + plan.ephemeral_1h_input_tokens
    )


# --- §6.4 worked checks -------------------------------------------------------------------


def test_growing_conversation_with_automatic_caching() -> None:
    cache = PromptCache(VirtualClock())
    system = filler("sys", 2400)
    q1, a1, q2 = "Question one?", "Answer one.", "Question two?"
    b1 = {"model": OPUS.name, "system": system, "cache_control": E5, "messages": [user(q1)]}
    tok_sys = sys_tokens(system)
    total1 = tok_sys + msg_tokens(q1, True)
    p1 = run(cache, b1)
    assert usage(p1) == (0, 0, total1, 0)
    assert p1.breakpoints == [(1, "5m", total1)] and p1.hit_index == -1
    check_sums(p1, b1)

    b2 = {**b1, "messages": [user(q1), assistant(a1), user(q2)]}
    total2 = total1 + msg_tokens(a1, True) + msg_tokens(q2, True)
    p2 = run(cache, b2)
    assert p2.hit_index == 1  # System…User(1), written by request 1
    assert usage(p2) == (total1, 0, total2 - total1, 0)
    assert p2.breakpoints == [(3, "5m", total2)]
    check_sums(p2, b2)


def lookback_body(n: int, marks: set[int]) -> dict[str, Any]:
    blocks = [
        text(filler(f"b{i:02}", 480), **({"cache_control": E5} if i in marks else {}))
        for i in range(n)
    ]
    return {"model": OPUS.name, "messages": [user(blocks)]}


def lookback_cumulative() -> list[int]:
    out, total = [], 0
    for i in range(35):
        total += msg_tokens(filler(f"b{i:02}", 480), i == 0)
        out.append(total)
    return out


def test_lookback_window_of_twenty_blocks() -> None:
    cum = lookback_cumulative()
    assert cum[9] >= OPUS.min_cache_tokens
    cache = PromptCache(VirtualClock())
    assert usage(run(cache, lookback_body(10, {9}))) == (0, 0, cum[9], 0)
    p2 = run(cache, lookback_body(15, {14}))
    assert p2.hit_index == 9
    assert usage(p2) == (cum[9], 0, cum[14] - cum[9], 0)
    p3 = run(cache, lookback_body(35, {34}))  # checks 34..15: nothing there
    assert p3.hit_index == -1
    assert usage(p3) == (0, 0, cum[34], 0)


def test_a_second_breakpoint_inside_the_window_hits() -> None:
    cum = lookback_cumulative()
    cache = PromptCache(VirtualClock())
    run(cache, lookback_body(10, {9}))
    run(cache, lookback_body(15, {14}))
    p3 = run(cache, lookback_body(35, {14, 34}))  # block 15 (index 14) was written by turn 2
    assert p3.hit_index == 14
    assert usage(p3) == (cum[14], 0, cum[34] - cum[14], 0)


def test_breakpoint_on_a_timestamp_never_hits() -> None:
    cache = PromptCache(VirtualClock())
    system = filler("stable", 3000)
    for second in range(3):
        stamp = f"Current time: 2026-11-02T10:00:0{second}Z"
        body = {
            "model": OPUS.name,
            "system": system,
            "messages": [user([text("Summarise the log."), text(stamp, cache_control=E5)])],
        }
        total = (
            sys_tokens(system) + msg_tokens("Summarise the log.", True) + msg_tokens(stamp, False)
        )
        assert usage(run(cache, body)) == (0, 0, total, 0)


def mixed_body(system: str) -> dict[str, Any]:
    tool = {
        "name": "lookup",
        "description": filler("tool", 2400),
        "input_schema": {"type": "object"},
    }
    return {
        "model": OPUS.name,
        "tools": [{**tool, "cache_control": E1H}],
        "system": [text(system, cache_control=E1H)],
        "messages": [
            user(
                [text(filler("m0", 800), cache_control=E5), text("tail question", cache_control=E5)]
            )
        ],
    }


def test_mixed_ttls_a_b_c() -> None:
    cache = PromptCache(VirtualClock())
    body = mixed_body(filler("sys-a", 1200))
    tok_tool = tool_tokens(body["tools"][0])
    tok_sys = tok_tool + sys_tokens(body["system"][0]["text"])
    tok_m0 = tok_sys + msg_tokens(filler("m0", 800), True)
    total = tok_m0 + msg_tokens("tail question", False)
    p1 = run(cache, body)  # no hit: B = system (highest 1h), C = last
    assert usage(p1) == (0, tok_sys, total - tok_sys, 0)
    assert p1.breakpoints == [
        (0, "1h", tok_tool),
        (1, "1h", tok_sys),
        (2, "5m", tok_m0),
        (3, "5m", total),
    ]
    check_sums(p1, body)
    # a new system text: A = the tool (1h entry), B = the new system (1h), C = the last block
    body2 = mixed_body(filler("sys-b", 1200))
    p2 = run(cache, body2)
    assert p2.hit_index == 0
    assert usage(p2) == (tok_tool, tok_sys - tok_tool, total - tok_sys, 0)
    # the same prompt again: A = the last block, nothing to write
    p3 = run(cache, body2)
    assert p3.hit_index == 3
    assert usage(p3) == (total, 0, 0, 0)


def test_below_the_minimum_nothing_is_cached_and_no_error() -> None:
    cache = PromptCache(VirtualClock())
    body = {"model": SONNET.name, "cache_control": E5, "messages": [user(filler("short", 1000))]}
    total = msg_tokens(filler("short", 1000), True)
    assert total < SONNET.min_cache_tokens
    plan = run(cache, body, SONNET)
    assert usage(plan) == (0, 0, 0, total)
    assert plan.writes == [] and cache.snapshot() == []
    assert plan.usage_dict() == {
        "input_tokens": total,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
    }
    # exactly the minimum is enough
    exact = dataclasses.replace(SONNET, name="exact", min_cache_tokens=total)
    assert usage(run(cache, body, exact)) == (0, 0, total, 0)


def tiered_body(**changes: Any) -> dict[str, Any]:
    tool = {
        "name": "lookup",
        "description": filler("tool", 2400),
        "input_schema": {"type": "object"},
    }
    body: dict[str, Any] = {
        "model": OPUS.name,
        "tools": [{**tool, "cache_control": E5}],
        "system": [text(filler("sys", 2400), cache_control=E5)],
        "messages": [user([text(filler("msg", 2400), cache_control=E5)])],
    }
    body.update(changes)
    return body


def test_tool_choice_change_keeps_tools_and_system_tools_change_misses_all() -> None:
    cache = PromptCache(VirtualClock())
    base = tiered_body()
    tok_tool = tool_tokens(base["tools"][0])
    tok_sys = tok_tool + sys_tokens(filler("sys", 2400))
    total = tok_sys + msg_tokens(filler("msg", 2400), True)
    assert usage(run(cache, base)) == (0, 0, total, 0)
    p = run(cache, tiered_body(tool_choice={"type": "auto"}))
    assert p.hit_index == 1
    assert usage(p) == (tok_sys, 0, total - tok_sys, 0)
    new_tool = {**base["tools"][0], "description": filler("tool", 2400) + " v2"}
    changed = tiered_body(tools=[new_tool])
    total2 = total - tool_tokens(base["tools"][0]) + tool_tokens(new_tool)
    p = run(cache, changed)
    assert p.hit_index == -1
    assert usage(p) == (0, 0, total2, 0)


def test_invalidation_tiers() -> None:
    cache = PromptCache(VirtualClock())
    base = tiered_body()
    run(cache, base)
    cases: list[tuple[dict[str, Any], int]] = [
        (tiered_body(), 2),  # the same prompt
        (tiered_body(thinking={"type": "adaptive"}), 1),  # messages tier only
        (tiered_body(output_config={"effort": "low"}), 1),
        (tiered_body(system=[text(filler("sys2", 2400), cache_control=E5)]), 0),
        (tiered_body(speed="fast"), 0),  # system tier and after
        (
            tiered_body(
                tools=[*base["tools"], {"type": "web_search_20250305", "name": "web_search"}]
            ),
            0,
        ),
        (tiered_body(model="claude-opus-5-5"), -1),
    ]
    for body, hit in cases:
        model = DEFAULT_CATALOG[body["model"]]
        assert cache.plan(body, workspace="ws", model=model).hit_index == hit, body
    # moving a marker invalidates nothing
    moved = tiered_body()
    moved["messages"] = [user([text(filler("msg", 2400))])]
    moved["cache_control"] = E5
    assert cache.plan(moved, workspace="ws", model=OPUS).hit_index == 2
    # an image anywhere changes the messages tier
    pic = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    with_image = tiered_body()
    with_image["messages"] = [*base["messages"], assistant("ok"), user([pic, text("and this?")])]
    assert cache.plan(with_image, workspace="ws", model=OPUS).hit_index == 1


def test_role_boundaries_are_part_of_the_prefix() -> None:
    cache = PromptCache(VirtualClock())
    a, b = filler("a", 2400), filler("b", 400)
    one = {"model": OPUS.name, "cache_control": E5, "messages": [user([text(a), text(b)])]}
    two = {"model": OPUS.name, "cache_control": E5, "messages": [user(a), assistant(b)]}
    run(cache, one)
    assert cache.plan(two, workspace="ws", model=OPUS).hit_index == -1


def test_concurrent_identical_requests_both_miss() -> None:
    cache = PromptCache(VirtualClock())
    body = tiered_body()
    first = cache.plan(body, workspace="ws", model=OPUS)
    second = cache.plan(body, workspace="ws", model=OPUS)
    assert cache.snapshot() == []  # planning is pure
    cache.commit(first)
    cache.commit(second)
    assert usage(first) == usage(second) == (0, 0, first.total_tokens, 0)
    assert cache.plan(body, workspace="ws", model=OPUS).hit_index == 2


# --- TTL on the virtual clock -------------------------------------------------------------


def test_five_minute_entry_hits_at_4_59_refreshes_and_expires() -> None:
    clock = VirtualClock()
    cache = PromptCache(clock)
    body = tiered_body()
    run(cache, body)
    clock.set(299.0)  # 4:59
    p = run(cache, body)
    assert p.hit_index == 2 and p.cache_read_input_tokens == p.total_tokens
    assert [e["expires_at"] for e in cache.snapshot()] == [300.0, 300.0, 599.0]
    clock.set(598.0)  # only alive because the read refreshed it
    assert cache.plan(body, workspace="ws", model=OPUS).hit_index == 2
    clock.set(599.0)
    assert cache.plan(body, workspace="ws", model=OPUS).hit_index == -1


def test_five_minute_entry_read_at_5_01_misses() -> None:
    clock = VirtualClock()
    cache = PromptCache(clock)
    run(cache, tiered_body())
    clock.set(301.0)
    plan = run(cache, tiered_body())
    assert plan.hit_index == -1
    assert usage(plan) == (0, 0, plan.total_tokens, 0)


def test_one_hour_entries() -> None:
    clock = VirtualClock(1000.0)
    cache = PromptCache(clock)
    body = {"model": OPUS.name, "cache_control": E1H, "messages": [user(filler("long", 3000))]}
    total = msg_tokens(filler("long", 3000), True)
    assert usage(run(cache, body)) == (0, total, 0, 0)
    assert cache.snapshot()[0]["expires_at"] == 4600.0
    clock.set(1000.0 + 600)  # past 5 minutes
    assert usage(run(cache, body)) == (total, 0, 0, 0)  # refreshed to 1600 + 3600
    clock.set(1600.0 + 3599)
    assert cache.plan(body, workspace="ws", model=OPUS).hit_index == 0
    clock.set(1600.0 + 3600)
    assert cache.plan(body, workspace="ws", model=OPUS).hit_index == -1


def test_expiry_counts_from_request_start() -> None:
    clock = VirtualClock()
    cache = PromptCache(clock)
    body = tiered_body()
    plan = cache.plan(body, workspace="ws", model=OPUS)
    clock.advance(10.0)  # prefill delay before the response starts
    cache.commit(plan)
    assert {e["expires_at"] for e in cache.snapshot()} == {300.0}
    later = cache.plan(body, workspace="ws", model=OPUS, request_start=299.5)
    assert later.hit_index == 2 and later.request_start == 299.5
    clock.set(300.0)
    assert cache.plan(body, workspace="ws", model=OPUS).hit_index == -1


# --- breakpoints, isolation, stripping ----------------------------------------------------


def test_automatic_breakpoint_walks_back_and_merges_with_an_explicit_one() -> None:
    body: dict[str, Any] = {
        "model": OPUS.name,
        "cache_control": E5,
        "messages": [
            user("q"),
            assistant([text("partial"), {"type": "thinking", "thinking": "t", "signature": "s"}]),
        ],
    }
    assert breakpoints(body, flatten(body)) == [(1, "5m")]
    body["messages"][0] = user([text("q", cache_control=E5)])
    assert breakpoints(body, flatten(body)) == [(0, "5m"), (1, "5m")]
    body["messages"][1] = assistant([text("partial", cache_control=E5)])
    assert breakpoints(body, flatten(body)) == [(0, "5m"), (1, "5m")]
    body["cache_control"] = E1H  # no cacheable block at all: nothing automatic
    assert breakpoints({**body, "messages": [assistant([])]}, []) == []


def test_workspaces_and_models_are_isolated() -> None:
    cache = PromptCache(VirtualClock())
    body = tiered_body()
    run(cache, body, ws="a")
    assert cache.plan(body, workspace="b", model=OPUS).hit_index == -1
    other = dataclasses.replace(OPUS, name="claude-opus-5-copy")
    assert cache.plan(body, workspace="a", model=other).hit_index == -1
    assert cache.plan(body, workspace="a", model=OPUS).hit_index == 2
    assert {(e["workspace"], e["model"]) for e in cache.snapshot()} == {("a", OPUS.name)}
    cache.clear()
    assert cache.snapshot() == []


def thinking_turns(new_turn: bool) -> dict[str, Any]:
    thinking = {"type": "thinking", "thinking": filler("think", 400), "signature": "sig"}
    use = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    messages = [
        user([text(filler("question", 2400), cache_control=E5)]),
        assistant([thinking, use]),
        user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"}]),
    ]
    if new_turn:
        messages += [assistant("It is 42."), user("Thanks. And 43?")]
    return {"model": OPUS.name, "cache_control": E5, "messages": messages}


def test_models_that_strip_old_thinking_miss_after_it() -> None:
    keeps = OPUS
    strips = dataclasses.replace(OPUS, name="stripper", strips_thinking=True)
    for model, hit in ((keeps, 3), (strips, 0)):
        cache = PromptCache(VirtualClock())
        first = run(cache, thinking_turns(False), model)
        assert first.hit_index == -1
        second = run(cache, thinking_turns(True), model)
        assert second.hit_index == hit, model.name
        check_sums(second, thinking_turns(True))


def test_thinking_before_tools_reaches_every_tier() -> None:
    model = dataclasses.replace(OPUS, name="early-thinker", thinking_before_tools=True)
    cache = PromptCache(VirtualClock())
    run(cache, tiered_body(), model)
    assert cache.plan(tiered_body(), workspace="ws", model=model).hit_index == 2
    changed = tiered_body(thinking={"type": "adaptive"})
    assert cache.plan(changed, workspace="ws", model=model).hit_index == -1


def test_no_breakpoint_is_all_input_and_snapshot_fields() -> None:
    clock = VirtualClock()
    cache = PromptCache(clock)
    body = {"model": OPUS.name, "messages": [user("hello")]}
    plan = run(cache, body)
    assert usage(plan) == (0, 0, 0, msg_tokens("hello", True)) and plan.breakpoints == []
    run(cache, tiered_body())
    entry = cache.snapshot()[0]
    assert set(entry) == {
        "workspace",
        "model",
        "hash",
        "index",
        "tokens",
        "ttl",
        "expires_at",
        "live",
    }
    assert entry["live"] is True and len(entry["hash"]) == 16
    clock.set(1000.0)
    assert cache.snapshot()[0]["live"] is False
