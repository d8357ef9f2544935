"""The magics: thin - parse, call the runtime through `KernelAgent`, display.

`%%agent` cells, `%tasks --wait` / `--pull` and `%compact` lines, and unindented `%agent`,
`%send`, `%notifications` and `%commands` lines are rewritten by an input transformer into a
top-level `await`, so the cell stays busy while the kernel's event loop stays free (workers
progress, buttons work, and files are read on threads). The magic functions below are what
runs when no await is possible (`run_cell_magic` from code, an indented line): the work then
starts in the background and its handle is returned.

Every magic's line, on either path, is parsed once, by the parser its `@magic_arguments`
declare (`parse_line`); the prose of `%fork` and `%send` is kept as written.
"""

from __future__ import annotations

import asyncio
import functools
import re
from argparse import Action, ArgumentParser, Namespace
from collections.abc import Callable
from typing import TYPE_CHECKING, Concatenate, ParamSpec, Protocol, TypeVar

from IPython.core.error import UsageError
from IPython.core.magic import (
    Magics,
    line_cell_magic,
    line_magic,
    magics_class,
    no_var_expand,
)
from IPython.core.magic_arguments import argument, magic_arguments

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__all__ = [
    "AgentMagics",
    "MagicsHost",
    "agent_line",
    "agent_options",
    "commands_options",
    "compact_options",
    "hooks_options",
    "mcp_options",
    "notifications_options",
    "parse_line",
    "permissions_options",
    "send_options",
    "tasks_options",
    "transform_cell",
    "trust_options",
]

HELP_WORDS = ("-h", "--help", "?", "??")
"""A magic's whole line asking for its help (`%fork -h`, `%fork ?`): the help is shown, nothing
runs."""


class HelpShown(Exception):  # noqa: N818 (not an error: the help was shown)
    """Raised by `parse_line` after printing a magic's help; the magic then returns."""


_P = ParamSpec("_P")
_S = TypeVar("_S")
_R = TypeVar("_R")

Started = asyncio.Task[None] | None
"""What a magic returns: the handle of the work it started in the background, or None."""


