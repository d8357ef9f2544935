"""The tool-use loop: one turn of a conversation as an async iterator of typed events.

A turn sends the history to the model, streams the reply, appends it, runs the tools it asked
for (concurrency-safe ones together, the others one by one, results kept in call order), appends
their results, and goes again until the model stops asking for tools. It ends with exactly one
`Stop` event naming why.

Invariants kept whatever happens (errors, refusal, cancellation): the history the caller owns
stays a valid conversation - every `tool_use` is answered by a `tool_result` in the next
message, no message is empty, and a failed request adds nothing. A tool that fails, gets
invalid input or is denied produces an `is_error` tool_result the model reads; only API
failures (after the SDK's retries) and cancellation end a turn early.

A reply whose stream breaks off mid-way (`StreamInterruptedError`) is sent again from the same
request - no tool has run, nothing of it was appended - after a `Retrying` event and a backoff
(`AgentConfig.stream_retry`); when its retries are used up the turn stops with `error`.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace

from ...messages_api.shapes import ToolInput
from ...messages_api.usage import cost_usd
from ..errors import ModelError, StreamInterruptedError
from ..events import (
    AssistantMessage,
    LoopEvent,
    ModelResponse,
    RequestSent,
    Retrying,
    Stop,
    TextDelta,
    ToolResult,
    ToolUse,
    UsageReport,
)
from ..history import Block, Message, valid_text
from ..model.client import ModelRequest
from ..model.timing import RequestClock
from ..permissions.gate import Allow
from ..secrets import redact
from ..tools.base import CallInfo, ToolOutcome, run_parsed
from .compaction import compact_if_needed, note_usage
from .config import AgentConfig, LoopState

__all__ = ["call_tool", "run_turn"]

INTERRUPTED = "The user interrupted this tool call before it finished; it did not complete."
NOT_RUN_REFUSAL = "Not run: the reply that asked for this call ended in a refusal."
NOT_RUN_TRUNCATED = "Not run: the reply was cut off by max_tokens before this call was complete."


def _tool_uses(content: Sequence[Block]) -> list[Block]:
    return [b for b in content if b.get("type") == "tool_use"]


def _result_block(tool_use_id: str, outcome: ToolOutcome) -> Block:
    content: str | list[Block] = outcome.content
    if outcome.images:
        content = [{"type": "text", "text": outcome.content}]
        content += [
            {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": "image/png",
                    "data": base64.b64encode(png).decode("ascii"),
                },
            }
            for png in outcome.images
        ]
    block: Block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if outcome.is_error:
        block["is_error"] = True
    return block


def _clean(content: Sequence[Block]) -> list[Block]:
    """Drop whitespace-only text blocks: the API rejects them when they are sent back."""
    return [
        b for b in content if not (b.get("type") == "text" and not str(b.get("text", "")).strip())
    ]


async def _call_tool(cfg: AgentConfig, use: Block, history: list[Message]) -> ToolOutcome:
    name = str(use.get("name"))
    raw = use.get("input") if isinstance(use.get("input"), dict) else {}
    assert isinstance(raw, dict)
    parsed = cfg.tools.parse_call(name, raw)
    if isinstance(parsed, ToolOutcome):
        return parsed
    tool, args = parsed
    ctx = replace(cfg.ctx, call=CallInfo(str(use.get("id")), history))
    hooks = cfg.hooks
    about = {"agent_id": ctx.agent_id, "tool_name": name, "tool_input": raw}
    hook_asks = False
    if hooks is not None and hooks.has("PreToolUse"):
        said = await hooks.run("PreToolUse", about, name)
        if said.blocked:  # never an allow: the gate is not even asked
            return ToolOutcome(f"{name} call blocked by a PreToolUse hook: {said.reason}", True)
        # a hook's allow does not override the rules; its ask makes the call asked
        hook_asks = said.decision == "ask"
    decision = await cfg.gate.check(tool, args, ctx, raw, hook_asks=hook_asks)
    if not isinstance(decision, Allow):
        return ToolOutcome(decision.message, True)
    if decision.updated_input is not None:  # what the person approved, edited
        parsed = cfg.tools.parse_call(name, decision.updated_input)
        if isinstance(parsed, ToolOutcome):
            return parsed
        tool, args = parsed
    outcome = await run_parsed(tool, args, ctx)
    if hooks is not None and hooks.has("PostToolUse"):
        response = {"content": outcome.content, "is_error": outcome.is_error}
        said = await hooks.run("PostToolUse", {**about, "tool_response": response}, name)
        notes = [f"PostToolUse hook: {said.reason}"] if said.blocked else []
        notes += said.context
        if notes:
            text = "\n\n".join([outcome.content, *notes])
            outcome = ToolOutcome(text, outcome.is_error, outcome.images)
    return outcome


async def call_tool(
    cfg: AgentConfig,
    name: str,
    tool_input: ToolInput,
    history: list[Message],
    call_id: str,
) -> ToolOutcome:
    """One call made outside the model's turn on the person's behalf (a command's shell
    line), exactly as the loop makes the model's: PreToolUse hooks, the gate (asked like any
    call), the tool, PostToolUse hooks. A refusal is an `is_error` outcome."""
    return await _call_tool(
        cfg, {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}, history
    )


async def _timed_call(
    cfg: AgentConfig, use: Block, history: list[Message]
) -> tuple[ToolOutcome, float, float]:
    """`_call_tool`, with when it started and ended (wall clock)."""
    started = time.time()
    outcome = await _call_tool(cfg, use, history)
    return outcome, started, time.time()


def _batches(cfg: AgentConfig, uses: list[Block]) -> list[list[int]]:
    """Indices of calls grouped so that consecutive concurrency-safe calls share a batch."""

    def safe(use: Block) -> bool:
        tool = cfg.tools.get(str(use.get("name")))
        return bool(tool and tool.concurrency_safe)

    batches: list[list[int]] = []
    for i, use in enumerate(uses):
        if safe(use) and batches and batches[-1][-1] == i - 1 and safe(uses[i - 1]):
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


async def run_turn(
    cfg: AgentConfig,
    history: list[Message],
    state: LoopState | None = None,
) -> AsyncIterator[LoopEvent]:
    """Run the loop on `history` (which must end with a user message), appending to it."""
    state = state or LoopState()
    requests = 0
    while True:
        clock = RequestClock()
        if state.before_first_request is not None:
            hold, state.before_first_request = state.before_first_request, None
            held_from = time.time()
            if await hold():
                clock.held = (held_from, time.time())
        if cfg.compaction is not None:
            async for compacted in compact_if_needed(cfg, history, state):
                yield compacted
        request = _request(cfg, history, state, clock)
        yield RequestSent(index=requests, model=cfg.model, message_count=len(history))
        response: ModelResponse | None = None
        async for got in _receive(cfg, request, requests):
            if isinstance(got, ModelResponse):
                response = got
                continue
            yield got
            if isinstance(got, Stop):
                return
        assert response is not None
        requests += 1
        yield _account(state, history, response, clock)

        content = _clean(response.content)
        uses = _tool_uses(content)
        if content:
            state.append(history, {"role": "assistant", "content": content})
            yield AssistantMessage(content, response.stop_reason)

        cut = _cut_short(response.stop_reason, uses, history, state, requests)
        if cut is not None:
            yield cut
            return
        if not uses:
            if response.stop_reason == "pause_turn" and content:
                continue
            yield Stop("end_turn", turns=requests)
            return

        outcomes: list[ToolOutcome | None] = [None] * len(uses)
        try:
            for use in uses:
                name, data = str(use["name"]), dict(use.get("input") or {})
                yield ToolUse(str(use["id"]), name, data, cfg.tools.describe(name, data))
            for batch in _batches(cfg, uses):
                results = await asyncio.gather(*(_timed_call(cfg, uses[i], history) for i in batch))
                for i, (outcome, started, ended) in zip(batch, results, strict=True):
                    text = valid_text(redact(outcome.content))  # encodable, whatever it printed
                    outcome = ToolOutcome(text, outcome.is_error, outcome.images)
                    outcomes[i] = outcome
                    yield ToolResult(
                        str(uses[i]["id"]),
                        str(uses[i]["name"]),
                        *_pair(outcome),
                        started=started,
                        ended=ended,
                    )
        finally:
            # Runs on normal completion and on cancellation alike: answer every call.
            blocks = [
                _result_block(u["id"], o or ToolOutcome(INTERRUPTED, True))
                for u, o in zip(uses, outcomes, strict=True)
            ]
            if state.inbox is not None:
                blocks += [{"type": "text", "text": text} for text in state.inbox()]
            state.append(history, {"role": "user", "content": blocks})
        if requests >= cfg.max_turns:
            yield Stop("max_turns", f"stopped after {requests} model requests", turns=requests)
            return


def _request(
    cfg: AgentConfig, history: list[Message], state: LoopState, clock: RequestClock
) -> ModelRequest:
    """The next model request of the loop (the first response's start hook goes with the
    first request only)."""
    start_hook = state.on_first_response_start
    request = ModelRequest(
        model=cfg.model,
        system=cfg.system,
        tools=cfg.gate.offered(cfg.tools.specs()),
        messages=history,
        max_tokens=cfg.max_tokens,
        thinking=cfg.thinking,
        effort=cfg.effort,
        cache_ttl=cfg.cache_ttl,
        cache_points=state.cache_points,
        previous_end=state.previous_end,
        on_response_start=_once(start_hook) if start_hook is not None else None,
        on_rate_wait=state.on_rate_wait,
        clock=clock,
    )
    state.on_first_response_start = None
    return request


async def _receive(
    cfg: AgentConfig, request: ModelRequest, requests: int
) -> AsyncIterator[TextDelta | Retrying | Stop | ModelResponse]:
    """The model's response to `request` (last), its text streamed as it comes; a stream cut
    short is retried as `cfg.stream_retry` says. A `Stop` instead when no response came."""
    response: ModelResponse | None = None
    retries = 0
    while response is None:
        streamed = 0
        try:
            async for event in cfg.client.stream(request):
                if isinstance(event, TextDelta):
                    streamed += len(event.text)
                    yield event
                else:
                    response = event
        except StreamInterruptedError as exc:
            policy = cfg.stream_retry
            if retries >= policy.retries:
                yield Stop("error", _gave_up(exc, retries), turns=requests)
                return
            retries += 1
            delay = policy.delay(retries)
            yield Retrying(retries, policy.retries, delay, exc.reason, streamed)
            await asyncio.sleep(delay)
            continue
        except ModelError as exc:
            yield Stop("error", redact(str(exc)), turns=requests)
            return
        if response is None:
            yield Stop("error", "the model stream ended without a message", turns=requests)
            return
    yield response


def _account(
    state: LoopState,
    history: list[Message],
    response: ModelResponse,
    clock: RequestClock,
) -> UsageReport:
    """Note a response's usage on the loop state; its report."""
    state.requests += 1
    state.previous_end = len(history) - 1
    state.cache_points = []  # a fork's shared prefix matters for its first request only
    note_usage(state, response.usage)
    cost = cost_usd(response.usage, response.model, response.service_tier)
    return UsageReport(
        response.usage,
        response.model,
        cost,
        message_id=response.message_id,
        timing=clock.summary() if clock.attempts else None,
    )


