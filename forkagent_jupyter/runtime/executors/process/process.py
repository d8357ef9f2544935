"""Worker processes started from a snapshot of the kernel (the kernel's side).

A `Snapshot` is a process forked from the kernel at one moment (copy-on-write: the namespace
as it was then, without pickling anything). It forks a worker process for each agent that
needs one (`spawn`), reports how each ended, and goes away when nothing needs it any more.
A `ProcessRunner` is one agent's worker process: its code runs there, in parallel with the
kernel and the other workers; its outputs come back as messages that the runner hands to its
sink; stopping the agent kills the process at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import socket
import threading
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Protocol

from ..base import (
    CallFailedError,
    ClearOutput,
    Display,
    ExecResult,
    OutputSink,
    PullError,
    StreamText,
    WorkerLostError,
)
from ..confinement.listeners import aclosed_ports
from ..memory import Held, parse_held
from ..pulled import decode_pulled
from ..wire import (
    READ_LIMIT,
    FrameTooLargeError,
    MessageError,
    Request,
    call_result,
    encode,
    frame_limit,
    read_message,
    send_with_fd,
)
from .child import become_snapshot, describe_status
from .forksafety import settle, survey
from .tree import kill_tree

__all__ = ["ProcessRunner", "RunnerPlane", "Snapshot", "fork_supported"]

EXIT_REPORT_WAIT = 60.0
"""At most how long (seconds) the kernel waits for the snapshot to say how a worker it lost
ended. The report comes once the snapshot has reaped the worker (it looks every 0.2 s), or
the wait ends with the snapshot; on a busy machine that takes more than a second, and the
worker's card then said only "ended" instead of why (a fork-safety exit, a signal)."""
SPAWN_WAIT = 120.0
"""At most how long (seconds) a spawn waits for the snapshot to say it started the worker
(well under a second when idle). Past it the snapshot is ended, named as the cause, and the
next call starts from a new snapshot: a worker never waits for ever on a snapshot that hangs."""
ENDING_WAIT = 2.0  # seconds a failed spawn waits for the snapshot's last report
_tokens = itertools.count(1)


def fork_supported() -> bool:
    """Workers can start from a copy-on-write fork of this process (Linux)."""
    return hasattr(os, "fork") and os.uname().sysname == "Linux"