def _shows_help(
    magic: Callable[Concatenate[_S, _P], _R],
) -> Callable[Concatenate[_S, _P], _R | None]:
    """A magic that returns quietly once `parse_line` has shown its help."""

    @functools.wraps(magic)
    def run(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R | None:
        try:
            return magic(self, *args, **kwargs)
        except HelpShown:
            return None

    return run


_CELL = re.compile(r"^%%agent\b(.*)$")
_AWAITED = re.compile(r"^(\s*)%tasks(\s+--(?:wait|pull|timeline|memory)\b.*)$")
_COMPACT = re.compile(r"^(\s*)%compact\b(?![?])(.*)$")
_TOP_LEVEL = re.compile(
    r"^()%(send|notifications|permissions|mcp|hooks|commands|trust|tasks)\b(?![?])(.*)$"
)
"""`%send`, `%notifications`, `%permissions`, `%mcp`, `%hooks`, `%commands`, `%trust` and `%tasks`
lines awaited when not indented (an indented line may be in a function, where an await is not
allowed: those run the magic, see `KernelAgent.send`)."""
_AGENT_LINE = re.compile(r"^%agent\b(?![?])(.*)$")
"""An unindented `%agent PROMPT` line: the prompt's turn, awaited like an `%%agent` cell."""
_PROSE = re.compile(r"^(\s*)%(fork|send)(\s.*)$")
"""A `%fork` or `%send` line not otherwise rewritten: its prose goes to the magic as written.
IPython would read a line ending in `?` (`%fork ... the mean price?`) as a help request for its
last word; a line that asks for the magic's own help (`%fork ?`, `%fork -h`) is left to it."""
_SEND_CELL = re.compile(r"^%%send\b(.*)$")
"""A `%%send TO` cell: the body is the message, awaited like a `%send` line."""


def _first_word(text: str) -> tuple[str, str]:
    """The first word of `text` and the rest after it, as written (leading spaces dropped)."""
    parts = text.split(None, 1)
    return (parts[0], parts[1] if len(parts) > 1 else "") if parts else ("", "")


LINE_LIMIT = 300
"""The longest a magic's refusal gets: a line pasted 20,000 characters long is not echoed."""


def parser_of(magic: Callable[..., object]) -> ArgumentParser:
    """The parser a magic's `@magic_arguments` declaration built (IPython keeps it on the
    function, as its `parser` attribute)."""
    parser = getattr(magic, "parser", None)
    if not isinstance(parser, ArgumentParser):
        raise TypeError(f"{magic!r} declares no @magic_arguments")
    return parser


def parse_line(
    magic: Callable[..., object], line: str, name: str, text: str | None = None
) -> Namespace:
    """`_parse_line`, each refusal cut to `LINE_LIMIT` characters."""
    try:
        return _parse_line(magic, line, name, text)
    except UsageError as exc:
        said = str(exc)
        if len(said) <= LINE_LIMIT:
            raise
        raise UsageError(said[: LINE_LIMIT - 3] + "...") from None


def _parse_line(
    magic: Callable[..., object], line: str, name: str, text: str | None = None
) -> Namespace:
    """`line` parsed by the parser the magic declares with `@magic_arguments`: the one parser of
    every magic (options, values, help all come from the declaration).

    `text` names the positional that takes the rest of the line as it was written (quotes,
    apostrophes and spacing kept: a directive or a message is prose, not shell words); the
    magic's options must then come first, and the positionals declared before `text` take one
    word each. Without `text`, the line is split into words. Any problem is one UsageError
    line starting with `name`."""
    parser = parser_of(magic)
    options = parser._option_string_actions  # the declared options (argparse keeps them here)
    if line.strip() in HELP_WORDS:
        shown = parser.format_help().replace("::\n\n", "", 1).strip()
        print(re.sub(r"^\S+", lambda _: name, shown, count=1))  # `%%agent`, not `%agent`
        raise HelpShown(name)

    def known(word: str) -> Action:
        option = word.partition("=")[0]
        action = options.get(option)
        if action is None:
            listed = ", ".join(sorted(o for o in options if o.startswith("--"))) or "none"
            raise UsageError(f"{name}: unknown option {option} (options: {listed})")
        return action

    words: list[str] = []
    rest = line.strip()
    if text is not None:
        while rest.startswith("--"):
            head, rest = _first_word(rest)
            option, eq, _ = head.partition("=")
            action = known(head)
            words.append(head)
            if eq and not head.partition("=")[2]:
                raise UsageError(f"{name}: option {option} needs a value")
            if action.nargs == 0 or eq:
                continue
            value, rest = _first_word(rest)
            if not value or value.startswith("--"):
                raise UsageError(f"{name}: option {option} needs a value")
            words.append(value)
        head, _ = _first_word(rest)
        option = head.partition("=")[0]
        if re.match(r"^-[A-Za-z][\w-]*$", option) and option not in options:  # `-name x`
            if f"-{option}" in options:
                raise UsageError(f"{name}: {option} has one dash: did you mean -{option}?")
            listed = ", ".join(sorted(o for o in options if o.startswith("--")))
            raise UsageError(f"{name}: unknown option {option} (options: {listed})")
        positionals = [a.dest for a in parser._actions if not a.option_strings]
        for _ in positionals[: positionals.index(text)]:
            word, rest = _first_word(rest)
            if word:
                words.append(word)
    else:
        words, rest = line.split(), ""
        for word in words:
            if word.startswith("--"):
                known(word)
                if word.endswith("="):
                    raise UsageError(f"{name}: option {word[:-1]} needs a value")
    try:
        args: Namespace = parser.parse_args(words)
    except UsageError as exc:
        raise UsageError(f"{name}: {exc}") from None
    if text is not None:
        setattr(args, text, rest)
    return args


def _asks_help(line: str) -> bool:
    """`%send -h`, `%compact ?`: a line magic asked for its help (left for the magic)."""
    words = line.split(None, 1)
    return (
        len(words) == 2
        and words[0].startswith("%")
        and not words[0].startswith("%%")
        and words[1].strip() in HELP_WORDS
    )


def transform_cell(lines: list[str]) -> list[str]:
    """Input transformer: `%%agent` cells and `%tasks --wait`, `%tasks --pull`, `%compact`,
    and unindented `%send` and `%notifications` lines become awaits."""
    if not lines:
        return lines
    first = _CELL.match(lines[0].rstrip("\n"))
    if first and first.group(1).strip() in HELP_WORDS:
        return lines  # `%%agent?`, `%%agent -h`: the magic's help
    if first:
        body = "".join(lines[1:])
        return [f"await __forkagent__.run_cell({first.group(1).strip()!r}, {body!r})\n"]
    send_cell = _SEND_CELL.match(lines[0].rstrip("\n"))
    if send_cell and send_cell.group(1).strip() not in HELP_WORDS:  # `%%send TO` + message
        line = send_cell.group(1).strip() + "\n" + "".join(lines[1:])
        return [f"await __forkagent__.send_line({line!r})\n"]
    out = []
    for line in lines:
        if _asks_help(line):
            out.append(line)  # the magic shows its help
            continue
        agent = _AGENT_LINE.match(line.rstrip("\n"))
        if agent:  # the prose is kept as written (`{name}` is interpolated by the turn)
            out.append(f"await __forkagent__.run_line({agent.group(1).strip()!r})\n")
            continue
        awaited = _AWAITED.match(line.rstrip("\n"))
        if awaited:
            indent, args = awaited.group(1), awaited.group(2).strip()
            line = f"{indent}await __forkagent__.run_tasks({args!r})\n"
        compact = _COMPACT.match(line.rstrip("\n"))
        if compact and not awaited:
            indent, args = compact.group(1), compact.group(2).strip()
            line = f"{indent}await __forkagent__.compact({args!r})\n"
        top = _TOP_LEVEL.match(line.rstrip("\n"))
        if top:  # %send interpolates `{name}` itself; the others as IPython expands a line
            rest = top.group(3)
            expanded = (
                repr(rest) if top.group(2) == "send" else f"get_ipython().var_expand({rest!r})"
            )
            line = f"await __forkagent__.{top.group(2)}_line({expanded})\n"
        prose = None if top else _PROSE.match(line.rstrip("\n"))
        if prose:
            indent, name, rest = prose.groups()
            line = f"{indent}get_ipython().run_line_magic({name!r}, {rest.strip()!r})\n"
        out.append(line)
    return out


class MagicsHost(Protocol):
    """What the magics call (`extension.KernelAgent`): each returns at once; awaitable work
    is started in the background (`start_*`) and its handle returned."""

    def start_cell(self, opts: Namespace, body: str) -> asyncio.Task[None]: ...
    def fork(self, directive: str, name: str | None, shared: bool, turns: int | None) -> None: ...
    def fork_batch(self, template: str, opts: dict[str, str | int | bool]) -> None: ...
    def send(self, to: str, message: str) -> Started: ...
    def stop(self, key: str | None) -> None: ...
    def background(self, key: str) -> None: ...
    def tasks_table(self, ids: list[str]) -> None: ...
    def start_wait(self, ids: list[str]) -> asyncio.Task[None]: ...
    def start_pull(self, args: list[str], trust: bool = False) -> asyncio.Task[None]: ...
    def start_memory(self, ids: list[str]) -> asyncio.Task[None]: ...
    def start_timeline(self, ids: list[str]) -> asyncio.Task[None]: ...
    def start_compact(self, args: str) -> asyncio.Task[None]: ...
    def start_replay(self, keys: list[str]) -> asyncio.Task[None]: ...
    def start_permissions(self) -> asyncio.Task[None]: ...
    def start_mcp(self, approve: str | None = None) -> asyncio.Task[None]: ...
    def start_hooks(self, approve: bool) -> asyncio.Task[None]: ...
    def start_commands(self) -> asyncio.Task[None]: ...
    def start_trust(self, record: bool) -> asyncio.Task[None]: ...


@magics_class
class AgentMagics(Magics):
    """%%agent and %agent, %fork, %send, %tasks, %stop, %compact, %notifications,
    %permissions, %mcp, %hooks, %commands."""

    def __init__(self, shell: InteractiveShell, agent: MagicsHost) -> None:
        super().__init__(shell)
        self.host = agent

    @magic_arguments()
    @argument("--new", action="store_true", help="start a new parent conversation")
    @argument("--model", help="switch the conversation to this model")
    @argument(
        "--think",
        type=int,
        metavar="N",
        help="extended thinking for this cell: a budget of N tokens (1024 or more; 0: off)",
    )
    @no_var_expand  # `{name}` is ours (interpolate)
    @line_cell_magic
    @_shows_help
    def agent(self, line: str, cell: str | None = None) -> Started:
        """Talk to the agent: the cell body (or, as `%agent PROMPT`, the rest of the line) is
        your turn in the parent conversation.

        The answer streams into the cell; usage and cost come at the end. `{name}` inserts
        the value of a notebook variable; `{{` and `}}` are literal braces. A prompt that
        starts with `/name` runs that command or skill (%commands lists them); in a cell it
        may follow the options on the `%%agent` line, the body then continuing its arguments.
        """
        if cell is None:
            opts, prompt = agent_line(line, "%agent")
            if not prompt.strip():
                raise UsageError("%agent: say what the agent should do, e.g. %agent /review")
            return self.host.start_cell(opts, prompt)
        opts, command = agent_line(line)
        return self.host.start_cell(opts, joined(command, cell))

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
        type=int,
        help="inherit only the last N turns of the conversation (default: all of it; the "
        "system prompt and tools always)",
    )
    @argument(
        "directive",
        nargs="?",
        help="what the worker should do: the rest of the line, or the cell's body (%%%%fork)",
    )
    @no_var_expand  # `{name}` is ours (interpolate); IPython's expansion is slow on long lines
    @line_cell_magic
    @_shows_help
    def fork(self, line: str, cell: str | None = None) -> Started:
        """Fork the parent conversation into a background worker; returns at once.

        The worker's Python runs in its own process, started from a snapshot of the kernel
        taken now: in parallel with you and the other workers, stopped at once by %stop, and
        unable to change your variables (bring values back with %tasks --pull ID NAME...).
        With --shared it runs in your namespace instead, one call at a time. As a cell,
        `%%fork [options]`, the directive is the cell's body, as written (several lines,
        code included).
        """
        args = parse_line(AgentMagics.fork, line, "%fork", text="directive")
        if cell is not None:
            args.directive = "\n".join(part for part in (args.directive, cell) if part.strip())
        if args.batch or args.over:
            given = {k: v for k, v in vars(args).items() if v not in (None, False)}
            self.host.fork_batch(args.directive, given)
            return None
        if args.poll is not None:
            raise UsageError("%fork: --poll goes with --batch --over NAME")
        if not args.directive:
            raise UsageError("%fork: say what the worker should do, e.g. %fork profile each column")
        if args.turns is not None and args.turns < 1:
            raise UsageError(f"%fork: --turns needs a number of turns >= 1, not {args.turns}")
        self.host.fork(args.directive, name=args.name, shared=args.shared, turns=args.turns)
        return None

    @magic_arguments()
    @argument("to", nargs="?", help="worker id or name; team:NAME or NAME:* for a whole team")
    @argument("message", nargs="?", help="the message: the rest of the line, or the cell's body")
    @no_var_expand
    @line_cell_magic
    @_shows_help
    def send(self, line: str, cell: str | None = None) -> Started:
        """Message a worker: queued if it is running, resumed if it has finished. As a cell,
        `%%send TO`, the message is the cell's body."""
        args = send_options(line if cell is None else f"{line.strip()}\n{cell}")
        return self.host.send(args.to, args.message)

    @magic_arguments()
    @argument("--wait", action="store_true", help="wait until the tasks finish")
    @argument(
        "--pull",
        action="store_true",
        help="%%tasks --pull ID NAME...: copy these variables of worker ID into your namespace",
    )
    @argument(
        "--trust",
        action="store_true",
        help="with --pull: also unpickle objects that are not data (runs the worker's code here)",
    )
    @argument(
        "--timeline",
        action="store_true",
        help="draw the fan-out of these tasks (default: the session's; after a restart, the "
        "last one run) from their transcripts: requests, cache, tools, approvals, waits",
    )
    @argument(
        "--memory",
        action="store_true",
        help="each live worker process: its memory shared with the kernel and its own, and "
        "what it holds for pulls",
    )
    @argument("ids", nargs="*", help="task ids or names (default: all)")
    @line_magic
    @_shows_help
    def tasks(self, line: str) -> Started:
        """A table of all tasks (after a kernel restart, with the last session's workers that
        it cut off, as interrupted: `%send NAME ...` resumes one); `%tasks --wait [IDS]`
        waits for them to finish;
        `%tasks --pull ID NAME...` copies a worker's values into your namespace;
        `%tasks --timeline [IDS]` draws their fan-out on a time axis; `%tasks --memory [IDS]`
        shows their worker processes' memory and what each holds for pulls."""
        args = tasks_options(line)
        if args.timeline:
            return self.host.start_timeline(args.ids)
        if args.memory:
            return self.host.start_memory(args.ids)
        if args.pull:
            return self.host.start_pull(args.ids, args.trust)
        if args.wait:
            return self.host.start_wait(args.ids)
        self.host.tasks_table(args.ids)
        return None

    @magic_arguments()
    @argument("--all", action="store_true", help="stop every running task")
    @argument("id", nargs="?", help="task id or name; team:NAME shuts a whole team down")
    @line_magic
    @_shows_help
    def stop(self, line: str) -> Started:
        """Stop a worker (its partial result is reported), or all of them with --all."""
        args = parse_line(AgentMagics.stop, line, "%stop")
        if args.all == bool(args.id):
            raise UsageError("%stop: give a task id or name, or --all")
        self.host.stop(None if args.all else args.id)
        return None

    @magic_arguments()
    @argument("id", help="task id or name")
    @line_magic
    @_shows_help
    def bg(self, line: str) -> Started:
        """Move a named agent that the parent waits for to the background: the parent's turn
        goes on, and the agent's result comes later as a notification."""
        args = parse_line(AgentMagics.bg, line, "%bg")
        self.host.background(args.id)
        return None

    @magic_arguments()
    @argument("--keep", type=int, help="turns to keep after the summary (default 2)")
    @line_magic
    @_shows_help
    def compact(self, line: str) -> Started:
        """Compact the parent conversation now: a fork of it summarises the conversation so
        far (reading it from the prompt cache), and the history becomes that summary plus the
        last turns. Shows the tokens before and after and what the summary cost. Runs by
        itself when a request would reach ForkAgent.compact_at of the context window."""
        compact_options(line)  # its help, or a bad option, before anything starts
        return self.host.start_compact(line)

    @magic_arguments()
    @argument("ids", nargs="+", help="task ids or names")
    @line_magic
    @_shows_help
    def notifications(self, line: str) -> Started:
        """Show the notifications of these tasks and the parent's answer again, from the
        transcripts on disk (no model call). Cells inserted by the JupyterLab extension run
        this when re-executed."""
        return self.host.start_replay(notifications_options(line).ids)

    @magic_arguments()
    @line_magic
    @_shows_help
    def permissions(self, line: str) -> Started:
        """List the permission rules in force (deny, ask, allow), the file or call each came
        from, the mode, the additional directories, and the rules refused with why. The
        settings files (~/.claude/settings.json, .claude/settings.json,
        .claude/settings.local.json and their .forkagent twins) are read again first."""
        permissions_options(line)
        return self.host.start_permissions()

    @magic_arguments()
    @argument("approve", nargs="?", choices=["approve"], help="approve a project server")
    @argument("name", nargs="?", help="the .mcp.json server to approve")
    @line_magic
    @_shows_help
    def mcp(self, line: str) -> Started:
        """List the MCP servers (.mcp.json, ~/.claude.json, agents' own): each one's state
        (connected, failed with why, or not approved), where it was configured and its tools
        (mcp__server__tool), the servers refused and the recent failures. Starts the
        configured servers if no turn has yet. `%mcp approve NAME` adds a project server to
        enabledMcpjsonServers in .claude/settings.local.json; it starts at the next turn."""
        return self.host.start_mcp(mcp_options(line).name)

    @magic_arguments()
    @argument("approve", nargs="?", choices=["approve"], help="approve the project's hooks")
    @line_magic
    @_shows_help
    def hooks(self, line: str) -> Started:
        """List the settings files' hooks in force and the project's hooks not approved (its
        committed .claude/settings.json and its agent files: someone else's), each with its
        event, matcher, command and file. `%hooks approve` adds the commands listed as not
        approved to enabledProjectHooks in .claude/settings.local.json; they run from the
        next turn."""
        return self.host.start_hooks(hooks_options(line).approve is not None)

    @magic_arguments()
    @argument("yes", nargs="?", choices=["yes"], help="trust this folder")
    @line_magic
    @_shows_help
    def trust(self, line: str) -> Started:
        """Whether this folder (the session's work directory) is trusted, and what its own
        files grant: the allow rules, mode, additional directories and hooks of its
        .claude/settings.json and .claude/settings.local.json (and .forkagent twins), its
        .mcp.json servers, its agent files' hooks and servers. Until you trust the folder they
        are not applied (their deny and ask rules are). `%trust yes` records your trust in
        ~/.claude.json, as Claude Code's trust dialog does; it applies from the next turn."""
        return self.host.start_trust(trust_options(line).yes is not None)

    @magic_arguments()
    @line_magic
    @_shows_help
    def commands(self, line: str) -> Started:
        """List the slash commands and skills a prompt can run as /name: each with its
        arguments, what it does, how it runs (inline, or in a fork of the conversation) and
        the file it comes from (.claude/commands, .claude/skills, yours or the project's);
        then the files that cannot be used, with why, and the names given twice."""
        commands_options(line)
        return self.host.start_commands()


