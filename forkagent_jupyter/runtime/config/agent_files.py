"""Reading agent definition files: which files, their text, and their YAML front matter.

Read the way Claude Code reads them, so that a file that loads there loads here:

* Folders are searched with their subfolders (a collection installed as
  `.claude/agents/<collection>/<category>/*.md` is found); hidden files and folders (`.git`,
  `.claude-plugin`) are skipped, and so are `README.md` files, which collections ship beside
  their agents as documentation. A symlinked folder is followed once.
* The front matter is YAML. When it does not parse, it is parsed once more with each
  one-line `key: value` whose value YAML cannot take as it is (an unquoted `: ` inside a
  long description, a value starting with `*` such as `tools: *` or `**Bold**: ...`) read
  as a plain string: what Claude Code's loader does. Only a file that fails both ways is
  rejected, with the line YAML stopped at.

Every problem is a `FileProblemError` that says the line (1-based, counted in the whole file) and
the key where it knows them; `agent_definitions.py` turns it into the file's one warning.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from .files import FileRefusedError, read_bytes

__all__ = [
    "MAX_AGENT_FILE_BYTES",
    "FileProblemError",
    "FrontMatter",
    "agent_files",
    "parse_front_matter",
    "read_agent_text",
]

MAX_AGENT_FILE_BYTES = 1_000_000
"""A larger file is not read (it is no agent definition)."""
MAX_DEPTH = 8  # subfolder levels searched below an agents folder
MAX_NODES = 100_000  # values a front matter key may hold, YAML aliases expanded
DOC_NAMES = frozenset({"readme.md"})


class FileProblemError(Exception):
    """Why a file cannot be used: `problem`, at `line` (1-based) and `key` when known."""

    def __init__(self, problem: str, *, line: int | None = None, key: str | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.line = line
        self.key = key


@dataclass(frozen=True)
class FrontMatter:
    """A parsed file: its keys, the line of each key, and the Markdown body."""

    data: dict[str, object]
    lines: dict[str, int]
    body: str
    relaxed: bool = False  # it parsed only with the lenient second reading


def agent_files(folder: Path) -> Iterator[Path]:
    """The `.md` files under `folder`, shallower first, then by path; symlinked folders are
    followed, each real folder once."""
    seen: set[str] = set()
    level = [folder]
    for _depth in range(MAX_DEPTH + 1):
        files: list[Path] = []
        below: list[Path] = []
        for here in level:
            try:
                real = os.path.realpath(here)
                if real in seen:
                    continue
                seen.add(real)
                entries = sorted(os.scandir(here), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                path = Path(entry.path)
                try:
                    if entry.is_dir():
                        below.append(path)
                    elif entry.name.lower().endswith(".md") and entry.name.lower() not in DOC_NAMES:
                        files.append(path)
                except OSError:
                    continue
        yield from sorted(files)
        if not below:
            return
        level = sorted(below)


def read_agent_text(path: Path) -> str:
    """The file's text; a FileProblemError when it is no text file (binary, not UTF-8, too big,
    unreadable, or not a regular file: a FIFO is never opened, so it cannot hang a turn)."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise FileProblemError(f"cannot be read ({exc.strerror or exc})") from None
    if size > MAX_AGENT_FILE_BYTES and path.is_file():
        raise FileProblemError(f"is {size:,} bytes; an agent file is at most 1 MB")
    try:
        data = read_bytes(path, MAX_AGENT_FILE_BYTES)
    except FileRefusedError as exc:
        raise FileProblemError(str(exc)) from None
    if data is None:
        raise FileProblemError("cannot be read (it is gone)")
    if b"\0" in data[:8192]:
        raise FileProblemError("is a binary file, not a Markdown agent file", line=1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise FileProblemError("is not UTF-8 text", line=line) from None


def _split(text: str) -> tuple[list[str], str]:
    """(front matter lines, body)."""
    lines = text.removeprefix("\ufeff").split("\n")
    if lines[0].rstrip() != "---":
        raise FileProblemError(
            "has no front matter (an agent file starts with a '---' line, then "
            "'name:' and 'description:' lines, then '---')",
            line=1,
        )
    for i, line in enumerate(lines[1:], start=1):
        if line.rstrip() == "---":
            return [ln.rstrip("\r") for ln in lines[1:i]], "\n".join(lines[i + 1 :])
    raise FileProblemError("front matter has no closing '---' line", line=1)


_KEY_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)[ \t]*:(?:[ \t]+(.*?))?[ \t]*$")


