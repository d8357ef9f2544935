"""Rate limits as the Messages API states them (docs/rate-limits.md has the sources).

Limits are per organization and model: requests per minute (RPM), input tokens per minute
(ITPM) and output tokens per minute (OTPM), each a token bucket that holds at most its
per-minute limit and is refilled continuously (limit / 60 per second). What a request costs:

* requests: 1;
* input tokens: `input_tokens + cache_creation_input_tokens` (`charged_input`); tokens read
  from the prompt cache are free;
* output tokens: `max_tokens` reserved when the request starts, corrected to the actual
  `output_tokens` when it ends.

Every response carries `anthropic-ratelimit-{kind}-{limit,remaining,reset}` for the kinds in
`HEADER_KINDS` (`tokens` is input plus output); a 429 `rate_limit_error` carries
`retry-after`. `TokenBucket` is the arithmetic both the emulator (which enforces the limits)
and the runtime's pacer (which keeps a fan-out inside them) use; `parse_headers` reads the
headers back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from .usage import Usage

__all__ = [
    "BUCKETS",
    "EXAMPLE_TIER",
    "HEADER_KINDS",
    "PERIOD_SECONDS",
    "BucketKind",
    "BucketReport",
    "RateLimit",
    "TokenBucket",
    "charged_input",
    "header_name",
    "parse_headers",
]

PERIOD_SECONDS = 60.0
"""A limit is per minute: its bucket refills limit / 60 per second."""

BucketKind = Literal["requests", "input-tokens", "output-tokens"]
BUCKETS: tuple[BucketKind, ...] = ("requests", "input-tokens", "output-tokens")
HEADER_KINDS: tuple[str, ...] = ("requests", "tokens", "input-tokens", "output-tokens")
UNITS: dict[BucketKind, str] = {
    "requests": "requests per minute",
    "input-tokens": "input tokens per minute",
    "output-tokens": "output tokens per minute",
}


def header_name(kind: str, field: Literal["limit", "remaining", "reset"]) -> str:
    return f"anthropic-ratelimit-{kind}-{field}"


@dataclass(frozen=True)
class RateLimit:
    """The per-minute limits of one model (None: that bucket is not limited)."""

    requests_per_minute: int | None = None
    input_tokens_per_minute: int | None = None
    output_tokens_per_minute: int | None = None

    def limit(self, kind: BucketKind) -> int | None:
        return {
            "requests": self.requests_per_minute,
            "input-tokens": self.input_tokens_per_minute,
            "output-tokens": self.output_tokens_per_minute,
        }[kind]

    @classmethod
    def parse(cls, text: str) -> RateLimit:
        """From "RPM,ITPM,OTPM" (an empty field: not limited)."""
        parts = [p.strip() for p in text.split(",")]
        if len(parts) != 3:
            raise ValueError(f"a rate limit is RPM,ITPM,OTPM, not {text!r}")
        values = [int(p.replace("_", "")) if p else None for p in parts]
        if any(v is not None and v <= 0 for v in values):
            raise ValueError(f"rate limits must be positive, not {text!r}")
        return cls(*values)


EXAMPLE_TIER = RateLimit(50, 30_000, 8_000)
"""The documentation's example tier: 50 RPM, 30,000 ITPM, 8,000 OTPM."""


def charged_input(usage: Usage) -> int:
    """The input tokens a response charged to ITPM (cache reads are free)."""
    return usage.input_tokens + usage.cache_creation_input_tokens


class TokenBucket:
    """A bucket of `capacity` refilled at `rate` per second, on the caller's clock.

    `level` may go below zero: a cost larger than the capacity is admitted once the bucket
    is full (`fits`), and the debt is paid back by the refill.
    """

    def __init__(self, capacity: float, rate: float, now: float) -> None:
        self.capacity = float(capacity)
        self.rate = float(rate)
        self.level = float(capacity)
        self.at = now

    def refill(self, now: float) -> float:
        if now > self.at:
            self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
            self.at = now
        return self.level

    def need(self, cost: float) -> float:
        """What the bucket must hold to admit `cost` (at most its capacity)."""
        return min(max(cost, 0.0), self.capacity)

    def fits(self, cost: float, now: float) -> bool:
        return self.refill(now) >= self.need(cost) - 1e-9

    def wait(self, cost: float, now: float) -> float:
        """Seconds until `cost` fits (0 when it fits now)."""
        short = self.need(cost) - self.refill(now)
        if short <= 1e-9 or self.rate <= 0:
            return 0.0
        return short / self.rate

    def take(self, cost: float, now: float) -> None:
        self.refill(now)
        self.level -= cost

    def give(self, amount: float, now: float) -> None:
        """Return `amount` (a reservation larger than what was used)."""
        self.refill(now)
        self.level = min(self.capacity, self.level + amount)

    def until_full(self, now: float) -> float:
        short = self.capacity - self.refill(now)
        return 0.0 if short <= 0 or self.rate <= 0 else short / self.rate

    def remaining(self, now: float) -> int:
        return max(0, int(self.refill(now)))


@dataclass(frozen=True)
class BucketReport:
    """One bucket as a response's headers describe it."""

    limit: int
    remaining: int
    reset: datetime | None


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(float(value.strip()))
    except ValueError:
        return None


def _time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None


def parse_headers(headers: Mapping[str, str]) -> dict[BucketKind, BucketReport]:
    """The buckets a response's headers report (a bucket without both a numeric limit and
    remaining is left out: a server that sends no rate-limit headers gives {})."""
    lower = {k.lower(): v for k, v in headers.items()}
    out: dict[BucketKind, BucketReport] = {}
    for kind in BUCKETS:
        limit = _int(lower.get(header_name(kind, "limit")))
        remaining = _int(lower.get(header_name(kind, "remaining")))
        if limit is None or remaining is None or limit <= 0:
            continue
        reset = _time(lower.get(header_name(kind, "reset")))
        out[kind] = BucketReport(limit, max(0, remaining), reset)
    return out
