"""Python: run code in a namespace dict, like a notebook cell.

Every statement runs; if the code ends with an expression, its value's repr is reported (as
IPython shows `Out[n]`). What *this* call prints is captured; an exception becomes an
`is_error` result holding the traceback from the code's own frames on. Top-level `await`
works (the coroutine runs on a private event loop in the worker thread).

Where code runs is the host's choice, through an `Executor` (`ctx.services["python_executor"]`).
The default `ThreadExecutor` runs each call in its own daemon thread, so the asyncio loop (in
a kernel: the kernel's loop, with every widget and background agent on it) keeps running
while code computes. Calls on one namespace are serialised: two agents never execute code in
the same namespace at once. Output is captured by a thread-aware proxy on sys.stdout/stderr:
writes made by the executing thread go to that call's buffer, all others pass through to the
original stream; the proxy is installed while at least one call runs and removed after.
Cancelling a call interrupts its code (an exception raised in the worker thread at the next
Python bytecode; code blocked inside a C call, such as `time.sleep`, stops when that returns).
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import contextvars
import ctypes
import inspect
import io
import itertools
import linecache
import os
import sys
import threading
import traceback
import weakref
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from types import CodeType
from typing import Any, Protocol, TextIO, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from .base import Tool, ToolContext, ToolError
from .output import cap_output

__all__ = [
    "ExecResult",
    "ExecutionInterrupted",
    "Executor",
    "PythonInput",
    "PythonTool",
    "ThreadExecutor",
    "execute_source",
]

REPR_CHARS = 20_000
_INTERRUPT_TEXT = "Interrupted: the call was cancelled while the code ran."
_SOURCES_KEPT = 500  # cells whose source stays in linecache for tracebacks


@dataclass(frozen=True)
class ExecResult:
    """What one execution produced. `value_repr` is None when the code did not end with an
    expression (or it was None); `error` holds a formatted traceback."""

    stdout: str = ""
    stderr: str = ""
    value_repr: str | None = None
    error: str | None = None


@runtime_checkable
class Executor(Protocol):
    """Runs code in a namespace; hosts (a Jupyter kernel) may supply their own."""

    async def run(self, code: str, namespace: dict[str, Any]) -> ExecResult: ...


class ExecutionInterrupted(KeyboardInterrupt):
    """Raised inside running code when its call is cancelled."""


# -- output capture ------------------------------------------------------------------------


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

    def __getattr__(self, name: str) -> Any:
        return getattr(self.original, name)


_capture_lock = threading.Lock()
_capturing = 0


@contextlib.contextmanager
def _captured(out: io.StringIO, err: io.StringIO) -> Iterator[None]:
    """Route this thread's writes to sys.stdout/stderr into `out`/`err` while inside."""
    global _capturing
    me = threading.get_ident()
    with _capture_lock:
        for name in ("stdout", "stderr"):
            if not isinstance(getattr(sys, name), _ThreadRouter):
                setattr(sys, name, _ThreadRouter(getattr(sys, name)))
        routers = [r for r in (sys.stdout, sys.stderr) if isinstance(r, _ThreadRouter)]
        for router, buf in zip(routers, (out, err), strict=True):
            router.buffers[me] = buf
        _capturing += 1
    try:
        yield
    finally:
        with _capture_lock:
            for router in routers:
                router.buffers.pop(me, None)
            _capturing -= 1
            if _capturing == 0:
                for name in ("stdout", "stderr"):
                    current = getattr(sys, name)
                    if isinstance(current, _ThreadRouter) and not current.buffers:
                        setattr(sys, name, current.original)


# -- running source ------------------------------------------------------------------------

_cell_numbers = itertools.count(1)
_sources: deque[str] = deque()


def _register_source(code: str) -> str:
    """A fresh file name for `code`, registered in linecache so tracebacks show its lines."""
    filename = f"<python-{next(_cell_numbers)}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    _sources.append(filename)
    while len(_sources) > _SOURCES_KEPT:
        linecache.cache.pop(_sources.popleft(), None)
    return filename


def _evaluate(code: CodeType, namespace: dict[str, Any]) -> Any:
    result = eval(code, namespace)
    if code.co_flags & inspect.CO_COROUTINE:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(result)
        result.close()
        raise RuntimeError(
            "top-level await is not available here: this code runs on the thread of a running "
            "event loop. Schedule the coroutine with asyncio.ensure_future(...) instead."
        )
    return result


def _safe_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as exc:
        return f"<{type(value).__name__} object; repr() failed: {exc!r}>"
    return cap_output(text, REPR_CHARS)


def _format_exception(exc: BaseException) -> str:
    """The traceback from the first frame that is not this module's (or asyncio's, for
    top-level await) - what a notebook user would see."""
    if isinstance(exc, ExecutionInterrupted):
        return _INTERRUPT_TEXT
    tb = exc.__traceback__
    while tb is not None and (
        tb.tb_frame.f_code.co_filename == __file__
        or f"{os.sep}asyncio{os.sep}" in tb.tb_frame.f_code.co_filename
    ):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb)).rstrip("\n")


