"""Compaction: keeping a long conversation inside its model's context window.

Every request must fit its window: the API refuses one whose input plus `max_tokens` exceeds
it. Before each request the loop predicts the prompt it is about to send: what the last
response measured plus the emulator's token count of the messages added since (the whole
request is counted only when nothing was measured yet: a first request, or right after a
compaction; that count also calibrates the emulator's figures against the model's). When
the prediction plus `max_tokens` reaches `compact_at` of the window, it compacts first:

1. The summary request is a fork of the conversation: the same model, system prompt, tools,
   thinking settings and messages, with one instruction added to the last user message (or
   as a new user message after a final assistant one). Its prefix is byte-identical to the
   previous request's, with a breakpoint where that request ended, so it reads the history
   from the prompt cache: a summary costs cache reads plus its own output.
2. The history is replaced by the summary plus the last `keep_turns` turns. A turn starts at
   a user message without `tool_result` blocks, so a cut there never separates a `tool_use`
   from its result; the summary goes in front of the first kept message (no two user
   messages in a row). The turn in progress is always kept.
3. The runtime appends the session's tasks (ids, names, status) to the summary, so task ids
   survive whatever the model wrote (and a worker's own fork directive, when its message is
   dropped); pending notifications wait in the command queue, not in the history, and are
   untouched.
4. The owner records the compacted history (`LoopState.on_history_replaced`): a transcript
   keeps every earlier message and an event with the new history, so a resume replays to the
   compacted history.

A conversation already past its window (compaction turned on late) is summarised from its
most recent turns that fit. A failed summary request leaves the history as it was (a
`Compacted` event with `error`).
`last_turns` cuts the same way for forks that inherit only the last N turns.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from typing import Literal

from ...messages_api.catalog import DEFAULT_CATALOG, catalog_name
from ...messages_api.shapes import JSON
from ...messages_api.tokens import ByteTokenizer, count_input_tokens
from ...messages_api.usage import Usage, cost_usd
from ..errors import ModelError, StreamInterruptedError, UsageError
from ..events import Compacted, LoopEvent, ModelResponse, UsageReport
from ..history import Block, Message, blocks_of
from ..model.client import ModelRequest, build_request
from ..secrets import redact
from .config import AgentConfig, CompactPolicy, LoopState
from .fork import FORK_TAG

__all__ = [
    "COMPACT_REQUEST_TAG",
    "SUMMARY_TAG",
    "CompactPolicy",
    "check_compact_at",
    "compact",
    "compact_if_needed",
    "compacted_history",
    "estimate_tokens",
    "last_turns",
    "note_usage",
    "predict_tokens",
    "turn_starts",
    "window_for",
]

DEFAULT_WINDOW = 200_000
"""The window assumed for a model the catalog does not list."""
COMPACT_REQUEST_TAG = "compaction-request"
SUMMARY_TAG = "conversation-summary"

_INSTRUCTION = f"""\
<{COMPACT_REQUEST_TAG}>
This conversation is about to be shortened: the messages above will be replaced by what you \
write now, followed by the latest turns. Do not call any tool. Write a summary that lets you \
continue the work without the earlier messages:
- what the person asked for and still expects;
- what was done and found: results, numbers, variable, file and function names;
- decisions taken and why;
- background tasks (ids, what each does, status) and results they reported;
- what is still open.
Plain text under short headings; complete but brief (at most {{words}} words).
</{COMPACT_REQUEST_TAG}>"""

_TOKENIZER = ByteTokenizer()


def check_compact_at(value: float | None) -> float | None:
    """`value` if it is a usable threshold (0 < value <= 1, or None), else a UsageError."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise UsageError(
            f"compact_at must be a fraction of the context window between 0 and 1 (e.g. 0.8), "
            f"or None to never compact; got {value!r}."
        )
    return float(value)


def window_for(model: str, policy: CompactPolicy | None = None) -> int:
    """The context window of `model` in tokens (the policy's override first)."""
    if policy is not None and policy.window:
        return policy.window
    info = DEFAULT_CATALOG.get(catalog_name(model))  # a platform's id: the model inside it
    return info.context_window if info is not None else DEFAULT_WINDOW


def _has_results(message: Message) -> bool:
    return any(b.get("type") == "tool_result" for b in blocks_of(message))


def turn_starts(history: Sequence[Message]) -> list[int]:
    """Indices of the messages that start a turn: user messages without tool results."""
    return [i for i, m in enumerate(history) if m.get("role") == "user" and not _has_results(m)]


def last_turns(history: Sequence[Message], turns: int) -> list[Message]:
    """The last `turns` turns of `history` (all of it when it has no more); the message
    dicts are shared, not copied."""
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
        raise UsageError(f"The number of turns to inherit must be 1 or more; got {turns!r}.")
    starts = turn_starts(history)
    if len(starts) <= turns:
        return list(history)
    return list(history[starts[-turns] :])