def _cut_short(
    stop_reason: str,
    uses: list[Block],
    history: list[Message],
    state: LoopState,
    requests: int,
) -> Stop | None:
    """The Stop of a refused or truncated response, whose tool calls are answered as not
    run (never run a refused or cut-off call); None for any other response."""
    if stop_reason not in ("refusal", "max_tokens"):
        return None
    if uses:
        note = NOT_RUN_REFUSAL if stop_reason == "refusal" else NOT_RUN_TRUNCATED
        state.append(
            history,
            {
                "role": "user",
                "content": [_result_block(u["id"], ToolOutcome(note, True)) for u in uses],
            },
        )
    return Stop("refusal" if stop_reason == "refusal" else "max_tokens", turns=requests)


def _once(hook: Callable[[], None]) -> Callable[[], None]:
    """`hook`, called at most once however many attempts the request takes."""
    called = False

    def call() -> None:
        nonlocal called
        if not called:
            called = True
            hook()

    return call


def _gave_up(exc: StreamInterruptedError, retries: int) -> str:
    message = redact(str(exc))
    if retries == 0:
        return message
    times = "once" if retries == 1 else f"{retries} times"
    return f"{message} (the request was retried {times}; it broke off each time)"


def _pair(outcome: ToolOutcome) -> tuple[str, bool]:
    return outcome.content, outcome.is_error