def execute_source(code: str, namespace: dict[str, Any]) -> tuple[str | None, str | None]:
    """Run `code` in `namespace` in the calling thread: (repr of the trailing expression's
    value or None, formatted traceback or None). Never raises for errors in the code."""
    filename = _register_source(code)
    namespace.setdefault("__name__", "__main__")
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    try:
        tree = ast.parse(code, filename, "exec")
        last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        if last is not None:
            tree.body.pop()
        body = compile(tree, filename, "exec", flags=flags, dont_inherit=True)
        tail = (
            compile(ast.Expression(last.value), filename, "eval", flags=flags, dont_inherit=True)
            if last is not None
            else None
        )
    except SyntaxError as exc:
        return None, "".join(traceback.format_exception_only(type(exc), exc)).rstrip("\n")
    try:
        _evaluate(body, namespace)
        if tail is None:
            return None, None
        value = _evaluate(tail, namespace)
        return (None if value is None else _safe_repr(value)), None
    except BaseException as exc:  # the code's own errors, SystemExit and interrupts included
        return None, _format_exception(exc)


def _checkpoint() -> None:
    """A Python-level call: a pending asynchronous exception is delivered on entering it."""


class _Job:
    """One execution in its own thread, interruptible while the code runs."""

    def __init__(self, code: str, namespace: dict[str, Any]) -> None:
        self.code = code
        self.namespace = namespace
        self.guard = threading.Lock()
        self.thread_id: int | None = None
        self.armed = False  # the code is running: an interrupt may be raised in it
        self.cancelled = False

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

    def run(self) -> ExecResult:
        out, err = io.StringIO(), io.StringIO()
        value: str | None = None
        error: str | None = None
        with _namespace_thread_lock(self.namespace), _captured(out, err):
            try:
                with self.guard:
                    if self.cancelled:
                        return ExecResult(error=_INTERRUPT_TEXT)
                    self.thread_id = threading.get_ident()
                    self.armed = True
                value, error = execute_source(self.code, self.namespace)
                with self.guard:
                    self.armed = False
                _checkpoint()  # an interrupt sent just before disarming lands here
            except ExecutionInterrupted:
                value, error = None, _INTERRUPT_TEXT
        return ExecResult(out.getvalue(), err.getvalue(), value, error)


_thread_locks_guard = threading.Lock()
_thread_locks: dict[int, threading.Lock] = {}


def _namespace_thread_lock(namespace: dict[str, Any]) -> threading.Lock:
    """Hard exclusion per namespace across event loops (uncontended within one loop)."""
    with _thread_locks_guard:
        return _thread_locks.setdefault(id(namespace), threading.Lock())


class ThreadExecutor:
    """The default Executor: a daemon thread per call, one call at a time per namespace."""

    def __init__(self) -> None:
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, asyncio.Lock]]
        self._locks = weakref.WeakKeyDictionary()

    def _lock(self, namespace: dict[str, Any]) -> asyncio.Lock:
        per_loop = self._locks.setdefault(asyncio.get_running_loop(), {})
        return per_loop.setdefault(id(namespace), asyncio.Lock())

    async def run(self, code: str, namespace: dict[str, Any]) -> ExecResult:
        lock = self._lock(namespace)
        await lock.acquire()
        job = _Job(code, namespace)
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


# -- the tool ------------------------------------------------------------------------------


class PythonInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(
        min_length=1,
        description="Python source to run in the notebook's namespace. If it ends with an "
        "expression, that value's repr is returned, as in a notebook cell.",
    )


class PythonTool(Tool[PythonInput]):
    name = "Python"
    description = (
        "Run Python code in the notebook's namespace, like executing a cell: the user's "
        "variables (DataFrames, models, ...) are there, and what you define stays for later "
        "calls and for the user. Returns what the code printed and the repr of a final "
        "expression; an exception returns its traceback. Top-level await is allowed. Keep "
        "large outputs small (print shapes, heads, summaries) - long output is cut."
    )
    input_model = PythonInput

    def permission_subject(self, args: PythonInput) -> str:
        return args.code.strip()

    async def run(self, args: PythonInput, ctx: ToolContext) -> str:
        executor = ctx.services.get("python_executor")
        if not isinstance(executor, Executor):
            executor = DEFAULT_EXECUTOR
        result = await executor.run(args.code, ctx.namespace)
        parts: list[str] = []
        if result.stdout:
            parts.append(result.stdout.rstrip("\n"))
        if result.stderr:
            parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
        if result.value_repr is not None:
            parts.append(result.value_repr)
        if result.error:
            parts.append(result.error)
            raise ToolError(cap_output("\n".join(parts)))
        return cap_output("\n".join(parts)) or "(no output)"
