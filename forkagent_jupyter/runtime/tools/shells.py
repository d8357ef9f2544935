"""Background shell commands: `Bash` with `run_in_background`.

A command started in the background runs in its own process group, its output (stdout and
stderr, in order) collected with a bounded head and tail, and written whole to its output
file (`<session>/tasks/<id>.output` beside the agents' ones, when the session keeps
transcripts). It gets an id (`b` + 16 hex) that `TaskOutput` reads (status, exit code,
output so far; optionally waiting for the end) and `TaskStop` stops (`shell_id`). Its
process group is also in its agent's `shell_groups`, so it is killed when that agent ends;
the parent's are killed when the session closes. The registry is one per session
(`ctx.services.shells`).

It reports back as an agent does: when it ends by itself, its agent (the parent, or a
worker while it runs) gets one `<task-notification>` (tasks/notifications.py) with its
status, its exit code in the summary, and its output file; a `later` command, read after the
person's own prompts. One that was stopped (TaskStop, its agent's end, the session's close)
or whose end was read with TaskOutput sends none, as in the reference.

Its stdin is `/dev/null`: a command that asks a question gets end of input at once and
usually fails on it, which its end notification then reports. One that prints a question
and waits anyway (no output for `stall_after` seconds, its last line looks like a prompt:
`(y/n)`, `[Y/n]`, `Continue?`, `Press Enter`...) sends one notification without a status
saying it seems to wait for input, with its last output and what to do: the reference's
stall watchdog. A command that is merely slow says nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from ..output import HeadTail, cap_output
from ..tasks.notifications import CommandQueue, format_task_notification
from ..tasks.registry import DESCRIPTION_LIMIT, clip_words, shown_path
from ..tasks.snapshot import TaskSnapshot

__all__ = [
    "STALL_AFTER",
    "STALL_CHECK",
    "BackgroundShell",
    "OutputFiles",
    "ShellRegistry",
    "looks_like_prompt",
]

ShellStatus = Literal["running", "completed", "failed", "killed"]

STALL_AFTER = 45.0
"""Seconds without output after which a command whose last line looks like a question is
reported as waiting for input (the reference's threshold)."""
STALL_CHECK = 5.0
"""Seconds between two looks at a running command's output."""
STALL_TAIL = 1024
"""Characters of its last output a stall notification shows."""
OUTPUT_FILE_LIMIT = 64 * 1024 * 1024
"""Bytes of a command's output its file keeps (the rest is counted, not written)."""

_PROMPTS = (
    re.compile(r"\(y/n\)", re.IGNORECASE),
    re.compile(r"\[y/n\]", re.IGNORECASE),
    re.compile(r"\(yes/no\)", re.IGNORECASE),
    re.compile(r"\b(?:Do you|Would you|Shall I|Are you sure|Ready to)\b.*\? *$", re.IGNORECASE),
    re.compile(r"Press (?:any key|Enter)", re.IGNORECASE),
    re.compile(r"Continue\?", re.IGNORECASE),
    re.compile(r"Overwrite\?", re.IGNORECASE),
    re.compile(r"(?:password|passphrase)[^:\n]*: *$", re.IGNORECASE),
)


def looks_like_prompt(tail: str) -> bool:
    """Whether the last line of `tail` looks like a question waiting for an answer."""
    last = tail.rstrip().rsplit("\n", 1)[-1]
    return any(p.search(last) for p in _PROMPTS)


class OutputFiles(Protocol):
    """Where a command's output file lies and how it is appended to, off the event loop (the
    session's transcript store)."""

    def output_path(self, agent_id: str) -> Path: ...

    def append_output(self, task_id: str, data: bytes) -> None: ...


@dataclass(eq=False)
class BackgroundShell:
    """One command running (or run) in the background."""

    id: str
    command: str
    agent_id: str
    proc: asyncio.subprocess.Process
    description: str | None = None
    tool_use_id: str | None = None
    sink: HeadTail = field(default_factory=HeadTail)
    status: ShellStatus = "running"
    exit_code: int | None = None
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: bool = False
    notified: bool = False  # its end was reported, or is not to be (stopped, read)
    received: int = 0  # bytes of output so far
    output_file: Path | None = None
    files: OutputFiles | None = None

    def write(self, data: bytes) -> None:
        """Output from the command's pipe: kept (head and tail) and written to its file."""
        before = self.received
        self.received += len(data)
        self.sink.write(data)
        if self.files is None or before >= OUTPUT_FILE_LIMIT:
            return
        room = OUTPUT_FILE_LIMIT - before
        if len(data) > room:
            data = data[:room] + b"\n[the rest of the output is not written: the file is full]\n"
        self.files.append_output(self.id, data)

    def output(self) -> str:
        return cap_output(self.sink.text().rstrip("\n"))

    @property
    def label(self) -> str:
        """What a summary calls it: its description, else its command (clipped)."""
        return clip_words(self.description or self.command, DESCRIPTION_LIMIT) or self.id

    def stop(self) -> None:
        """Kill its whole process group (its status becomes `killed` when it is reaped); a
        stop someone asked for is not reported back."""
        self.stopped = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def finish(self, code: int) -> None:
        self.exit_code = code
        self.ended_at = time.time()
        if self.stopped or code < 0:
            self.status = "killed"
        else:
            self.status = "completed" if code == 0 else "failed"
        self.ended.set()

    def summary(self) -> str:
        """One line on how it ended, as the reference words it."""
        label = f'Background command "{self.label}"'
        if self.status == "completed":
            return f"{label} completed (exit code {self.exit_code})"
        if self.status == "failed":
            return f"{label} failed with exit code {self.exit_code}"
        if self.status == "killed":
            return f"{label} was stopped" + (
                f" (signal {-self.exit_code})" if self.exit_code is not None else ""
            )
        return f"{label} seems to wait for input"

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


def _same(owner: str) -> str:
    return owner


class ShellRegistry:
    """The session's background shells, by id; they report to `queue` once the session
    connects it (`report_to`)."""

    def __init__(self, *, stall_after: float = STALL_AFTER, stall_check: float = STALL_CHECK):
        self.shells: dict[str, BackgroundShell] = {}
        self._watchers: set[asyncio.Task[None]] = set()
        self.stall_after = stall_after
        self.stall_check = stall_check
        self.queue: CommandQueue | None = None
        self.recipient: Callable[[str], str] = _same
        self.files: OutputFiles | None = None
        self.base: Path | None = None

    def report_to(
        self,
        queue: CommandQueue,
        *,
        recipient: Callable[[str], str] = _same,
        files: OutputFiles | None = None,
        base: Path | None = None,
    ) -> None:
        """Send the shells' notifications to `queue`, for whoever reads for their agent now
        (`recipient`: the agent while it runs, else the one above it); their output files
        go to `files` (none: no file), shown relative to `base`."""
        self.queue = queue
        self.recipient = recipient
        self.files = files
        self.base = base

    @staticmethod
    def new_id() -> str:
        return "b" + secrets.token_hex(8)

    def prepare(self, shell: BackgroundShell) -> None:
        """Give `shell` its output file (created empty now, so it can be read at once)."""
        if self.files is None:
            return
        shell.files = self.files
        shell.output_file = self.files.output_path(shell.id)
        self.files.append_output(shell.id, b"")

    def add(self, shell: BackgroundShell, reader: asyncio.Future[None]) -> None:
        """Track `shell` until its process ends and its output is read; then report it."""
        self.shells[shell.id] = shell

        async def watch() -> None:
            code = await shell.proc.wait()
            with contextlib.suppress(asyncio.TimeoutError):  # children may hold the pipe
                await asyncio.wait_for(asyncio.shield(reader), 0.5)
            shell.finish(code)
            self._report_end(shell)

        self._spawn(watch())
        if self.stall_after > 0:
            self._spawn(self._watch_for_questions(shell))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        job = asyncio.get_running_loop().create_task(coro)
        self._watchers.add(job)
        job.add_done_callback(self._watchers.discard)

    def get(self, shell_id: str) -> BackgroundShell | None:
        return self.shells.get(shell_id)

    def read(self, shell: BackgroundShell) -> None:
        """Its end was read with TaskOutput: no notification any more (a queued one is
        dropped)."""
        if shell.status == "running":
            return
        shell.notified = True
        if self.queue is not None:
            self.queue.discard(shell.id)

    def stop_agent(self, agent_id: str) -> None:
        """Stop the running shells `agent_id` started (it ended): none reports back."""
        for shell in self.shells.values():
            if shell.agent_id == agent_id and shell.status == "running":
                shell.stop()

    def stop_all(self) -> None:
        """Kill every running shell (the session closes)."""
        for shell in self.shells.values():
            if shell.status == "running":
                shell.stop()

    async def aclose(self) -> None:
        """Kill every running shell and wait (bounded) until each is reaped and its output
        pipe closed."""
        self.stop_all()
        if self._watchers:
            await asyncio.wait(set(self._watchers), timeout=10)

    def _shown_file(self, shell: BackgroundShell) -> str:
        return shown_path(shell.output_file, self.base)

    def _report_end(self, shell: BackgroundShell) -> None:
        """Its one end notification, unless it was stopped or read (see the module doc)."""
        if shell.stopped or shell.notified or self.queue is None:
            return
        shell.notified = True
        text = format_task_notification(
            task_id=shell.id,
            tool_use_id=shell.tool_use_id,
            output_file=self._shown_file(shell),
            status=shell.status,
            summary=shell.summary(),
        )
        self._enqueue(shell, text, "later")

    def _enqueue(
        self, shell: BackgroundShell, text: str, priority: Literal["next", "later"]
    ) -> None:
        assert self.queue is not None
        snapshot = TaskSnapshot(
            task_id=shell.id,
            kind="bash",
            status=shell.status,
            description=shell.description or shell.command,
            summary=shell.summary(),
            result=cap_output(shell.sink.text().rstrip("\n"), 2000),
            notification=text,
            elapsed=round((shell.ended_at or time.time()) - shell.started_at, 3),
        )
        self.queue.enqueue(
            text,
            owner=self.recipient(shell.agent_id),
            task_id=shell.id,
            snapshot=snapshot,
            priority=priority,
        )

    async def _watch_for_questions(self, shell: BackgroundShell) -> None:
        """Report `shell` once if it stops printing with a question as its last line."""
        loop = asyncio.get_running_loop()
        size, since = shell.received, loop.time()
        while shell.status == "running":
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(shell.ended.wait(), self.stall_check)
            if shell.status != "running" or self.queue is None:
                return
            now = loop.time()
            if shell.received != size:
                size, since = shell.received, now
                continue
            if now - since < self.stall_after:
                continue
            tail = shell.sink.text().rstrip()[-STALL_TAIL:]
            if not looks_like_prompt(tail):
                since = now  # merely slow: look again after another quiet spell
                continue
            self._enqueue(shell, self._question_text(shell, tail), "next")
            return

    def _question_text(self, shell: BackgroundShell, tail: str) -> str:
        head = format_task_notification(
            task_id=shell.id,
            tool_use_id=shell.tool_use_id,
            output_file=self._shown_file(shell),
            status=None,  # it still runs
            summary=shell.summary(),
        )
        return (
            f"{head}\nIts last output:\n{tail}\n\nIt seems to wait for an answer, which cannot "
            "reach it: its input is closed. Stop it (TaskStop with its shell_id) and run it "
            "again with the answer piped in (`yes | command`) or with the option that makes "
            "it ask nothing."
        )
