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
The server's level is read from `-reset` (when the bucket is full again: the level now is
limit - rate x the time left, exact, on this machine's clock) kept within the rounding of
`-remaining` (to the nearest thousand for tokens); every response's headers lower the copy
where the server holds less (other clients of the same account) and raise it where the copy
is below what the server holds less what is under way (see `observe`). The copy refills
only up to the limit less what requests still on their way to the server took (`_sync`):
the server's bucket, without them, is full and refills no more.

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
import functools
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from ...messages_api.ratelimits import (
    BUCKETS,
    BucketKind,
    BucketReport,
    TokenBucket,
    charged_input,
    parse_headers,
)
from ...messages_api.tokens import count_input_tokens
from ...messages_api.usage import Usage
from ..errors import ModelError, StreamInterruptedError
from ..events import ModelEvent, ModelResponse
from ..tasks.registry import Task
from .client import ModelClient, ModelRequest, build_request

__all__ = [
    "RATE_WAIT",
    "PacedModel",
    "Pacer",
    "RateLimits",
    "Ticket",
    "rate_wait",
    "uncached_estimate",
    "wait_text",
]

RateWait = Callable[[float | None], None]
"""Told the expected seconds of a request's wait for rate-limit room; None when it ends."""

ROUNDING_SLACK = 500
"""Token `-remaining` headers are rounded to the nearest thousand."""
HEADER_AGE = 1.0
"""Seconds of refill a `-reset` level may show above `-remaining` + the rounding: the server
wrote the headers before they were read here."""
MARGIN = 0.02
"""Of a token bucket's limit kept free: a request's input estimate can fall short of what the
server charges until its response ends (a lead fork writes its part of the shared prefix),
and other clients of the account spend between two responses."""
REFRESH_SECONDS = 1.0
"""How often the waits shown for queued requests are brought up to date."""


RATE_WAIT = "waiting for rate limit"


def wait_text(seconds: float) -> str:
    """What a task row shows while its request waits."""
    return f"{RATE_WAIT} ({max(1, round(seconds))} s)"


def rate_wait(task: Task) -> str:
    """A task's "waiting for rate limit (N s)" while it runs and waits, else ""."""
    waiting = not task.done and task.activity.startswith(RATE_WAIT)
    return task.activity if waiting else ""


