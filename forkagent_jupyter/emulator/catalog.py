"""The models the emulator knows, with the limits its rules need.

Context windows: 1M tokens for the 5.x family, 200k for 4.x. Maximum output: 128k for 5.x,
64k for 4.x. Minimum cacheable prefix lengths follow the prompt-caching documentation; models
it does not list (the *-5-5 family) use 1024. Prefill (a final assistant message) is refused
by models from 4.6 on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import ApiError

__all__ = ["DEFAULT_CATALOG", "ModelInfo", "lookup"]


@dataclass(frozen=True)
class ModelInfo:
    name: str
    max_output: int
    context_window: int
    min_cache_tokens: int
    prefill: bool = False
    thinking_modes: frozenset[str] = frozenset({"enabled", "adaptive", "disabled"})
    system_role: bool = True
    strips_thinking: bool = False
    thinking_before_tools: bool = False


def _five(name: str, min_cache: int) -> ModelInfo:
    return ModelInfo(name, 128_000, 1_000_000, min_cache)


def _four(name: str, min_cache: int, *, prefill: bool = False, strips: bool = False) -> ModelInfo:
    return ModelInfo(
        name, 64_000, 200_000, min_cache, prefill=prefill, strips_thinking=strips, system_role=False
    )


_MODELS = [
    _five("claude-fable-5-2", 512),
    _five("claude-mythos-5-2", 512),
    _five("claude-fable-5-1", 512),
    _five("claude-mythos-5-1", 512),
    _five("claude-fable-5", 512),
    _five("claude-mythos-5", 512),
    _five("claude-opus-5", 512),
    _five("claude-opus-5-5", 1024),
    _five("claude-sonnet-5-5", 1024),
    _five("claude-haiku-5-5", 1024),
    _five("claude-sonnet-5", 1024),
    _five("claude-mythos-preview", 2048),
    _four("claude-opus-4-8", 1024),
    _four("claude-opus-4-7", 2048),
    _four("claude-opus-4-6", 4096),
    _four("claude-sonnet-4-6", 1024),
    _four("claude-opus-4-5", 4096, prefill=True),
    _four("claude-opus-4-5-20251101", 4096, prefill=True),
    _four("claude-sonnet-4-5", 1024, prefill=True, strips=True),
    _four("claude-sonnet-4-5-20250929", 1024, prefill=True, strips=True),
    _four("claude-haiku-4-5", 4096, prefill=True, strips=True),
    _four("claude-haiku-4-5-20251001", 4096, prefill=True, strips=True),
]

DEFAULT_CATALOG: Mapping[str, ModelInfo] = {m.name: m for m in _MODELS}


def lookup(model: str, catalog: Mapping[str, ModelInfo]) -> ModelInfo:
    info = catalog.get(model)
    if info is None:
        raise ApiError(404, "not_found_error", f"model: {model}")
    return info
