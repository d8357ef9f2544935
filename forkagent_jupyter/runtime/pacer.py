"""Pacing every request of a session to the account's rate limits (one pacer per model).

`RateLimits` holds one `Pacer` per model for a session; `PacedModel` wraps the session's model
client so that every request - the parent's, forks', named agents', compaction's - asks the
pacer for room before it is sent (the batch pre-warm asks it directly).

A pacer knows nothing until a response carries `anthropic-ratelimit-*` headers: until then
(and for ever, with a server that sends none) nothing is held back. From the headers it
learns each bucket's limit (requests, input tokens, output tokens per minute) and keeps its
own copy of the bucket, refilled continuously at limit / `period` per second, as the API
does. A request costs 1 request, its input tokens that are not expected from the prompt cache
(cache reads are free; `uncached_estimate`), and reserves `max_tokens` output tokens; when
its response ends the reservation and the estimate are corrected to the usage it reports.
Every response's headers lower a bucket the server says holds less than the copy (other
clients of the same account, rounding), never raise it.

Requests wait in arrival order (so the lead fork of a fan-out still goes first) until every
bucket holds their cost - a cost above a bucket's limit needs a full bucket, as the API
admits it - and while they wait `on_rate_wait` tells their owner the expected seconds (the
task row shows "waiting for rate limit (N s)"). A 429 that still happens is waited out
(`retry-after`, else until the buckets have room) and the request is sent again, however
often: a rate limit never fails a task (a stop still ends it).

`period` is the length of a rate-limit minute (60 s); a test against an emulator whose clock
runs faster sets it shorter.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, replace

from ..messages_api.ratelimits import (
    BUCKETS,
    BucketKind,
    TokenBucket,
    charged_input,
    parse_headers,
)
from ..messages_api.tokens import count_input_tokens
from ..messages_api.usage import Usage
from .errors import ModelError
from .events import ModelEvent, ModelResponse
from .model import ModelClient, ModelRequest, build_request

__all__ = [
    "RATE_WAIT",
    "PacedModel",
    "Pacer",
    "RateLimits",
    "Ticket",
    "uncached_estimate",
    "wait_text",
]

RateWait = Callable[[float | None], None]
"""Told the expected seconds of a request's wait for rate-limit room; None when it ends."""

ROUNDING_SLACK = 500
"""Token `-remaining` headers are rounded to the nearest thousand."""
REFRESH_SECONDS = 1.0
"""How often the waits shown for queued requests are brought up to date."""


RATE_WAIT = "waiting for rate limit"


def wait_text(seconds: float) -> str:
    """What a task row shows while its request waits."""
    return f"{RATE_WAIT} ({max(1, round(seconds))} s)"


@dataclass(eq=False)
class Ticket:
    """One request's costs, taken from the pacer's buckets when it was let through."""

    costs: dict[BucketKind, float]
    counted: bool  # taken from known buckets (else: the server's next headers count it)
    settled: bool = False


@dataclass(eq=False)
class _Waiter:
    costs: dict[BucketKind, float]
    on_wait: RateWait | None
    turn: asyncio.Event = field(default_factory=asyncio.Event)
    shown: float | None = None


