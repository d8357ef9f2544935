"""Running source like a notebook cell: every statement, then the value of a final expression.

Errors in the code become a traceback that starts at the code's own frames (what a notebook
user would see); top-level `await` works where no event loop runs in the calling thread.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import itertools
import linecache
import os
import traceback
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from types import CodeType

__all__ = [
    "INTERRUPT_TEXT",
    "ExecutionInterrupted",
    "NotInWorkerError",
    "Ran",
    "execute_source",
    "run_source",
]

REPR_CHARS = 20_000
INTERRUPT_TEXT = "Interrupted: the call was cancelled while the code ran."
_SOURCES_KEPT = 500  # cells whose source stays in linecache for tracebacks
_HERE = str(Path(__file__).parent)


class ExecutionInterrupted(KeyboardInterrupt):
    """Raised inside running code when its call is cancelled."""


class NotInWorkerError(RuntimeError):
    """What a worker process cannot do (widgets, input()): its message says what and what to
    do instead, so the error is that one line, without a traceback through the library."""


@dataclass(frozen=True)
class Ran:
    """The outcome of running source: the final expression's value (when there was one and it
    was not None) or the formatted traceback."""

    value: object = None
    has_value: bool = False
    error: str | None = None

    @property
    def value_repr(self) -> str | None:
        return safe_repr(self.value) if self.has_value else None


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


def _evaluate(code: CodeType, namespace: dict[str, object]) -> object:
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


def safe_repr(value: object) -> str:
    from ..output import cap_output  # here: the tools package imports this one

    try:
        text = repr(value)
    except Exception as exc:
        return f"<{type(value).__name__} object; repr() failed: {exc!r}>"
    return cap_output(text, REPR_CHARS)


def format_exception(exc: BaseException) -> str:
    """The traceback from the first frame that is not this package's executor code (or
    asyncio's, for top-level await)."""
    if isinstance(exc, ExecutionInterrupted):
        return INTERRUPT_TEXT
    if isinstance(exc, NotInWorkerError):
        return f"{type(exc).__name__}: {exc}"
    tb = exc.__traceback__
    while tb is not None and (
        str(Path(tb.tb_frame.f_code.co_filename).parent) == _HERE
        or f"{os.sep}asyncio{os.sep}" in tb.tb_frame.f_code.co_filename
    ):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb)).rstrip("\n")


def run_source(code: str, namespace: dict[str, object]) -> Ran:
    """Run `code` in `namespace` in the calling thread. Never raises for errors in the code
    (SystemExit and interrupts included: they become the error text)."""
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
        return Ran(error="".join(traceback.format_exception_only(type(exc), exc)).rstrip("\n"))
    try:
        _evaluate(body, namespace)
        if tail is None:
            return Ran()
        value = _evaluate(tail, namespace)
        return Ran(value, value is not None)
    except BaseException as exc:  # the code's own errors, SystemExit and interrupts included
        return Ran(error=format_exception(exc))


def execute_source(code: str, namespace: dict[str, object]) -> tuple[str | None, str | None]:
    """Run `code`: (repr of the trailing expression's value or None, traceback or None)."""
    ran = run_source(code, namespace)
    return ran.value_repr, ran.error