@dataclass(eq=False)
class Ticket:
    """One request's costs, taken from the pacer's buckets when it was let through."""

    costs: dict[BucketKind, float]
    counted: bool  # taken from known buckets (else: the server's next headers count it)
    seq: int = 0  # the order it was let through in
    settled: bool = False
    waited: bool = False  # it waited in the queue for room
    given: dict[BucketKind, float] = field(default_factory=dict)  # `Pacer.given` at its take
    under_way: list[Ticket] = field(default_factory=list)  # not settled when it was taken
    input_charged: bool = False  # the copy holds the server's charge of its input, not ours
    admitted: bool = False  # the server has it (its headers came, or it ended)


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
        self.given: dict[BucketKind, float] = dict.fromkeys(BUCKETS, 0.0)  # given back, in all
        self.blocked_until = 0.0
        self._queue: deque[_Waiter] = deque()
        self._open: list[Ticket] = []  # let through, not settled
        self._recent: deque[Ticket] = deque()  # from the oldest open one on
        self._refreshed = 0.0
        self._wake = asyncio.Event()  # set (and replaced) when room is given back
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

    def _sync(self, now: float) -> None:
        """Refill the copy to `now`, up to the limit less what requests let through but not
        yet seen at the server took: the server's bucket, without them, stops at its limit
        (a full bucket refills no more while they are on their way)."""
        for kind, bucket in self.buckets.items():
            bucket.refill(now)
            pending = sum(t.costs.get(kind, 0.0) for t in self._open if not t.admitted)
            bucket.level = min(bucket.level, bucket.capacity - pending)

    def _wait(self, costs: Mapping[BucketKind, float], now: float) -> float:
        self._sync(now)
        wait = max(self.blocked_until - now, 0.0)
        for kind, bucket in self.buckets.items():
            wait = max(wait, bucket.wait(self._with_margin(kind, bucket, costs), now))
        return wait

    @staticmethod
    def _with_margin(
        kind: BucketKind, bucket: TokenBucket, costs: Mapping[BucketKind, float]
    ) -> float:
        cost = costs.get(kind, 0.0)
        if kind == "requests" or cost <= 0:
            return cost
        return min(cost + MARGIN * bucket.capacity, bucket.capacity)

    def _etas(self, now: float) -> list[float]:
        """Expected wait of each queued request (those ahead of it go first)."""
        self._sync(now)
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
                await self._sleep(min(wait, REFRESH_SECONDS))
            ticket = self._take(costs)
            ticket.waited = True
            return ticket
        finally:
            self.wait_seconds += self.now() - started
            self._queue.remove(waiter)
            if self._queue:
                self._queue[0].turn.set()
            self._refresh(self.now(), force=True)
            if waiter.shown is not None:
                waiter.shown = None
                self._show(waiter, None)

    async def _sleep(self, seconds: float) -> None:
        """Sleep `seconds`, or until a response gives room back (`_room`)."""
        woken = asyncio.ensure_future(self._wake.wait())
        try:  # not wait_for: on Python < 3.12 it can swallow a cancel (a stop)
            await asyncio.wait({woken}, timeout=seconds)
        finally:
            woken.cancel()

    def _room(self) -> None:
        """Room was given back: the request at the head looks again at once."""
        wake, self._wake = self._wake, asyncio.Event()
        wake.set()

    def _take(self, costs: dict[BucketKind, float]) -> Ticket:
        now = self.now()
        self._sync(now)
        for kind, bucket in self.buckets.items():
            bucket.take(costs.get(kind, 0.0), now)
        ticket = Ticket(
            costs,
            counted=self.known,
            seq=self.sent,
            given=dict(self.given),
            under_way=list(self._open),
            admitted=not self.known,  # nothing taken: nothing to keep under the limit
        )
        self._open.append(ticket)
        self._recent.append(ticket)
        self.sent += 1
        return ticket

    # -- what the server says ---------------------------------------------------------------

    def observe(
        self, headers: Mapping[str, str], ticket: Ticket | None = None, *, refused: bool = False
    ) -> None:
        """Learn from the headers of `ticket`'s response (see the module doc); no headers
        change nothing.

        The server's level S (`_reported`) counts `ticket` as the server charged it; whether
        it counts the requests under way and those let through after `ticket` (even ended
        ones) is unknown. So the copy is raised to S - (what those requests took) when below
        that, and lowered to S + (what this pacer gave back since `ticket` was let through:
        corrections the server may have made after writing the headers) when above it: it
        stays at or under the server's level. The headers of a refused request (`refused`:
        a 429) lower the copy to S: the server said no.
        """
        reports = parse_headers(headers)
        if not reports:
            return
        now = self.now()
        self._sync(now)
        if ticket is not None:
            ticket.admitted = True
        wall = datetime.now(timezone.utc)
        new = not self.buckets
        for kind, report in reports.items():
            rate = report.limit / self.period
            low, high = _reported(kind, report, rate, wall)
            others = sum(t.costs.get(kind, 0.0) for t in self._others(ticket))
            floor = low - others
            bucket = self.buckets.get(kind)
            if bucket is None:
                bucket = TokenBucket(report.limit, rate, now)
                bucket.level = max(floor, 0.0)
                self.buckets[kind] = bucket
                self._from_server(kind, ticket)
                continue
            if bucket.capacity != report.limit:
                bucket.refill(now)
                bucket.capacity, bucket.rate = float(report.limit), rate
                bucket.level = min(bucket.level, bucket.capacity)
            level = bucket.refill(now)
            if refused or ticket is None:
                ceiling = low if refused else high
            else:
                ceiling = high + self.given[kind] - ticket.given.get(kind, self.given[kind])
            if ceiling < level:
                bucket.level = max(ceiling, 0.0)
                self._from_server(kind, ticket)
            elif floor > level:
                bucket.level = min(floor, bucket.capacity)
                self._from_server(kind, ticket)
                self._room()
        if new:  # what was sent before is in the server's numbers now
            for open_ticket in self._open:
                open_ticket.counted = True

    @staticmethod
    def _from_server(kind: BucketKind, ticket: Ticket | None) -> None:
        """The copy was set from the server's level, which holds `ticket`'s input as charged:
        its end corrects only the output reservation."""
        if ticket is not None and kind == "input-tokens":
            ticket.input_charged = True

    def _others(self, ticket: Ticket | None) -> list[Ticket]:
        """The requests the server's numbers in `ticket`'s response may not count yet: those
        under way when it was let through and those let through after it (ended or not:
        the server may admit requests in another order than they were let through here).
        Without a ticket: those under way now."""
        if ticket is None:
            return list(self._open)
        later = [t for t in self._recent if t.seq > ticket.seq]
        return ticket.under_way + later

    def settle(self, ticket: Ticket, usage: Usage | None, *, refused: bool = False) -> None:
        """The request ended: correct its costs to `usage`. `refused` (a 429): it cost
        nothing. No usage otherwise (it failed or broke off): its costs stay taken."""
        if ticket.settled:
            return
        self._sync(self.now())  # up to now it was on its way, or under way
        ticket.settled = True
        ticket.under_way = []  # its response's headers came before its end
        if ticket in self._open:
            self._open.remove(ticket)
        while self._recent and self._recent[0].settled:
            self._recent.popleft()
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
        if ticket.input_charged and usage is not None:
            used["input-tokens"] = ticket.costs.get("input-tokens", 0.0)
        for kind, bucket in self.buckets.items():
            amount = ticket.costs.get(kind, 0.0) - used[kind]
            bucket.give(amount, now)
            self.given[kind] += max(amount, 0.0)
        self._room()
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
        self._sync(now)
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
        """One line per pacer that has something to say (limits known, or a 429 seen)."""
        return [
            f"rate limits: {p.describe()}" for p in self.pacers.values() if p.known or p.throttled
        ]


