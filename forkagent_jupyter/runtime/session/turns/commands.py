"""Slash commands in the parent conversation: a prompt `/name args` (an `%%agent` cell,
an `%agent` line, `Session.ask`) runs the command or skill of that name
(`config/commands.py` reads them).

What a prompt starting with `/` is, as Claude Code decides: the command of that name if there
is one; else, when the word could be a command's name (letters, digits, `:`, `_`, `-`) and no
file or folder `/word` exists, an unknown command, refused in one line naming the closest
names (nothing is sent to the model); else (`/usr/bin/env ...`, `/tmp ...`) an ordinary
prompt.

A command runs in one of two ways:

* inline (the default): its text, arguments put in, is the user message of a parent turn,
  after a line naming the command (`<command-name>/review</command-name>`, as Claude Code
  writes it); its `model` and `effort` hold for that turn only;
* `context: fork`: a fork of the parent conversation (the same cached prefix as `%fork`)
  with the command's text as its directive, run while the caller waits (a card shows it;
  its "Run in background" button lets the caller go on, the result then coming as a
  notification). Its result is the turn's text, and enters the parent conversation as the
  command's output (the typed line, then `<local-command-stdout>`), not as a notification;
  the parent model is not called. With `agent: <name>` of a defined agent, that named agent
  runs the text instead (its own context, as in Claude Code); an agent not defined here
  (Claude Code's built-in `Explore`) is said in one line and the fork runs it.

`allowed-tools` never grants anything (the file may be someone else's): it limits the calls
the command's agent (the parent for that turn, or the fork, and what they start) may make
(`permissions/limits.py`), and the gate still decides each allowed one. The model is told the
limit after the command's text.

Shell lines (`` !`git status` ``, ```` ```! ```` blocks) run before the model reads the text,
each as a Bash call through the gate (the person is asked unless a rule allows it; a deny
rule or a refusal stops the command in one line, nothing sent); their output takes their
place. `@file` references are left as written: the model reads the file with its tools.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ...config.agent_definitions import resolve_model
from ...config.command_text import shell_lines, with_outputs
from ...config.commands import (
    Command,
    CommandScan,
    looks_like_command,
    parse_invocation,
    scan_commands,
)
from ...errors import UsageError
from ...events import LoopEvent, Stop, TextDelta, ToolResult, ToolUse
from ...history import Block, Message
from ...loop.config import AgentConfig
from ...loop.loop import call_tool
from ...permissions.limits import ToolLimit
from ...tasks.registry import Task
from ...workers.workers import AgentRun, Workers

if TYPE_CHECKING:
    from ..agent_setup import AgentContexts
    from ..place import Place
    from .turn_setup import TurnSetup

__all__ = ["Invocation", "Prepared", "PromptCommands", "find_invocation"]

CLAUDE_CODE_BUILT_INS = {
    "compact": "%compact (or Session.compact())",
    "clear": "%%agent --new (or Session.parent.reset())",
    "new": "%%agent --new (or Session.parent.reset())",
    "help": "%commands, and %%agent? for the magic's options",
    "agents": "%tasks, and the named agents listed to the model",
    "permissions": "%permissions",
    "hooks": "%hooks",
    "mcp": "%mcp",
    "model": "%%agent --model NAME, or %config ForkAgent.model",
    "cost": "the footer of each %%agent cell, or Session.cost_usd",
}
"""Claude Code's own commands, and what does their work here (said with an unknown name)."""
OUTPUT_LIMIT = 300
"""Characters of a shell line's output quoted when it stops a command."""


@dataclass(frozen=True)
class Invocation:
    """A prompt that names a command: the command, its arguments, the line as typed."""

    command: Command
    args: str

    @property
    def typed(self) -> str:
        return f"/{self.command.name} {self.args}".strip()

    def tags(self) -> str:
        """The line naming the command in the parent's user message (Claude Code's tags)."""
        name = self.command.name
        lines = [
            f"<command-message>{name}</command-message>",
            f"<command-name>/{name}</command-name>",
        ]
        if self.args:
            lines.append(f"<command-args>{self.args}</command-args>")
        return "\n".join(lines)


def unknown_line(name: str, scan: CommandScan) -> str:
    """The one line for `/name` that names no command."""
    said = f"Unknown command /{name}"
    built_in = CLAUDE_CODE_BUILT_INS.get(name)
    if built_in is not None:
        said += f" (Claude Code's own /{name}; here: {built_in})"
    closest = scan.closest(name)
    if closest:
        return said + ". Closest: " + ", ".join(f"/{c}" for c in closest) + "."
    if not scan.commands:
        where = ".claude/commands/*.md, .claude/skills/NAME/SKILL.md"
        return said + f": there are no commands ({where})."
    return said + ". %commands lists the commands there are."