class Snapshot:
    """A process forked from this one now; it forks the worker processes."""

    def __init__(self, namespace: dict[str, object], epoch: int = 0) -> None:
        self.epoch = epoch
        self.control, theirs = socket.socketpair()
        found = survey()  # what a copy of the kernel now could wait on for ever
        with warnings.catch_warnings():  # 3.12+: fork of a multi-threaded process warns
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the snapshot process
            self.control.close()
            settle(found)
            become_snapshot(theirs, namespace)
        theirs.close()
        self.control.setblocking(False)  # as its reader will have it (wire.send_with_fd)
        del found  # the kernel keeps no reference to its threads' locks
        self.pid = pid
        self.claims = 0  # runners bound to this snapshot that have no process yet
        self.children: set[int] = set()
        self.current = True
        self.closed = False
        self._spawns: dict[int, asyncio.Future[int]] = {}
        self._exits: dict[int, int] = {}
        self._exit_waiters: dict[int, asyncio.Future[int | None]] = {}
        self._reader: asyncio.Task[None] | None = None
        self.broke = ""  # the traceback the snapshot sent when serving spawns raised
        self._status: int | None = None  # its wait status, once it has ended and was reaped
        self._sending = asyncio.Lock()  # one spawn request at a time on the control socket

    async def spawn(self, nice: int = 0) -> tuple[int, socket.socket]:
        """A new worker process forked from the snapshot, and the kernel's end of its socket.
        It cannot connect to the servers the kernel runs now (confinement/listeners.py)."""
        closed = await aclosed_ports()
        if self.closed:
            raise WorkerLostError("the snapshot process has ended")
        if self._reader is None:
            loop = asyncio.get_running_loop()
            self._reader = loop.create_task(_read_reports(weakref.ref(self), self.control))
        ours, theirs = socket.socketpair()
        token = next(_tokens)
        waiter = asyncio.get_running_loop().create_future()
        self._spawns[token] = waiter
        # the request goes out whole even if this call is cancelled meanwhile (half a frame
        # would garble every later one); the worker then sees `ours` close and exits
        sending = asyncio.ensure_future(self._request_spawn((token, nice, sorted(closed)), theirs))
        sending.add_done_callback(_retrieved)
        try:
            await asyncio.shield(sending)
            pid = await asyncio.wait_for(waiter, SPAWN_WAIT)
        except asyncio.TimeoutError:
            ours.close()
            self.current = False
            self.close()
            raise WorkerLostError(
                f"the snapshot process did not start the worker within {SPAWN_WAIT:.0f} s, so it "
                "was ended; the next call starts from a new snapshot of the notebook"
            ) from None
        except OSError as exc:  # it has ended: what it said last comes with its end
            ours.close()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(waiter, ENDING_WAIT)
            raise WorkerLostError(
                f"the snapshot process cannot start a worker: {exc}{self._how_it_ended()}"
            ) from None
        except BaseException:
            ours.close()
            raise
        finally:
            self._spawns.pop(token, None)
        self.children.add(pid)
        return pid, ours

    async def _request_spawn(
        self, request: tuple[int, int, list[int]], theirs: socket.socket
    ) -> None:
        try:
            async with self._sending:
                await send_with_fd(self.control, ("spawn", *request), theirs.fileno())
        finally:
            theirs.close()

    def _how_it_ended(self) -> str:
        """How the snapshot process ended, if it has, for an error message ("" if not)."""
        if self._status is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere, before its status was read here
                pid, status = 0, 0
            if pid:
                self._status = status
        parts = [f"it {describe_status(self._status)}"] if self._status is not None else []
        parts += self.broke.strip().splitlines()[-1:]  # the exception, if it sent one
        return f" ({': '.join(parts)})" if parts else ""

    def _record_status(self, status: int) -> None:
        if self._status is None:
            self._status = status

    def _on_report(self, message: tuple[object, ...]) -> None:
        if len(message) == 2 and message[0] == "broke" and isinstance(message[1], str):
            self.broke = message[1]  # its last line names the exception in the worker's error
            return
        if len(message) != 3:
            return
        kind, first, second = message
        if type(first) is not int or type(second) is not int:
            return
        if kind == "spawned":
            waiter = self._spawns.pop(first, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(second)
        elif kind == "exited":
            pid, status = first, second
            self.children.discard(pid)
            self._exits[pid] = status
            exit_waiter = self._exit_waiters.pop(pid, None)
            if exit_waiter is not None and not exit_waiter.done():
                exit_waiter.set_result(status)
            self.retire_if_unused()

    def _on_end(self) -> None:
        self.closed = True
        ended = f"the snapshot process ended{self._how_it_ended()}"
        for waiter in self._spawns.values():
            if not waiter.done():
                waiter.set_exception(WorkerLostError(ended))
        for exit_waiter in self._exit_waiters.values():  # nobody is left to say
            if not exit_waiter.done():
                exit_waiter.set_result(None)
        self.control.close()  # now, even if the loop ends before the transport does
        _reap_soon(self.pid, self._record_status)

    async def exit_status(self, pid: int) -> int | None:
        """How worker `pid` ended, once the snapshot has reaped it (None if unknown: the
        snapshot has ended too, or said nothing within EXIT_REPORT_WAIT)."""
        if pid in self._exits:
            return self._exits[pid]
        if self.closed:
            return None
        waiter = self._exit_waiters.setdefault(pid, asyncio.get_running_loop().create_future())
        try:
            return await asyncio.wait_for(asyncio.shield(waiter), EXIT_REPORT_WAIT)
        except asyncio.TimeoutError:
            return None

    def retire_if_unused(self) -> None:
        if not self.current and self.claims <= 0 and not self.children:
            self.close()

    def close(self) -> None:
        """End the snapshot process (its workers, if any are left, die with it)."""
        if self.closed:
            return
        self.closed = True
        for child in list(self.children):
            kill_tree(child)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        if self._reader is None:
            self.control.close()
            _reap_soon(self.pid)

    def __del__(self) -> None:  # a session dropped without aclose(): no process outlives it
        if not self.closed:
            with contextlib.suppress(Exception):
                os.kill(self.pid, signal.SIGKILL)
        if getattr(self, "_reader", None) is None:
            self.control.close()
        # else the reader owns the socket (the loop may be registering it right now): it sees
        # the process end and closes it


async def _read_reports(snapshot: weakref.ref[Snapshot], control: socket.socket) -> None:
    """Read a snapshot's reports (holding it weakly: a dropped session's snapshot ends)."""
    reader, writer = await asyncio.open_unix_connection(sock=control)
    try:
        while (found := snapshot()) is not None:
            del found
            message = await read_message(reader)
            found = snapshot()
            if found is not None:
                found._on_report(message)
    except (asyncio.IncompleteReadError, ConnectionError, OSError, MessageError):
        pass
    finally:
        writer.close()
        found = snapshot()
        if found is not None:
            found._on_end()
        else:
            control.close()


def _retrieved(task: asyncio.Future[None]) -> None:
    """Done callback: the outcome of a task nobody may await any more is taken (no warning)."""
    if not task.cancelled():
        task.exception()


def _reap(pid: int, record: Callable[[int], None] | None = None) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        _pid, status = os.waitpid(pid, 0)
        if record is not None:
            record(status)


def _reap_soon(pid: int, record: Callable[[int], None] | None = None) -> None:
    """Collect the exit status of a child that has ended or is ending, without waiting; give
    it to `record` (from a thread, if it had not ended yet)."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        return
    if done:
        if record is not None:
            record(status)
        return
    threading.Thread(target=_reap, args=(pid, record), name="forkagent-reap", daemon=True).start()


class RunnerPlane(Protocol):
    """What a process runner uses of the compute plane that made it (`plane.ComputePlane`):
    room for its process, the snapshot to start from, the niceness to start with."""

    @property
    def nice(self) -> int: ...

    async def acquire(self, runner: ProcessRunner) -> None: ...

    def release(self, runner: ProcessRunner) -> None: ...

    def snapshot(self) -> Snapshot: ...


class ProcessRunner:
    """One agent's worker process (see the module doc). The process starts at the first
    call; until then the runner holds its place in the snapshot taken at the fork."""

    kind = "process"

    def __init__(self, plane: RunnerPlane, agent_id: str, snapshot: Snapshot, sink: OutputSink):
        # weak: a runner must not be kept alive by a cycle, so that dropping a session
        # without aclose() still ends its processes (in __del__) before their sockets go
        self._plane = weakref.ref(plane)
        self.agent_id = agent_id
        self.snapshot = snapshot
        self._claim: Snapshot | None = snapshot  # its place in the snapshot until it spawns
        snapshot.claims += 1
        self.sink = sink
        self.pid: int | None = None
        self.ended: str | None = None  # why the process is gone, once it is
        self.parked = False  # the agent has finished; the process waits for pulls
        self.held: tuple[Held, ...] = ()  # what its code bound, as of its last finished call
        self.held_count = 0  # how many names that is (`held` lists the largest)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._killed = False
        self._sock: socket.socket | None = None

    def __del__(self) -> None:  # a session dropped without aclose(): no process outlives it
        if self.alive and self.pid is not None:
            with contextlib.suppress(Exception):
                os.kill(self.pid, signal.SIGKILL)
        if self._sock is not None:
            self._sock.close()

    @property
    def plane(self) -> RunnerPlane:
        plane = self._plane()
        if plane is None:
            raise WorkerLostError("the session of this worker was closed")
        return plane

    @property
    def alive(self) -> bool:
        return self.pid is not None and self.ended is None

    # -- process lifecycle -------------------------------------------------------------------

    async def _ensure(self) -> None:
        """Start the process if it is not running: from the snapshot taken at the fork, or
        (a resumed agent whose process ended) from a fresh snapshot."""
        if self.alive:
            return
        await self.plane.acquire(self)
        try:
            claim = self._claim
            snapshot = claim if claim is not None and not claim.closed else self.plane.snapshot()
            if snapshot is not claim:  # held while it spawns: a cell meanwhile cannot retire it
                self._release_claim()
                self._claim = snapshot
                snapshot.claims += 1
            self.snapshot = snapshot
            self.pid, sock = await snapshot.spawn(self.plane.nice)
        except BaseException:
            self.plane.release(self)
            raise
        finally:
            self._release_claim()
        self._sock = sock
        self._reader, self._writer = await asyncio.open_unix_connection(sock=sock, limit=READ_LIMIT)
        self.ended = None
        self._killed = False
        self.parked = False

    def _release_claim(self) -> None:
        claim, self._claim = self._claim, None
        if claim is not None:
            claim.claims -= 1
            claim.retire_if_unused()

    def kill(self, why: str = "it was stopped") -> None:
        """End the process now (nothing it holds can be pulled afterwards)."""
        self._release_claim()
        if not self.alive:
            self.ended = self.ended or why
            self._close_channel()
            return
        self._killed = True
        self.ended = why
        assert self.pid is not None
        kill_tree(self.pid)
        self._close_channel()
        plane = self._plane()
        if plane is not None:
            plane.release(self)

    def _close_channel(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._sock is not None:
            self._sock.close()  # now, even if the loop ends before the transport does

    async def _lost(self) -> WorkerLostError:
        """The process ended under a call: say how."""
        pid = self.pid
        status = (
            await self.snapshot.exit_status(pid)
            if self.snapshot is not None and pid is not None
            else None
        )
        how = describe_status(status) if status is not None else "ended"
        reason = f"the worker's process {how} while it ran Python code"
        if self.alive:
            self.ended = reason
            self._close_channel()
            plane = self._plane()
            if plane is not None:
                plane.release(self)
        return WorkerLostError(reason)

    # -- requests ----------------------------------------------------------------------------

    async def _request(self, message: Request, reply: str) -> tuple[object, ...]:
        """Send a request and wait for its reply, handing outputs to the sink meanwhile. A
        frame longer than the reply may be (`wire.frame_limit`) ends the process."""
        assert self._reader is not None and self._writer is not None
        limit = frame_limit(reply)
        try:
            self._writer.write(encode(message))
            await self._writer.drain()
            while True:
                received = await read_message(self._reader, limit)
                if received[0] == "output" and isinstance(
                    received[1], (StreamText, Display, ClearOutput)
                ):
                    self.sink(received[1])
                elif received[0] == reply and received[1:2] == message[1:2]:
                    return received
                elif received[0] not in ("done", "called", "pulled"):  # an old reply: skipped
                    raise MessageError(f"an unexpected {received[0]!r} message")
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            if self._killed:
                raise asyncio.CancelledError from None
            raise await self._lost() from None
        except FrameTooLargeError as exc:
            why = f"the worker's process sent {exc}, and was ended"
            self.kill(why)
            raise WorkerLostError(why) from None
        except MessageError as exc:
            why = f"the worker's process sent what is not a message of the protocol ({exc})"
            self.kill(why)
            raise WorkerLostError(why) from None
        except asyncio.CancelledError:
            self.kill()
            raise

    async def run(self, code: str) -> ExecResult:
        async with self._lock:
            await self._ensure()
            done = await self._request(("run", next(self._ids), code), "done")
            result = done[2] if len(done) in (3, 4) else None
            if len(done) == 4:
                self.held, self.held_count = parse_held(done[3])
            if not isinstance(result, ExecResult):
                self.kill("it sent a result that is not one")
                raise WorkerLostError("the worker's process sent a result that is not one")
            return result

    async def call(self, fn: Callable[..., object], *args: object) -> object:
        async with self._lock:
            await self._ensure()
            called = await self._request(("call", next(self._ids), fn, args), "called")
            status, value = call_result(called[2] if len(called) == 3 else None)
            if status != "ok":
                raise CallFailedError(str(value))
            return value

    async def pull(self, names: Sequence[str], trust: bool = False) -> dict[str, object]:
        if not self.alive:
            why = self.ended or "it has not run any code yet"
            raise PullError(f"worker {self.agent_id} has no process to pull from: {why}")
        async with self._lock:
            pulled = await self._request(("pull", next(self._ids), list(names), trust), "pulled")
        return await decode_pulled(pulled[2:], names, trust)