def _reported(
    kind: BucketKind, report: BucketReport, rate: float, wall: datetime
) -> tuple[float, float]:
    """The least and the most the server's bucket may hold now, from one response's headers.

    `-remaining` is exact for requests (the whole number under the level) and rounded to
    the nearest thousand for tokens. `-reset` (when the bucket is full again)
    gives the level now exactly: limit - rate x the seconds left - refill since the headers
    were written included; kept within the rounding of `-remaining` (and `HEADER_AGE` of
    refill above it), so that a clock ahead of the server's or a coarse reset cannot put the
    copy far above it."""
    slack = 0 if kind == "requests" else ROUNDING_SLACK
    low = float(report.remaining - slack)
    high = float(report.remaining + slack)
    if report.reset is None:
        return low, high
    reset = report.reset if report.reset.tzinfo else report.reset.replace(tzinfo=timezone.utc)
    left = max((reset - wall).total_seconds(), 0.0)
    level = report.limit - left * rate
    level = min(max(level, low), high + rate * HEADER_AGE)
    return level, level


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
        clock = request.clock
        while True:
            asked = time.time()
            ticket = await pacer.acquire(
                input_tokens=estimate, max_tokens=request.max_tokens, on_wait=request.on_rate_wait
            )
            observe = functools.partial(pacer.observe, ticket=ticket)
            paced = replace(
                request,
                on_headers=_chain(request.on_headers, observe),
                # an error response did not charge the request: it is one of the others
                on_error_headers=_chain(
                    request.on_error_headers, functools.partial(pacer.observe, refused=True)
                ),
            )
            if clock is not None:
                if ticket.waited:
                    clock.waited(asked, time.time())
                clock.send()
                paced.on_response_start = _then(request.on_response_start, clock.response_started)
            usage: Usage | None = None
            try:
                async for event in self.inner.stream(paced):
                    if isinstance(event, ModelResponse):
                        usage = event.usage
                        if clock is not None:
                            clock.end()
                    elif clock is not None:
                        clock.token()
                    yield event
            except ModelError as exc:
                if exc.status != 429:
                    pacer.settle(ticket, None)
                    if clock is not None:
                        clock.fail(_reason(exc))
                    raise
                pacer.settle(ticket, None, refused=True)
                pacer.rate_limited(exc.retry_after)
                if clock is not None:
                    clock.fail("rate limited (429)")
                estimate = uncached_estimate(request) if pacer.known else 0
                continue
            except BaseException as exc:
                pacer.settle(ticket, None)
                if clock is not None:
                    clock.fail(_reason(exc))
                raise
            pacer.settle(ticket, usage)
            return

    async def aclose(self) -> None:
        await self.inner.aclose()


def _reason(exc: BaseException) -> str:
    """Why an attempt ended without a response, in a few words."""
    if isinstance(exc, StreamInterruptedError):
        return exc.reason
    if isinstance(exc, ModelError):
        return f"HTTP {exc.status}" if exc.status else "request failed"
    if isinstance(exc, asyncio.CancelledError):
        return "stopped"
    return type(exc).__name__


def _then(first: Callable[[], None] | None, second: Callable[[], None]) -> Callable[[], None]:
    if first is None:
        return second

    def both() -> None:
        first()
        second()

    return both


def _chain(
    first: Callable[[Mapping[str, str]], None] | None, second: Callable[[Mapping[str, str]], None]
) -> Callable[[Mapping[str, str]], None]:
    if first is None:
        return second

    def both(headers: Mapping[str, str]) -> None:
        first(headers)
        second(headers)

    return both
