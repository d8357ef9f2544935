"""From a brain's `Reply` to the wire: the finished content, the Message, the SSE events.

`finish_reply` applies what the request asks of the output: ids for `tool_use` blocks,
signatures for `thinking` blocks (over the text actually delivered, so `display:"omitted"`
blocks verify too), `stop_sequences` (the text is cut before the first match; later blocks
are dropped), `max_tokens` (content is cut so its output tokens fit; a block that does not
fit at all is dropped; `output_tokens` is then `max_tokens`) and `max_tokens: 0` (no content).

`message_dict` is the non-streaming body; `message_events` the streaming sequence:
message_start (input and cache usage, output_tokens 1) -> per block content_block_start /
deltas / content_block_stop (indices contiguous from 0) -> message_delta (cumulative usage)
-> message_stop, with optional `ping` and unknown events (`StreamOptions`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..messages_api.tokens import Tokenizer, count_output_tokens
from .brains import Reply

__all__ = [
    "Outcome",
    "SseEvent",
    "StreamOptions",
    "encode_event",
    "finish_reply",
    "message_dict",
    "message_events",
    "split_chunks",
]


@dataclass(frozen=True)
class StreamOptions:
    """How a reply is cut into events.

    `text_chunk`/`thinking_chunk`/`json_chunk`: characters per delta (text and thinking of two
    characters or more always take at least two deltas). `empty_first_json`: the first
    `input_json_delta` is "". `ping_every=N`: a `ping` right after message_start and after
    every N content events. `unknown_event_at=K`: an event of type `unknown_event` after K
    content events (clients must ignore it).
    """

    text_chunk: int = 16
    thinking_chunk: int = 24
    json_chunk: int = 12
    empty_first_json: bool = True
    ping_every: int | None = None
    unknown_event_at: int | None = None
    unknown_event: str = "emulator_unknown_event"


@dataclass(frozen=True)
class Outcome:
    """The finished assistant output of one request."""

    content: list[dict[str, Any]]
    stop_reason: str
    stop_sequence: str | None
    stop_details: Mapping[str, Any] | None
    output_tokens: int


@dataclass(frozen=True)
class SseEvent:
    name: str
    data: dict[str, Any]
    content: bool = False  # a content_block_* event (counted for faults and latency)
    delta: bool = False

    def encode(self) -> bytes:
        return encode_event(self.name, self.data)


def encode_event(name: str, data: Mapping[str, Any]) -> bytes:
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {payload}\n\n".encode()


def _first_stop(text: str, sequences: Sequence[str]) -> tuple[int, str] | None:
    best: tuple[int, str] | None = None
    for seq in sequences:
        if not seq:
            continue
        at = text.find(seq)
        if at >= 0 and (best is None or at < best[0]):
            best = (at, seq)
    return best


def _truncate(
    blocks: list[dict[str, Any]], max_tokens: int, tokenizer: Tokenizer
) -> list[dict[str, Any]]:
    kept: list[dict[str, Any]] = []
    for block in blocks:
        if count_output_tokens([*kept, block], tokenizer) <= max_tokens:
            kept.append(block)
            continue
        field = {"text": "text", "thinking": "thinking"}.get(str(block.get("type")))
        if field is not None:
            full = str(block.get(field, ""))
            lo, hi = 0, len(full)
            while lo < hi:  # the longest prefix that still fits
                mid = (lo + hi + 1) // 2
                if count_output_tokens([*kept, {**block, field: full[:mid]}], tokenizer) <= (
                    max_tokens
                ):
                    lo = mid
                else:
                    hi = mid - 1
            if lo > 0:
                kept.append({**block, field: full[:lo]})
        break
    return kept


def finish_reply(
    reply: Reply,
    body: Mapping[str, Any],
    *,
    tokenizer: Tokenizer,
    new_tool_id: Callable[[], str],
    sign: Callable[[str], str],
) -> Outcome:
    """The content and stop fields the request gets for `reply` (see the module doc)."""
    max_tokens = int(body.get("max_tokens") or 0)
    if max_tokens <= 0:
        return Outcome([], "max_tokens", None, None, 0)
    blocks = reply.blocks()
    for block in blocks:
        if block.get("type") == "tool_use" and not block.get("id"):
            rest = {k: v for k, v in block.items() if k not in ("type", "id")}
            block.clear()
            block.update({"type": "tool_use", "id": new_tool_id(), **rest})
    stop_reason = reply.resolved_stop_reason()
    stop_sequence: str | None = None
    stop_details = reply.stop_details
    sequences = [s for s in body.get("stop_sequences") or [] if isinstance(s, str)]
    if sequences:
        for k, block in enumerate(blocks):
            if block.get("type") != "text":
                continue
            found = _first_stop(str(block.get("text", "")), sequences)
            if found is not None:
                at, stop_sequence = found
                cut = str(block["text"])[:at]
                blocks = blocks[:k] + ([{**block, "text": cut}] if cut else [])
                stop_reason, stop_details = "stop_sequence", None
                break
    output_tokens = count_output_tokens(blocks, tokenizer)
    if output_tokens > max_tokens:
        blocks = _truncate(blocks, max_tokens, tokenizer)
        stop_reason, stop_sequence, stop_details = "max_tokens", None, None
        output_tokens = max_tokens
    thinking = body.get("thinking")
    omitted = isinstance(thinking, Mapping) and thinking.get("display") == "omitted"
    for block in blocks:
        if block.get("type") == "thinking":
            if omitted:
                block["thinking"] = ""
                block.pop("signature", None)
            if not block.get("signature"):
                block["signature"] = sign(str(block.get("thinking", "")))
    return Outcome(blocks, stop_reason, stop_sequence, stop_details, output_tokens)


def full_usage(usage: Mapping[str, Any], output_tokens: int) -> dict[str, Any]:
    """The Message usage object: input and cache counts (0, never null), breakdown, output."""
    breakdown = usage.get("cache_creation") or {}
    full = {
        "input_tokens": int(usage.get("input_tokens") or 0),
        "cache_creation_input_tokens": int(usage.get("cache_creation_input_tokens") or 0),
        "cache_read_input_tokens": int(usage.get("cache_read_input_tokens") or 0),
        "cache_creation": {
            "ephemeral_5m_input_tokens": int(breakdown.get("ephemeral_5m_input_tokens") or 0),
            "ephemeral_1h_input_tokens": int(breakdown.get("ephemeral_1h_input_tokens") or 0),
        },
        "output_tokens": output_tokens,
        "service_tier": "standard",
        "inference_geo": "global",
    }
    if usage.get("server_tool_use"):  # only when server tools ran
        full["server_tool_use"] = dict(usage["server_tool_use"])
    return full


def message_dict(
    *, message_id: str, model: str, outcome: Outcome, usage: Mapping[str, Any]
) -> dict[str, Any]:
    """The non-streaming response body (§4)."""
    out: dict[str, Any] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "content": outcome.content,
        "model": model,
        "stop_reason": outcome.stop_reason,
        "stop_sequence": outcome.stop_sequence,
        "usage": full_usage(usage, outcome.output_tokens),
    }
    if outcome.stop_details is not None:
        out["stop_details"] = dict(outcome.stop_details)
    return out


def split_chunks(text: str, size: int) -> list[str]:
    """`text` in pieces of at most `size` characters; two pieces at least when possible."""
    if not text:
        return []
    size = max(1, min(size, -(-len(text) // 2))) if len(text) > 1 else 1
    return [text[i : i + size] for i in range(0, len(text), size)]


def _block_events(index: int, block: Mapping[str, Any], opts: StreamOptions) -> Iterator[SseEvent]:
    kind = block.get("type")

    def delta(payload: dict[str, Any]) -> SseEvent:
        data = {"type": "content_block_delta", "index": index, "delta": payload}
        return SseEvent("content_block_delta", data, content=True, delta=True)

    if kind == "text":
        start: dict[str, Any] = {"type": "text", "text": ""}
        if "citations" in block:
            start["citations"] = None
    elif kind == "tool_use":
        start = {"type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": {}}
        if "caller" in block:
            start["caller"] = block["caller"]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
    else:
        start = dict(block)
    data = {"type": "content_block_start", "index": index, "content_block": start}
    yield SseEvent("content_block_start", data, content=True)
    if kind == "text":
        for piece in split_chunks(str(block.get("text", "")), opts.text_chunk):
            yield delta({"type": "text_delta", "text": piece})
        for citation in block.get("citations") or []:
            yield delta({"type": "citations_delta", "citation": citation})
    elif kind == "tool_use":
        raw = json.dumps(block.get("input", {}), ensure_ascii=False)
        pieces = split_chunks(raw, opts.json_chunk)
        if opts.empty_first_json:
            pieces = ["", *pieces]
        for piece in pieces:
            yield delta({"type": "input_json_delta", "partial_json": piece})
    elif kind == "thinking":
        for piece in split_chunks(str(block.get("thinking", "")), opts.thinking_chunk):
            yield delta({"type": "thinking_delta", "thinking": piece})
        yield delta({"type": "signature_delta", "signature": str(block.get("signature", ""))})
    stop = {"type": "content_block_stop", "index": index}
    yield SseEvent("content_block_stop", stop, content=True)


def message_events(message: Mapping[str, Any], opts: StreamOptions) -> Iterator[SseEvent]:
    """The SSE events of a streamed `message` (a `message_dict`), in the order of §5."""
    usage = dict(message["usage"])
    start_message = {
        **{k: v for k, v in message.items() if k not in ("content", "usage", "stop_details")},
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 1},
    }
    yield SseEvent("message_start", {"type": "message_start", "message": start_message})
    if opts.ping_every is not None:
        yield SseEvent("ping", {"type": "ping"})
    count = 0
    for index, block in enumerate(message["content"]):
        for event in _block_events(index, block, opts):
            yield event
            count += 1
            if opts.ping_every and count % opts.ping_every == 0:
                yield SseEvent("ping", {"type": "ping"})
            if opts.unknown_event_at is not None and count == opts.unknown_event_at:
                yield SseEvent(opts.unknown_event, {"type": opts.unknown_event, "note": "ignore"})
    if opts.unknown_event_at is not None and count < opts.unknown_event_at:
        yield SseEvent(opts.unknown_event, {"type": opts.unknown_event, "note": "ignore"})
    final_usage = {
        "input_tokens": usage["input_tokens"],
        "cache_creation_input_tokens": usage["cache_creation_input_tokens"],
        "cache_read_input_tokens": usage["cache_read_input_tokens"],
        "output_tokens": usage["output_tokens"],
    }
    if "server_tool_use" in usage:
        final_usage["server_tool_use"] = usage["server_tool_use"]
    delta: dict[str, Any] = {
        "stop_reason": message["stop_reason"],
        "stop_sequence": message["stop_sequence"],
    }
    if message.get("stop_details") is not None:
        delta["stop_details"] = message["stop_details"]
    yield SseEvent(
        "message_delta",
        {
            "type": "message_delta",
            "delta": delta,
            "usage": final_usage,
        },
    )
    yield SseEvent("message_stop", {"type": "message_stop"})
