"""The magics: thin - parse, call the runtime through `KernelAgent`, display.

`%%agent` cells and `%tasks --wait` lines are rewritten by an input transformer into a
top-level `await`, so the cell stays busy while the kernel's event loop stays free (workers
progress, buttons work). The magic functions below are what runs when no await is possible
(`run_cell_magic` from code): the turn then starts in the background and its handle is
returned.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

if TYPE_CHECKING:
    from .extension import KernelAgent

__all__ = ["AgentMagics", "split_options", "transform_cell"]

_CELL = re.compile(r"^%%agent\b(.*)$")
_WAIT = re.compile(r"^(\s*)%tasks\s+--wait\b(.*)$")
_PULL = re.compile(r"^(\s*)%tasks\s+--pull\b(.*)$")
_COMPACT = re.compile(r"^(\s*)%compact\b(?![?])(.*)$")


def split_options(line: str, flags: dict[str, bool], magic: str) -> tuple[dict[str, Any], str]:
    """Leading `--option [value]` pairs, then the free text (kept verbatim, quotes and all).

    `flags` maps each option to whether it takes a value. An unknown option, or one missing
    its value, is a one-line UsageError."""
    opts: dict[str, Any] = {}
    rest = line.strip()
    while rest.startswith("--"):
        head, _, tail = rest.partition(" ")
        name, eq, inline = head.partition("=")
        if name not in flags:
            known = ", ".join(sorted(flags)) or "none"
            raise UsageError(f"%{magic}: unknown option {name} (options: {known})")
        if flags[name]:
            if eq:
                value, rest = inline, tail.strip()
            else:
                value, _, rest = tail.strip().partition(" ")
                rest = rest.strip()
            if not value:
                raise UsageError(f"%{magic}: option {name} needs a value")
            opts[name[2:].replace("-", "_")] = value
        else:
            opts[name[2:].replace("-", "_")] = True
            rest = tail.strip()
    return opts, rest


def transform_cell(lines: list[str]) -> list[str]:
    """Input transformer: `%%agent` cells and `%tasks --wait`, `%tasks --pull` and `%compact`
    lines become awaits."""
    if not lines:
        return lines
    first = _CELL.match(lines[0].rstrip("\n"))
    if first and first.group(1).strip() in ("?", "??"):
        return lines  # `%%agent?`: IPython shows the magic's help
    if first:
        body = "".join(lines[1:])
        return [f"await __forkagent__.run_cell({first.group(1).strip()!r}, {body!r})\n"]
    out = []
    for line in lines:
        wait = _WAIT.match(line.rstrip("\n"))
        pull = _PULL.match(line.rstrip("\n"))
        compact = _COMPACT.match(line.rstrip("\n"))
        if wait:
            line = f"{wait.group(1)}await __forkagent__.wait_tasks({wait.group(2).strip()!r})\n"
        elif pull:
            line = f"{pull.group(1)}await __forkagent__.pull({pull.group(2).strip()!r})\n"
        elif compact:
            line = f"{compact.group(1)}await __forkagent__.compact({compact.group(2).strip()!r})\n"
        out.append(line)
    return out


@magics_class
class AgentMagics(Magics):  # type: ignore[misc]
    """%%agent, %fork, %send, %tasks, %stop, %compact, %notifications."""

    def __init__(self, shell: Any, agent: KernelAgent) -> None:
        super().__init__(shell)
        self.host = agent

    @magic_arguments()
    @argument("--new", action="store_true", help="start a new parent conversation")
    @argument("--model", help="switch the conversation to this model")
    @cell_magic
    def agent(self, line: str, cell: str) -> Any:
        """Talk to the agent: the cell body is your turn in the parent conversation.

        The answer streams into the cell; usage and cost come at the end. `{name}` inserts
        the value of a notebook variable; `{{` and `}}` are literal braces.
        """
        parse_argstring(self.agent, line)  # validate: one-line UsageError
        return self.host.start_cell(line, cell)

    @magic_arguments()
    @argument("--name", help="a name to address the worker with (%%send, %%stop)")
    @argument(
        "--shared",
        action="store_true",
        help="run the worker's code in your namespace on a thread (default: its own process "
        "from a snapshot of the kernel)",
    )
    @argument(
        "--batch",
        action="store_true",
        help="one fork per element of --over NAME, their first requests sent as one Message "
        "Batch (half price; one card; %%stop BATCH_ID cancels it)",
    )
    @argument("--over", help="with --batch: the notebook variable to fan out over ({item})")
    @argument("--poll", help="with --batch: seconds between polls of the batch (default 30)")
    @argument(
        "--turns",
        help="inherit only the last N turns of the conversation (default: all of it; the "
        "system prompt and tools always)",
    )
    @argument("directive", nargs="*", help="what the worker should do")
    @line_magic
    def fork(self, line: str) -> Any:
        """Fork the parent conversation into a background worker; returns at once.

        The worker's Python runs in its own process, started from a snapshot of the kernel
        taken now: in parallel with you and the other workers, stopped at once by %stop, and
        unable to change your variables (bring values back with %tasks --pull ID NAME...).
        With --shared it runs in your namespace instead, one call at a time.
        """
        flags = {
            "--name": True,
            "--shared": False,
            "--batch": False,
            "--over": True,
            "--poll": True,
            "--turns": True,
        }
        opts, directive = split_options(line, flags, "fork")
        if opts.get("batch") or opts.get("over"):
            return self.host.fork_batch(directive, opts)
        if not directive:
            raise UsageError("%fork: say what the worker should do, e.g. %fork profile each column")
        turns = None
        if "turns" in opts:
            turns = int(opts["turns"]) if str(opts["turns"]).isdigit() else 0
            if turns < 1:
                given = opts["turns"]
                raise UsageError(f"%fork: --turns needs a number of turns >= 1, not {given!r}")
        return self.host.fork(
            directive, name=opts.get("name"), shared=bool(opts.get("shared")), turns=turns
        )

    @magic_arguments()
    @argument("to", help="worker id or name")
    @argument("message", nargs="*", help="the message")
    @line_magic
    def send(self, line: str) -> Any:
        """Message a worker: queued if it is running, resumed if it has finished."""
        to, _, message = line.strip().partition(" ")
        if not to or not message.strip():
            raise UsageError("%send: usage: %send <worker id or name> <message>")
        return self.host.send(to, message.strip())

    @magic_arguments()
    @argument("--wait", action="store_true", help="wait until the tasks finish")
    @argument(
        "--pull",
        action="store_true",
        help="%%tasks --pull ID NAME...: copy these variables of worker ID into your namespace",
    )
    @argument("ids", nargs="*", help="task ids or names (default: all)")
    @line_magic
    def tasks(self, line: str) -> Any:
        """A table of all tasks; `%tasks --wait [IDS]` waits for them to finish;
        `%tasks --pull ID NAME...` copies a worker's values into your namespace."""
        args = parse_argstring(self.tasks, line)
        if args.pull:
            return self.host.start_pull(" ".join(args.ids))
        if args.wait:
            return self.host.start_wait(args.ids)
        return self.host.tasks_table(args.ids)

    @magic_arguments()
    @argument("--all", action="store_true", help="stop every running task")
    @argument("id", nargs="?", help="task id or name")
    @line_magic
    def stop(self, line: str) -> Any:
        """Stop a worker (its partial result is reported), or all of them with --all."""
        args = parse_argstring(self.stop, line)
        if args.all == bool(args.id):
            raise UsageError("%stop: give a task id or name, or --all")
        return self.host.stop(None if args.all else args.id)

    @magic_arguments()
    @argument("id", help="task id or name")
    @line_magic
    def bg(self, line: str) -> Any:
        """Move a named agent that the parent waits for to the background: the parent's turn
        goes on, and the agent's result comes later as a notification."""
        args = parse_argstring(self.bg, line)
        return self.host.background(args.id)

    @magic_arguments()
    @argument("--keep", help="turns to keep after the summary (default 2)")
    @line_magic
    def compact(self, line: str) -> Any:
        """Compact the parent conversation now: a fork of it summarises the conversation so
        far (reading it from the prompt cache), and the history becomes that summary plus the
        last turns. Shows the tokens before and after and what the summary cost. Runs by
        itself when a request would reach ForkAgent.compact_at of the context window."""
        return self.host.start_compact(line)

    @magic_arguments()
    @argument("ids", nargs="+", help="task ids or names")
    @line_magic
    def notifications(self, line: str) -> Any:
        """Show the notifications of these tasks and the parent's answer again, from the
        transcripts on disk (no model call). Cells inserted by the JupyterLab extension run
        this when re-executed."""
        args = parse_argstring(self.notifications, line)
        return self.host.replay(args.ids)
