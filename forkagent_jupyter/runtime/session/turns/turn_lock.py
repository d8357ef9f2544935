"""`TurnLock`: one parent turn at a time, and who goes next when several wait.

The parent conversation runs one turn at a time: a prompt's turn, the automatic answer to
notifications, a compaction. When the running turn ends, the waiting turn of the most urgent
priority goes next (`now` before `next` before `later`, as the reference's message queue
orders its commands; first come, first served within one priority). A prompt is `next`;
the automatic answer to notifications is `later`, so a prompt the person is waiting to send
goes before it, whichever came first.

The host may hold the `later` turns back for a while (`hold_later`: the notebook does so
between a cell and the next `%%agent` cell it has queued, which is not waiting here yet);
while it holds them, the lock looks again every `RECHECK` seconds and whenever `wake()` is
called.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from types import TracebackType

from ...tasks.notifications import PRIORITY_RANK, Priority

__all__ = ["RECHECK", "TurnLock"]

RECHECK = 0.05
"""Seconds between two looks at the host's hold while a `later` turn waits on it."""


class TurnLock:
    """An asyncio lock whose waiters are served by priority (see the module doc)."""

    def __init__(self) -> None:
        self._held = False
        self._waiting: dict[int, tuple[int, asyncio.Future[None]]] = {}
        self._order = itertools.count()
        self._recheck: asyncio.TimerHandle | None = None
        self.hold_later: Callable[[], bool] | None = None
        """The host's hold on `later` turns: while it returns True, none starts."""

    def locked(self) -> bool:
        return self._held

    def waiting(self, upto: Priority = "later") -> int:
        """How many turns of priority `upto` or more urgent wait."""
        limit = PRIORITY_RANK[upto]
        return sum(1 for rank, fut in self._waiting.values() if rank <= limit and not fut.done())

    def turn(self, priority: Priority) -> _Turn:
        """`async with lock.turn("next"): ...` runs one turn of that priority."""
        return _Turn(self, priority)

    async def __aenter__(self) -> None:  # a plain `async with lock`: a prompt's priority
        await self.acquire("next")

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    async def acquire(self, priority: Priority = "next") -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        key = next(self._order)
        self._waiting[key] = (PRIORITY_RANK[priority], fut)
        self._grant()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # granted as it was cancelled: pass it on
                self._held = False
                self._grant()
            raise
        finally:
            self._waiting.pop(key, None)

    def release(self) -> None:
        if not self._held:
            raise RuntimeError("TurnLock.release() of a lock that is not held")
        self._held = False
        self._grant()

    def wake(self) -> None:
        """The host's hold may have changed: look again now."""
        self._grant()

    def _held_back(self, rank: int) -> bool:
        if rank < PRIORITY_RANK["later"] or self.hold_later is None:
            return False
        try:
            return bool(self.hold_later())
        except Exception:  # a host's hold that fails holds nothing back
            return False

    def _grant(self) -> None:
        """Give the lock, if free, to the most urgent waiter (the oldest within one
        priority), unless the host holds that one back."""
        if self._held:
            return
        live = [(rank, key, fut) for key, (rank, fut) in self._waiting.items() if not fut.done()]
        if not live:
            return
        rank, _key, fut = min(live, key=lambda item: (item[0], item[1]))
        if self._held_back(rank):
            self._look_again()
            return
        self._held = True
        fut.set_result(None)

    def _look_again(self) -> None:
        if self._recheck is not None and not self._recheck.cancelled():
            self._recheck.cancel()
        self._recheck = asyncio.get_running_loop().call_later(RECHECK, self._grant)


class _Turn:
    def __init__(self, lock: TurnLock, priority: Priority) -> None:
        self.lock = lock
        self.priority: Priority = priority

    async def __aenter__(self) -> None:
        await self.lock.acquire(self.priority)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.lock.release()
