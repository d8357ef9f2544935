"""`AgentCore`: what every action of the kernel's agent stands on.

One Session per kernel, made on first use with its `KernelUI` (ui.py) on the kernel's own
event loop; the settings (`ForkAgent`), the comm (`Bridge`) and the console prompt
(`TerminalAsk`); background work started where no await is possible. The magics' actions
build on it (`magics/turn_actions.py`, `magics/worker_actions.py`, `magics/view_actions.py`)
and `extension.KernelAgent` puts them together.

The person's prompts go before the parent's automatic answer to notifications. A prompt that
waits for its turn in the session goes first by itself (runtime/session/turn_lock.py); an
`%%agent` cell the kernel has queued behind the running cell does not wait there yet, so the
session is told to hold its automatic answer back (`_answers_wait`) from the end of a cell
while the kernel has further requests in hand, until the next cell starts, and for as long
as an `%%agent` cell runs. A cell of other code does not hold it back: the answer comes while
it runs, as before (`await session.idle()` in a cell waits for that answer).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Coroutine
from typing import TYPE_CHECKING, TypeVar

from IPython.core.error import UsageError

from .approvals.terminal import TerminalAsk
from .comm.bridge import Bridge
from .said import said_as
from .settings import ForkAgent, fixed_settings

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..runtime import Session
    from .ui import KernelUI

__all__ = ["AgentCore", "interruptible", "team_key"]

WAKE_INTERVAL = 0.1

_T = TypeVar("_T")


@contextlib.asynccontextmanager
async def interruptible() -> AsyncIterator[None]:
    """Keep the event loop waking up while a cell awaits, so an interrupt ends it at once.

    ipykernel turns SIGINT during an async cell into a callback that cancels the cell, but
    queues it without waking the loop: with nothing else to do (a slow first token, workers
    waiting for approval) the cell would only end at the loop's next event."""

    loop = asyncio.get_running_loop()
    timer: asyncio.TimerHandle | None = None

    def wake() -> None:
        nonlocal timer
        timer = loop.call_later(WAKE_INTERVAL, wake)

    wake()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()


def team_key(target: str) -> str | None:
    """The team a `%send` or `%stop` target names: "team:NAME" or "NAME:*" -> NAME,
    "team:*" -> "" (the team the parent leads now); None: it names one task."""
    if target.startswith("team:"):
        rest = target[len("team:") :]
        return "" if rest == "*" else rest
    if target.endswith(":*"):
        return target[: -len(":*")]
    return None


