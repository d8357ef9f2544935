"""An Anthropic Messages API emulator: real HTTP, SSE, validation, prompt-cache accounting,
fault injection and a usage ledger. Start one with ``Emulator().start()`` (or as a context
manager) and point the official SDK at ``emulator.base_url``.
"""

from __future__ import annotations

from .brains import Brain, EchoBrain, OfflineBrain, Reply, ScriptedBrain, StaticBrain
from .cache import VirtualClock
from .errors import ApiError
from .faults import Fault
from .server import Emulator, WallClock

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
