"""Slash commands and skills: which files, what each says, and which one `/name` means.

Read the way Claude Code reads them, so that a command that runs there runs here:

* Commands are Markdown files under `.claude/commands/` (project) and `~/.claude/commands/`
  (user), subfolders included: `.claude/commands/frontend/component.md` is
  `/frontend:component`. A folder of the commands tree holding a `SKILL.md` is one command
  named by that file's `name` (else the folder). Front matter is optional: a file without it
  is all prompt. `README.md` files are documentation, not commands.
* Skills are `.claude/skills/<name>/SKILL.md` (project and user); each can be typed as
  `/<name>` (the folder's name), unless its front matter says `user-invocable: false`. A
  skill's text starts with a line naming its folder, where its other files are.
* `.forkagent/commands` and `.forkagent/skills` beside each `.claude` folder are read too (a
  `.forkagent` file wins over a `.claude` one of the same name in the same place).
* When two files give the same name, the first of this order is used and a note names both:
  skills before commands; the user's own (home folder) before the project's. So a project's
  committed file never replaces a command the person wrote for themselves.

Front matter keys (Claude Code's): `description` (else the first line of the text),
`argument-hint` (shown by `%commands`), `allowed-tools` (a list, or names separated by commas
or spaces, `Bash(git diff:*)` kept whole), `model` (`inherit`, an alias or an id; anything
else makes the file unusable, with the line saying why), `effort`, `context: fork` (the
command runs in a fork of the conversation), `agent` (with `context: fork`: the named agent
that runs it instead), `arguments` (names for the arguments), `user-invocable`,
`disable-model-invocation` (read; no model here invokes skills by itself), `shell` (`bash`).
`hooks` in a command's front matter are not run here (one note); keys Claude Code ignores
(`name` of a skill, `version`, `when_to_use`, `license`...) are ignored too.

What `allowed-tools` means here is the session's business (`session/turns/commands.py`): it narrows
what the command may use and never grants anything.

A bad file is one `CommandProblem` line naming the file, line and field; it never stops the
others. `scan_commands` never raises.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..model.names import model_problem
from .agent_files import FileProblemError, agent_files, parse_front_matter, read_agent_text
from .command_text import substitute

__all__ = [
    "Command",
    "CommandProblem",
    "CommandScan",
    "describe",
    "parse_invocation",
    "parse_tool_list",
    "scan_commands",
]

Scope = Literal["user", "project"]
Kind = Literal["command", "skill"]

EFFORTS = ("low", "medium", "high", "xhigh", "max")
_TYPED_NAME = re.compile(r"^[^\s/]+$")
_INVOCATION = re.compile(r"/(\S+)(?:\s(.*))?", re.DOTALL)
_COMMAND_LIKE = re.compile(r"^[A-Za-z0-9:_-]+$")


@dataclass(frozen=True)
class Command:
    """One command or skill, as its file says."""

    name: str
    kind: Kind
    scope: Scope
    path: Path
    text: str
    """The Markdown after the front matter: the prompt."""
    description: str
    argument_hint: str | None = None
    allowed_tools: tuple[str, ...] | None = None
    """The `allowed-tools` entries (None: not given)."""
    model: str | None = None
    """As written (`inherit` is None: the conversation's model)."""
    effort: str | None = None
    fork: bool = False
    agent: str | None = None
    argument_names: tuple[str, ...] = ()
    user_invocable: bool = True
    shell: str = "bash"

    @property
    def folder(self) -> Path | None:
        """A skill's folder (its other files are there); None for a plain command."""
        return self.path.parent if self.path.name.lower() == "skill.md" else None

    def expand(self, args: str, session_id: str) -> str:
        """The command's text for `args` (see `command_text.py`), shell lines still in it."""
        text = self.text
        if self.folder is not None:
            text = f"Base directory for this skill: {self.folder}\n\n{text}"
        text = substitute(text, args, self.argument_names)
        if self.folder is not None:
            text = text.replace("${CLAUDE_SKILL_DIR}", str(self.folder))
        return text.replace("${CLAUDE_SESSION_ID}", session_id)


@dataclass(frozen=True)
class CommandProblem:
    """A file that gives no command: where, and why (one line)."""

    path: Path
    name: str
    line: str


@dataclass(frozen=True)
class CommandScan:
    """What `scan_commands` found: the commands by name (in precedence order), the files that
    give none, and the notes (names given twice, keys not honoured)."""

    commands: dict[str, Command]
    problems: tuple[CommandProblem, ...] = ()
    notes: tuple[str, ...] = ()
    workdir: Path = field(default_factory=Path)
    home: Path | None = None

    def broken(self, name: str) -> CommandProblem | None:
        return next((p for p in self.problems if p.name == name), None)

    def closest(self, name: str, n: int = 3) -> list[str]:
        """The names most like `name`, best first (those typed by the person only)."""
        names = [c.name for c in self.commands.values() if c.user_invocable]
        return difflib.get_close_matches(name, names, n=n, cutoff=0.5)

    def shown(self, path: Path) -> str:
        """`path` as %commands shows it (relative to the project, or `~/`)."""
        return shown_path(path, self.workdir, self.home)


def shown_path(path: Path, workdir: Path, home: Path | None) -> str:
    roots = [(workdir, "")] + ([(home, "~/")] if home is not None else [])
    for root, label in sorted(roots, key=lambda r: len(str(r[0])), reverse=True):
        try:
            return label + path.relative_to(root).as_posix()
        except ValueError:
            continue
    return str(path)


def parse_invocation(prompt: str) -> tuple[str, str] | None:
    """(name, arguments) of a prompt that starts with `/word`; None for any other prompt.
    The arguments are everything after the first white space, as typed."""
    m = _INVOCATION.fullmatch(prompt.strip())
    if m is None:
        return None
    return m.group(1), m.group(2) or ""


def looks_like_command(name: str) -> bool:
    """Whether `/name` is meant as a command (Claude Code's rule: only letters, digits, `:`,
    `_` and `-`, and no file or folder `/name` exists; `/usr/bin/x` or `/tmp` is a prompt).
    Blocking: it looks at the file system."""
    return bool(_COMMAND_LIKE.match(name)) and not os.path.lexists("/" + name)


def parse_tool_list(value: object) -> tuple[str, ...]:
    """`allowed-tools` as Claude Code splits it: a list, or one string of names separated by
    commas or spaces, where a `(...)` spec is kept whole (`Bash(git diff:*)`)."""
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            continue
        current, depth = "", 0
        for ch in item:
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth = max(depth - 1, 0)
            if ch in ", " and depth == 0:
                if current.strip():
                    out.append(current.strip())
                current = ""
                continue
            current += ch
        if current.strip():
            out.append(current.strip())
    return tuple(out)


def _flag(value: object) -> bool:
    return value is True or value == "true"


def _first_line(text: str, fallback: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line:
            line = re.sub(r"^#+\s+", "", line)
            return line if len(line) <= 100 else line[:97] + "..."
    return fallback


def _hint(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):  # `argument-hint: [message]` is a YAML list
        return " ".join(f"[{v}]" for v in value)
    return str(value)


class _BadFileError(Exception):
    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


def _where(path: str, lines: dict[str, int], key: str | None) -> str:
    at = f"{path}:{lines[key]}" if key is not None and key in lines else path
    return at + (f": field '{key}'" if key else "")


def _read(
    path: Path,
    name: str,
    kind: Kind,
    scope: Scope,
    notes: list[str],
    named_by_file: bool,
    shown: str,
) -> Command:
    """One file's command; `_BadFileError` (its one line, the file as `shown`) when it gives
    none."""
    try:
        text = read_agent_text(path)
        if text.removeprefix("\ufeff").split("\n", 1)[0].rstrip() == "---":
            parsed = parse_front_matter(text)
            data, lines, body = parsed.data, parsed.lines, parsed.body
        else:
            data, lines, body = {}, {}, text.removeprefix("\ufeff")
    except FileProblemError as exc:
        at = f"{shown}:{exc.line}" if exc.line is not None else shown
        raise _BadFileError(f"{at}: {exc.problem}") from None
    given = data.get("name")
    if named_by_file and isinstance(given, str) and given.strip():
        name = name.rpartition(":")[0] + (":" if ":" in name else "") + given.strip()
    if not _TYPED_NAME.match(name):
        raise _BadFileError(
            f"{shown}: the command name {name!r} cannot be typed (no spaces or '/')"
        )
    model = data.get("model")
    if model is not None:
        problem = model_problem(str(model))
        if problem is not None:
            raise _BadFileError(f"{_where(shown, lines, 'model')}: {problem}")
        model = None if str(model).strip().lower() == "inherit" else str(model).strip()
    effort = data.get("effort")
    if effort is not None and str(effort) not in EFFORTS:
        notes.append(
            f"{_where(shown, lines, 'effort')}: {effort!r} is no effort level "
            f"({', '.join(EFFORTS)}); the command runs without it"
        )
        effort = None
    shell = str(data.get("shell") or "bash")
    if "hooks" in data:
        notes.append(
            f"{_where(shown, lines, 'hooks')}: hooks in a command's front matter are not run "
            "here; the command runs without them"
        )
    names = data.get("arguments")
    if isinstance(names, str):
        names = names.split()
    allowed = data.get("allowed-tools")
    tools = parse_tool_list(allowed) if allowed else ()
    description = data.get("description")
    return Command(
        name=name,
        kind=kind,
        scope=scope,
        path=path,
        text=body,
        description=str(description).strip()
        if description not in (None, "")
        else _first_line(body, "Skill" if kind == "skill" else "Custom command"),
        argument_hint=_hint(data.get("argument-hint")),
        allowed_tools=tools or None,
        model=model,
        effort=str(effort) if effort is not None else None,
        fork=data.get("context") == "fork",
        agent=str(data["agent"]) if data.get("agent") and data.get("context") == "fork" else None,
        argument_names=tuple(
            str(n) for n in (names if isinstance(names, list) else []) if not str(n).isdigit()
        ),
        user_invocable=data.get("user-invocable") is None or _flag(data.get("user-invocable")),
        shell=shell,
    )


def _skill_files(folder: Path) -> Iterable[tuple[str, Path]]:
    """(name, SKILL.md) of each `<folder>/<name>/SKILL.md`, by name."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        path = Path(entry.path) / "SKILL.md"
        try:
            if entry.is_dir() and path.is_file():
                yield entry.name, path
        except OSError:
            continue


def _command_files(folder: Path) -> Iterable[tuple[str, Path, bool]]:
    """(name, path, named by its front matter's `name`) of each command file under
    `folder`: `dir:sub:file`; a folder with a SKILL.md gives that file alone."""
    files = list(agent_files(folder))
    skill_dirs = {p.parent for p in files if p.name.lower() == "skill.md"}
    for path in files:
        if path.parent in skill_dirs and path.name.lower() != "skill.md":
            continue
        if path.name.lower() == "skill.md":
            parts = path.parent.relative_to(folder).parts
            if not parts:  # a SKILL.md directly in commands/: named by its front matter
                parts = ("SKILL",)
            yield ":".join(parts), path, True
        else:
            parts = path.relative_to(folder).with_suffix("").parts
            yield ":".join(parts), path, False


def _places(workdir: Path, home: Path | None) -> list[tuple[Path, Kind, Scope]]:
    """Where to look, first (strongest) first: skills, then commands; in each, the user's
    then the project's; in each of those, `.forkagent` then `.claude`."""
    scopes: list[tuple[Path, Scope]] = []
    if home is not None and Path(home).resolve() != Path(workdir).resolve():
        scopes.append((Path(home), "user"))
    scopes.append((Path(workdir), "project"))
    kinds: list[tuple[str, Kind]] = [("skills", "skill"), ("commands", "command")]
    return [
        (base / folder / sub, kind, scope)
        for sub, kind in kinds
        for base, scope in scopes
        for folder in (".forkagent", ".claude")
    ]


def scan_commands(workdir: Path, home: Path | None = None) -> CommandScan:
    """Every command and skill that can be typed (see the module doc); never raises.
    Blocking: call it on a thread."""
    commands: dict[str, Command] = {}
    problems: list[CommandProblem] = []
    notes: list[str] = []
    seen: set[str] = set()
    for folder, kind, scope in _places(workdir, home):
        if not folder.is_dir():
            continue
        found: Iterable[tuple[str, Path, bool]]
        if kind == "skill":
            found = ((name, path, False) for name, path in _skill_files(folder))
        else:
            found = _command_files(folder)
        for name, path, named_by_file in found:
            real = os.path.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            try:
                shown = shown_path(path, workdir, home)
                command = _read(path, name, kind, scope, notes, named_by_file, shown)
            except _BadFileError as bad:
                problems.append(CommandProblem(path, name, bad.line))
                continue
            earlier = commands.get(command.name)
            if earlier is not None:
                notes.append(
                    f"/{command.name}: {shown} is not used; "
                    f"{shown_path(earlier.path, workdir, home)} gives the same name and comes "
                    "first (skills before commands, your own before the project's)"
                )
                continue
            commands[command.name] = command
    return CommandScan(commands, tuple(problems), tuple(notes), Path(workdir), home)


def describe(scan: CommandScan) -> str:
    """What `%commands` shows: each command with where it came from, then the files that
    give none and the notes."""
    listed = sorted(scan.commands.values(), key=lambda c: c.name)
    if not listed and not scan.problems:
        return (
            "No commands: put Markdown files in .claude/commands/ (or ~/.claude/commands/), "
            "or skills in .claude/skills/<name>/SKILL.md; type /name in an %%agent cell."
        )
    lines = [f"Commands ({len(listed)}): type /name [arguments] in %%agent or %agent"]
    rows = []
    for c in listed:
        call = f"/{c.name}" + (f" {c.argument_hint}" if c.argument_hint else "")
        how = "fork" if c.fork else "inline"
        if c.agent:
            how = f"fork, agent {c.agent}"
        if not c.user_invocable:
            how = "model only (user-invocable: false)"
        where = f"{c.scope} {c.kind}, {scan.shown(c.path)}"
        rows.append((call, f"{_first_line(c.description, '')}  [{how}; {where}]"))
    width = min(max((len(r[0]) for r in rows), default=0), 40)
    lines += [f"  {call:<{width}}  {what}" for call, what in rows]
    if scan.problems:
        lines.append(f"not usable ({len(scan.problems)}):")
        lines += [f"  {p.line}" for p in scan.problems]
    if scan.notes:
        lines.append("notes:")
        lines += [f"  {n}" for n in scan.notes]
    return "\n".join(lines)
