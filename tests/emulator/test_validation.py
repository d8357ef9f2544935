"""Every validation rule answers through the SDK with the right exception, status and message."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from anthropic.types import Message, MessageTokensCount

from forkagent_jupyter.emulator import Emulator
from forkagent_jupyter.emulator.server import TRANSPORT_MESSAGES
from forkagent_jupyter.messages_api.catalog import ModelInfo
from forkagent_jupyter.messages_api.validation import MESSAGES, sign_thinking

from .conftest import EPHEMERAL, MODEL, ONE_HOUR, assistant, user

TOOL = {"name": "lookup", "input_schema": {"type": "object"}}
THINKING_ON = {"type": "enabled", "budget_tokens": 1024}
SIGNED = {"type": "thinking", "thinking": "hmm", "signature": sign_thinking("hmm")}


def use(id: str = "toolu_a", name: str = "lookup") -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": {}}


def result(id: str = "toolu_a") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": id, "content": "42"}


def text(t: str, **kw: Any) -> dict[str, Any]:
    return {"type": "text", "text": t, **kw}


def body(**kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"model": MODEL, "max_tokens": 2048, "messages": [user("hi")]}
    out.update(kw)
    return {k: v for k, v in out.items() if v is not None}


def msg(key: str, **values: Any) -> str:
    return MESSAGES[key].format(**values)


# (id, request body, status, message, also checked on count_tokens)
CASES: list[tuple[str, dict[str, Any], int, str, bool]] = [
    ("no-model", body(model=None), 400, msg("required", field="model"), True),
    ("no-max-tokens", body(max_tokens=None), 400, msg("required", field="max_tokens"), False),
    ("no-messages", body(messages=None), 400, msg("required", field="messages"), True),
    (
        "max-tokens-type",
        body(max_tokens="ten"),
        400,
        msg("type", field="max_tokens", expected="a valid integer"),
        False,
    ),
    ("bad-role", body(messages=[{"role": "tool", "content": "x"}]), 400, msg("role", i=0), True),
    ("unknown-model", body(model="claude-nope-1"), 404, "model: claude-nope-1", True),
    (
        "empty-message",
        body(messages=[user("hi"), assistant("ok"), user([])]),
        400,
        msg("empty_message", i=2),
        True,
    ),
    (
        "empty-string-message",
        body(messages=[user("hi"), assistant("ok"), user("")]),
        400,
        msg("empty_message", i=2),
        True,
    ),
    ("empty-text", body(messages=[user([text("")])]), 400, msg("empty_text"), True),
    (
        "cache-on-empty-text",
        body(messages=[user([text("a"), text("", cache_control=EPHEMERAL)])]),
        400,
        msg("cache_empty_text", i=0, j=1),
        True,
    ),
    ("blank-text", body(messages=[user([text("  \n")])]), 400, msg("blank_text"), True),
    (
        "five-breakpoints",
        body(messages=[user([text(f"b{i}", cache_control=EPHEMERAL) for i in range(5)])]),
        400,
        msg("too_many_breakpoints", n=5),
        True,
    ),
    (
        "auto-with-four",
        body(
            cache_control=EPHEMERAL,
            messages=[
                user([text(f"b{i}", cache_control=EPHEMERAL) for i in range(4)] + [text("x")])
            ],
        ),
        400,
        msg("auto_with_four"),
        True,
    ),
    (
        "auto-ttl-conflict",
        body(cache_control=EPHEMERAL, messages=[user([text("x", cache_control=ONE_HOUR)])]),
        400,
        msg("auto_ttl_conflict", block="1h", top="5m"),
        True,
    ),
    (
        "ttl-order",
        body(
            system=[text("sys", cache_control=EPHEMERAL)],
            messages=[user([text("x", cache_control=ONE_HOUR)])],
        ),
        400,
        msg("ttl_order"),
        True,
    ),
    (
        "unanswered-tool-use",
        body(
            tools=[TOOL],
            messages=[user("go"), assistant([use("toolu_a"), use("toolu_b")]), user("and?")],
        ),
        400,
        msg("unanswered", i=1, ids="toolu_a, toolu_b"),
        True,
    ),
    (
        "unexpected-tool-result",
        body(tools=[TOOL], messages=[user("go"), assistant("ok"), user([result("toolu_x")])]),
        400,
        msg("unexpected_result", i=2, j=0, id="toolu_x"),
        True,
    ),
    (
        "results-not-first",
        body(
            tools=[TOOL],
            messages=[user("go"), assistant([use()]), user([text("first"), result()])],
        ),
        400,
        msg("results_first", i=2, n=1),
        True,
    ),
    (
        "duplicate-tool-use-id",
        body(
            tools=[TOOL],
            messages=[user("go"), assistant([use(), use()]), user([result()])],
        ),
        400,
        msg("duplicate_id", i=1, j=1),
        True,
    ),
    ("duplicate-tools", body(tools=[TOOL, TOOL]), 400, msg("duplicate_tool"), True),
    (
        "bad-tool-name",
        body(tools=[{**TOOL, "name": "has space"}]),
        400,
        msg("bad_tool_name", i=0),
        True,
    ),
    (
        "bad-tool-use-id",
        body(tools=[TOOL], messages=[user("go"), assistant([use("bad id!")]), user("x")]),
        400,
        msg("bad_id", i=1, j=0),
        True,
    ),
    (
        "thinking-must-lead",
        body(
            thinking=THINKING_ON,
            tools=[TOOL],
            messages=[user("go"), assistant([use()]), user([result()])],
        ),
        400,
        msg("thinking_first", i=1, t="tool_use"),
        True,
    ),
    (
        "thinking-when-disabled",
        body(messages=[user("go"), assistant([SIGNED])]),
        400,
        msg("thinking_disabled", i=1, j=0),
        True,
    ),
    (
        "thinking-modified",
        body(
            thinking=THINKING_ON,
            tools=[TOOL],
            messages=[
                user("go"),
                assistant([{**SIGNED, "thinking": "edited"}, use()]),
                user([result()]),
            ],
        ),
        400,
        msg("thinking_modified", i=1, j=0),
        True,
    ),
    (
        "budget-too-small",
        body(thinking={"type": "enabled", "budget_tokens": 512}),
        400,
        msg("budget"),
        False,
    ),
    (
        "thinking-forced-tool",
        body(thinking=THINKING_ON, tools=[TOOL], tool_choice={"type": "any"}),
        400,
        msg("thinking_tool_choice"),
        False,
    ),
    (
        "max-tokens-over-model",
        body(max_tokens=200_000),
        400,
        msg("max_tokens", n=200_000, max=128_000, model=MODEL),
        False,
    ),
    (
        "temperature-2026",
        body(temperature=0.5),
        400,
        msg("sampling", field="temperature", version="2026-10-21"),
        False,
    ),
    (
        "assistant-document",
        body(
            messages=[
                user("go"),
                assistant(
                    [
                        {
                            "type": "document",
                            "source": {"type": "text", "media_type": "text/plain", "data": "d"},
                        }
                    ]
                ),
                user("x"),
            ]
        ),
        400,
        msg("assistant_document", i=1, j=0),
        True,
    ),
    (
        "user-citations",
        body(messages=[user([text("x", citations=[{"type": "char_location"}])])]),
        400,
        msg("user_citations", i=0, j=0),
        True,
    ),
    ("prefill", body(messages=[user("go"), assistant("Sure")]), 400, msg("prefill"), False),
    (
        "system-role-first",
        body(messages=[{"role": "system", "content": "be brief"}, user("x")]),
        400,
        msg("system_role_place", i=0),
        True,
    ),
    (
        "system-role-model",
        body(
            model="claude-sonnet-4-6",
            messages=[user("x"), {"role": "system", "content": "be brief"}],
        ),
        400,
        msg("system_role_model"),
        True,
    ),
    (
        "warm-with-stream",
        body(max_tokens=0, stream=True),
        400,
        msg("warm_combo", what="stream: true"),
        False,
    ),
    (
        "warm-with-forced-tool",
        body(max_tokens=0, tools=[TOOL], tool_choice={"type": "any"}),
        400,
        msg("warm_combo", what="tool_choice any"),
        False,
    ),
    (
        "unknown-tool-choice",
        body(tools=[TOOL], tool_choice={"type": "tool", "name": "nope"}),
        400,
        msg("tool_choice", problem="tool 'nope' is not in tools"),
        True,
    ),
]

# core validation checks budget_tokens < max_tokens on count_tokens too, which has no
# max_tokens, so every count_tokens body with thinking enabled gets the budget error first

EXCEPTIONS = {400: anthropic.BadRequestError, 404: anthropic.NotFoundError}


def check_error(exc: anthropic.APIStatusError, status: int, message: str) -> None:
    assert type(exc) is EXCEPTIONS[status]
    assert exc.status_code == status
    assert exc.message and message in exc.message
    assert isinstance(exc.body, dict)
    assert exc.body["error"]["message"] == message
    assert exc.body["type"] == "error"
    assert exc.body["request_id"] == exc.request_id == exc.response.headers["request-id"]
    assert exc.request_id is not None and exc.request_id.startswith("req_")
    assert exc.response.headers["x-should-retry"] == "false"


@pytest.mark.parametrize(
    ("request_body", "status", "message"),
    [pytest.param(b, s, m, id=i) for i, b, s, m, _ in CASES],
)
def test_rule_through_sdk(
    emulator: Emulator,
    sync_client: anthropic.Anthropic,
    request_body: dict[str, Any],
    status: int,
    message: str,
) -> None:
    with emulator.expect_violations(1) as seen, pytest.raises(anthropic.APIStatusError) as info:
        sync_client.post("/v1/messages", cast_to=Message, body=request_body)
    check_error(info.value, status, message)
    assert seen[0].message == message and seen[0].status == status
    assert len(emulator.requests) == 1  # a 4xx with x-should-retry: false is not retried
    assert emulator.ledger.entries() == []
    assert emulator.cache.snapshot() == []


@pytest.mark.parametrize(
    ("request_body", "status", "message"),
    [pytest.param(b, s, m, id=i) for i, b, s, m, ct in CASES if ct],
)
def test_rule_on_count_tokens(
    emulator: Emulator,
    sync_client: anthropic.Anthropic,
    request_body: dict[str, Any],
    status: int,
    message: str,
) -> None:
    ct_body = {k: v for k, v in request_body.items() if k not in ("max_tokens", "stream")}
    with emulator.expect_violations(1), pytest.raises(anthropic.APIStatusError) as info:
        sync_client.post("/v1/messages/count_tokens", cast_to=MessageTokensCount, body=ct_body)
    check_error(info.value, status, message)


@pytest.mark.anyio
async def test_rules_through_async_create(
    emulator: Emulator, async_client: anthropic.AsyncAnthropic
) -> None:
    with emulator.expect_violations(2):
        with pytest.raises(anthropic.BadRequestError) as info:
            await async_client.messages.create(
                model=MODEL,
                max_tokens=100,
                tools=[TOOL, TOOL],
                messages=[user("hi")],
            )
        check_error(info.value, 400, msg("duplicate_tool"))
        with pytest.raises(anthropic.NotFoundError) as nf:
            async with async_client.messages.stream(
                model="claude-nope-1", max_tokens=10, messages=[user("hi")]
            ) as stream:
                await stream.get_final_message()
        check_error(nf.value, 404, "model: claude-nope-1")


def test_invalid_json(emulator: Emulator, sync_client: anthropic.Anthropic) -> None:
    with emulator.expect_violations(1), pytest.raises(anthropic.BadRequestError) as info:
        sync_client.post(
            "/v1/messages",
            cast_to=Message,
            content=b'{"model": ',
            options={"headers": {"content-type": "application/json"}},
        )
    prefix = TRANSPORT_MESSAGES["bad_json"].split("{")[0]
    assert info.value.body["error"]["message"].startswith(prefix)
    assert info.value.body["error"]["type"] == "invalid_request_error"


def test_prompt_too_long_on_a_small_model() -> None:
    tiny = {"tiny-1": ModelInfo("tiny-1", max_output=1000, context_window=200, min_cache_tokens=64)}
    with Emulator(catalog=tiny) as emu:
        client = anthropic.Anthropic(base_url=emu.base_url, api_key="k")
        big = "x" * 2000
        with pytest.raises(anthropic.BadRequestError) as info:
            client.messages.create(model="tiny-1", max_tokens=10, messages=[user(big)])
        total = info.value.body["error"]["message"]
        assert total.startswith("prompt is too long: ") and total.endswith("tokens > 200 maximum")
        assert [v.status for v in emu.violations] == [400]
        client.close()


def test_input_plus_max_tokens_over_the_window_on_a_small_model() -> None:
    tiny = {"tiny-1": ModelInfo("tiny-1", max_output=1000, context_window=900, min_cache_tokens=64)}
    with Emulator(catalog=tiny) as emu:
        client = anthropic.Anthropic(base_url=emu.base_url, api_key="k")
        prompt = [user("x" * 2000)]  # about 510 tokens: fits alone, not with 400 more out
        fits = client.messages.create(model="tiny-1", max_tokens=300, messages=prompt)
        n = fits.usage.input_tokens
        with pytest.raises(anthropic.BadRequestError) as info:
            client.messages.create(model="tiny-1", max_tokens=400, messages=prompt)
        assert info.value.body["error"] == {
            "type": "invalid_request_error",
            "message": f"input length and `max_tokens` exceed context limit: {n} + 400 > 900, "
            "decrease input length or `max_tokens` and try again",
        }
        assert [v.status for v in emu.violations] == [400]
        client.close()


def test_legacy_rules_only_in_strict_legacy() -> None:
    messages = [assistant("I start"), user("hi"), user("again")]
    with Emulator(strict_legacy=True) as emu:
        client = anthropic.Anthropic(base_url=emu.base_url, api_key="k")
        with pytest.raises(anthropic.BadRequestError) as info:
            client.messages.create(model=MODEL, max_tokens=10, messages=messages)
        assert info.value.body["error"]["message"] == msg("first_user")
        client.close()


def test_merged_roles_and_assistant_first_are_accepted(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    messages = [assistant("I start"), user("hi"), user("again")]
    reply = sync_client.messages.create(model=MODEL, max_tokens=10, messages=messages)
    assert reply.stop_reason in ("end_turn", "max_tokens")


def test_sampling_params_allowed_under_2023_06_01(lenient_emulator: Emulator) -> None:
    client = anthropic.Anthropic(
        base_url=lenient_emulator.base_url,
        api_key="k",
        default_headers={"anthropic-version": "2023-06-01"},
    )
    reply = client.messages.create(
        model=MODEL, max_tokens=10, messages=[user("hi")], extra_body={"temperature": 0.2}
    )
    assert reply.type == "message"
    assert lenient_emulator.requests[0].headers["anthropic-version"] == "2023-06-01"
    client.close()
