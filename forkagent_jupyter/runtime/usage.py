"""Token accounting and cost.

`Usage` mirrors the usage object of the Messages API (all counts are integers, never None)
and adds up across requests. `PRICES` holds USD per million tokens for the known models; cache
writes cost 1.25x (5 minute TTL) or 2x (1 hour TTL) the base input price, cache reads a
per-model multiple of it (0.1x for most models).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = [
    "BATCH_DISCOUNT",
    "DEFAULT_MODEL",
    "PRICES",
    "Price",
    "Usage",
    "cost_usd",
    "price_for",
    "usage_counts",
]

DEFAULT_MODEL = "claude-sonnet-5-5"
BATCH_DISCOUNT = 0.5
"""Message Batches bill every token (cache writes and reads included) at this share."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read_multiplier: float = 0.1

    @property
    def cache_write_5m(self) -> float:
        return self.input * 1.25

    @property
    def cache_write_1h(self) -> float:
        return self.input * 2.0

    @property
    def cache_read(self) -> float:
        return self.input * self.cache_read_multiplier


PRICES: Mapping[str, Price] = {
    "claude-fable-5-2": Price(10.0, 50.0, 0.025),
    "claude-mythos-5-2": Price(10.0, 50.0, 0.025),
    "claude-fable-5-1": Price(10.0, 50.0, 0.025),
    "claude-mythos-5-1": Price(10.0, 50.0, 0.025),
    "claude-fable-5": Price(10.0, 50.0),
    "claude-mythos-5": Price(10.0, 50.0),
    "claude-mythos-preview": Price(10.0, 50.0),
    "claude-opus-5-5": Price(4.0, 20.0, 0.05),
    "claude-opus-5": Price(5.0, 25.0),
    "claude-opus-4-8": Price(5.0, 25.0),
    "claude-opus-4-7": Price(5.0, 25.0),
    "claude-opus-4-6": Price(5.0, 25.0),
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-sonnet-5-5": Price(2.0, 10.0, 0.05),
    "claude-sonnet-5": Price(2.0, 10.0),
    "claude-sonnet-4-6": Price(3.0, 15.0),
    "claude-sonnet-4-5": Price(3.0, 15.0),
    "claude-haiku-5-5": Price(0.10, 0.50),
    "claude-haiku-4-5": Price(1.0, 5.0),
}


def price_for(model: str) -> Price:
    """The price of `model`; dated ids (`claude-haiku-4-5-20251001`) use their family's."""
    if model in PRICES:
        return PRICES[model]
    for name in sorted(PRICES, key=len, reverse=True):
        if model.startswith(name + "-"):
            return PRICES[name]
    return PRICES[DEFAULT_MODEL]


class Usage(BaseModel):
    """Token counts of one response, or a sum of several."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0

    @classmethod
    def from_api(cls, usage: Mapping[str, Any] | Any) -> Usage:
        """Build from an API usage dict or SDK object (None fields count as 0)."""
        data: Mapping[str, Any] = usage if isinstance(usage, Mapping) else usage.model_dump()

        def num(key: str, src: Mapping[str, Any] = data) -> int:
            value = src.get(key)
            return int(value) if value is not None else 0

        breakdown = data.get("cache_creation") or {}
        created = num("cache_creation_input_tokens")
        five = num("ephemeral_5m_input_tokens", breakdown)
        hour = num("ephemeral_1h_input_tokens", breakdown)
        if created and not (five or hour):
            five = created
        return cls(
            input_tokens=num("input_tokens"),
            output_tokens=num("output_tokens"),
            cache_creation_input_tokens=created,
            cache_read_input_tokens=num("cache_read_input_tokens"),
            ephemeral_5m_input_tokens=five,
            ephemeral_1h_input_tokens=hour,
        )

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens
            + other.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            ephemeral_5m_input_tokens=self.ephemeral_5m_input_tokens
            + other.ephemeral_5m_input_tokens,
            ephemeral_1h_input_tokens=self.ephemeral_1h_input_tokens
            + other.ephemeral_1h_input_tokens,
        )

    @property
    def total_input_tokens(self) -> int:
        """Every prompt token: uncached + written + read."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    @property
    def cache_hit_ratio(self) -> float:
        """Share of prompt tokens served from cache (0.0 when nothing was sent)."""
        total = self.total_input_tokens
        return self.cache_read_input_tokens / total if total else 0.0


def usage_counts(usage: Usage) -> dict[str, int]:
    """The token counts as JSON, in the Messages API's own words: `input_tokens` is the
    uncached part of the prompt only, the cache counts come apart, and `total_input_tokens`
    is the whole prompt (uncached + cache writes + cache reads). Panels, notification
    payloads and transcripts all send this one shape."""
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": usage.output_tokens,
        "total_input_tokens": usage.total_input_tokens,
    }


def cost_usd(usage: Usage, model: str, service_tier: str | None = None) -> float:
    """What `usage` costs on `model`, in USD (`service_tier="batch"`: the batch price)."""
    p = price_for(model)
    share = BATCH_DISCOUNT if service_tier == "batch" else 1.0
    full = (
        usage.input_tokens * p.input
        + usage.output_tokens * p.output
        + usage.ephemeral_5m_input_tokens * p.cache_write_5m
        + usage.ephemeral_1h_input_tokens * p.cache_write_1h
        + usage.cache_read_input_tokens * p.cache_read
    ) / 1_000_000
    return share * full
