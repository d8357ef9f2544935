"""The models: one table of per-model limits and prices.

The runtime prices usage with it, the offline model and the emulator check requests against it.

`DEFAULT_CATALOG` holds every model id of `anthropic.types.ModelParam` (SDK 2.12), dated ids
included. A test or a server can pass its own `Mapping[str, ModelInfo]` instead (for example
`{**DEFAULT_CATALOG, "tiny": ModelInfo("tiny", 100, 500, 64)}`, or `dataclasses.replace` of an
entry to flip `strips_thinking`).

Choices (spec §2, §6.1, §6.2; our own where the spec has no figure):

* Context window: 1,000,000 tokens for the 5.x family (Mythos Preview included), 200,000 for
  the 4.x family.
* Maximum output (`max_tokens`): 128,000 for 5.x, 64,000 for 4.x.
* Minimum cacheable prefix (`min_cache_tokens`) as listed in spec §6.1: 512 for Opus 5,
  Fable 5/5.1, Mythos 5/5.1; 1024 for Opus 4.8, Sonnet 5, Sonnet 4.6/4.5; 2048 for Opus 4.7
  and Mythos Preview; 4096 for Opus 4.6/4.5 and Haiku 4.5. Models the spec does not list
  (`*-5-5`, Fable/Mythos 5.2) use `DEFAULT_MIN_CACHE_TOKENS` = 1024.
* Prefill (a final assistant message): refused from 4.6 on (4.6, 4.7, 4.8 and all 5.x);
  accepted by the 4.5 models.
* Thinking modes (`thinking.type`): 4.5 models take enabled/disabled; 4.6–4.8 add adaptive;
  5.x also take between_tools.
* `role: "system"` messages (mid-conversation system text): 5.x only.
* `strips_thinking`: the model drops thinking blocks of earlier turns from the prompt, so a
  cached prefix that contained them stops matching (§6.2: Sonnet <= 4.5 and every Haiku).
* `thinking_before_tools`: the model renders the thinking settings before the tools, so a
  thinking/effort change invalidates every tier (§6.2 note). Not known for any listed model:
  False everywhere; a custom catalog can set it.
* Prices (`Price`, USD per million tokens): cache writes cost 1.25x (5 minute TTL) or 2x
  (1 hour TTL) the base input price, cache reads a per-model multiple of it (0.1x for most
  models). Message Batches bill every token at `BATCH_DISCOUNT` of that. `price_for` prices
  any id: a dated id not in the table uses its family's price, an unknown one the default
  model's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import ApiError

__all__ = [
    "BATCH_DISCOUNT",
    "DEFAULT_CATALOG",
    "DEFAULT_MIN_CACHE_TOKENS",
    "DEFAULT_MODEL",
    "PRICES",
    "ModelInfo",
    "Price",
    "catalog_name",
    "lookup",
    "price_for",
]

DEFAULT_MODEL = "claude-sonnet-5-5"
DEFAULT_MIN_CACHE_TOKENS = 1024
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


_DEFAULT_PRICE = Price(2.0, 10.0, 0.05)
"""The default model's price, also that of a custom catalog entry that names none."""

_MODES_45 = frozenset({"enabled", "disabled"})
_MODES_4X = frozenset({"enabled", "adaptive", "disabled"})
_MODES_5X = frozenset({"enabled", "adaptive", "disabled", "between_tools"})


@dataclass(frozen=True)
class ModelInfo:
    """What the rules and the bill need to know about one model id."""

    name: str
    max_output: int
    context_window: int
    price: Price = _DEFAULT_PRICE
    min_cache_tokens: int = DEFAULT_MIN_CACHE_TOKENS
    prefill: bool = False
    thinking_modes: frozenset[str] = _MODES_5X
    system_role: bool = True
    strips_thinking: bool = False
    thinking_before_tools: bool = False


def _five(
    name: str, price: Price, min_cache: int = DEFAULT_MIN_CACHE_TOKENS, *, strips: bool = False
) -> ModelInfo:
    return ModelInfo(name, 128_000, 1_000_000, price, min_cache, strips_thinking=strips)