def _key_lines(head: list[str]) -> dict[str, int]:
    """The file line (1-based) of each top-level key."""
    found: dict[str, int] = {}
    for i, line in enumerate(head):
        m = _KEY_LINE.match(line)
        if m is not None and m.group(1) not in found:
            found[m.group(1)] = i + 2  # +1: the '---' line, +1: 1-based
    return found


def _parses_alone(line: str) -> bool:
    try:
        yaml.safe_load(line)
    except (yaml.YAMLError, RecursionError):
        return False
    return True


_SPECIAL = re.compile(r"[{}\[\]*&#!|>%@`]|: ")
"""What makes Claude Code's loader quote a value on its second reading."""


def _relaxed(head: list[str]) -> list[str]:
    """The front matter with each one-line `key: value` that YAML rejects on its own and
    that holds a character YAML reads as syntax (`: `, a leading `*`, ...) turned into a
    quoted string (a value continued on indented lines is left alone)."""
    out: list[str] = []
    for i, line in enumerate(head):
        m = _KEY_LINE.match(line)
        value = m.group(2) if m is not None else None
        continued = i + 1 < len(head) and head[i + 1][:1] in (" ", "\t")
        if m is None or not value or continued or not _SPECIAL.search(value) or _parses_alone(line):
            out.append(line)
            continue
        quoted = value.replace("\\", "\\\\").replace('"', '\\"')
        out.append(f'{m.group(1)}: "{quoted}"')
    return out


class _TooDeepError(yaml.YAMLError):
    """Front matter nested deeper than the YAML reader can follow (it recurses)."""


def _load(head: list[str]) -> object:
    try:
        return yaml.safe_load("\n".join(head))
    except RecursionError:
        raise _TooDeepError() from None


def parse_front_matter(text: str) -> FrontMatter:
    """The front matter and body of an agent file's text (see the module doc)."""
    head, body = _split(text)
    lines = _key_lines(head)
    relaxed = False
    try:
        data = _load(head)
    except _TooDeepError:
        raise FileProblemError(
            "front matter is nested too deeply to read (lists or mappings inside one another "
            "hundreds of levels deep)",
            line=2,
        ) from None
    except yaml.YAMLError as exc:
        try:
            data = _load(_relaxed(head))
            relaxed = True
        except yaml.YAMLError:
            mark = getattr(exc, "problem_mark", None)
            problem = getattr(exc, "problem", None) or type(exc).__name__
            line = mark.line + 2 if mark is not None else None
            before = sorted((n, k) for k, n in lines.items() if line is not None and n <= line)
            key = before[-1][1] if before else None
            problem = f"front matter is not valid YAML ({problem})"
            raise FileProblemError(problem, line=line, key=key) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FileProblemError("front matter must be 'key: value' lines", line=2)
    for key, value in data.items():
        if _expanded_size(value, MAX_NODES) > MAX_NODES:
            raise FileProblemError(
                f"front matter is too large once its YAML aliases are expanded (more than "
                f"{MAX_NODES:,} values)",
                line=lines.get(str(key)),
                key=str(key),
            )
    return FrontMatter({str(k): v for k, v in data.items()}, lines, body, relaxed)


def _expanded_size(value: object, budget: int) -> int:
    """How many values `value` holds with every YAML alias expanded (a list or mapping
    reached twice counts twice), counting no further than just past `budget`: nine
    lines of `&a [*b, *b, ...]` expand to a billion values, which reading them (a
    message quoting the value) would never finish."""
    count = 0
    stack = [value]
    while stack and count <= budget:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set)):
            stack.extend(item)
    return count
