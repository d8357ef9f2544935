"""Code on a thread, in a namespace the caller owns (the notebook's own, in a kernel).

The parent's `Python` calls run here, in the user's namespace (its turn is like a cell), and so
do the calls of workers forked with `--shared`. Each call runs in its own daemon thread, so the
event loop (in a kernel: the kernel's, with every card and worker on it) keeps running while
code computes. Calls on one namespace are serialised: two agents never execute code in the same
namespace at once. What the calling thread prints is captured by a thread-aware proxy on
sys.stdout/stderr (all other writes pass through), installed only while a call runs (a stopped
call's thread that still waits does not keep it); its displays go to the runner's sink when it
has one (a worker's card), else where they would go anyway (the running cell), and their PNG
figures are kept for the model. Cancelling a call interrupts its code (an exception raised in
the thread at the next Python bytecode; code blocked inside a C call, such as `time.sleep`,
stops when that returns).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ctypes
import io
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TextIO

from .base import Display, ExecResult, OutputSink, PullError, StreamText, png_of
from .display import DisplayRouter, flush_figures, ipython_shell, open_figures
from .source import INTERRUPT_TEXT, ExecutionInterrupted, run_source

__all__ = ["ThreadExecutor", "ThreadRunner"]


class _ThreadRouter(io.TextIOBase):
    """Stands in for sys.stdout/stderr: writes from a capturing thread go to its buffer,
    everything else to the stream it replaced."""

    def __init__(self, original: TextIO) -> None:
        self.original = original
        self.buffers: dict[int, io.StringIO] = {}

    def write(self, text: str) -> int:
        buf = self.buffers.get(threading.get_ident())
        if buf is not None:
            return buf.write(text)
        return self.original.write(text)

    def flush(self) -> None:
        if threading.get_ident() not in self.buffers:
            self.original.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return threading.get_ident() not in self.buffers and self.original.isatty()

    def fileno(self) -> int:
        return self.original.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.original, "encoding", None) or "utf-8"

    def __getattr__(self, name: str) -> object:
        return getattr(self.original, name)


class _Tee(io.StringIO):
    """A capture buffer that also hands each write to a sink (a worker's card)."""

    def __init__(self, name: str, sink: OutputSink) -> None:
        super().__init__()
        self.name = name
        self.sink = sink

    def write(self, text: str) -> int:
        if text:
            self.sink(StreamText("stderr" if self.name == "stderr" else "stdout", text))
        return super().write(text)


_capture_lock = threading.Lock()


class _Capture:
    """One call's routing of its thread's writes to sys.stdout/stderr into `out`/`err`.

    The proxies are installed by the first capture and put back by the last release, so
    sys.stdout/stderr are the original streams whenever no call is running. A call ends its
    capture when it ends, or when it is stopped while its thread still waits in a C call
    (`time.sleep`): a lingering thread never keeps the proxies installed."""

    def __init__(self, out: io.StringIO, err: io.StringIO) -> None:
        self.buffers = (out, err)
        self.routers: list[tuple[str, _ThreadRouter]] = []
        self.thread_id: int | None = None
        self.ended = False

    def start(self) -> None:
        """Route the calling thread's writes (once, and not after `release`)."""
        import sys

        with _capture_lock:
            if self.thread_id is not None or self.ended:
                return
            self.thread_id = threading.get_ident()
            for name, buf in zip(("stdout", "stderr"), self.buffers, strict=True):
                router = getattr(sys, name)
                if not isinstance(router, _ThreadRouter):
                    router = _ThreadRouter(router)
                    setattr(sys, name, router)
                router.buffers[self.thread_id] = buf
                self.routers.append((name, router))

    def release(self) -> None:
        """End the routing (from any thread; again: nothing). A proxy that routes no other
        call is replaced by the stream it stood in for."""
        import sys

        with _capture_lock:
            self.ended = True
            routers, self.routers = self.routers, []
            for name, router in routers:
                router.buffers.pop(self.thread_id or 0, None)
                if not router.buffers and getattr(sys, name) is router:
                    setattr(sys, name, router.original)


@contextlib.contextmanager
def _captured(capture: _Capture) -> Iterator[None]:
    """`capture` routes this thread's writes while inside."""
    capture.start()
    try:
        yield
    finally:
        capture.release()


@contextlib.contextmanager
def _displays(sink: OutputSink | None, images: list[bytes]) -> Iterator[None]:
    """Route this thread's displays to `sink` (or let them through) and keep their PNGs."""
    shell = ipython_shell()
    router = DisplayRouter.of(shell) if shell is not None else None
    me = threading.get_ident()

    def route(display: Display) -> bool:
        png = png_of(display.data)
        if png is not None:
            images.append(png)
        if sink is None:
            return False
        sink(display)
        return True

    def keep(display: Display) -> None:
        route(display)

    if router is not None:
        router.routes[me] = route
    before = open_figures()
    try:
        yield
    finally:
        if sink is not None:  # figures left open go to the card now, not to a later cell
            flush_figures(keep, before)
        if router is not None:
            router.routes.pop(me, None)


def _checkpoint() -> None:
    """A Python-level call: a pending asynchronous exception is delivered on entering it."""


class _Job:
    """One execution in its own thread, interruptible while the code runs."""

    def __init__(self, code: str, namespace: dict[str, object], sink: OutputSink | None) -> None:
        self.code = code
        self.namespace = namespace
        self.sink = sink
        self.guard = threading.Lock()
        self.thread_id: int | None = None
        self.armed = False  # the code is running: an interrupt may be raised in it
        self.cancelled = False
        self.capture: _Capture | None = None

    def interrupt(self) -> None:
        """Stop the code (at most once); a job that has not started never starts."""
        with self.guard:
            if self.cancelled:
                return
            self.cancelled = True
            if self.armed and self.thread_id is not None:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(self.thread_id), ctypes.py_object(ExecutionInterrupted)
                )
            capture = self.capture
        if capture is not None:  # the call is over, even if its thread still waits
            capture.release()

    def run(self) -> ExecResult:
        sink = self.sink
        out = _Tee("stdout", sink) if sink is not None else io.StringIO()
        err = _Tee("stderr", sink) if sink is not None else io.StringIO()
        images: list[bytes] = []
        value: str | None = None
        error: str | None = None
        with self.guard:
            self.capture = _Capture(out, err)
        with _namespace_thread_lock(self.namespace), _captured(self.capture):
            try:
                with _displays(sink, images):
                    with self.guard:
                        if self.cancelled:
                            return ExecResult(error=INTERRUPT_TEXT)
                        self.thread_id = threading.get_ident()
                        self.armed = True
                    ran = run_source(self.code, self.namespace)
                    with self.guard:
                        self.armed = False
                    _checkpoint()  # an interrupt sent just before disarming lands here
                    value, error = ran.value_repr, ran.error
            except ExecutionInterrupted:
                value, error = None, INTERRUPT_TEXT
        return ExecResult(out.getvalue(), err.getvalue(), value, error, tuple(images))