def _four(
    name: str,
    price: Price,
    min_cache: int,
    *,
    prefill: bool = False,
    strips: bool = False,
    modes: frozenset[str] = _MODES_4X,
) -> ModelInfo:
    return ModelInfo(
        name,
        64_000,
        200_000,
        price,
        min_cache,
        prefill=prefill,
        thinking_modes=modes,
        system_role=False,
        strips_thinking=strips,
    )


_TOP = Price(10.0, 50.0)
_TOP_5X = Price(10.0, 50.0, 0.025)
_OPUS = Price(5.0, 25.0)

_MODELS = [
    _five("claude-fable-5-2", _TOP_5X),
    _five("claude-mythos-5-2", _TOP_5X),
    _five("claude-haiku-5-5", Price(0.10, 0.50), strips=True),
    _five("claude-sonnet-5-5", _DEFAULT_PRICE),
    _five("claude-fable-5-1", _TOP_5X, 512),
    _five("claude-opus-5-5", Price(4.0, 20.0, 0.05)),
    _five("claude-mythos-5-1", _TOP_5X, 512),
    _five("claude-sonnet-5", Price(2.0, 10.0), 1024),
    _five("claude-fable-5", _TOP, 512),
    _five("claude-mythos-5", _TOP, 512),
    _five("claude-opus-5", _OPUS, 512),
    _four("claude-opus-4-8", _OPUS, 1024),
    _four("claude-opus-4-7", _OPUS, 2048),
    _five("claude-mythos-preview", _TOP, 2048),
    _four("claude-opus-4-6", _OPUS, 4096),
    _four("claude-sonnet-4-6", Price(3.0, 15.0), 1024),
    _four("claude-haiku-4-5", Price(1.0, 5.0), 4096, prefill=True, strips=True, modes=_MODES_45),
    _four(
        "claude-haiku-4-5-20251001",
        Price(1.0, 5.0),
        4096,
        prefill=True,
        strips=True,
        modes=_MODES_45,
    ),
    _four("claude-opus-4-5", _OPUS, 4096, prefill=True, modes=_MODES_45),
    _four("claude-opus-4-5-20251101", _OPUS, 4096, prefill=True, modes=_MODES_45),
    _four("claude-sonnet-4-5", Price(3.0, 15.0), 1024, prefill=True, strips=True, modes=_MODES_45),
    _four(
        "claude-sonnet-4-5-20250929",
        Price(3.0, 15.0),
        1024,
        prefill=True,
        strips=True,
        modes=_MODES_45,
    ),
]

DEFAULT_CATALOG: dict[str, ModelInfo] = {m.name: m for m in _MODELS}

PRICES: Mapping[str, Price] = {m.name: m.price for m in _MODELS}
"""The price column of the table, by model id."""


def lookup(model: str, catalog: Mapping[str, ModelInfo]) -> ModelInfo:
    """The catalog entry of `model`; a 404 `not_found_error` ("model: {model}") otherwise."""
    info = catalog.get(model)
    if info is None:
        raise ApiError(404, "not_found_error", f"model: {model}")
    return info


_PLATFORM_ID = re.compile(r"^(?:[a-z]+\.)?anthropic\.(.+?)(?:-v\d+(?::\d+)?)?$")


def catalog_name(model: str) -> str:
    """The first-party id inside a cloud platform's model id: Amazon Bedrock's
    `anthropic.claude-sonnet-4-5-20250929-v1:0` and its cross-region inference profiles
    (`us.anthropic...`), Vertex AI's `claude-sonnet-4-5@20250929`. Any other id as it is."""
    match = _PLATFORM_ID.match(model)
    if match is not None:
        return match.group(1)
    return model.replace("@", "-", 1) if "@" in model else model


def price_for(model: str) -> Price:
    """The price of `model`; dated ids (`claude-haiku-4-5-20251001`) use their family's, a
    platform's id (`catalog_name`) the model's inside it."""
    model = catalog_name(model)
    if model in PRICES:
        return PRICES[model]
    for name in sorted(PRICES, key=len, reverse=True):
        if model.startswith(name + "-"):
            return PRICES[name]
    return PRICES[DEFAULT_MODEL]