def find_invocation(prompt: str, workdir: Path, home: Path | None) -> Invocation | None:
    """The command `prompt` runs, None for an ordinary prompt; a UsageError (one line) for a
    command name that names none, or a file that cannot be used. Blocking: it reads the
    command files (call it on a thread)."""
    parsed = parse_invocation(prompt)
    if parsed is None:
        return None
    name, args = parsed
    scan = scan_commands(workdir, home)
    command = scan.commands.get(name)
    if command is None:
        broken = scan.broken(name)
        if broken is not None:
            raise UsageError(f"/{name} cannot be used: {broken.line}")
        if not looks_like_command(name):
            return None
        raise UsageError(unknown_line(name, scan))
    if not command.user_invocable:
        raise UsageError(
            f"/{name} is a skill for the model only (user-invocable: false in "
            f"{scan.shown(command.path)}); it cannot be typed as a command."
        )
    return Invocation(command, args)


def command_limit(command: Command, tool_names: list[str]) -> ToolLimit | None:
    """The limit a command's `allowed-tools` puts on its calls (None: it names none)."""
    if command.allowed_tools is None:
        return None
    return ToolLimit.of(command.allowed_tools, f"/{command.name}'s allowed-tools", tool_names)


def adjusted(config: AgentConfig, command: Command, limit: ToolLimit | None) -> AgentConfig:
    """The parent's config for an inline command's turn: its limit, model and effort."""
    if limit is not None:
        config = replace(config, gate=config.gate.limited(limit))
    model = resolve_model(command.model, config.model)
    if model is not None:
        config = replace(config, model=model)
    if command.effort is not None:
        config = replace(config, effort=command.effort)
    return config


async def shell_expanded(
    config: AgentConfig,
    invocation: Invocation,
    text: str,
    history: list[Message],
    events: list[LoopEvent],
) -> str:
    """`text` with each shell line's output in its place: each line a Bash call through the
    gate (`loop.call_tool`), its events added to `events`. A line that is refused or fails
    stops the command: a UsageError naming it."""
    lines = shell_lines(text)
    if not lines:
        return text
    name = invocation.command.name
    if invocation.command.shell != "bash":
        raise UsageError(
            f"/{name}: its shell lines are for {invocation.command.shell}; only bash runs "
            "here, so the command was not run."
        )
    if config.tools.get("Bash") is None:
        raise UsageError(f"/{name}: this session has no Bash tool to run its shell lines.")
    outputs = []
    for i, line in enumerate(lines):
        call_id = f"command-{name}-{i}"
        data = {"command": line.command}
        events.append(ToolUse(call_id, "Bash", data, config.tools.describe("Bash", data)))
        started = time.time()
        outcome = await call_tool(config, "Bash", data, history, call_id)
        events.append(
            ToolResult(
                call_id, "Bash", outcome.content, outcome.is_error, started=started,
                ended=time.time(),
            )
        )  # fmt: skip
        if outcome.is_error:
            said = " ".join(outcome.content.split())
            if len(said) > OUTPUT_LIMIT:
                said = said[: OUTPUT_LIMIT - 3] + "..."
            raise UsageError(
                f"/{name} was not run: its shell line {line.written!r} did not run or "
                f"failed: {said}"
            )
        outputs.append((line, outcome.content))
    return with_outputs(text, outputs)


@dataclass(frozen=True)
class Prepared:
    """A command ready to run: its text (arguments and shell outputs in, the limit told) and
    the limit its `allowed-tools` puts on its calls."""

    invocation: Invocation
    text: str
    limit: ToolLimit | None

    def texts(self) -> list[str]:
        """An inline command's user message: the line naming it, then its text."""
        return [self.invocation.tags(), self.text]

    def adjust(self, config: AgentConfig) -> AgentConfig:
        """The parent's config for an inline command's turn."""
        return adjusted(config, self.invocation.command, self.limit)


