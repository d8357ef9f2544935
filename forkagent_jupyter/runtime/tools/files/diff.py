"""Unified diffs of a file change, exact to the byte.

Lines are split at `\n` only (a `\r` stays part of its line, so a CRLF file's diff shows its
line ends as they are), and a last line without a newline is marked the way `git diff` marks
it, so the diff applied with `git apply` (or `patch`) gives exactly the new content.
"""

from __future__ import annotations

import difflib

__all__ = ["unified_diff"]

NO_NEWLINE = "\\ No newline at end of file\n"


def _lines(text: str) -> list[str]:
    """`text` cut after each `\n` (the last piece kept if it has no newline)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def unified_diff(old: str | None, new: str, shown: str) -> str:
    """The change from `old` to `new` of the file shown as `shown` (`old` None: the file is
    created). Empty when nothing changes."""
    before = "/dev/null" if old is None else f"a/{shown}"
    out: list[str] = []
    for line in difflib.unified_diff(_lines(old or ""), _lines(new), before, f"b/{shown}"):
        out.append(line if line.endswith("\n") else f"{line}\n{NO_NEWLINE}")
    return "".join(out)
