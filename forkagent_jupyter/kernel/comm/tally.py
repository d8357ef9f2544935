"""Messages from the frontend that the kernel dropped, said in the kernel's log as a count.

A frontend that sends 10,000 messages the kernel does not take must not write 10,000 lines
into the log the person reads (the Jupyter server's terminal), nor have the kernel format
each. A spell of drops starts with the first one: its first `LINES` drops get a line each,
saying why (as a single malformed message always did); the rest are counted, and when the
spell ends (`SPELL` seconds after it started) one line says how many more there were, by
kind. Drops may be counted from the shell thread (`door`) and the main one (`bridge`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

__all__ = ["LINES", "SPELL", "Tally"]

LINES = 50
"""Drops of one spell logged with their reason, a line each (a few junk messages: all)."""
SPELL = 5.0
"""Seconds from a spell's first drop to the line that counts the rest."""


class Tally:
    """Drops counted and logged as the module doc says."""

    def __init__(self, log: Callable[[], logging.Logger]) -> None:
        self._log = log
        self._lock = threading.Lock()
        self._started: float | None = None  # when the current spell began
        self._spell = 0  # which spell that is (a timer ends only its own)
        self._seen = 0  # drops in this spell
        self._counted: dict[str, int] = {}  # kind -> drops past LINES in this spell
        self.total = 0
        """Every drop counted so far."""

    def drop(self, kind: str, line: Callable[[], str]) -> None:
        """Count one dropped message of `kind` ("malformed", "over the rate"); `line()` is its
        line, made and logged only while the spell has room for lines."""
        with self._lock:
            now = time.monotonic()
            ended = self._end() if self._started and now - self._started >= SPELL else None
            if self._started is None:
                self._started = now
                self._count_later()
            self._seen += 1
            self.total += 1
            said = self._seen <= LINES
            if not said:
                self._counted[kind] = self._counted.get(kind, 0) + 1
        if ended:
            self._log().warning(ended)
        if said:
            self._log().warning(line())

    def flush(self, spell: int | None = None) -> None:
        """End the spell now (only if it is still `spell`, when given): the line counting its
        drops past `LINES`, if there were any."""
        with self._lock:
            ended = self._end() if spell is None or spell == self._spell else None
        if ended:
            self._log().warning(ended)

    def _end(self) -> str | None:
        """End the spell (under the lock); its count line, if it has one."""
        started, counted = self._started, self._counted
        self._started, self._seen, self._counted = None, 0, {}
        self._spell += 1
        if started is None or not counted:
            return None
        kinds = ", ".join(f"{n:,} {kind}" for kind, n in sorted(counted.items()))
        return (
            f"forkagent comm: dropped {sum(counted.values()):,} more messages from the frontend "
            f"in {max(SPELL, time.monotonic() - started):.0f} s, without a line each ({kinds})"
        )

    def _count_later(self) -> None:
        """Have the spell end SPELL seconds from now, on the loop of the thread that dropped
        (without one, it ends at the first drop after that, or at `flush`)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        loop.call_later(SPELL, self.flush, self._spell)
