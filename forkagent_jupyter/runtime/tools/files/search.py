"""Search tools: Glob (files by name) and Grep (files by content), in pure Python.

Both walk folders themselves: they skip VCS folders, caches and virtual environments unless
the pattern names them, do not enter symlinked folders, and hide files that
`ctx.services.read_guard` refuses (a `Callable[[Path], bool]` taking a real path; the
permission gate installs one for deny rules on reading tools). Grep never opens a file whose
real path leaves both the work directory and the searched folder (a symlink pointing out);
Glob lists such a symlink by name (Read of it is then up to the permission gate). Results are
sorted and capped.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ...output import cap_output
from ..base import Tool, ToolContext, ToolError
from ..services import ReadGuard
from .paths import NOISE_DIRS, expand_braces, glob_match, is_inside, literal_prefix, resolve_in

__all__ = ["GlobTool", "GrepTool", "ReadGuard", "display_path", "tidy"]

MAX_ENTRIES = 250  # Glob files / Grep entries (files, counts or lines)
MAX_GREP_BYTES = 20_000_000  # larger files are not searched
GREP_LINE_CHARS = 500
SNIFF = 8192


def tidy(path: str) -> str:
    """A path as written, with `./`, `//` and `a/../` folded (lexically, no file access)."""
    return os.path.normpath(path).replace(os.sep, "/") if path else path


def display_path(ctx: ToolContext, path: Path) -> str:
    """A real path as tools print it: relative to the work directory when inside, else
    absolute."""
    root = resolve_in(ctx.workdir, ".")
    try:
        rel = path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
    return rel or "."


def _is_binary(head: bytes) -> bool:
    return b"\0" in head


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- Glob and Grep -------------------------------------------------------------------------


def _search_base(ctx: ToolContext, path: str | None, pattern: str) -> tuple[Path, str]:
    """The real folder a search starts from and the pattern relative to it. A pattern's
    leading literal folders (`../data/*.csv`, `/abs/**/*.py`) move into the base, so the
    permission gate sees where the search really happens."""
    if pattern.startswith("~"):
        pattern = str(Path(pattern).expanduser())
    prefix, rest = literal_prefix(pattern)
    start = prefix if pattern.startswith("/") else f"{path or '.'}/{prefix or '.'}"
    return resolve_in(ctx.workdir, start), rest


def _walk(base: Path, named: str, max_depth: int | None) -> Iterator[tuple[Path, str]]:
    """(path, POSIX path relative to base) of files under base, in sorted order; noise
    folders are skipped unless `named` mentions them; symlinked folders are not entered."""
    root_depth = len(base.parts)
    for dirpath, dirnames, filenames in os.walk(base):
        here = Path(dirpath)
        depth = len(here.parts) - root_depth
        if max_depth is not None and depth + 1 >= max_depth:
            dirnames[:] = []
        else:
            dirnames[:] = sorted(d for d in dirnames if d not in NOISE_DIRS or d in named)
        for name in sorted(filenames):
            full = here / name
            yield full, full.relative_to(base).as_posix()


def _readable(ctx: ToolContext, base: Path, path: Path, *, opening: bool = True) -> bool:
    """Whether a search may show `path`: the read guard (deny rules) does not refuse its real
    path, and - when the search opens the file - that real path stays in the work directory
    or the searched folder."""
    target = resolve_in(ctx.workdir, path)
    if opening and not (is_inside(ctx.workdir, target) or is_inside(base, target)):
        return False
    guard = ctx.services.read_guard
    return guard is None or guard(target)


class GlobInput(_Input):
    pattern: str = Field(
        min_length=1,
        description="Glob pattern matched against paths below `path`, e.g. '**/*.py', "
        "'data/*.csv', 'src/**/test_*.{py,ipynb}'. `*` stays within a folder, `**` crosses "
        "folders.",
    )
    path: str | None = Field(
        default=None, description="Folder to search in (default: the work directory)."
    )


class GlobTool(Tool[GlobInput]):
    name = "Glob"
    description = (
        "Find files by name pattern. Returns matching file paths (relative to the work "
        f"directory), sorted, at most {MAX_ENTRIES}. `*.py` looks only in the folder itself; "
        "use `**/*.py` to include subfolders. Skips .git, caches and virtual environments "
        "unless the pattern names them."
    )
    input_model = GlobInput
    concurrency_safe = True
    needs_approval = False
    allowed_in_plan = True

    def permission_subject(self, args: GlobInput) -> str:
        return tidy(f"{args.path or '.'}/{args.pattern}")

    def paths(self, args: GlobInput, ctx: ToolContext) -> list[Path]:
        return [_search_base(ctx, args.path, args.pattern)[0]]

    async def run(self, args: GlobInput, ctx: ToolContext) -> str:
        base, pattern = _search_base(ctx, args.path, args.pattern)
        return await asyncio.to_thread(self._glob, ctx, base, pattern or "*", args.pattern)

    def _glob(self, ctx: ToolContext, base: Path, pattern: str, asked: str) -> str:
        if not base.is_dir():
            raise ToolError(f"Folder not found: {display_path(ctx, base)}")
        patterns = expand_braces(pattern)
        deep = any("**" in p for p in patterns)
        depth = None if deep else max(p.count("/") + 1 for p in patterns)
        found: list[str] = []
        for full, rel in _walk(base, pattern, depth):
            if not any(glob_match(p, rel) for p in patterns):
                continue
            if not full.is_file() or not _readable(ctx, base, full, opening=False):
                continue
            found.append(display_path(ctx, full))
        if not found:
            return f"No files match {asked!r} in {display_path(ctx, base)}."
        found.sort()
        more = len(found) - MAX_ENTRIES
        tail = f"\n... and {more} more (narrow the pattern)" if more > 0 else ""
        return "\n".join(found[:MAX_ENTRIES]) + tail


class GrepInput(_Input):
    pattern: str = Field(
        min_length=1, description="Regular expression to search for (Python `re` syntax)."
    )
    path: str | None = Field(
        default=None, description="File or folder to search (default: the work directory)."
    )
    glob: str | None = Field(
        default=None,
        description="Only search files whose name matches, e.g. '*.py' or '*.{csv,tsv}'; a "
        "pattern with '/' is matched against the path below `path`.",
    )
    case_insensitive: bool = Field(default=False, description="Ignore upper/lower case.")
    output_mode: Literal["content", "files_with_matches", "count"] = Field(
        default="files_with_matches",
        description="'files_with_matches': the files that match (default); 'content': the "
        "matching lines as path:line:text; 'count': path:number of matching lines.",
    )
    context: int = Field(
        default=0, ge=0, le=20, description="Lines of context around each match (content mode)."
    )


class GrepTool(Tool[GrepInput]):
    name = "Grep"
    description = (
        "Search file contents with a regular expression (Python syntax). By default lists the "
        "files that match; output_mode='content' shows matching lines with line numbers, "
        "'count' the number per file. Filter files with `glob`. Binary files, .git, caches "
        f"and virtual environments are skipped. At most {MAX_ENTRIES} entries are returned."
    )
    input_model = GrepInput
    concurrency_safe = True
    needs_approval = False
    allowed_in_plan = True

    def permission_subject(self, args: GrepInput) -> str:
        return tidy(args.path or ".")

    def describe(self, args: GrepInput) -> str:
        only = f" ({args.glob})" if args.glob else ""
        return f"Grep: {args.pattern!r} in {tidy(args.path or '.')}{only}"

    def paths(self, args: GrepInput, ctx: ToolContext) -> list[Path]:
        return [resolve_in(ctx.workdir, args.path or ".")]

    async def run(self, args: GrepInput, ctx: ToolContext) -> str:
        try:
            regex = re.compile(args.pattern, re.IGNORECASE if args.case_insensitive else 0)
        except re.error as exc:
            raise ToolError(f"Invalid regular expression {args.pattern!r}: {exc}") from None
        base = resolve_in(ctx.workdir, args.path or ".")
        return await asyncio.to_thread(self._grep, ctx, regex, base, args)

    def _files(self, ctx: ToolContext, base: Path, args: GrepInput) -> Iterator[Path]:
        if base.is_file():
            yield base
            return
        filters = expand_braces(args.glob) if args.glob else []
        for full, rel in _walk(base, (args.path or "") + (args.glob or ""), None):
            if filters and not any(glob_match(f, rel if "/" in f else full.name) for f in filters):
                continue
            if full.is_file() and _readable(ctx, base, full):
                yield full

    def _grep(self, ctx: ToolContext, regex: re.Pattern[str], base: Path, args: GrepInput) -> str:
        if not base.exists():
            raise ToolError(f"Not found: {display_path(ctx, base)}")
        if base.is_file() and not _readable(ctx, base, base):
            raise ToolError(f"{display_path(ctx, base)} may not be read.")
        out: list[str] = []
        for f in self._files(ctx, base, args):
            out.extend(_search_file(f, display_path(ctx, f), regex, args)[: MAX_ENTRIES - len(out)])
            if len(out) >= MAX_ENTRIES:
                out.append(f"... [stopped after {MAX_ENTRIES} entries; narrow the search]")
                break
        if not out:
            return f"No matches for {args.pattern!r} in {display_path(ctx, base)}."
        return cap_output("\n".join(out))


def _search_file(f: Path, shown: str, regex: re.Pattern[str], args: GrepInput) -> list[str]:
    """The output entries of one file (none if it does not match or cannot be searched)."""
    try:
        if f.stat().st_size > MAX_GREP_BYTES:
            return []
        data = f.read_bytes()
    except OSError:
        return []
    if _is_binary(data[:SNIFF]):
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    if args.output_mode == "files_with_matches":
        return [shown] if any(regex.search(line) for line in lines) else []
    hits = [i for i, line in enumerate(lines) if regex.search(line)]
    if not hits:
        return []
    if args.output_mode == "count":
        return [f"{shown}:{len(hits)}"]
    return _with_context(shown, lines, hits, args.context)


def _with_context(shown: str, lines: list[str], hits: list[int], context: int) -> list[str]:
    """grep-style lines: `path:n:text` for matches, `path-n-text` for context, `--` between
    separate groups."""
    hit_set = set(hits)
    keep: list[int] = []
    for i in hits:
        for j in range(max(0, i - context), min(len(lines), i + context + 1)):
            if not keep or j > keep[-1]:
                keep.append(j)
    out: list[str] = []
    prev = None
    for j in keep:
        if prev is not None and j > prev + 1:
            out.append("--")
        sep = ":" if j in hit_set else "-"
        out.append(f"{shown}{sep}{j + 1}{sep}{lines[j][:GREP_LINE_CHARS]}")
        prev = j
    return out