def commands_options(line: str) -> Namespace:
    """The arguments of a `%commands` line (none)."""
    return parse_line(AgentMagics.commands, line, "%commands")


def hooks_options(line: str) -> Namespace:
    """The arguments of a `%hooks` line (none, or `approve`)."""
    return parse_line(AgentMagics.hooks, line, "%hooks")


def trust_options(line: str) -> Namespace:
    """The arguments of a `%trust` line (none, or `yes`)."""
    return parse_line(AgentMagics.trust, line, "%trust")


def mcp_options(line: str) -> Namespace:
    """The arguments of a `%mcp` line (none, or `approve NAME`)."""
    args = parse_line(AgentMagics.mcp, line, "%mcp")
    if (args.approve is None) != (args.name is None):
        raise UsageError("%mcp: approve takes one server name (%mcp approve NAME)")
    return args


def permissions_options(line: str) -> Namespace:
    """The arguments of a `%permissions` line (none)."""
    return parse_line(AgentMagics.permissions, line, "%permissions")


def agent_options(line: str) -> Namespace:
    """The options of an `%%agent` line (whether the cell is awaited or not: parsed once)."""
    return parse_line(AgentMagics.agent, line, "%%agent")


def agent_line(line: str, name: str = "%%agent") -> tuple[Namespace, str]:
    """The options of an `%%agent` or `%agent` line and the text after them, as written.
    `%agent`: the text is the prompt. `%%agent`: it may only be a `/command` (its arguments
    continue in the body); other words there are refused as before."""
    if line.strip() in HELP_WORDS:
        return parse_line(AgentMagics.agent, line, name), ""
    options = parser_of(AgentMagics.agent)._option_string_actions
    words: list[str] = []
    rest = line.strip()
    while rest.startswith("--"):
        head, rest = _first_word(rest)
        words.append(head)
        action = options.get(head.partition("=")[0])
        if action is not None and action.nargs != 0 and "=" not in head and rest:
            value, rest = _first_word(rest)
            words.append(value)
    opts = parse_line(AgentMagics.agent, " ".join(words), name)
    if name == "%%agent" and rest and not rest.startswith("/"):
        said = f"{name}: unrecognized arguments: {rest}"
        raise UsageError(said if len(said) <= LINE_LIMIT else said[: LINE_LIMIT - 3] + "...")
    return opts, rest


