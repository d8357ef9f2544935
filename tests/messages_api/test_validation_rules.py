"""Every validation rule of spec §3, called directly, with the exact message text."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import pytest

from forkagent_jupyter.messages_api.catalog import DEFAULT_CATALOG, ModelInfo
from forkagent_jupyter.messages_api.errors import ApiError, error_body
from forkagent_jupyter.messages_api.validation import (
    THINKING_SECRET,
    sign_thinking,
    validate_request,
    verify_thinking,
)

MODEL = "claude-sonnet-5-5"  # 5.x: no prefill, role "system" allowed, max output 128000
PREFILL_MODEL = "claude-sonnet-4-5"  # 4.5: prefill allowed, no adaptive thinking
E5: dict[str, Any] = {"type": "ephemeral"}
E1H: dict[str, Any] = {"type": "ephemeral", "ttl": "1h"}
TOOL: dict[str, Any] = {"name": "lookup", "input_schema": {"type": "object"}}
THINKING_ON: dict[str, Any] = {"type": "enabled", "budget_tokens": 1024}
NEW, OLD = "2026-10-21", "2023-06-01"


def text(s: str, **kw: Any) -> dict[str, Any]:
    return {"type": "text", "text": s, **kw}


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def system_msg(content: Any) -> dict[str, Any]:
    return {"role": "system", "content": content}


def use(id: str = "toolu_a", name: str = "lookup") -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": {}}


def result(id: str = "toolu_a") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": id, "content": "42"}


def thought(s: str = "hmm") -> dict[str, Any]:
    return {"type": "thinking", "thinking": s, "signature": sign_thinking(s)}


def body(**kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"model": MODEL, "max_tokens": 2048, "messages": [user("hi")]}
    out.update(kw)
    return {k: v for k, v in out.items() if v is not None}


def ok(b: Any, **kw: Any) -> ModelInfo:
    kw.setdefault("version", NEW)
    kw.setdefault("catalog", DEFAULT_CATALOG)
    return validate_request(b, **kw)


def fails(b: Any, message: str, status: int = 400, **kw: Any) -> None:
    with pytest.raises(ApiError) as info:
        ok(b, **kw)
    err = info.value
    assert err.message == message
    assert err.status == status
    assert err.error_type == ("invalid_request_error" if status == 400 else "not_found_error")


def counting(b: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in b.items() if k not in ("max_tokens", "stream")}


def test_a_valid_conversation_passes_and_returns_the_model() -> None:
    b = body(
        system=[text("Be brief.", cache_control=E1H)],
        tools=[{**TOOL, "cache_control": E1H}],
        thinking=THINKING_ON,
        cache_control=E5,
        messages=[
            user("q"),
            assistant([thought("a"), text("let me look"), use("toolu_1")]),
            user([result("toolu_1"), text("and hurry")]),
            assistant([thought("b"), use("toolu_2")]),
            user([result("toolu_2")]),
        ],
    )
    assert ok(b) is DEFAULT_CATALOG[MODEL]
    assert ok(counting(b), for_count_tokens=True) is DEFAULT_CATALOG[MODEL]


def test_errors_and_error_body() -> None:
    err = ApiError(529, message="Overloaded", headers={"retry-after": "1"})
    assert (err.status, err.error_type, err.headers) == (
        529,
        "overloaded_error",
        {"retry-after": "1"},
    )
    assert error_body(err, "req_1") == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": "req_1",
    }


# --- rule 1 and 22: shape and types -------------------------------------------------------


@pytest.mark.parametrize("field", ["model", "max_tokens", "messages"])
def test_rule_1_required_fields(field: str) -> None:
    fails(body(**{field: None}), f"{field}: Field required")


def test_rule_1_count_tokens_needs_no_max_tokens() -> None:
    assert ok(body(max_tokens=None), for_count_tokens=True).name == MODEL
    fails(body(messages=None), "messages: Field required", for_count_tokens=True)


@pytest.mark.parametrize(
    ("b", "message"),
    [
        ([1], "body: Input should be a valid dictionary"),
        (body(model=5), "model: Input should be a valid string"),
        (body(max_tokens="ten"), "max_tokens: Input should be a valid integer"),
        (body(max_tokens=True), "max_tokens: Input should be a valid integer"),
        (body(max_tokens=-1), "max_tokens: Input should be greater than or equal to 0"),
        (body(messages={"role": "user"}), "messages: Input should be a valid list"),
        (body(messages=[]), "messages: at least one message is required"),
        (body(messages=["hi"]), "messages.0: Input should be a valid dictionary"),
        (body(messages=[{"content": "x"}]), "messages.0.role: Field required"),
        (body(messages=[{"role": "user"}]), "messages.0.content: Field required"),
        (
            body(messages=[{"role": "tool", "content": "x"}]),
            "messages.0.role: Input should be 'user', 'assistant' or 'system'",
        ),
        (body(messages=[user(7)]), "messages.0.content: Input should be a valid string or list"),
        (body(messages=[user(["x"])]), "messages.0.content.0: Input should be a valid dictionary"),
        (body(messages=[user([{"text": "x"}])]), "messages.0.content.0.type: Field required"),
        (
            body(messages=[user([{"type": "text", "text": 3}])]),
            "messages.0.content.0.text: Input should be a valid string",
        ),
        (
            body(messages=[user("go"), assistant([{**use(), "input": []}]), user([result()])]),
            "messages.1.content.0.input: Input should be a valid dictionary",
        ),
        (
            body(messages=[user([{"type": "tool_result", "tool_use_id": "t", "is_error": "y"}])]),
            "messages.0.content.0.is_error: Input should be a valid boolean",
        ),
        (body(system=3), "system: Input should be a valid string or list"),
        (body(system=[{"type": "image", "source": {}}]), "system.0.type: Input should be 'text'"),
        (body(stream="yes"), "stream: Input should be a valid boolean"),
        (body(stop_sequences=["a", 1]), "stop_sequences.1: Input should be a valid string"),
        (body(tools=[{"input_schema": {"type": "object"}}]), "tools.0.name: Field required"),
        (
            body(tools=[{"name": "f", "input_schema": {"type": "string"}}]),
            "tools.0.input_schema.type: Input should be 'object'",
        ),
        (
            body(cache_control={"type": "persistent"}),
            "cache_control.type: Input should be 'ephemeral'",
        ),
        (
            body(messages=[user([text("x", cache_control={"type": "ephemeral", "ttl": "10m"})])]),
            "messages.0.content.0.cache_control.ttl: Input should be '5m' or '1h'",
        ),
        (
            body(output_config={"effort": "extreme"}),
            "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'",
        ),
        (body(speed="warp"), "speed: Input should be 'standard' or 'fast'"),
    ],
)
def test_rule_1_and_22_wrong_types(b: Any, message: str) -> None:
    fails(b, message)


def test_too_many_messages() -> None:
    messages = [user("a"), assistant("b")] * 50_000 + [user("c")]
    fails(
        body(messages=messages),
        "messages: List should have at most 100000 items after validation, not 100001",
    )


# --- model and limits ---------------------------------------------------------------------


def test_rule_17_unknown_model_is_404() -> None:
    fails(body(model="claude-nope-1"), "model: claude-nope-1", status=404)
    fails(
        counting(body(model="claude-nope-1")),
        "model: claude-nope-1",
        status=404,
        for_count_tokens=True,
    )


def test_max_tokens_above_the_model_maximum() -> None:
    ok(body(max_tokens=128_000))
    fails(
        body(max_tokens=128_001),
        "max_tokens: 128001 > 128000, which is the maximum allowed number of output tokens for "
        "claude-sonnet-5-5",
    )
    fails(
        body(model="claude-opus-4-8", max_tokens=64_001),
        "max_tokens: 64001 > 64000, which is the maximum allowed number of output tokens for "
        "claude-opus-4-8",
    )


def test_rule_16_prompt_too_long() -> None:
    tiny = {"tiny": ModelInfo("tiny", max_output=100, context_window=50, min_cache_tokens=10)}
    words = "x" * 200
    # one user text block: 4 + 3 + ceil(len('{"type":"text","text":"xxx…"}') / 4)
    n = 4 + 3 + math.ceil(len(json.dumps(text(words), separators=(",", ":"))) / 4)
    assert n == 64
    fails(
        body(model="tiny", max_tokens=10, messages=[user(words)]),
        "prompt is too long: 64 tokens > 50 maximum",
        catalog=tiny,
    )
    ok(body(model="tiny", max_tokens=10, messages=[user("x" * 100)]), catalog=tiny)


def test_rule_16_input_plus_max_tokens_over_the_window() -> None:
    tiny = {"tiny": ModelInfo("tiny", max_output=100, context_window=80, min_cache_tokens=10)}
    words = "x" * 200  # 64 tokens (see above): fits alone, not with 17 tokens of output
    fails(
        body(model="tiny", max_tokens=17, messages=[user(words)]),
        "input length and `max_tokens` exceed context limit: 64 + 17 > 80, decrease input "
        "length or `max_tokens` and try again",
        catalog=tiny,
    )
    ok(body(model="tiny", max_tokens=16, messages=[user(words)]), catalog=tiny)
    # count_tokens has no max_tokens: only the input counts
    ok(
        body(model="tiny", max_tokens=None, messages=[user(words)]),
        catalog=tiny,
        for_count_tokens=True,
    )


# --- rules 2-4: empty content -------------------------------------------------------------


def test_rule_2_empty_messages() -> None:
    message = (
        "messages.{i}: all messages must have non-empty content except for the optional final "
        "assistant message"
    )
    fails(body(messages=[user("hi"), assistant("ok"), user([])]), message.format(i=2))
    fails(body(messages=[user("")]), message.format(i=0))
    fails(body(messages=[user("hi"), assistant([]), user("x")]), message.format(i=1))
    ok(body(model=PREFILL_MODEL, messages=[user("hi"), assistant([])]))
    ok(body(messages=[user("hi"), user([])]))  # merged first: the turn is not empty


def test_rule_3_empty_and_blank_text() -> None:
    fails(body(messages=[user([text("")])]), "messages: text content blocks must be non-empty")
    fails(
        body(messages=[user([text(" \n\t")])]),
        "messages: text content blocks must contain non-whitespace text",
    )
    fails(body(system=[text("")]), "system: text content blocks must be non-empty")
    fails(body(system=[text("  ")]), "system: text content blocks must contain non-whitespace text")


def test_rule_4_cache_control_on_empty_text_keeps_original_indices() -> None:
    fails(
        body(messages=[user("a"), user([text("b"), text("", cache_control=E5)])]),
        "messages.1.content.1.text: cache_control cannot be set for empty text blocks",
    )


def test_cache_control_on_thinking() -> None:
    fails(
        body(
            thinking=THINKING_ON,
            messages=[
                user("q"),
                assistant([{**thought(), "cache_control": E5}, use()]),
                user([result()]),
            ],
        ),
        "messages.1.content.0.thinking: cache_control cannot be set for thinking blocks",
    )


# --- rules 5, 20, 21: breakpoints ---------------------------------------------------------


def test_rule_5_at_most_four_breakpoints() -> None:
    five = body(
        tools=[{**TOOL, "cache_control": E5}],
        system=[text("s", cache_control=E5)],
        messages=[user([text(f"b{i}", cache_control=E5) for i in range(3)])],
    )
    fails(five, "A maximum of 4 blocks with cache_control may be provided. Found 5.")
    # three explicit markers plus the automatic one make four
    four_with_auto = body(
        cache_control=E5,
        messages=[user([text(f"b{i}", cache_control=E5) for i in range(3)] + [text("x")])],
    )
    ok(four_with_auto)
    # a fourth explicit marker leaves no slot for automatic caching (rule 20)
    fails(
        {**four_with_auto, "system": [text("s", cache_control=E5)]},
        "cache_control: automatic caching cannot be used when 4 blocks already have cache_control",
    )
    # the automatic breakpoint on a block already marked with the same TTL is not a second one
    merged = body(
        cache_control=E5, messages=[user([text(f"b{i}", cache_control=E5) for i in range(4)])]
    )
    fails(
        merged,
        "cache_control: automatic caching cannot be used when 4 blocks already have cache_control",
    )
    three = body(
        cache_control=E5, messages=[user([text(f"b{i}", cache_control=E5) for i in range(3)])]
    )
    ok(three)


def test_rule_20_automatic_caching_conflicts() -> None:
    fails(
        body(
            cache_control=E5,
            messages=[user([text(f"b{i}", cache_control=E5) for i in range(4)] + [text("x")])],
        ),
        "cache_control: automatic caching cannot be used when 4 blocks already have cache_control",
    )
    fails(
        body(cache_control=E5, messages=[user([text("x", cache_control=E1H)])]),
        "cache_control: the last block's cache_control ttl (1h) differs from the top-level "
        "cache_control ttl (5m)",
    )
    ok(body(cache_control=E1H, messages=[user([text("x", cache_control=E1H)])]))


def test_rule_21_longer_ttl_first() -> None:
    message = (
        "cache_control: a ttl='1h' cache_control block cannot come after a ttl='5m' one; longer "
        "lifetimes must come first"
    )
    fails(
        body(
            system=[text("sys", cache_control=E5)], messages=[user([text("x", cache_control=E1H)])]
        ),
        message,
    )
    fails(body(system=[text("sys", cache_control=E5)], cache_control=E1H), message)
    ok(
        body(
            tools=[{**TOOL, "cache_control": E1H}],
            system=[text("sys", cache_control=E5)],
            cache_control=E5,
        )
    )


# --- rules 6-11: tools and pairing --------------------------------------------------------


def test_rule_6_unanswered_tool_use_lists_every_missing_id() -> None:
    message = (
        "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "{ids}. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
    )
    fails(
        body(
            tools=[TOOL],
            messages=[user("go"), assistant([use("toolu_a"), use("toolu_b")]), user("and?")],
        ),
        message.format(i=1, ids="toolu_a, toolu_b"),
    )
    fails(
        body(
            tools=[TOOL],
            messages=[
                user("go"),
                assistant([use("toolu_a"), use("toolu_b")]),
                user([result("toolu_b")]),
            ],
        ),
        message.format(i=1, ids="toolu_a"),
    )


def test_rule_6_applies_to_every_pair_and_keeps_original_indices() -> None:
    message = (
        "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "{ids}. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
    )
    early = [
        user("go"),
        assistant([use("toolu_1")]),
        user("never mind"),
        assistant("ok"),
        user("next"),
    ]
    fails(body(tools=[TOOL], messages=early), message.format(i=1, ids="toolu_1"))
    split = [user("go"), assistant("thinking aloud"), assistant([use("toolu_9")]), user("hm")]
    fails(body(tools=[TOOL], messages=split), message.format(i=2, ids="toolu_9"))


def test_rule_6_a_final_assistant_tool_use_is_unanswered() -> None:
    message = (
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_a. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
    )
    fails(
        body(model=PREFILL_MODEL, tools=[TOOL], messages=[user("go"), assistant([use()])]), message
    )
    fails(
        counting(body(tools=[TOOL], messages=[user("go"), assistant([use()])])),
        message,
        for_count_tokens=True,
    )


def test_rule_7_unexpected_tool_result() -> None:
    message = (
        "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous "
        "message."
    )
    fails(
        body(messages=[user("go"), assistant("ok"), user([result("toolu_x")])]),
        message.format(i=2, j=0, id="toolu_x"),
    )
    fails(
        body(messages=[user([text("hi"), result("toolu_y")])]),
        message.format(i=0, j=1, id="toolu_y"),
    )
    # an id from an older assistant message does not count
    old = [
        user("go"),
        assistant([use("toolu_1")]),
        user([result("toolu_1")]),
        assistant("done"),
        user([result("toolu_1")]),
    ]
    fails(body(tools=[TOOL], messages=old), message.format(i=4, j=0, id="toolu_1"))


def test_rule_8_tool_results_come_first() -> None:
    fails(
        body(
            tools=[TOOL],
            messages=[
                user("go"),
                assistant([use("toolu_1"), use("toolu_2")]),
                user([text("first"), result("toolu_1"), result("toolu_2")]),
            ],
        ),
        "messages.2: Did not find 2 `tool_result` block(s) at the beginning of this message. "
        "Messages following `tool_use` blocks must begin with a matching number of `tool_result` "
        "blocks.",
    )
    ok(
        body(
            tools=[TOOL],
            messages=[user("go"), assistant([use()]), user([result(), text("then text")])],
        )
    )


def test_rule_9_duplicate_tool_use_ids() -> None:
    fails(
        body(tools=[TOOL], messages=[user("go"), assistant([use(), use()]), user([result()])]),
        "messages.1.content.1: `tool_use` ids must be unique",
    )
    again = [user("go"), assistant([use()]), user([result()]), assistant([use()]), user([result()])]
    fails(body(tools=[TOOL], messages=again), "messages.3.content.0: `tool_use` ids must be unique")


def test_rule_10_duplicate_tool_names() -> None:
    fails(body(tools=[TOOL, {**TOOL, "description": "again"}]), "tools: Tool names must be unique.")


def test_rule_11_id_and_name_patterns() -> None:
    fails(
        body(
            tools=[TOOL],
            messages=[user("go"), assistant([use("bad id!")]), user([result("bad id!")])],
        ),
        "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
    )
    fails(
        body(messages=[user([result("no/slash")])]),
        "messages.0.content.0.tool_result.tool_use_id: String should match pattern "
        "'^[a-zA-Z0-9_-]+$'",
    )
    pattern = "tools.0.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'"
    fails(body(tools=[{**TOOL, "name": "has space"}]), pattern)
    fails(body(tools=[{**TOOL, "name": "x" * 65}]), pattern)
    fails(body(tools=[{**TOOL, "name": ""}]), pattern)
    ok(body(tools=[{**TOOL, "name": "x" * 64}]))


def test_server_tools_pass_through() -> None:
    ok(body(tools=[TOOL, {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]))


# --- rules 12-15: thinking ----------------------------------------------------------------


def test_rule_12_thinking_must_lead_the_final_assistant_turn() -> None:
    message = (
        "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{t}`. "
        "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
        "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you "
        "include "
        "thinking blocks from previous turns. To avoid this requirement, disable `thinking`. "
        "Please "
        "consult our documentation at "
        "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
    )
    loop = [user("go"), assistant([use()]), user([result()])]
    fails(
        body(thinking=THINKING_ON, tools=[TOOL], messages=loop), message.format(i=1, t="tool_use")
    )
    fails(
        counting(body(thinking=THINKING_ON, tools=[TOOL], messages=loop)),
        message.format(i=1, t="tool_use"),
        for_count_tokens=True,
    )
    prefill = [user("go"), assistant("Sure")]
    fails(
        body(model=PREFILL_MODEL, thinking=THINKING_ON, messages=prefill),
        message.format(i=1, t="text"),
    )
    # an earlier turn without thinking is fine
    ok(body(thinking=THINKING_ON, tools=[TOOL], messages=[*loop, assistant("42"), user("thanks")]))
    ok(
        body(
            thinking={"type": "adaptive"},
            tools=[TOOL],
            messages=[user("go"), assistant([thought(), use()]), user([result()])],
        )
    )


def test_rule_13_thinking_in_the_final_assistant_message_when_disabled() -> None:
    message = (
        "messages.{i}.content.{j}: When thinking is disabled, an `assistant` message in the final "
        "position "
        "cannot contain `thinking`. To use thinking blocks, enable `thinking` in your request."
    )
    fails(body(messages=[user("go"), assistant([thought()])]), message.format(i=1, j=0))
    loop = [user("go"), assistant("I'll check."), assistant([thought(), use()]), user([result()])]
    fails(body(tools=[TOOL], messages=loop), message.format(i=2, j=0))
    fails(
        body(thinking={"type": "disabled"}, tools=[TOOL], messages=loop), message.format(i=2, j=0)
    )
    ok(body(tools=[TOOL], messages=[*loop, assistant("42"), user("thanks")]))


def test_rule_14_modified_thinking_blocks() -> None:
    message = (
        "messages.1.content.{j}: `thinking` or `redacted_thinking` blocks in the latest assistant "
        "message "
        "cannot be modified. These blocks must remain as they were in the original response."
    )
    edited = {**thought("original"), "thinking": "edited"}
    loop = [user("go"), assistant([edited, use()]), user([result()])]
    fails(body(thinking=THINKING_ON, tools=[TOOL], messages=loop), message.format(j=0))
    redacted = [
        user("go"),
        assistant([thought(), {"type": "redacted_thinking", "data": ""}, use()]),
        user([result()]),
    ]
    fails(body(thinking=THINKING_ON, tools=[TOOL], messages=redacted), message.format(j=1))
    ok(body(thinking=THINKING_ON, tools=[TOOL], messages=loop), thinking_secret=None)
    other_secret = [
        user("go"),
        assistant([{**thought(), "signature": sign_thinking("hmm", b"other")}, use()]),
        user([result()]),
    ]
    fails(body(thinking=THINKING_ON, tools=[TOOL], messages=other_secret), message.format(j=0))
    ok(body(thinking=THINKING_ON, tools=[TOOL], messages=other_secret), thinking_secret=b"other")
    # thinking of an earlier turn is not checked
    ok(
        body(
            thinking=THINKING_ON,
            tools=[TOOL],
            messages=[*loop, assistant([thought(), text("42")]), user("ok")],
        )
    )


def test_signatures() -> None:
    sig = sign_thinking("abc")
    assert sig == sign_thinking("abc", THINKING_SECRET) and sig != sign_thinking("abd")
    assert len(sig) == 64 and sig != sign_thinking("abc", b"x")
    assert verify_thinking({"type": "thinking", "thinking": "abc", "signature": sig})
    assert not verify_thinking({"type": "thinking", "thinking": "abc", "signature": sig[:-1]})
    assert verify_thinking({"type": "redacted_thinking", "data": "opaque"})


def test_rule_15_thinking_settings() -> None:
    fails(
        body(thinking={"type": "enabled", "budget_tokens": 1023}),
        "thinking.budget_tokens: Input should be greater than or equal to 1024",
    )
    budget_max = (
        "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
        "documentation at "
        "https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size"
    )
    fails(body(max_tokens=2048, thinking={"type": "enabled", "budget_tokens": 2048}), budget_max)
    ok(counting(body(thinking={"type": "enabled", "budget_tokens": 4096})), for_count_tokens=True)
    fails(body(thinking={"type": "enabled"}), "thinking.budget_tokens: Field required")
    fails(
        body(thinking={"type": "sometimes"}),
        "thinking.type: Input should be 'enabled', 'adaptive', 'disabled' or 'between_tools'",
    )
    fails(
        body(model=PREFILL_MODEL, thinking={"type": "adaptive"}),
        "thinking.type: 'adaptive' thinking is not supported on claude-sonnet-4-5",
    )
    fails(
        body(thinking={"type": "adaptive", "display": "full"}),
        "thinking.display: Input should be 'summarized' or 'omitted'",
    )
    for choice in ({"type": "any"}, {"type": "tool", "name": "lookup"}):
        fails(
            body(thinking=THINKING_ON, tools=[TOOL], tool_choice=choice),
            "Thinking may not be enabled when tool_choice forces tool use.",
        )
    ok(body(thinking=THINKING_ON, tools=[TOOL], tool_choice={"type": "auto"}))


# --- rules 16-19: roles, prefill, version-gated fields, max_tokens 0 ----------------------


def test_system_role_messages() -> None:
    place = (
        "messages.{i}: a `system` message must follow a `user` message and be followed by an "
        "`assistant` message or end the conversation"
    )
    fails(body(messages=[system_msg("be brief"), user("x")]), place.format(i=0))
    fails(body(messages=[user("x"), system_msg("be brief"), user("y")]), place.format(i=1))
    fails(
        body(model=PREFILL_MODEL, messages=[user("x"), assistant("y"), system_msg("z")]),
        "role 'system' is not supported on this model",
    )
    fails(
        body(model="claude-sonnet-4-6", messages=[user("x"), system_msg("be brief")]),
        "role 'system' is not supported on this model",
    )
    fails(
        body(
            messages=[
                user("x"),
                system_msg([text("a"), {"type": "image", "source": {"type": "url", "url": "u"}}]),
            ]
        ),
        "messages.1.content.1: a `system` message may only contain text blocks",
    )
    ok(body(messages=[user("x"), system_msg("be brief")]))
    ok(
        body(
            model=PREFILL_MODEL.replace("sonnet-4-5", "sonnet-5"),
            messages=[user("x"), system_msg("s"), assistant("y"), user("z")],
        )
    )


def test_rule_17_prefill() -> None:
    message = (
        "This model does not support assistant message prefill. The conversation must end with a "
        "user message."
    )
    fails(body(messages=[user("go"), assistant("Sure")]), message)
    fails(body(model="claude-opus-4-6", messages=[user("go"), assistant("Sure")]), message)
    ok(body(model=PREFILL_MODEL, messages=[user("go"), assistant("Sure")]))
    ok(counting(body(messages=[user("go"), assistant("Sure")])), for_count_tokens=True)


def test_rule_18_version_gated_fields() -> None:
    for name, value in (("temperature", 0.5), ("top_p", 0.9), ("top_k", 5)):
        fails(
            body(**{name: value}),
            f"{name}: this parameter is not supported by API version 2026-10-21",
        )
        ok(body(**{name: value}), version=OLD)
    doc = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "d"}}
    fails(
        body(messages=[user("go"), assistant([doc]), user("x")]),
        "messages.1.content.0: document blocks are not allowed in assistant messages",
    )
    ok(body(messages=[user("go"), assistant([doc]), user("x")]), version=OLD)
    cited = [user([text("x", citations=[{"type": "char_location"}])])]
    fails(
        body(messages=cited),
        "messages.0.content.0.citations: citations are not allowed in user messages",
    )
    ok(body(messages=cited), version=OLD)
    ok(body(messages=[user([text("x", citations=[])])]))
    ok(body(messages=[user([doc, text("summarise")])]))


@pytest.mark.parametrize(
    ("extra", "what"),
    [
        ({"stream": True}, "stream: true"),
        ({"thinking": THINKING_ON}, "thinking"),
        (
            {"output_config": {"format": {"type": "json_schema", "schema": {}}}},
            "output_config.format",
        ),
        ({"tools": [TOOL], "tool_choice": {"type": "any"}}, "tool_choice any"),
        ({"tools": [TOOL], "tool_choice": {"type": "tool", "name": "lookup"}}, "tool_choice tool"),
    ],
)
def test_rule_19_max_tokens_zero_combinations(extra: dict[str, Any], what: str) -> None:
    fails(body(max_tokens=0, **extra), f"max_tokens: 0 cannot be combined with {what}")


def test_rule_19_max_tokens_zero_alone_is_a_cache_warm_up() -> None:
    ok(body(max_tokens=0, cache_control=E5, tools=[TOOL], tool_choice={"type": "auto"}))


def test_rule_22_tool_choice() -> None:
    fails(
        body(tools=[TOOL], tool_choice={"type": "sometimes"}),
        "tool_choice: type must be one of 'auto', 'any', 'tool', 'none'",
    )
    fails(
        body(tools=[TOOL], tool_choice={"type": "tool", "name": "nope"}),
        "tool_choice: tool 'nope' is not in tools",
    )
    fails(body(tool_choice={"type": "any"}), "tool_choice: 'any' requires at least one tool")
    fails(
        body(tools=[TOOL], tool_choice={"type": "auto", "disable_parallel_tool_use": "yes"}),
        "tool_choice: disable_parallel_tool_use must be a boolean",
    )
    ok(
        body(
            tools=[TOOL],
            tool_choice={"type": "tool", "name": "lookup", "disable_parallel_tool_use": True},
        )
    )
    ok(body(tool_choice={"type": "none"}))


# --- merging and strict_legacy ------------------------------------------------------------


def test_merged_roles_and_assistant_first_are_accepted() -> None:
    ok(body(messages=[assistant("I start"), user("hi"), user("again")]))
    merged_loop = [user("go"), assistant("ok"), assistant([use()]), user([result()]), user("more")]
    ok(body(tools=[TOOL], messages=merged_loop))


def test_strict_legacy_rules() -> None:
    fails(
        body(messages=[assistant("I start"), user("hi")]),
        'messages: first message must use the "user" role',
        strict_legacy=True,
    )
    fails(
        body(messages=[user("hi"), user("again")]),
        'messages: roles must alternate between "user" and "assistant", but found multiple "user" '
        "roles in a row",
        strict_legacy=True,
    )
    ok(body(messages=[user("hi"), system_msg("s"), assistant("a"), user("b")]), strict_legacy=True)


def test_custom_catalog_flags() -> None:
    legacy = dataclasses.replace(
        DEFAULT_CATALOG[MODEL], name="custom", prefill=True, system_role=False
    )
    catalog = {"custom": legacy}
    ok(body(model="custom", messages=[user("go"), assistant("Sure")]), catalog=catalog)
    fails(
        body(model="custom", messages=[user("x"), system_msg("s")]),
        "role 'system' is not supported on this model",
        catalog=catalog,
    )
