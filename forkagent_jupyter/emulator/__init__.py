"""An Anthropic Messages API emulator: real HTTP, SSE, validation, prompt-cache accounting,
fault injection and a usage ledger. Start one with ``Emulator().start()`` (or as a context
manager) and point the official SDK at ``emulator.base_url``.

The public names are imported lazily, so importing the package stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = [
    "ApiError",
    "Brain",
    "EchoBrain",
    "Emulator",
    "Fault",
    "OfflineBrain",
    "Reply",
    "ScriptedBrain",
    "StaticBrain",
    "VirtualClock",
    "WallClock",
]

_WHERE = {
    "ApiError": "..messages_api.errors",
    "Brain": "brains",
    "EchoBrain": "brains",
    "Emulator": "server",
    "Fault": "faults",
    "OfflineBrain": "brains",
    "Reply": "brains",
    "ScriptedBrain": "brains",
    "StaticBrain": "brains",
    "VirtualClock": "..messages_api.cache",
    "WallClock": "..messages_api.cache",
}

if TYPE_CHECKING:
    from ..messages_api.cache import VirtualClock, WallClock
    from ..messages_api.errors import ApiError
    from .brains import Brain, EchoBrain, OfflineBrain, Reply, ScriptedBrain, StaticBrain
    from .faults import Fault
    from .server import Emulator


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    where = module if module.startswith("..") else f".{module}"
    return getattr(import_module(where, __name__), name)


def __dir__() -> list[str]:
    return sorted(__all__)
