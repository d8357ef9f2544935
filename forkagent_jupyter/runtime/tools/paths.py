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
import os
import re
from pathlib import Path

__all__ = [
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


def expand_braces(pattern: str) -> list[str]:
    """`*.{py,ipynb}` -> [`*.py`, `*.ipynb`] (nested and repeated braces too)."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", pattern)
    if m is None:
        return [pattern]
    out: list[str] = []
    for choice in m.group(1).split(","):
        out.extend(expand_braces(pattern[: m.start()] + choice + pattern[m.end() :]))
    return out
