"""Token accounting and cost.

`Usage` mirrors the usage object of the Messages API (all counts are integers, never None)
and adds up across requests; `cost_usd` prices it with the catalog's per-model prices
(`catalog.price_for`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict  # pydantic validates it on 3.10/3.11

from .catalog import BATCH_DISCOUNT, price_for

__all__ = ["WEB_SEARCH_USD", "Usage", "UsageCounts", "cost_usd", "usage_counts"]

WEB_SEARCH_USD = 0.01
"""The price of one web search (the server tool): $10 per 1,000 searches. Web fetches cost
only the tokens of what they fetched."""


class Usage(BaseModel):
    """Token counts of one response, or a sum of several."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0
    web_search_requests: int = 0
    """Server tool calls (`usage.server_tool_use`): web searches and web fetches."""
    web_fetch_requests: int = 0

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
        server = data.get("server_tool_use") or {}
        if not isinstance(server, Mapping):
            server = server.model_dump() if hasattr(server, "model_dump") else {}
        return cls(
            web_search_requests=num("web_search_requests", server),
            web_fetch_requests=num("web_fetch_requests", server),
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
            web_search_requests=self.web_search_requests + other.web_search_requests,
            web_fetch_requests=self.web_fetch_requests + other.web_fetch_requests,
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


class UsageCounts(TypedDict):
    """Token counts as JSON, in the Messages API's own words (see `usage_counts`)."""

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int
    total_input_tokens: int


def usage_counts(usage: Usage) -> UsageCounts:
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
    """What `usage` costs on `model`, in USD (`service_tier="batch"`: the batch price of the
    tokens), web searches included (`WEB_SEARCH_USD` each)."""
    p = price_for(model)
    share = BATCH_DISCOUNT if service_tier == "batch" else 1.0
    full = (
        usage.input_tokens * p.input
        + usage.output_tokens * p.output
        + usage.ephemeral_5m_input_tokens * p.cache_write_5m
        + usage.ephemeral_1h_input_tokens * p.cache_write_1h
        + usage.cache_read_input_tokens * p.cache_read
    ) / 1_000_000
    return share * full + usage.web_search_requests * WEB_SEARCH_USD
