"""Background shell commands: `Bash` with `run_in_background`.

A command started in the background runs in its own process group, its output (stdout and
stderr, in order) collected with a bounded head and tail. It gets an id (`b` + 16 hex) that
`TaskOutput` reads (status, exit code, output so far; optionally waiting for the end) and
`TaskStop` stops (`shell_id`). Its process group is also in its agent's `shell_groups`, so it
is killed when that agent ends; the parent's are killed when the session closes. The
registry is one per session (`ctx.services.shells`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from typing import Literal

from ..output import HeadTail, cap_output

__all__ = ["BackgroundShell", "ShellRegistry"]

ShellStatus = Literal["running", "completed", "failed", "killed"]


@dataclass(eq=False)
class BackgroundShell:
    """One command running (or run) in the background."""

    id: str
    command: str
    agent_id: str
    proc: asyncio.subprocess.Process
    sink: HeadTail = field(default_factory=HeadTail)
    status: ShellStatus = "running"
    exit_code: int | None = None
    started_at: float = field(default_factory=time.time)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: bool = False

    def output(self) -> str:
        return cap_output(self.sink.text().rstrip("\n"))

    def stop(self) -> None:
        """Kill its whole process group (its status becomes `killed` when it is reaped)."""
        self.stopped = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def finish(self, code: int) -> None:
        self.exit_code = code
        if self.stopped or code < 0:
            self.status = "killed"
        else:
            self.status = "completed" if code == 0 else "failed"
        self.ended.set()

    def report(self, retrieval: str) -> str:
        """What TaskOutput returns for it (the same shape as for an agent)."""
        parts = [
            f"<retrieval_status>{retrieval}</retrieval_status>",
            f"<task_id>{self.id}</task_id>",
            "<task_type>local_bash</task_type>",
            f"<status>{self.status}</status>",
        ]
        if self.exit_code is not None:
            parts.append(f"<exit_code>{self.exit_code}</exit_code>")
        text = self.output()
        if text:
            parts.append(f"<output>\n{text}\n</output>")
        return "\n\n".join(parts)


class ShellRegistry:
    """The session's background shells, by id."""

    def __init__(self) -> None:
        self.shells: dict[str, BackgroundShell] = {}
        self._watchers: set[asyncio.Task[None]] = set()

    @staticmethod
    def new_id() -> str:
        return "b" + secrets.token_hex(8)

    def add(self, shell: BackgroundShell, reader: asyncio.Future[None]) -> None:
        """Track `shell` until its process ends and its output is read."""
        self.shells[shell.id] = shell

        async def watch() -> None:
            code = await shell.proc.wait()
            with contextlib.suppress(asyncio.TimeoutError):  # children may hold the pipe
                await asyncio.wait_for(asyncio.shield(reader), 0.5)
            shell.finish(code)

        job = asyncio.get_running_loop().create_task(watch())
        self._watchers.add(job)
        job.add_done_callback(self._watchers.discard)

    def get(self, shell_id: str) -> BackgroundShell | None:
        return self.shells.get(shell_id)

    def stop_all(self) -> None:
        """Kill every running shell (the session closes)."""
        for shell in self.shells.values():
            if shell.status == "running":
                shell.stop()
