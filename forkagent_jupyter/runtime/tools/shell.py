"""Bash: one shell command in the work directory, with a timeout and an output cap.

The command runs in its own process group (session) with stdin closed (`/dev/null`: a command
that asks gets end of input at once) and an environment
without credentials (`ctx.env` if the host gave one, else `os.environ`; credential variables
are removed from either). stdout and stderr share one pipe, so their output keeps its order.
On timeout or cancellation the whole process group is killed. Memory stays bounded however
much the command prints (the head and the tail are kept).

In a kernel (Linux) the shell runs in namespaces of its own
(`executors/confinement/confine.py`): its /proc shows only its own processes, and the kernel's
connection file and Jupyter's runtime folder are covered. A process it starts with `&` ends
when the call ends; a background shell's (`run_in_background`) live until every one has ended
or TaskStop kills them. Where that cannot be done here, every call is asked (`unconfined`),
whatever the rules and the mode say.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from ..executors.confinement.listeners import aclosed_ports
from ..executors.confinement.sandbox import confined, confinement_gap
from ..output import MAX_OUTPUT, HeadTail, cap_output
from ..secrets import scrubbed_env
from .base import Tool, ToolContext, ToolError
from .shells import BackgroundShell, ShellRegistry

__all__ = ["BashInput", "BashTool", "cap_output"]

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 600.0
# After the shell exits, how long to keep reading output that its background children may
# still write to the shared pipe before returning.
DRAIN_AFTER_EXIT = 0.5


class BashInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1, description="The command line to run with bash.")
    timeout: float = Field(
        default=DEFAULT_TIMEOUT,
        gt=0,
        le=MAX_TIMEOUT,
        description=f"Seconds before the command is killed (default {DEFAULT_TIMEOUT:g}, "
        f"max {MAX_TIMEOUT:g}).",
    )
    description: str | None = Field(
        default=None, description="A few words on what the command does (shown to the user)."
    )
    run_in_background: bool = Field(
        default=False,
        description="Start the command and return at once with its shell id; you are "
        "notified when it ends. Read its output with TaskOutput (task_id: the shell id) or "
        "its output file, stop it with TaskStop (shell_id). It is killed when you finish, or "
        "stopped. For servers and long jobs you check on later: in a notebook's kernel a "
        "process started with `&` by a call that is not in the background ends when that "
        "call ends.",
    )


class BashTool(Tool[BashInput]):
    name = "Bash"
    description = (
        "Run a bash command in the work directory and return its output (stdout and stderr "
        "together, in order). A non-zero exit code is reported as an error together with the "
        f"output. Each call starts a fresh shell (cd and variables do not persist); stdin is "
        f"closed, so interactive commands fail. Killed after `timeout` seconds (default "
        f"{DEFAULT_TIMEOUT:g}). Long output keeps its first and last {MAX_OUTPUT // 2000}k "
        "characters. Prefer Read, Grep and Glob for looking at files."
    )
    input_model = BashInput

    def permission_subject(self, args: BashInput) -> str:
        return args.command.strip()

    def describe(self, args: BashInput) -> str:
        command = " ".join(args.command.split())
        why = " ".join((args.description or "").split())
        return f"Bash: {command}" + (f"  # {why}" if why else "")

    async def unconfined(self, args: BashInput, ctx: ToolContext) -> str | None:
        why = await confinement_gap()
        if why is None:
            return None
        return (
            f"this system cannot run the command in namespaces of its own ({why}): it would "
            "see every process of your user (the Jupyter server's command line and "
            "environment, with its token) and the kernel's connection file"
        )

    async def preview(self, args: BashInput, ctx: ToolContext) -> str:
        why = f"# {args.description.strip()}\n" if args.description else ""
        unconfined = await self.unconfined(args, ctx)
        if unconfined is not None:  # why it is asked even where a rule allows it
            why = f"# asked: {unconfined}\n{why}"
        return why + args.command

    async def run(self, args: BashInput, ctx: ToolContext) -> str:
        if not ctx.workdir.is_dir():
            raise ToolError(f"The work directory {ctx.workdir} does not exist.")
        if args.run_in_background:
            return await _start_background(args, ctx)
        sink = HeadTail()
        proc, read_fd, groups = await _spawn(args.command, ctx)
        loop = asyncio.get_running_loop()
        try:
            transport, reader = await loop.connect_read_pipe(
                lambda: _Collect(sink, loop), os.fdopen(read_fd, "rb", buffering=0)
            )
        except BaseException:  # cancelled (or failed) before the output is read: no leftovers
            await _kill(proc)
            raise
        try:
            try:
                await asyncio.wait_for(proc.wait(), args.timeout)
            except asyncio.TimeoutError:
                await _kill(proc)
                await _drain(reader, DRAIN_AFTER_EXIT)
                text = sink.text().rstrip("\n")
                raise ToolError(
                    (f"{text}\n" if text else "")
                    + f"Command timed out after {args.timeout:g} s; it and its child processes "
                    "were killed."
                ) from None
            except asyncio.CancelledError:
                await _kill(proc)
                raise
            held = not await _drain(reader, DRAIN_AFTER_EXIT)
        finally:
            transport.close()
            if groups is not None and not _group_alive(proc.pid):
                groups.discard(proc.pid)
        text = sink.text().rstrip("\n")
        if held:
            text += (
                "\n(background processes still hold the output open; their further output is "
                "not shown - redirect it to a file, e.g. `cmd > log.txt 2>&1 &`)"
            )
        if proc.returncode:
            raise ToolError(f"{text}\nExit code {proc.returncode}".lstrip("\n"))
        return text or "(no output)"


async def _spawn(
    command: str, ctx: ToolContext, *, task: bool = False
) -> tuple[asyncio.subprocess.Process, int, set[int] | None]:
    """Start `command` in a fresh shell and session (its own process group) with stdin closed,
    its stdout and stderr on our own pipe (not asyncio's: we own the read end, so we can stop
    reading when the shell has exited but a background child still holds the write end).
    Returns the process, the pipe's read end, and the agent's set of process groups, which
    now holds it (killed when the agent ends, `cmd &` children too), if it has one."""
    read_fd, write_fd = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            *confined(
                [shutil.which("bash") or "/bin/sh", "-c", command],
                task=task,
                closed=await aclosed_ports(),
            ),
            cwd=ctx.workdir,
            env=scrubbed_env(ctx.env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    groups = ctx.services.shell_groups
    if not isinstance(groups, set):
        return proc, read_fd, None
    groups.add(proc.pid)
    return proc, read_fd, groups


async def _start_background(args: BashInput, ctx: ToolContext) -> str:
    """Start `args.command` in the background (see shells.py); its shell id and how to use it."""
    registry = ctx.services.shells
    if not isinstance(registry, ShellRegistry):
        raise ToolError("Background commands are not available in this session.")
    proc, read_fd, _groups = await _spawn(args.command, ctx, task=True)
    call = ctx.call
    shell = BackgroundShell(
        registry.new_id(),
        args.command,
        ctx.agent_id,
        proc,
        description=args.description,
        tool_use_id=call.tool_use_id if call is not None else None,
    )
    registry.prepare(shell)
    loop = asyncio.get_running_loop()
    try:
        _transport, reader = await loop.connect_read_pipe(
            lambda: _Collect(shell, loop), os.fdopen(read_fd, "rb", buffering=0)
        )
    except BaseException:
        await _kill(proc)
        raise
    registry.add(shell, reader.done)
    where = f"\nIts output file: {shell.output_file}" if shell.output_file else ""
    return (
        f"Started in the background as shell {shell.id}: {args.command}\n"
        "You will be notified when it ends (a <task-notification> in a later message). Read "
        f"its output with TaskOutput (task_id: '{shell.id}'); stop it with TaskStop "
        f"(shell_id: '{shell.id}'). It is killed when you finish.{where}"
    )


class _Sink(Protocol):
    def write(self, data: bytes) -> None: ...


class _Collect(asyncio.Protocol):
    """Feeds the pipe into a HeadTail (or a background shell); `done` resolves at end of
    file."""

    def __init__(self, sink: _Sink, loop: asyncio.AbstractEventLoop) -> None:
        self.sink = sink
        self.done: asyncio.Future[None] = loop.create_future()

    def data_received(self, data: bytes) -> None:
        self.sink.write(data)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _drain(reader: _Collect, seconds: float) -> bool:
    """Wait up to `seconds` for the rest of the output; whether it ended."""
    try:
        await asyncio.wait_for(asyncio.shield(reader.done), seconds)
    except asyncio.TimeoutError:
        return False
    return True


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group is still there (a background child of the command)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """Kill the command's whole process group and reap the shell."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    # Reap the shell (bounded: SIGKILL cannot be ignored).
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(proc.wait()), 5)