class Pacer:
    """The rate-limit state of one model in one session (see the module doc)."""

    def __init__(self, model: str, *, period: float = 60.0) -> None:
        self.model = model
        self.period = period
        self.buckets: dict[BucketKind, TokenBucket] = {}
        self.blocked_until = 0.0
        self._queue: deque[_Waiter] = deque()
        self._open: list[Ticket] = []  # let through, not settled
        self._refreshed = 0.0
        self.sent = 0
        self.throttled = 0
        self.waited = 0
        self.wait_seconds = 0.0

    @staticmethod
    def now() -> float:
        return time.monotonic()

    @property
    def known(self) -> bool:
        """Whether the server has told this pacer its limits."""
        return bool(self.buckets)

    # -- waiting for room -------------------------------------------------------------------

    def _wait(self, costs: Mapping[BucketKind, float], now: float) -> float:
        wait = max(self.blocked_until - now, 0.0)
        for kind, bucket in self.buckets.items():
            wait = max(wait, bucket.wait(costs.get(kind, 0.0), now))
        return wait

    def _etas(self, now: float) -> list[float]:
        """Expected wait of each queued request (those ahead of it go first)."""
        blocked = max(self.blocked_until - now, 0.0)
        etas = [blocked] * len(self._queue)
        for kind, bucket in self.buckets.items():
            level, ahead = bucket.refill(now), 0.0
            for index, waiter in enumerate(self._queue):
                ahead += bucket.need(waiter.costs.get(kind, 0.0))
                if ahead > level and bucket.rate > 0:
                    etas[index] = max(etas[index], (ahead - level) / bucket.rate)
        return etas

    def _show(self, waiter: _Waiter, seconds: float | None) -> None:
        if waiter.on_wait is None:
            return
        if seconds is not None and waiter.shown is not None and abs(seconds - waiter.shown) < 1:
            return
        waiter.shown = seconds
        try:
            waiter.on_wait(seconds)
        except Exception:  # a display callback must not lose the request
            pass

    def _refresh(self, now: float, force: bool = False) -> None:
        if not force and now - self._refreshed < REFRESH_SECONDS:
            return
        self._refreshed = now
        waiters = list(self._queue)
        for index, (waiter, eta) in enumerate(zip(waiters, self._etas(now), strict=True)):
            if index > 0:
                self._show(waiter, eta)

    async def acquire(
        self, *, input_tokens: int, max_tokens: int, on_wait: RateWait | None = None
    ) -> Ticket:
        """Wait (in arrival order) until the buckets hold this request's costs; take them."""
        costs: dict[BucketKind, float] = {
            "requests": 1.0,
            "input-tokens": float(max(input_tokens, 0)),
            "output-tokens": float(max(max_tokens, 0)),
        }
        if not self._queue and self._wait(costs, self.now()) <= 0:
            return self._take(costs)
        waiter = _Waiter(costs, on_wait)
        self._queue.append(waiter)
        self.waited += 1
        started = self.now()
        try:
            if self._queue[0] is not waiter:
                self._show(waiter, self._etas(self.now())[-1])
                await waiter.turn.wait()
            while True:
                now = self.now()
                wait = self._wait(costs, now)
                if wait <= 0:
                    break
                self._show(waiter, wait)
                self._refresh(now)
                await asyncio.sleep(min(wait, REFRESH_SECONDS))
            return self._take(costs)
        finally:
            self.wait_seconds += self.now() - started
            self._queue.remove(waiter)
            if self._queue:
                self._queue[0].turn.set()
            self._refresh(self.now(), force=True)
            if waiter.shown is not None:
                waiter.shown = None
                self._show(waiter, None)

    def _take(self, costs: dict[BucketKind, float]) -> Ticket:
        now = self.now()
        for kind, bucket in self.buckets.items():
            bucket.take(costs.get(kind, 0.0), now)
        ticket = Ticket(costs, counted=self.known)
        self._open.append(ticket)
        self.sent += 1
        return ticket

    # -- what the server says ---------------------------------------------------------------

    def observe(self, headers: Mapping[str, str]) -> None:
        """Learn from a response's headers (see the module doc); no headers change nothing."""
        reports = parse_headers(headers)
        if not reports:
            return
        now = self.now()
        new = not self.buckets
        for kind, report in reports.items():
            bucket = self.buckets.get(kind)
            rate = report.limit / self.period
            if bucket is None:
                bucket = TokenBucket(report.limit, rate, now)
                bucket.level = float(report.remaining)
                self.buckets[kind] = bucket
                continue
            if bucket.capacity != report.limit:
                bucket.refill(now)
                bucket.capacity, bucket.rate = float(report.limit), rate
                bucket.level = min(bucket.level, bucket.capacity)
            slack = 0 if kind == "requests" else ROUNDING_SLACK
            if report.remaining + slack < bucket.refill(now):
                bucket.level = float(report.remaining + slack)
        if new:  # what was sent before is in the server's numbers now
            for ticket in self._open:
                ticket.counted = True

    def settle(self, ticket: Ticket, usage: Usage | None, *, refused: bool = False) -> None:
        """The request ended: correct its costs to `usage`. `refused` (a 429): it cost
        nothing. No usage otherwise (it failed or broke off): its costs stay taken."""
        if ticket.settled:
            return
        ticket.settled = True
        if ticket in self._open:
            self._open.remove(ticket)
        if not ticket.counted or (usage is None and not refused):
            return
        now = self.now()
        used: dict[BucketKind, float] = (
            {
                "requests": 1.0,
                "input-tokens": float(charged_input(usage)),
                "output-tokens": float(usage.output_tokens),
            }
            if usage is not None
            else dict.fromkeys(BUCKETS, 0.0)
        )
        for kind, bucket in self.buckets.items():
            bucket.give(ticket.costs.get(kind, 0.0) - used[kind], now)
        self._refresh(now, force=True)

    def rate_limited(self, retry_after: float | None) -> float:
        """A 429 came back: hold every request for `retry_after` (else until the buckets
        would have room); returns the hold in seconds."""
        self.throttled += 1
        now = self.now()
        hold = retry_after if retry_after is not None and retry_after > 0 else 1.0
        self.blocked_until = max(self.blocked_until, now + hold)
        return hold

    # -- what %tasks shows ------------------------------------------------------------------

    def describe(self) -> str:
        """One line: the limits, what is left, what waits."""
        if not self.buckets:
            return f"{self.model}: no rate-limit headers seen, nothing held back"
        now = self.now()
        names = {"requests": "RPM", "input-tokens": "ITPM", "output-tokens": "OTPM"}
        parts = [
            f"{names[k]} {max(0, int(b.refill(now))):,}/{int(b.capacity):,}"
            for k, b in self.buckets.items()
        ]
        line = f"{self.model}: " + ", ".join(parts) + " left"
        if self._queue:
            line += f"; {len(self._queue)} waiting (~{self._etas(now)[-1]:.0f} s)"
        if self.blocked_until > now:
            line += f"; held {self.blocked_until - now:.0f} s after a 429"
        line += f"; {self.sent} sent, {self.throttled} rate-limited (429)"
        return line


