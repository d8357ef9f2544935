"""The models the emulator knows, with the per-model limits its rules need.

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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import ApiError

__all__ = ["DEFAULT_CATALOG", "DEFAULT_MIN_CACHE_TOKENS", "ModelInfo", "lookup"]

DEFAULT_MIN_CACHE_TOKENS = 1024

_MODES_45 = frozenset({"enabled", "disabled"})
_MODES_4X = frozenset({"enabled", "adaptive", "disabled"})
_MODES_5X = frozenset({"enabled", "adaptive", "disabled", "between_tools"})


@dataclass(frozen=True)
class ModelInfo:
    """What the emulator needs to know about one model id."""

    name: str
    max_output: int
    context_window: int
    min_cache_tokens: int = DEFAULT_MIN_CACHE_TOKENS
    prefill: bool = False
    thinking_modes: frozenset[str] = _MODES_5X
    system_role: bool = True
    strips_thinking: bool = False
    thinking_before_tools: bool = False


def _five(
    name: str, min_cache: int = DEFAULT_MIN_CACHE_TOKENS, *, strips: bool = False
) -> ModelInfo:
    return ModelInfo(name, 128_000, 1_000_000, min_cache, strips_thinking=strips)


def _four(
    name: str,
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
        min_cache,
        prefill=prefill,
        thinking_modes=modes,
        system_role=False,
        strips_thinking=strips,
    )


_MODELS = [
    _five("claude-fable-5-2"),
    _five("claude-mythos-5-2"),
    _five("claude-haiku-5-5", strips=True),
    _five("claude-sonnet-5-5"),
    _five("claude-fable-5-1", 512),
    _five("claude-opus-5-5"),
    _five("claude-mythos-5-1", 512),
    _five("claude-sonnet-5", 1024),
    _five("claude-fable-5", 512),
    _five("claude-mythos-5", 512),
    _five("claude-opus-5", 512),
    _four("claude-opus-4-8", 1024),
    _four("claude-opus-4-7", 2048),
    _five("claude-mythos-preview", 2048),
    _four("claude-opus-4-6", 4096),
    _four("claude-sonnet-4-6", 1024),
    _four("claude-haiku-4-5", 4096, prefill=True, strips=True, modes=_MODES_45),
    _four("claude-haiku-4-5-20251001", 4096, prefill=True, strips=True, modes=_MODES_45),
    _four("claude-opus-4-5", 4096, prefill=True, modes=_MODES_45),
    _four("claude-opus-4-5-20251101", 4096, prefill=True, modes=_MODES_45),
    _four("claude-sonnet-4-5", 1024, prefill=True, strips=True, modes=_MODES_45),
    _four("claude-sonnet-4-5-20250929", 1024, prefill=True, strips=True, modes=_MODES_45),
]

DEFAULT_CATALOG: dict[str, ModelInfo] = {m.name: m for m in _MODELS}


def lookup(model: str, catalog: Mapping[str, ModelInfo]) -> ModelInfo:
    """The catalog entry of `model`; a 404 `not_found_error` ("model: {model}") otherwise."""
    info = catalog.get(model)
    if info is None:
        raise ApiError(404, "not_found_error", f"model: {model}")
    return info