async def _wait(workers: Workers, run: AgentRun, task: Task) -> bool:
    """Wait for a command's agent while the caller waits (True: it ended; False: the person
    moved it to the background, its result coming as a notification). Interrupted, it is
    stopped and reports to no one."""
    task.foreground = True
    workers.registry.changed(task)
    ended = asyncio.ensure_future(task.ended())
    moved = asyncio.ensure_future(run.to_background.wait())
    try:
        await asyncio.wait({ended, moved}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        if not task.done:
            workers.registry.suppress(task)
            workers.kill(task.id, "the cell that ran its command was interrupted")
        raise
    finally:
        ended.cancel()
        moved.cancel()
        task.foreground = False
    if not task.done:
        workers.registry.changed(task)
        return False
    workers.registry.suppress(task)  # its result is the command's output, not a notification
    await task.wait()
    return True


class PromptCommands:
    """The parent's slash commands: which one a prompt invokes, a command made ready (the
    settings files read again first, `setup`), and a `context: fork` command run by the
    workers from the parent's run (`main`)."""

    def __init__(
        self,
        *,
        place: Place,
        setup: TurnSetup,
        contexts: AgentContexts,
        main: AgentRun,
        workers: Workers,
    ) -> None:
        self.place = place
        self.setup = setup
        self.contexts = contexts
        self.main = main
        self.workers = workers

    async def find(self, prompt: str) -> Invocation | None:
        """The command `prompt` invokes (None: an ordinary prompt), the files read on a
        thread; an unknown command is a UsageError."""
        place = self.place
        return await asyncio.to_thread(find_invocation, prompt, place.workdir, place.home)

    async def prepare(self, invocation: Invocation, events: list[LoopEvent]) -> Prepared:
        """The settings files read, the command's text expanded and its shell lines run (their
        calls' events added to `events`); a UsageError stops it."""
        await self.setup.load_settings()
        config = self.contexts.parent_config(self.main)
        command = invocation.command
        text = command.expand(invocation.args, self.place.session_id)
        text = await shell_expanded(config, invocation, text, self.main.history, events)
        limit = command_limit(command, config.tools.names())
        if limit is not None:
            text += "\n\n" + limit.told()
        return Prepared(invocation, text, limit)

    async def _start(self, prepared: Prepared, text: str) -> tuple[Task, str]:
        """Start the command's agent (the fork, or its named agent) on `text`; the task and a
        note for the person ("" when none)."""
        invocation, limit = prepared.invocation, prepared.limit
        command = invocation.command
        workers = self.workers
        if command.agent is not None:
            agents = (await workers.scan()).agents
            definition = agents.get(command.agent)
            if definition is not None:
                run = workers.named(
                    self.main, definition, text, description=invocation.typed, model=command.model
                )
                if limit is not None:
                    run.config = replace(run.config, gate=run.config.gate.limited(limit))
                if command.effort is not None:
                    run.config = replace(run.config, effort=command.effort)
                return workers.start(run), ""
            note = (
                f"/{command.name} asks for the agent {command.agent!r}, which is not defined here "
                "(.claude/agents); it runs in a fork of the conversation.\n\n"
            )
        else:
            note = ""
        task = workers.fork(
            self.main,
            text,
            description=invocation.typed,
            limit=limit,
            model=resolve_model(command.model, self.main.config.model),
            effort=command.effort,
        )
        return task, note

    async def run_fork(self, prepared: Prepared) -> AsyncIterator[LoopEvent]:
        """A `context: fork` command, run while the caller waits (see the module doc); the
        caller holds the parent's lock. Its events: a note (if any), the result text, a Stop.
        The UserPromptSubmit hooks see the line as typed, as for any prompt."""
        main = self.main
        invocation = prepared.invocation
        text = prepared.text
        hooks = self.contexts.hooks
        if hooks.has("UserPromptSubmit"):
            hooked = await hooks.run(
                "UserPromptSubmit", {"agent_id": "main", "prompt": invocation.typed}
            )
            if hooked.blocked:
                raise UsageError(f"A UserPromptSubmit hook blocked the prompt: {hooked.reason}")
            text = "\n\n".join([text, *hooked.context])
        task, note = await self._start(prepared, text)
        if note:
            yield TextDelta(note)
        run = self.workers.runs[task.id]
        ended = await _wait(self.workers, run, task)
        if not ended:
            said = (
                f"{invocation.typed} moved to the background (task {task.id}); its result comes "
                "back as a notification."
            )
            output = f"<local-command-stdout>\n{said}\n</local-command-stdout>"
            stop = Stop("end_turn")
        elif task.status == "completed":
            said = task.result or ""
            output = f"<local-command-stdout>\n{said}\n</local-command-stdout>"
            stop = Stop("end_turn")
        else:
            why = task.error or task.status
            said = f"{invocation.typed} {task.status}: {why}"
            if task.result:
                said += f"\n\nIts partial result:\n{task.result}"
            output = f"<local-command-stderr>\n{said}\n</local-command-stderr>"
            stop = Stop("error", f"{invocation.typed} {task.status}: {why}")
        blocks: list[Block] = [
            {"type": "text", "text": invocation.typed},
            {"type": "text", "text": output},
        ]
        main.state.append(main.history, {"role": "user", "content": blocks})
        yield TextDelta(said)
        yield stop