def joined(command: str, body: str) -> str:
    """An `%%agent` cell's prompt: the `/command` of its line (if any), then its body."""
    return "\n".join(part for part in (command, body) if part.strip())


def tasks_options(line: str) -> Namespace:
    """The arguments of a `%tasks` line (whether the line is awaited or not)."""
    args = parse_line(AgentMagics.tasks, line, "%tasks")
    if args.trust and not args.pull:
        raise UsageError("%tasks: --trust goes with --pull (%tasks --pull --trust ID NAME...)")
    if args.timeline and (args.wait or args.pull):
        raise UsageError("%tasks: --timeline goes alone (%tasks --timeline [IDS])")
    if args.memory and (args.pull or args.wait or args.timeline):
        raise UsageError("%tasks: --memory goes alone (%tasks --memory [IDS])")
    return args


def send_options(line: str) -> Namespace:
    """The arguments of a `%send` line (whether the line is awaited or not)."""
    args = parse_line(AgentMagics.send, line, "%send", text="message")
    if not args.to or not args.message:
        raise UsageError("%send: usage: %send <worker id or name> <message>")
    return args


def notifications_options(line: str) -> Namespace:
    """The arguments of a `%notifications` line (whether the line is awaited or not)."""
    return parse_line(AgentMagics.notifications, line, "%notifications")


def compact_options(line: str) -> Namespace:
    """The options of a `%compact` line (whether the line is awaited or not)."""
    return parse_line(AgentMagics.compact, line, "%compact")
