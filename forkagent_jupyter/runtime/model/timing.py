"""When each part of a model request happened, and how the timings reach the transcript.

A `RequestClock` rides on one `ModelRequest` (the loop makes one per request). The layers the
request passes through mark it on the wall clock (`time.time()`, so that the marks of every
agent and of a later process line up):

* the loop: how long the fork scheduler held the request until the lead fork's response had
  started (`held`);
* the pacer (`PacedModel`): each wait for rate-limit room (`waits`), each attempt sent
  (`send`), its response start (`response_started`: from then on its cache writes are
  readable), its first text token (`token`), its end (`end`), or why it broke off (`fail`: a
  dropped stream, a 429) - a request that goes again has one `Attempt` per try.

The loop puts `summary()` on the request's `UsageReport`; the owner of the transcript writes it
as a `request` event (`record_timing`), with the usage and the message id. Tool calls are
written as `tool` events from their `ToolResult` (started, ended). These events are what
`transcripts/timeline.py` draws a fan-out from, also after a restart.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ...messages_api.shapes import JSON
from ...messages_api.usage import usage_counts
from ..events import ToolResult, UsageReport

__all__ = ["Attempt", "EventLog", "RequestClock", "record_timing", "stamp"]


def stamp(value: float | None) -> float | None:
    """A wall-clock time as written to a transcript (milliseconds)."""
    return None if value is None else round(value, 3)


@dataclass
class Attempt:
    """One try of a request: sent, its response started, first text token, ended or broke."""

    sent: float
    started: float | None = None
    first_token: float | None = None
    ended: float | None = None
    error: str | None = None

    def to_json(self) -> dict[str, JSON]:
        return {
            "sent": stamp(self.sent),
            "started": stamp(self.started),
            "first_token": stamp(self.first_token),
            "ended": stamp(self.ended),
            "error": self.error,
        }


@dataclass
class RequestClock:
    """The wall-clock marks of one model request (see the module doc)."""

    held: tuple[float, float] | None = None
    """Held by the fork scheduler until the lead fork's response started (start, end)."""
    waits: list[tuple[float, float]] = field(default_factory=list)
    """Waits for rate-limit room (start, end), before an attempt."""
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def current(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    def send(self) -> None:
        self.attempts.append(Attempt(time.time()))

    def response_started(self) -> None:
        attempt = self.current
        if attempt is not None and attempt.started is None:
            attempt.started = time.time()

    def token(self) -> None:
        attempt = self.current
        if attempt is not None and attempt.first_token is None:
            attempt.first_token = time.time()

    def end(self) -> None:
        attempt = self.current
        if attempt is not None and attempt.ended is None:
            attempt.ended = time.time()

    def fail(self, reason: str) -> None:
        attempt = self.current
        if attempt is not None and attempt.ended is None:
            attempt.ended = time.time()
            attempt.error = reason

    def waited(self, start: float, end: float) -> None:
        self.waits.append((start, end))

    def summary(self) -> dict[str, JSON]:
        """JSON-ready: when the attempt that answered was sent, its response started, its
        first token came and it ended; the attempts before it (each broke off or was refused)
        and the waits."""
        last = self.current
        return {
            "sent": stamp(last.sent) if last else None,
            "started": stamp(last.started) if last else None,
            "first_token": stamp(last.first_token) if last else None,
            "ended": stamp(last.ended) if last else None,
            "retries": [a.to_json() for a in self.attempts[:-1]],
            "rate_waits": [[stamp(s), stamp(e)] for s, e in self.waits],
            "held": [stamp(self.held[0]), stamp(self.held[1])] if self.held else None,
        }


class EventLog(Protocol):
    """Where `record_timing` writes: a transcript (`Transcript.append_event`)."""

    def append_event(self, kind: str, data: Mapping[str, object] | None = None) -> None: ...


def record_timing(transcript: EventLog | None, event: object) -> None:
    """Write the timing an event carries to `transcript` (a `Transcript`, or None: nothing):
    a `request` event for a `UsageReport` with a clock's summary, a `tool` event for a
    `ToolResult` with its times."""
    if transcript is None:
        return
    if isinstance(event, UsageReport) and event.timing is not None:
        transcript.append_event(
            "request",
            {
                **event.timing,
                "message_id": event.message_id,
                "model": event.model,
                "usage": usage_counts(event.usage),
                "cost_usd": round(event.cost_usd, 8),
            },
        )
    elif isinstance(event, ToolResult) and event.started is not None:
        transcript.append_event(
            "tool",
            {
                "id": event.tool_use_id,
                "name": event.name,
                "started": stamp(event.started),
                "ended": stamp(event.ended),
                "is_error": event.is_error,
            },
        )