class RateLimits:
    """The pacers of one session, one per model."""

    def __init__(self, *, period: float = 60.0) -> None:
        self._period = period
        self.pacers: dict[str, Pacer] = {}

    @property
    def period(self) -> float:
        return self._period

    @period.setter
    def period(self, value: float) -> None:
        if not value > 0:
            raise ValueError(f"a rate-limit period must be > 0 seconds, not {value!r}")
        self._period = float(value)
        for pacer in self.pacers.values():
            pacer.period = self._period
            for bucket in pacer.buckets.values():
                bucket.rate = bucket.capacity / self._period

    def pacer(self, model: str) -> Pacer:
        found = self.pacers.get(model)
        if found is None:
            found = self.pacers[model] = Pacer(model, period=self._period)
        return found

    def describe(self) -> list[str]:
        return [p.describe() for p in self.pacers.values()]


def uncached_estimate(request: ModelRequest) -> int:
    """The input tokens `request` is expected to charge: those after the last position it
    expects to read from the prompt cache (a fork's shared prefix, or where its previous
    request ended); all of them when it expects none."""
    anchors = [i for i, _ in request.cache_points]
    if request.previous_end is not None:
        anchors.append(request.previous_end)
    body = build_request(request)
    total = count_input_tokens(body)
    if not anchors:
        return total
    cut = min(max(anchors), len(request.messages) - 1)
    cached = count_input_tokens({**body, "messages": body["messages"][: cut + 1]})
    return max(total - cached, 1)


class PacedModel:
    """A model client whose requests go through the session's pacer for their model."""

    def __init__(self, inner: ModelClient, limits: RateLimits) -> None:
        self.inner = inner
        self.name = inner.name
        self.limits = limits

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        pacer = self.limits.pacer(request.model)
        estimate = uncached_estimate(request) if pacer.known else 0
        while True:
            ticket = await pacer.acquire(
                input_tokens=estimate, max_tokens=request.max_tokens, on_wait=request.on_rate_wait
            )
            paced = replace(request, on_headers=_chain(request.on_headers, pacer.observe))
            usage: Usage | None = None
            try:
                async for event in self.inner.stream(paced):
                    if isinstance(event, ModelResponse):
                        usage = event.usage
                    yield event
            except ModelError as exc:
                if exc.status != 429:
                    pacer.settle(ticket, None)
                    raise
                pacer.settle(ticket, None, refused=True)
                pacer.rate_limited(exc.retry_after)
                estimate = uncached_estimate(request) if pacer.known else 0
                continue
            except BaseException:
                pacer.settle(ticket, None)
                raise
            pacer.settle(ticket, usage)
            return

    async def aclose(self) -> None:
        await self.inner.aclose()


def _chain(
    first: Callable[[Mapping[str, str]], None] | None, second: Callable[[Mapping[str, str]], None]
) -> Callable[[Mapping[str, str]], None]:
    if first is None:
        return second

    def both(headers: Mapping[str, str]) -> None:
        first(headers)
        second(headers)

    return both
