"""When a response that broke off mid-stream is sent again, and how long to wait first.

A model turn whose stream breaks after the response started (see `StreamInterruptedError`)
is sent again from the same request - byte-identical, so the prompt cache still applies - up
to `retries` times. The wait before retry n (1-based) is exponential with jitter:
`min(base_delay * 2**(n-1), max_delay)`, scaled by a random factor in [1 - jitter, 1], so
workers that broke together do not all come back at the same moment.

One `StreamRetry` is shared by every agent of a session (configs copy the reference), so a
change of `retries` applies at once, to running workers too.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ..errors import UsageError

__all__ = ["DEFAULT_STREAM_RETRIES", "StreamRetry"]

DEFAULT_STREAM_RETRIES = 3


@dataclass
class StreamRetry:
    """How many times a broken stream is retried, and the backoff between attempts."""

    retries: int = DEFAULT_STREAM_RETRIES
    base_delay: float = 0.5
    max_delay: float = 8.0
    jitter: float = 0.25
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        self.retries = _count(self.retries)
        if self.base_delay < 0 or self.max_delay < 0:
            raise UsageError("stream retry delays must be >= 0 seconds")
        if not 0 <= self.jitter <= 1:
            raise UsageError("stream retry jitter must be between 0 and 1")

    def set_retries(self, value: int) -> None:
        self.retries = _count(value)

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry `attempt` (1 for the first retry)."""
        base: float = min(self.base_delay * 2.0 ** max(attempt - 1, 0), self.max_delay)
        return base * (1.0 - self.jitter * self.rng.random())


def _count(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"stream_retries must be a whole number >= 0, not {value!r}")
    return value