def _cut(history: Sequence[Message], keep_turns: int) -> int | None:
    """Where the kept turns start (None: nothing older to drop)."""
    starts = turn_starts(history)
    keep = max(1, keep_turns)
    if not starts:
        return None
    cut = starts[-keep] if len(starts) >= keep else starts[0]
    return cut or None


def compacted_history(
    history: Sequence[Message], summary: str, keep_turns: int
) -> list[Message] | None:
    """`summary` followed by the last `keep_turns` turns (at least the current one), or None
    when nothing older than those turns exists."""
    cut = _cut(history, keep_turns)
    if cut is None:
        return None
    first = history[cut]
    head: Message = {
        "role": "user",
        "content": [{"type": "text", "text": summary}, *blocks_of(first)],
    }
    return [head, *history[cut + 1 :]]


def _directives(history: Sequence[Message], keep_turns: int) -> list[str]:
    """The fork directives in the part that compaction drops: a worker keeps its own."""
    cut = _cut(history, keep_turns) or 0
    return [
        str(b.get("text"))
        for m in history[:cut]
        for b in blocks_of(m)
        if b.get("type") == "text" and f"<{FORK_TAG}>" in str(b.get("text", ""))
    ]


def summary_request_messages(history: Sequence[Message], words: int) -> list[Message]:
    """The conversation with the summary instruction at its end (every earlier message is
    the same dict, so the request's prefix is the conversation's)."""
    instruction: Block = {"type": "text", "text": _INSTRUCTION.format(words=words)}
    messages = list(history)
    if messages and messages[-1]["role"] == "user":
        messages[-1] = {"role": "user", "content": [*blocks_of(messages[-1]), instruction]}
    else:
        messages.append({"role": "user", "content": [instruction]})
    return messages


def estimate_tokens(cfg: AgentConfig, messages: Sequence[Message]) -> int:
    """The prompt tokens of a request with these messages, as the emulator counts them."""
    request = ModelRequest(
        model=cfg.model,
        system=cfg.system,
        tools=cfg.tools.specs(),
        messages=messages,
        max_tokens=cfg.max_tokens,
        thinking=cfg.thinking,
        effort=cfg.effort,
    )
    return count_input_tokens(build_request(request), _TOKENIZER)


def note_usage(state: LoopState, usage: Usage) -> None:
    """A response measured the prompt: remember its size, and calibrate the estimate."""
    state.context_tokens = usage.total_input_tokens
    if state.last_estimate > 0 and usage.total_input_tokens > 0:
        state.token_ratio = usage.total_input_tokens / state.last_estimate
    state.last_estimate = 0


def predict_tokens(
    cfg: AgentConfig, state: LoopState, history: Sequence[Message]
) -> tuple[int, int]:
    """The prompt tokens of the next request with `history`, and the uncalibrated count of
    the whole request when one was made (0 when the prediction built on a measurement)."""
    end = state.previous_end
    if state.context_tokens > 0 and end is not None and 0 <= end < len(history):
        added = history[end + 1 :]
        count = count_input_tokens({"messages": list(added)}, _TOKENIZER) if added else 0
        return state.context_tokens + round(count * state.token_ratio), 0
    raw = estimate_tokens(cfg, history)
    return round(raw * state.token_ratio), raw


async def compact_if_needed(
    cfg: AgentConfig, history: list[Message], state: LoopState
) -> AsyncIterator[LoopEvent]:
    """Compact `history` when the request about to be sent would reach the threshold."""
    policy = cfg.compaction
    if policy is None or policy.compact_at is None:
        return
    window = window_for(cfg.model, policy)
    predicted, raw = predict_tokens(cfg, state, history)
    if predicted + cfg.max_tokens < policy.compact_at * window:
        state.last_estimate = raw
        return
    # fewer turns than it keeps: keep only the current one rather than none of the older
    keep = policy.keep_turns if _cut(history, policy.keep_turns) is not None else 1
    if _cut(history, keep) is None:  # one turn: nothing to summarise (the API will say if
        state.last_estimate = raw  # the request does not fit)
        return
    async for event in compact(
        cfg, history, state, trigger="threshold", keep_turns=keep, before=predicted
    ):
        yield event
    state.last_estimate = predict_tokens(cfg, state, history)[1]


