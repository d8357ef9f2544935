"""Paths for the file tools and the permission rules: resolving, containment, globs.

Everything here compares *real* paths (`os.path.realpath`: symlinks followed, `..` folded), so
a symlink inside the work directory that points outside it counts as outside.

Two glob dialects share one translator:
- `glob_match` (the Glob tool): the pattern must match the whole relative path; `*` and `?`
  stay within one path component, `**` spans any number of components (`**/x` also matches
  `x`), `[abc]` / `[!abc]` are character classes.
- `rule_match` (permission rules, gitignore-like): the same syntax, plus: a pattern without a
  `/` matches a name at any depth (`*.py` matches `a/b/c.py`); a pattern that matches a
  folder matches everything inside it (`src` and `src/**` both match `src/a/b.py`); a trailing
  `/` means "inside this folder" (`build/` matches `build/x`, not a file named `build`);
  `x/**` matches the folder `x` itself as well as everything in it.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from pathlib import Path

__all__ = [
    "MAX_BRACE_EXPANSION",
    "NOISE_DIRS",
    "expand_braces",
    "glob_match",
    "glob_regex",
    "is_inside",
    "literal_prefix",
    "real",
    "resolve_in",
    "rule_match",
    "shown_path",
]

# Folders the search tools skip unless the pattern names them: VCS data, caches, environments.
NOISE_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        "node_modules",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".ipynb_checkpoints",
    }
)


def real(path: str | os.PathLike[str]) -> Path:
    """The canonical absolute form of `path` (symlinks followed, `~` expanded)."""
    return Path(os.path.realpath(Path(path).expanduser()))


def resolve_in(workdir: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """`path` as the file tools see it: `~` expanded, relative paths taken from `workdir`,
    then made real (symlinks followed, `..` folded)."""
    p = Path(path).expanduser()
    if not p.is_absolute():
        p = Path(workdir) / p
    return Path(os.path.realpath(p))


def is_inside(workdir: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """Whether `path` (relative paths taken from `workdir`) really lies in `workdir` (or is it)."""
    root = str(real(workdir))
    target = str(resolve_in(root, path))
    return target == root or target.startswith(root.rstrip(os.sep) + os.sep)


def shown_path(workdir: str | os.PathLike[str], path: str | os.PathLike[str]) -> str:
    """How a real path is shown and matched: relative to the work dir (POSIX) when inside it,
    absolute otherwise."""
    root = real(workdir)
    target = resolve_in(root, path)
    if is_inside(root, target):
        rel = target.relative_to(root).as_posix()
        return rel if rel else "."
    return str(target)


def literal_prefix(pattern: str) -> tuple[str, str]:
    """Split a glob into its leading wildcard-free folders and the rest:
    `/data/raw/*.csv` -> (`/data/raw`, `*.csv`); `*.py` -> (``, `*.py`)."""
    parts = pattern.split("/")
    head: list[str] = []
    for part in parts[:-1]:
        if any(c in part for c in "*?["):
            break
        head.append(part)
    rest = parts[len(head) :]
    prefix = "/".join(head)
    if pattern.startswith("/") and not prefix:
        prefix = "/"
    return prefix, "/".join(rest)


def _class(pattern: str, i: int) -> tuple[str, int] | None:
    """Translate the character class starting at pattern[i] == '['; None if unterminated."""
    j = i + 1
    if j < len(pattern) and pattern[j] in "!^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 1
    if j >= len(pattern):
        return None
    body = pattern[i + 1 : j]
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    body = body.replace("\\", "\\\\")
    return ("[^/" if negate else "[") + body + "]", j + 1


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        at_start = i == 0 or pattern[i - 1] == "/"
        if pattern.startswith("**", i) and at_start and (i + 2 == n or pattern[i + 2] == "/"):
            if i + 2 == n:
                out.append(".*")
                i += 2
            else:
                out.append("(?:[^/]*/)*")  # zero or more whole components
                i += 3
            continue
        if c == "*":
            while i < n and pattern[i] == "*":
                i += 1
            out.append("[^/]*")
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "[":
            cls = _class(pattern, i)
            if cls is not None:
                out.append(cls[0])
                i = cls[1]
                continue
            out.append(re.escape(c))
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=512)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A compiled regex matching whole POSIX paths against `pattern` (Glob-tool dialect)."""
    return re.compile(_translate(pattern), re.DOTALL)


def glob_match(pattern: str, path: str) -> bool:
    """Whether the POSIX `path` matches `pattern` as a whole (Glob-tool dialect)."""
    return glob_regex(pattern).fullmatch(path) is not None


