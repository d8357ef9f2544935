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
    "ApiError": "errors",
    "Brain": "brains",
    "EchoBrain": "brains",
    "Emulator": "server",
    "Fault": "faults",
    "OfflineBrain": "brains",
    "Reply": "brains",
    "ScriptedBrain": "brains",
    "StaticBrain": "brains",
    "VirtualClock": "cache",
    "WallClock": "server",
}

if TYPE_CHECKING:
    from .brains import Brain, EchoBrain, OfflineBrain, Reply, ScriptedBrain, StaticBrain
    from .cache import VirtualClock
    from .errors import ApiError
    from .faults import Fault
    from .server import Emulator, WallClock


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)


def __dir__() -> list[str]:
    return sorted(__all__)