async def compact(
    cfg: AgentConfig,
    history: list[Message],
    state: LoopState,
    *,
    trigger: Literal["threshold", "manual"] = "manual",
    keep_turns: int | None = None,
    before: int | None = None,
) -> AsyncIterator[LoopEvent]:
    """Summarise `history` by a fork of it and replace it in place by the summary plus the
    last turns. Yields the summary request's `UsageReport`, then one `Compacted`."""
    policy = cfg.compaction or CompactPolicy()
    keep = keep_turns if keep_turns is not None else policy.keep_turns
    window = window_for(cfg.model, policy)
    before = before if before is not None else predict_tokens(cfg, state, history)[0]
    count = len(history)

    def report(error: str, usage: Usage | None = None, cost: float = 0.0) -> Compacted:
        spent = usage or Usage()
        return Compacted(
            trigger, before, before, window, count, count, 0, "", spent, cost, error=error
        )

    if compacted_history(history, "-", keep) is None:
        yield report(f"nothing to compact: the conversation has no turn before the last {keep}")
        return
    max_tokens = cfg.max_tokens if cfg.thinking else min(cfg.max_tokens, policy.summary_max_tokens)
    words = max(100, max_tokens // 2)
    source, previous_end = _fitting(cfg, state, history, before, max_tokens, window, words)
    request = _summary_request(cfg, state, source, words, max_tokens, previous_end)
    response: ModelResponse | None = None
    try:
        async for event in cfg.client.stream(request):
            if isinstance(event, ModelResponse):
                response = event
    except (ModelError, StreamInterruptedError) as exc:
        yield report(f"the summary request failed: {redact(str(exc))}")
        return
    if response is None:
        yield report("the summary request ended without a message")
        return
    cost = cost_usd(response.usage, response.model, response.service_tier)
    yield UsageReport(response.usage, response.model, cost)
    text = "".join(
        str(b.get("text", "")) for b in response.content if b.get("type") == "text"
    ).strip()
    if not text:
        yield report("the summary came back empty", response.usage, cost)
        return
    summary = _summary_block(text, policy, cfg.ctx.agent_id, before, _directives(history, keep))
    new = compacted_history(history, summary, keep)
    assert new is not None
    history[:] = new
    state.previous_end = None  # the old positions are gone: the next request writes anew
    state.cache_points = []
    after = predict_tokens(cfg, state, history)[0]
    done = Compacted(
        trigger,
        before,
        after,
        window,
        count,
        len(history),
        len(turn_starts(history)),
        text,
        response.usage,
        cost,
    )
    if state.on_history_replaced is not None:
        state.on_history_replaced(list(history), _record(done))
    yield done


def _summary_request(
    cfg: AgentConfig,
    state: LoopState,
    source: list[Message],
    words: int,
    max_tokens: int,
    previous_end: int | None,
) -> ModelRequest:
    """The request that asks for a summary of `source` in about `words` words: the agent's
    own system and tools, so that it reads the conversation's cached prefix."""
    return ModelRequest(
        model=cfg.model,
        system=cfg.system,
        tools=cfg.tools.specs(),
        messages=summary_request_messages(source, words=words),
        max_tokens=max_tokens,
        thinking=cfg.thinking,
        effort=cfg.effort,
        cache_ttl=cfg.cache_ttl,
        previous_end=previous_end,
        on_rate_wait=state.on_rate_wait,
    )


def _fitting(
    cfg: AgentConfig,
    state: LoopState,
    history: list[Message],
    before: int,
    max_tokens: int,
    window: int,
    words: int,
) -> tuple[list[Message], int | None]:
    """What the summary request reads: the whole conversation when it fits the window (from
    the cache, at `previous_end`), else its most recent turns that do (a conversation already
    past its window, e.g. with compaction turned on late); the transcript keeps the rest."""
    instruction = count_input_tokens({"messages": summary_request_messages([], words)}, _TOKENIZER)
    if before + instruction + max_tokens <= window:
        return history, state.previous_end
    for start in turn_starts(history)[1:]:
        part = history[start:]
        size = round(estimate_tokens(cfg, part) * state.token_ratio)
        if size + instruction + max_tokens <= window:
            return part, None
    return history, state.previous_end  # nothing fits: the API will say so


def _summary_block(
    text: str, policy: CompactPolicy, agent_id: str, before: int, directives: list[str]
) -> str:
    lines = [
        f"<{SUMMARY_TAG}>",
        f"The earlier part of this conversation (about {before:,} tokens) was replaced by "
        "this summary; the transcript on disk keeps it.",
        "",
        _strip_tags(text),
    ]
    tasks = policy.task_lines(agent_id) if policy.task_lines is not None else []
    if tasks:
        lines += ["", "Background tasks started in this conversation (ids still valid):", *tasks]
    if directives:
        lines += ["", "Your directive, as you were given it:", directives[-1]]
    lines.append(f"</{SUMMARY_TAG}>")
    return "\n".join(lines)


def _strip_tags(text: str) -> str:
    """The model's summary without our own tags (a summary of a summary stays flat)."""
    return re.sub(rf"</?{SUMMARY_TAG}>", "", text).strip()


def _record(event: Compacted) -> dict[str, JSON]:
    return {
        "trigger": event.trigger,
        "before_tokens": event.before_tokens,
        "after_tokens": event.after_tokens,
        "window": event.window,
        "messages_before": event.messages_before,
        "messages_after": event.messages_after,
        "summary": event.summary,
        "usage": event.usage.model_dump(),
        "cost_usd": round(event.cost_usd, 6),
    }
