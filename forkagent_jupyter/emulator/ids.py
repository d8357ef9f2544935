"""Response ids: `req_...`, `msg_...`, `toolu_...` (base62), deterministic with a seed."""

from __future__ import annotations

import random
import string
import threading

__all__ = ["IdFactory"]

_B62 = string.digits + string.ascii_uppercase + string.ascii_lowercase


class IdFactory:
    """`req_`, `msg_` and `toolu_` ids; deterministic (in call order) with a seed."""

    def __init__(self, seed: int | None = None) -> None:
        self._rng: random.Random = (
            random.Random(seed) if seed is not None else random.SystemRandom()
        )
        self._lock = threading.Lock()

    def _make(self, prefix: str, n: int) -> str:
        with self._lock:
            return prefix + "".join(self._rng.choice(_B62) for _ in range(n))

    def request_id(self) -> str:
        return self._make("req_011C", 20)

    def message_id(self) -> str:
        return self._make("msg_01", 22)

    def tool_id(self) -> str:
        return self._make("toolu_01", 22)
