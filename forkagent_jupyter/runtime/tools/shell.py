"""Bash: one shell command in the work directory, with a timeout and an output cap.

The command gets an environment without credentials (never the API key). On timeout or
cancellation its whole process group is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from pydantic import BaseModel, ConfigDict, Field

from ..secrets import scrubbed_env
from .base import Tool, ToolContext, ToolError

__all__ = ["BashTool", "cap_output"]

MAX_OUTPUT = 30_000


def cap_output(text: str, limit: int = MAX_OUTPUT) -> str:
    """Keep the head and the tail of a long output, with a marker between."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n... [{cut} characters cut] ...\n{text[-half:]}"


class BashInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(description="The shell command to run (bash).")
    timeout: float = Field(
        default=120, gt=0, le=600, description="Seconds before the command is killed (max 600)."
    )
    description: str | None = Field(default=None, description="What the command does, briefly.")


class BashTool(Tool[BashInput]):
    name = "Bash"
    description = (
        "Run a shell command in the work directory and return its combined output and exit "
        "code. Use it for git, package tools and quick file operations."
    )
    input_model = BashInput

    def permission_subject(self, args: BashInput) -> str:
        return args.command.strip()

    async def run(self, args: BashInput, ctx: ToolContext) -> str:
        env = dict(ctx.env) if ctx.env is not None else scrubbed_env()
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            args.command,
            cwd=str(ctx.workdir),
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), args.timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise ToolError(f"Command timed out after {args.timeout:g} s and was killed.") from None
        text = cap_output(out.decode("utf-8", errors="replace"))
        if proc.returncode:
            raise ToolError(f"{text}\n(exit code {proc.returncode})".lstrip())
        return text or "(no output; exit code 0)"