_thread_locks_guard = threading.Lock()
_thread_locks: dict[int, threading.Lock] = {}


def _namespace_thread_lock(namespace: dict[str, object]) -> threading.Lock:
    """Hard exclusion per namespace across event loops (uncontended within one loop)."""
    with _thread_locks_guard:
        return _thread_locks.setdefault(id(namespace), threading.Lock())


class ThreadExecutor:
    """A daemon thread per call, one call at a time per namespace."""

    def __init__(self) -> None:
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, asyncio.Lock]]
        self._locks = weakref.WeakKeyDictionary()

    def lock(self, namespace: dict[str, object]) -> asyncio.Lock:
        per_loop = self._locks.setdefault(asyncio.get_running_loop(), {})
        return per_loop.setdefault(id(namespace), asyncio.Lock())

    async def run(
        self, code: str, namespace: dict[str, object], sink: OutputSink | None = None
    ) -> ExecResult:
        lock = self.lock(namespace)
        await lock.acquire()
        job = _Job(code, namespace, sink)
        try:
            done = self._start(job)
        except BaseException:
            lock.release()
            raise
        # The lock is held until the thread finishes, even if this call is cancelled first.
        done.add_done_callback(lambda _f: lock.release())
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            job.interrupt()
            raise

    @staticmethod
    def _start(job: _Job) -> asyncio.Future[ExecResult]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[ExecResult] = loop.create_future()

        def deliver(result: ExecResult) -> None:
            if not done.done():
                done.set_result(result)

        def body() -> None:
            try:
                result = job.run()
            except BaseException as exc:  # a bug here must still free the namespace
                result = ExecResult(error=f"internal error in the Python tool: {exc!r}")
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(deliver, result)

        context = contextvars.copy_context()
        threading.Thread(
            target=context.run, args=(body,), name="forkagent-python", daemon=True
        ).start()
        return done


DEFAULT_EXECUTOR = ThreadExecutor()


class ThreadRunner:
    """A CodeRunner on a namespace the caller owns (see the module doc). `on_ran` is told
    after each call (the namespace may have changed: snapshots taken before are stale)."""

    kind = "thread"

    def __init__(
        self,
        namespace: dict[str, object],
        *,
        sink: OutputSink | None = None,
        on_ran: Callable[[], None] | None = None,
        executor: ThreadExecutor = DEFAULT_EXECUTOR,
    ) -> None:
        self.namespace = namespace
        self.sink = sink
        self.on_ran = on_ran
        self.executor = executor

    async def run(self, code: str) -> ExecResult:
        try:
            return await self.executor.run(code, self.namespace, self.sink)
        finally:
            if self.on_ran is not None:
                self.on_ran()

    async def call(self, fn: Callable[..., object], *args: object) -> object:
        async with self.executor.lock(self.namespace):
            return await asyncio.to_thread(fn, self.namespace, *args)

    async def pull(self, names: Sequence[str]) -> dict[str, object]:
        missing = [n for n in names if n not in self.namespace]
        if missing:
            raise PullError(f"not defined here: {', '.join(missing)}")
        return {n: self.namespace[n] for n in names}
