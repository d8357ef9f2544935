"""Sending one messages reply once the response has started: the JSON body, or the stream (SSE,
or AWS event-stream frames for Bedrock), cut where an injected fault says, its ledger entry
added (once) before the last byte leaves.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from .eventstream import CONTENT_TYPE, chunk_frame, exception_frame
from .faults import Fault
from .sse import SseEvent, StreamOptions, message_events
from .transport import Handler

__all__ = ["send_body", "send_stream"]

Wait = Callable[[float], None]
"""Waits `seconds` of the emulator's time (raises when the emulator stops meanwhile)."""


def send_body(
    h: Handler,
    headers: Mapping[str, str],
    message: Mapping[str, Any],
    fault: Fault | None,
    latency: float,
    bill: Callable[[bool], None],
    wait: Wait,
    options: StreamOptions,
) -> None:
    """Send the message as one JSON body, after the time its tokens would take to stream;
    a fault that drops mid-way or at the end cuts the body short."""
    events = sum(1 for e in message_events(message, options) if e.delta)
    wait(latency * events)
    data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
    partial = fault is not None and fault.drop in ("mid", "end")
    bill(not partial)
    h.send_bytes(200, {**headers, "Content-Type": "application/json"}, data, partial=partial)


def send_stream(
    h: Handler,
    headers: Mapping[str, str],
    message: Mapping[str, Any],
    fault: Fault | None,
    latency: float,
    bill: Callable[[bool], None],
    wait: Wait,
    options: StreamOptions,
    *,
    eventstream: bool = False,
) -> None:
    """Send the stream (a fault may cut it); `bill` runs before the last write. SSE, or
    with `eventstream` AWS event-stream frames (Bedrock)."""
    headers = {
        **headers,
        "Content-Type": CONTENT_TYPE if eventstream else "text/event-stream; charset=utf-8",
        "Cache-Control": "no-cache",
    }

    def encode(event: SseEvent) -> bytes:
        return chunk_frame(event.data) if eventstream else event.encode()

    h.start_chunked(200, headers)
    error_after = fault.stream_error_after if fault is not None else None
    drop_after = fault.drop_after if fault is not None and fault.drop in ("mid", "end") else None
    pending: list[bytes] = []
    sent_content = 0

    def flush() -> None:
        if pending:
            h.write_chunk(b"".join(pending))
            pending.clear()

    def cut(event: SseEvent | None) -> bool:
        """Apply a fault due before `event` (None: before message_delta)."""
        due = event is None or event.content
        if not due:
            return False
        if error_after is not None and sent_content >= error_after:
            assert fault is not None
            err = {"type": fault.stream_error_type, "message": fault.stream_error_message}
            if eventstream:
                kind, text = fault.stream_error_type, fault.stream_error_message
                pending.append(exception_frame(kind, text))
            else:
                pending.append(SseEvent("error", {"type": "error", "error": err}).encode())
            bill(False)
            flush()
            h.end_chunked()
            return True
        if drop_after is not None and sent_content >= drop_after:
            bill(False)
            flush()
            if fault is not None and fault.drop == "end":
                h.end_chunked()  # a clean end, with the message unfinished
            else:
                h.drop()
            return True
        return False

    for event in message_events(message, options):
        if event.name == "message_delta" and cut(None):
            return
        if event.content and cut(event):
            return
        if event.delta and latency > 0:
            flush()
            wait(latency)
        pending.append(encode(event))
        if event.content:
            sent_content += 1
    bill(True)
    flush()
    h.end_chunked()
