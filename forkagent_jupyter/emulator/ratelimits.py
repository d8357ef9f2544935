"""Rate limits: RPM, ITPM and OTPM token buckets per workspace and model (off by default).

`RateLimiter(limits, clock)` holds the buckets. `limits` maps a model name to its
`RateLimit` (`"*"`: every model without its own entry); a model with none is not limited and
its responses carry no rate-limit headers. Per `/v1/messages` request, after validation and
the cache plan (so the input cost is known exactly):

* `admit` checks every bucket: requests 1, input tokens `input + cache writes` (cache reads
  are free), output tokens `max_tokens`. When one does not hold enough (a cost larger than
  a bucket's capacity needs a full bucket), the request gets 429 `rate_limit_error` with
  `retry-after` (the seconds until all its costs fit) and costs nothing. Otherwise all three
  are taken at once (the output reservation from `max_tokens`).
* `settle` corrects the output reservation to the `output_tokens` the response carried
  (at its end, or when it was cut short).
* `headers` describes the buckets after the request was admitted (or refused), in the
  documented names: `-limit`, `-remaining` (token counts rounded to `round_to`, 1000 as
  documented) and `-reset` (RFC 3339: when the bucket is full again), for `requests`,
  `input-tokens`, `output-tokens` and `tokens` (input plus output; its reset is the later of
  the two).

Time is the emulator's clock: with `WallClock(scale=20)` a minute of limits passes in three
real seconds, and `retry-after`/`-reset` are given in real seconds (fractional then) so the
SDK and a pacer wait the real time that is meant.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from ..messages_api.cache import VirtualClock
from ..messages_api.ratelimits import (
    BUCKETS,
    PERIOD_SECONDS,
    UNITS,
    BucketKind,
    RateLimit,
    TokenBucket,
    header_name,
)

__all__ = ["Admission", "RateLimiter", "Refusal", "Throttle"]


@dataclass
class Admission:
    """A request the limiter let through: what it reserved, to settle at its end."""

    key: tuple[str, str]
    output_reserved: int
    settled: bool = False


@dataclass(frozen=True)
class Refusal:
    """A request refused for a rate limit: which bucket, and the wait in real seconds."""

    kind: BucketKind
    limit: int
    retry_after: float
    message: str


@dataclass(frozen=True)
class Throttle:
    """A 429 the limiter answered (for the ledger)."""

    request_id: str
    time: float
    model: str
    workspace: str
    kind: str
    retry_after: float

    def to_json(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "time": self.time,
            "model": self.model,
            "workspace": self.workspace,
            "kind": self.kind,
            "retry_after": self.retry_after,
        }


@dataclass
class _Buckets:
    limit: RateLimit
    buckets: dict[BucketKind, TokenBucket] = field(default_factory=dict)


def _message(kind: BucketKind, limit: int, model: str) -> str:
    return (
        f"This request would exceed your rate limit of {limit:,} {UNITS[kind]} for {model}. "
        "The response headers show the current usage; retry after the time in the "
        "retry-after header, or lower the prompt or max_tokens."
    )


class RateLimiter:
    """The rate-limit buckets of one emulator (thread-safe; see the module doc)."""

    def __init__(
        self,
        clock: VirtualClock,
        limits: Mapping[str, RateLimit] | RateLimit | None = None,
        *,
        round_to: int = 1000,
    ) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._state: dict[tuple[str, str], _Buckets] = {}
        self.limits: dict[str, RateLimit] = {}
        self.round_to = round_to
        self.configure(limits)

    def configure(self, limits: Mapping[str, RateLimit] | RateLimit | None) -> None:
        """Replace the limits (None or {}: off) and start every bucket full."""
        if isinstance(limits, RateLimit):
            limits = {"*": limits}
        with self._lock:
            self.limits = dict(limits or {})
            self._state.clear()

    @property
    def enabled(self) -> bool:
        return bool(self.limits)

    def limit_for(self, model: str) -> RateLimit | None:
        return self.limits.get(model) or self.limits.get("*")

    @property
    def scale(self) -> float:
        return float(getattr(self._clock, "scale", 1.0))

    def _buckets(self, workspace: str, model: str) -> _Buckets | None:
        limit = self.limit_for(model)
        if limit is None:
            return None
        key = (workspace, model)
        state = self._state.get(key)
        if state is None or state.limit != limit:
            now = self._clock.now()
            state = _Buckets(limit)
            for kind in BUCKETS:
                value = limit.limit(kind)
                if value is not None:
                    state.buckets[kind] = TokenBucket(value, value / PERIOD_SECONDS, now)
            self._state[key] = state
        return state

    def admit(
        self, workspace: str, model: str, *, input_tokens: int, max_tokens: int
    ) -> Admission | Refusal | None:
        """Admit a request (taking its costs), refuse it, or None when `model` is not
        limited."""
        costs: dict[BucketKind, float] = {
            "requests": 1,
            "input-tokens": max(input_tokens, 0),
            "output-tokens": max(max_tokens, 0),
        }
        with self._lock:
            state = self._buckets(workspace, model)
            if state is None:
                return None
            now = self._clock.now()
            waits = {k: b.wait(costs[k], now) for k, b in state.buckets.items()}
            worst = max(waits, key=lambda k: waits[k], default=None)
            if worst is not None and waits[worst] > 0:
                limit = int(state.buckets[worst].capacity)
                wait = waits[worst] / self.scale
                return Refusal(worst, limit, wait, _message(worst, limit, model))
            for kind, bucket in state.buckets.items():
                bucket.take(costs[kind], now)
            return Admission((workspace, model), int(costs["output-tokens"]))

    def settle(self, admission: Admission, output_tokens: int) -> None:
        """Give back the part of the output reservation the response did not use."""
        with self._lock:
            if admission.settled:
                return
            admission.settled = True
            state = self._state.get(admission.key)
            bucket = state.buckets.get("output-tokens") if state is not None else None
            if bucket is not None:
                bucket.give(admission.output_reserved - max(output_tokens, 0), self._clock.now())

    def headers(self, workspace: str, model: str) -> dict[str, str]:
        """The `anthropic-ratelimit-*` headers for `model` now ({} when not limited)."""
        with self._lock:
            state = self._buckets(workspace, model)
            if state is None:
                return {}
            now = self._clock.now()
            wall = datetime.now(timezone.utc)
            out: dict[str, str] = {}
            tokens: list[tuple[int, int, float]] = []
            for kind, bucket in state.buckets.items():
                remaining = bucket.remaining(now)
                if kind != "requests":
                    remaining = self._rounded(remaining)
                    tokens.append((int(bucket.capacity), remaining, bucket.until_full(now)))
                full = bucket.until_full(now)
                out.update(self._triple(kind, int(bucket.capacity), remaining, wall, full))
            if tokens:
                limit = sum(t[0] for t in tokens)
                remaining = sum(t[1] for t in tokens)
                later = max(t[2] for t in tokens)
                out.update(self._triple("tokens", limit, remaining, wall, later))
            return out

    def _rounded(self, value: int) -> int:
        step = self.round_to
        if step <= 1:
            return value
        return math.floor(value / step + 0.5) * step

    def _triple(
        self, kind: str, limit: int, remaining: int, wall: datetime, full_in: float
    ) -> dict[str, str]:
        reset = wall + timedelta(seconds=full_in / self.scale)
        if self.scale == 1.0:
            stamp = reset.replace(microsecond=0)
            if reset.microsecond:
                stamp += timedelta(seconds=1)
            text = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
        else:
            text = reset.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return {
            header_name(kind, "limit"): str(limit),
            header_name(kind, "remaining"): str(remaining),
            header_name(kind, "reset"): text,
        }

    def retry_after_header(self, seconds: float) -> str:
        """`retry-after` for a wait of `seconds` (real): whole seconds, rounded up, as the
        API sends it; with a scaled clock, the exact fraction."""
        if self.scale == 1.0:
            return str(max(1, math.ceil(seconds)))
        return f"{max(seconds, 0.001):.3f}"

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            now = self._clock.now()
            buckets = [
                {
                    "workspace": workspace,
                    "model": model,
                    "kind": kind,
                    "capacity": bucket.capacity,
                    "level": round(bucket.refill(now), 3),
                }
                for (workspace, model), state in self._state.items()
                for kind, bucket in state.buckets.items()
            ]
            return {
                "limits": {
                    model: [
                        lim.requests_per_minute,
                        lim.input_tokens_per_minute,
                        lim.output_tokens_per_minute,
                    ]
                    for model, lim in self.limits.items()
                },
                "scale": self.scale,
                "round_to": self.round_to,
                "buckets": buckets,
            }
