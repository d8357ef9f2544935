"""Python: run code in a namespace, like a notebook cell.

All statements run; a trailing expression's repr is reported, with what the code printed
and any exception's traceback (an `is_error` result). The host decides where code runs
through an `Executor`: by default a worker thread, one call at a time per namespace, with
output captured per thread (so printing elsewhere is not swallowed); in a kernel the host
supplies one that runs on the kernel's loop.
"""

from __future__ import annotations

import ast
import asyncio
import io
import sys
import threading
import traceback
import weakref
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from pydantic import BaseModel, ConfigDict, Field

from .base import Tool, ToolContext, ToolError
from .shell import cap_output

__all__ = ["ExecResult", "Executor", "PythonTool", "ThreadExecutor", "execute_source"]


@dataclass(frozen=True)
class ExecResult:
    stdout: str
    stderr: str
    value_repr: str | None
    error: str | None


class Executor(Protocol):
    async def run(self, code: str, namespace: dict[str, Any]) -> ExecResult: ...


class _ThreadRouter(io.TextIOBase):
    """Stands in for sys.stdout/err: writes from a capturing thread go to its buffer."""

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


_router_lock = threading.Lock()


def _routers() -> tuple[_ThreadRouter, _ThreadRouter]:
    with _router_lock:
        if not isinstance(sys.stdout, _ThreadRouter):
            sys.stdout = _ThreadRouter(sys.stdout)
        if not isinstance(sys.stderr, _ThreadRouter):
            sys.stderr = _ThreadRouter(sys.stderr)
        return sys.stdout, sys.stderr


def execute_source(code: str, namespace: dict[str, Any]) -> tuple[str | None, str | None]:
    """Run `code` in `namespace`: (repr of a trailing expression, formatted traceback)."""
    try:
        tree = ast.parse(code, mode="exec")
    except SyntaxError:
        return None, traceback.format_exc(limit=0)
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    body = ast.Module(body=tree.body[:-1] if last else tree.body, type_ignores=[])
    try:
        exec(compile(body, "<agent>", "exec"), namespace)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<agent>", "eval"), namespace)
            return (None if value is None else repr(value)), None
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)) and not isinstance(exc, SystemExit):
            raise
        frames = traceback.extract_tb(exc.__traceback__)
        keep = [f for f in frames if f.filename != __file__]
        text = "".join(traceback.format_list(keep)) + "".join(
            traceback.format_exception_only(type(exc), exc)
        )
        return None, "Traceback (most recent call last):\n" + text
    return None, None


class ThreadExecutor:
    """Runs code in a worker thread, one call at a time per namespace."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[int, asyncio.Lock] = weakref.WeakValueDictionary()
        self._strong: dict[int, asyncio.Lock] = {}

    def _lock(self, namespace: dict[str, Any]) -> asyncio.Lock:
        key = id(namespace)
        lock = self._strong.get(key)
        if lock is None:
            lock = self._strong[key] = asyncio.Lock()
        return lock

    async def run(self, code: str, namespace: dict[str, Any]) -> ExecResult:
        async with self._lock(namespace):
            return await asyncio.to_thread(self._run, code, namespace)

    @staticmethod
    def _run(code: str, namespace: dict[str, Any]) -> ExecResult:
        out, err = _routers()
        me = threading.get_ident()
        out.buffers[me], err.buffers[me] = io.StringIO(), io.StringIO()
        try:
            value, error = execute_source(code, namespace)
        finally:
            stdout = out.buffers.pop(me).getvalue()
            stderr = err.buffers.pop(me).getvalue()
        return ExecResult(stdout, stderr, value, error)


DEFAULT_EXECUTOR = ThreadExecutor()


class PythonInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(
        description="Python code. Runs in the notebook's namespace; a trailing expression's "
        "value is shown, like in a cell."
    )


class PythonTool(Tool[PythonInput]):
    name = "Python"
    description = (
        "Run Python code in the notebook's namespace (the user's variables are there, and what "
        "you define stays). Printed output and the value of a trailing expression come back."
    )
    input_model = PythonInput

    def permission_subject(self, args: PythonInput) -> str:
        return args.code.strip().splitlines()[0][:200] if args.code.strip() else ""

    async def run(self, args: PythonInput, ctx: ToolContext) -> str:
        executor: Executor = ctx.services.get("python_executor") or DEFAULT_EXECUTOR
        result = await executor.run(args.code, ctx.namespace)
        parts = [p.rstrip("\n") for p in (result.stdout, result.stderr) if p]
        if result.value_repr is not None:
            parts.append(result.value_repr)
        if result.error:
            parts.append(result.error)
            raise ToolError(cap_output("\n".join(parts).strip()))
        return cap_output("\n".join(parts).strip()) or "(no output)"
