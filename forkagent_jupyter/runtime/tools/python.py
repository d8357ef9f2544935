"""Python: run code like a notebook cell, where the calling agent's code runs.

Every statement runs; if the code ends with an expression, its value's repr is reported (as
IPython shows `Out[n]`). What the call prints is captured; an exception becomes an `is_error`
result holding the traceback from the code's own frames on. Figures the code displays (or
leaves open) come back to the model as PNG image blocks: the first `MAX_IMAGES`, each at most
`MAX_IMAGE_BYTES`.

Where the code runs is the agent's `CodeRunner` (`ctx.services.python_runner`, see
`executors/`): the parent's runs in the notebook's namespace on a thread; a forked worker's
in its own process started from a snapshot of the kernel, unless it was forked `--shared`.
Without a runner (a bare ToolContext) the code runs on a thread in `ctx.namespace`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..executors import (
    DEFAULT_EXECUTOR,
    MAX_IMAGE_BYTES,
    MAX_IMAGES,
    CodeRunner,
    ExecResult,
    ExecutionInterrupted,
    ThreadExecutor,
    ThreadRunner,
    execute_source,
)
from ..output import as_shown, cap_output
from .base import Tool, ToolContext, ToolError, ToolOutput

__all__ = [
    "DEFAULT_EXECUTOR",
    "ExecResult",
    "ExecutionInterrupted",
    "PythonInput",
    "PythonTool",
    "ThreadExecutor",
    "execute_source",
    "runner_of",
]


def runner_of(ctx: ToolContext) -> CodeRunner:
    """The calling agent's runner (a thread on `ctx.namespace` when the host gave none)."""
    runner = ctx.services.python_runner
    if isinstance(runner, CodeRunner):
        return runner
    return ThreadRunner(ctx.namespace)


class PythonInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(
        min_length=1,
        description="Python source to run. If it ends with an expression, that value's repr "
        "is returned, as in a notebook cell.",
    )


class PythonTool(Tool[PythonInput]):
    name = "Python"
    description = (
        "Run Python code like executing a notebook cell: the user's variables (DataFrames, "
        "models, ...) are there. In the main conversation the code runs in the notebook's own "
        "namespace, so what you define stays for later calls and for the user; a forked worker "
        "runs in its own copy of the namespace taken when it was forked, so its assignments "
        "stay in the worker until the user pulls them. Returns what the code printed, the repr "
        "of a final expression and the figures it drew (as images); an exception returns its "
        "traceback. Top-level await is allowed. Keep large outputs small (print shapes, heads, "
        "summaries) - long output is cut."
    )
    input_model = PythonInput

    def permission_subject(self, args: PythonInput) -> str:
        return args.code.strip()

    def describe(self, args: PythonInput) -> str:
        lines = [line for line in args.code.strip().splitlines() if line.strip()] or [""]
        more = f"  (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
        return f"Python: {lines[0].strip()}{more}"

    async def preview(self, args: PythonInput, ctx: ToolContext) -> str:
        return args.code

    async def run(self, args: PythonInput, ctx: ToolContext) -> str | ToolOutput:
        result = await runner_of(ctx).run(args.code)
        parts: list[str] = []
        if result.stdout:
            parts.append(as_shown(result.stdout).rstrip("\n"))
        if result.stderr:
            parts.append("[stderr]\n" + as_shown(result.stderr).rstrip("\n"))
        if result.value_repr is not None:
            parts.append(result.value_repr)
        if result.error:
            parts.append(result.error)
            raise ToolError(cap_output("\n".join(parts)))
        images = [png for png in result.images if len(png) <= MAX_IMAGE_BYTES]
        skipped = len(result.images) - len(images[:MAX_IMAGES])
        if skipped:
            parts.append(
                f"[{skipped} more figure(s) not attached: at most {MAX_IMAGES} per call, "
                f"each at most {MAX_IMAGE_BYTES // 1000} kB]"
            )
        text = cap_output("\n".join(parts)) or "(no output)"
        if images:
            count = len(images[:MAX_IMAGES])
            text += f"\n[{count} figure{'s' if count > 1 else ''} attached as image]"
            return ToolOutput(text, tuple(images[:MAX_IMAGES]))
        return text
