"""The catalog is one table: every model the SDK names has its limits and its price there."""

from __future__ import annotations

import typing

from anthropic.types import ModelParam

from forkagent_jupyter.messages_api.catalog import (
    DEFAULT_CATALOG,
    DEFAULT_MODEL,
    PRICES,
    ModelInfo,
    Price,
    price_for,
)
from forkagent_jupyter.messages_api.usage import Usage, cost_usd


def _sdk_model_ids() -> set[str]:
    found: set[str] = set()
    for arg in typing.get_args(ModelParam):
        found |= {a for a in typing.get_args(arg) if isinstance(a, str)}
    return found


def test_every_sdk_model_has_limits_and_a_price() -> None:
    ids = _sdk_model_ids()
    assert ids, "the SDK's ModelParam lists no ids"
    missing = sorted(m for m in ids if m not in DEFAULT_CATALOG)
    assert missing == []
    assert set(PRICES) == set(DEFAULT_CATALOG)
    for name, info in DEFAULT_CATALOG.items():
        assert PRICES[name] is info.price
        assert info.context_window > info.max_output > 0


def test_dated_ids_cost_their_familys_price_and_unknown_ids_the_default() -> None:
    assert price_for("claude-opus-4-6-20990101") == DEFAULT_CATALOG["claude-opus-4-6"].price
    assert price_for("claude-haiku-4-5-20251001") == DEFAULT_CATALOG["claude-haiku-4-5"].price
    assert price_for("not-a-model") == DEFAULT_CATALOG[DEFAULT_MODEL].price
    assert ModelInfo("custom", 10, 100).price == DEFAULT_CATALOG[DEFAULT_MODEL].price


def test_cost_reads_the_tables_price() -> None:
    haiku = DEFAULT_CATALOG["claude-haiku-5-5"].price
    assert haiku == Price(0.10, 0.50)
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=1_000_000,
        cache_read_input_tokens=1_000_000,
        cache_creation_input_tokens=2_000_000,
        ephemeral_5m_input_tokens=1_000_000,
        ephemeral_1h_input_tokens=1_000_000,
    )
    expected = 0.10 + 0.50 + 0.10 * 0.1 + 0.10 * 1.25 + 0.10 * 2.0
    assert abs(cost_usd(usage, "claude-haiku-5-5") - expected) < 1e-12
    assert abs(cost_usd(usage, "claude-haiku-5-5", "batch") - expected / 2) < 1e-12


def test_a_platforms_model_id_is_the_model_inside_it() -> None:
    from forkagent_jupyter.messages_api.catalog import catalog_name

    for platform_id, name in [
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5-20250929"),
        ("us.anthropic.claude-sonnet-4-6-v1:0", "claude-sonnet-4-6"),
        ("global.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5-20251001"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5-20250929"),
        ("claude-sonnet-4-6", "claude-sonnet-4-6"),
    ]:
        assert catalog_name(platform_id) == name
        assert price_for(platform_id) == DEFAULT_CATALOG[name].price  # not the default's
    assert price_for("us.anthropic.claude-sonnet-4-6-v1:0") != price_for(DEFAULT_MODEL)