@functools.lru_cache(maxsize=512)
def _rule_regex(pattern: str) -> re.Pattern[str]:
    folder_only = pattern.endswith("/") and pattern != "/"
    body = pattern.rstrip("/") if folder_only else pattern
    if body.startswith("./"):
        body = body[2:]
    anywhere = "/" not in body
    if body.endswith("/**") and not folder_only:
        body = body[:-3]  # `x/**` covers the folder x itself too (so a search of x matches)
    regex = _translate(body)
    if anywhere:
        regex = "(?:.*/)?" + regex
    regex += "/.+" if folder_only else "(?:/.*)?"
    return re.compile(regex, re.DOTALL)


def rule_match(pattern: str, path: str) -> bool:
    """Whether `path` (POSIX, relative to the work dir or absolute) matches a permission-rule
    pattern (gitignore-like dialect, see the module doc). Absolute patterns match absolute
    paths only, relative patterns relative paths only."""
    if not pattern or not path:
        return False
    if pattern.startswith("/") != path.startswith("/"):
        return False
    if pattern == "/":
        return True
    return _rule_regex(pattern).fullmatch(path) is not None


MAX_BRACE_EXPANSION = 256
"""The most patterns one pattern's braces may expand to (a rule past it is refused)."""

_MAX_SEQUENCE = 10_000
_RANGE = re.compile(r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?|([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d+))?")


def expand_braces(pattern: str, limit: int | None = None) -> list[str]:
    """The patterns `pattern`'s braces stand for, as bash expands them: `*.{py,ipynb}` ->
    [`*.py`, `*.ipynb`], nested (`{a,b{1,2}}`), repeated, with ranges (`{1..3}`, `{a..c}`,
    `{01..10..3}`). A brace with neither a top-level comma nor a range (`{x}`, `{}`), and an
    escaped one (`\\{`), is literal. ValueError (one line) past `limit` patterns."""
    return _expand(pattern, limit)


def _expand(pattern: str, limit: int | None) -> list[str]:
    group = _brace_group(pattern)
    if group is None:
        return [pattern]
    start, end, choices = group
    tails = _expand(pattern[end + 1 :], limit)
    out: list[str] = []
    for choice in choices:
        for head in _expand(choice, limit):
            for tail in tails:
                out.append(pattern[:start] + head + tail)
                if limit is not None and len(out) > limit:
                    raise ValueError(f"its braces expand to more than {limit} patterns")
    return out


def _brace_group(pattern: str) -> tuple[int, int, list[str]] | None:
    """The first brace that expands: its `{` and `}` indices and its choices (None: none)."""
    i, n = 0, len(pattern)
    while i < n:
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "{":
            found = _choices(pattern, i)
            if found is not None:
                return i, found[0], found[1]
        i += 1
    return None


def _choices(pattern: str, open_: int) -> tuple[int, list[str]] | None:
    depth, cuts, j = 0, [open_], open_
    while j < len(pattern):
        c = pattern[j]
        if c == "\\":
            j += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                body = pattern[open_ + 1 : j]
                if len(cuts) > 1:
                    cuts.append(j)
                    return j, [pattern[a + 1 : b] for a, b in itertools.pairwise(cuts)]
                sequence = _sequence(body)
                return None if sequence is None else (j, sequence)
        elif c == "," and depth == 1:
            cuts.append(j)
        j += 1
    return None


def _sequence(body: str) -> list[str] | None:
    """`1..5`, `05..10..2`, `a..e`: the items, as bash writes them (None: not a range)."""
    m = _RANGE.fullmatch(body)
    if m is None:
        return None
    if m.group(4) is not None:
        first, last, step = ord(m.group(4)), ord(m.group(5)), abs(int(m.group(6) or 1)) or 1
        items = range(first, last + 1, step) if first <= last else range(first, last - 1, -step)
        return [chr(k) for k in items]
    first, last = int(m.group(1)), int(m.group(2))
    step = abs(int(m.group(3) or 1)) or 1
    width = max(len(m.group(1)), len(m.group(2)))
    padded = any(len(g.lstrip("-")) > 1 and g.lstrip("-").startswith("0") for g in m.group(1, 2))
    numbers = range(first, last + 1, step) if first <= last else range(first, last - 1, -step)
    if len(numbers) > _MAX_SEQUENCE:
        raise ValueError(f"{{{body}}} has more than {_MAX_SEQUENCE} items")
    return [str(k).zfill(width) if padded else str(k) for k in numbers]