class AgentCore:
    """The kernel's agent: its session and UI (made on first use), settings, comm, console."""

    def __init__(self, shell: InteractiveShell) -> None:
        self.shell = shell
        self.settings = ForkAgent(parent=shell)
        self.bridge = Bridge(getattr(shell, "kernel", None))
        self.terminal = TerminalAsk(getattr(shell, "kernel", None), lambda: self.bridge.connected)
        self._session: Session | None = None
        self._ui: KernelUI | None = None
        self._background: set[asyncio.Task[object]] = set()
        self._cell: str | None = None
        """What runs now: "agent" (an `%%agent` cell), "code" (another cell), None."""

    @property
    def session(self) -> Session:
        if self._session is None:
            from .ui import KernelUI

            self._ui = KernelUI(self)
            # a Dask cluster is joined once the session exists, as a later change would be:
            # one that cannot be used is said in one line and local processes are used
            executor, self.settings.executor = self.settings.executor, "local"
            try:
                with said_as("forkagent"):  # no key, a platform's extra missing: one line
                    self._session = self._ui.make_session()
            except UsageError:
                self._ui = None
                self.settings.executor = executor
                raise
            self.settings.executor = executor  # to the session (extension._setting_changed)
            if "permission_mode" in self.settings.assigned:  # the person's, over the files'
                self._session.configure(permission_mode=self.settings.permission_mode)
            for name in fixed_settings(self.settings):
                self.settings.freeze(
                    name,
                    f"the {name} cannot change once the session has started; %unload_ext "
                    "forkagent_jupyter then %load_ext forkagent_jupyter (or restart the "
                    "kernel) to use another",
                )
            self._resume_batches(self._session)
            self._session.hold_answers(self._answers_wait)
        return self._session

    def cell_started(self, source: str) -> None:
        """A cell starts (pre_run_cell): an `%%agent` cell holds the automatic answer back."""
        self._cell = "agent" if source.lstrip().startswith("%%agent") else "code"
        if self._session is not None:
            self._session.parent.lock.wake()  # the hold on answers may have ended

    def cell_ended(self) -> None:
        self._cell = None
        if self._session is not None:
            self._session.parent.lock.wake()  # the hold on answers may have ended

    def _answers_wait(self) -> bool:
        """Whether the automatic answer to notifications waits (see the module doc)."""
        if self._cell is not None:
            return self._cell == "agent"
        return _requests_in_hand(getattr(self.shell, "kernel", None))

    def _resume_batches(self, session: Session) -> None:
        """Batches submitted before a restart are polled again (runtime/batch/fan_out.py)."""
        from ..runtime import resume_batches

        try:
            self._spawn(resume_batches(session.batches))
        except RuntimeError:  # no event loop (a terminal IPython): nothing to resume into
            pass

    @property
    def ui(self) -> KernelUI:
        _ = self.session
        assert self._ui is not None
        return self._ui

    def _spawn(self, coro: Coroutine[object, object, _T]) -> asyncio.Task[_T]:
        task = asyncio.get_event_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def _start(self, work: Coroutine[object, object, object]) -> asyncio.Task[None]:
        """A magic's awaitable work, where no await is possible: started in the background
        (its output goes to this cell); a UsageError it meets is printed there."""

        async def run() -> None:
            try:
                await work
            except UsageError as exc:
                print(f"UsageError: {exc}", file=sys.stderr)

        return self._spawn(run())

    def _within_budget(self, magic: str, what: str) -> None:
        with said_as(magic):
            self.session.budget.check(what)

    def stop(self, key: str | None) -> None:
        """`%stop ID`, `%stop --all` and the cards' Stop button: a running task is stopped at
        once; a finished worker's process kept for pulls is freed."""
        if key is None:
            self._stop_all()
            return
        team = team_key(key)
        if team is not None:
            self._stop_team(team)
            return
        batch = self.session.batches.get(key)
        if batch is not None:  # a batched fan-out: cancel the batch, stop its forks
            self._spawn(batch.stop())
            return
        with said_as("%stop"):
            task = self.session.task(key)
        if task.done:
            if self.session.compute.free(task.id):
                held = f" ({task.memory_mb:,.0f} MB)" if task.memory_mb is not None else ""
                print(f"%stop: {task.name or task.id} had finished; its process{held} was freed.")
                return
            raise UsageError(f"%stop: {task.name or task.id} is not running ({task.status}).")
        # at once, here: nothing is left to fail unseen in a background task
        self.session.stop_now(task.id)
        print(f"%stop: stopping {task.name or task.id}.")

    def _stop_team(self, key: str) -> None:
        """`%stop team:NAME`: the team's running members stopped (notifications shown here,
        not sent to the agent)."""
        with said_as("%stop"):
            name, members = self.session.team(key)
        running = [t for t in members if not t.done]
        if not running:
            print(f"%stop: no member of team {name} is running.")
            return
        print(
            f"%stop: stopping team {name} ({len(running)} teammate(s)); their notifications "
            "are shown here, not sent to the agent."
        )
        self._spawn(self.session.stop_team(name))

    def _stop_all(self) -> None:
        running = self.session.running()
        freed = [t for t in self.session.tasks if self.session.compute.free(t.id)]
        if freed:
            print(f"%stop --all: freed the processes of {len(freed)} finished worker(s).")
        if not running:
            print("%stop --all: no task is running.")
            return
        print(
            f"%stop --all: stopping {len(running)} task(s); their notifications are shown "
            "here, not sent to the agent."
        )
        self._spawn(self.session.stop_all())


def _requests_in_hand(kernel: object) -> bool:
    """Whether the kernel handles a request now or has one queued (an execute request waits
    for the running cell's lock, ipykernel >= 7). Read off the lock ipykernel runs requests
    under; a kernel without one has nothing to tell (False)."""
    lock = getattr(kernel, "_main_asyncio_lock", None)
    if not isinstance(lock, asyncio.Lock):
        return False
    waiters = getattr(lock, "_waiters", None) or ()
    return lock.locked() or any(not w.cancelled() for w in waiters)
