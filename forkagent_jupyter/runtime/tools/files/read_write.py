"""The file tools that read and change one file: Read, Write, Edit (Glob and Grep are in
`search`; the package gathers them all).

Relative paths resolve against the work directory (`ctx.workdir`). Each tool reports the real
paths it touches (`paths`: symlinks followed, `..` folded) so the permission gate can keep
calls inside the work directory and match rules such as `Write(src/**)` against them; its
`permission_subject` is the path as the model wrote it, tidied (what a person reads).
Problems the model can fix (missing file, ambiguous edit, binary file) are `ToolError`s.
Write and Edit preview a call as the unified diff that `run` would write: the same path, the
same matching (CRLF, uniqueness), so what a person approves is what is written.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ..base import Tool, ToolContext, ToolError
from .diff import unified_diff
from .paths import resolve_in
from .search import display_path as _shown
from .search import tidy

__all__ = ["EditTool", "ReadTool", "WriteTool"]

READ_LINES = 2000  # default number of lines Read returns
READ_CHARS = 60_000  # Read stops (and says where to continue) past this many characters
LINE_CHARS = 2000  # longer lines are cut in Read output
SNIFF = 8192  # a NUL byte in the first SNIFF bytes means binary


def _io_error(action: str, shown: str, exc: OSError) -> ToolError:
    return ToolError(f"Could not {action} {shown}: {exc.strerror or exc}")


_locks_guard = threading.Lock()
_file_locks: dict[str, threading.Lock] = {}


def _file_lock(path: Path) -> threading.Lock:
    """One lock per file, so Write and Edit calls from parallel agents never interleave."""
    with _locks_guard:
        return _file_locks.setdefault(str(path), threading.Lock())


def _is_binary(head: bytes) -> bool:
    return b"\0" in head


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _FileInput(_Input):
    file_path: str = Field(min_length=1, description="Path of the file.")


FileInputT = TypeVar("FileInputT", bound=_FileInput)


class _FileTool(Tool[FileInputT]):
    """Shared path plumbing of the tools that take one `file_path`."""

    def permission_subject(self, args: FileInputT) -> str:
        return tidy(args.file_path)

    def paths(self, args: FileInputT, ctx: ToolContext) -> list[Path]:
        return [resolve_in(ctx.workdir, args.file_path)]


# -- Read ----------------------------------------------------------------------------------


class ReadInput(_FileInput):
    file_path: str = Field(
        min_length=1, description="File to read: relative to the work directory, or absolute."
    )
    offset: int | None = Field(
        default=None, ge=1, description="Line number to start at (1-based). Omit for the top."
    )
    limit: int | None = Field(
        default=None, ge=1, description=f"Number of lines to return (default {READ_LINES})."
    )


class ReadTool(_FileTool[ReadInput]):
    name = "Read"
    description = (
        "Read a text file. Lines come numbered like `cat -n` (number, tab, text); the numbers "
        f"are not part of the file. Returns up to {READ_LINES} lines; for longer files pass "
        "offset and limit to read further. Folders cannot be read (use Glob), nor binary files "
        "(use Python to load data files such as parquet or images)."
    )
    input_model = ReadInput
    concurrency_safe = True
    needs_approval = False
    allowed_in_plan = True

    def describe(self, args: ReadInput) -> str:
        if args.offset is None and args.limit is None:
            return f"Read: {tidy(args.file_path)}"
        start = args.offset or 1
        end = f"-{start + args.limit - 1}" if args.limit else " on"
        return f"Read: {tidy(args.file_path)} (lines {start}{end})"

    async def run(self, args: ReadInput, ctx: ToolContext) -> str:
        path = resolve_in(ctx.workdir, args.file_path)
        return await asyncio.to_thread(_read, path, _shown(ctx, path), args)


def _read(path: Path, shown: str, args: ReadInput) -> str:
    if path.is_dir():
        raise ToolError(f"{shown} is a folder. Use Glob (pattern '{shown}/*') to list it.")
    if not path.exists():
        raise ToolError(f"File not found: {shown}")
    start = args.offset or 1
    want = args.limit or READ_LINES
    out: list[str] = []
    used = 0
    total: int | None = None
    try:
        with path.open("rb") as f:
            if _is_binary(f.read(SNIFF)):
                size = path.stat().st_size
                raise ToolError(
                    f"{shown} is a binary file ({size} bytes); Read shows text only. "
                    "Use Python to load or inspect it."
                )
            f.seek(0)
            n = 0
            for n, raw in enumerate(f, 1):
                if n < start:
                    continue
                if len(out) >= want or used >= READ_CHARS:
                    total = n + sum(1 for _ in f) if path.stat().st_size < 50_000_000 else None
                    break
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if len(line) > LINE_CHARS:
                    line = f"{line[:LINE_CHARS]}... [{len(line) - LINE_CHARS} more characters]"
                out.append(f"{n:>6}\t{line}")
                used += len(line) + 8
            else:
                total = n
    except OSError as exc:
        raise _io_error("read", shown, exc) from None
    if total == 0:
        return f"{shown} is empty."
    if not out:
        raise ToolError(f"{shown} has {total} lines; offset {start} is past the end.")
    last = start + len(out) - 1
    if total is None or last < total:
        of = f" of {total}" if total is not None else ""
        out.append(f"... [lines {start}-{last}{of} shown; continue with offset={last + 1}]")
    return "\n".join(out)


# -- Write ---------------------------------------------------------------------------------


class WriteInput(_FileInput):
    file_path: str = Field(
        min_length=1, description="File to create or overwrite (relative or absolute)."
    )
    content: str = Field(description="The complete new content of the file.")


class WriteTool(_FileTool[WriteInput]):
    name = "Write"
    description = (
        "Create a file, or replace everything in an existing one, with `content`. Missing "
        "parent folders are created. To change part of a file, prefer Edit."
    )
    input_model = WriteInput

    def describe(self, args: WriteInput) -> str:
        return f"Write {tidy(args.file_path)} ({_count_lines(args.content)} lines)"

    async def preview(self, args: WriteInput, ctx: ToolContext) -> str:
        path = resolve_in(ctx.workdir, args.file_path)
        shown = _shown(ctx, path)

        def diff() -> str:
            _check_write(path, shown)
            if not path.exists():
                return unified_diff(None, args.content, shown) or f"(creates {shown}, empty)"
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise _io_error("read", shown, exc) from None
            try:
                old = data.decode("utf-8")
            except UnicodeDecodeError:
                return (
                    f"(replaces {shown}, {len(data)} bytes that are not UTF-8 text, with:)\n"
                    + unified_diff("", args.content, shown)
                )
            return unified_diff(old, args.content, shown) or "(no change)"

        return await asyncio.to_thread(diff)

    async def run(self, args: WriteInput, ctx: ToolContext) -> str:
        path = resolve_in(ctx.workdir, args.file_path)
        shown = _shown(ctx, path)

        def write() -> str:
            _check_write(path, shown)
            with _file_lock(path):
                existed = path.exists()
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with path.open("w", encoding="utf-8", newline="") as f:
                        f.write(args.content)
                except OSError as exc:
                    raise _io_error("write", shown, exc) from None
            verb = "Overwrote" if existed else "Created"
            lines = _count_lines(args.content)
            return f"{verb} {shown} ({lines} lines, {len(args.content)} characters)."

        return await asyncio.to_thread(write)


def _count_lines(text: str) -> int:
    return text.count("\n") + (not text.endswith("\n")) if text else 0


def _check_write(path: Path, shown: str) -> None:
    if path.is_dir():
        raise ToolError(f"{shown} is a folder; give a file path.")


# -- Edit ----------------------------------------------------------------------------------


class EditInput(_FileInput):
    file_path: str = Field(min_length=1, description="File to change (relative or absolute).")
    old_string: str = Field(
        description="Exact text to find, including indentation and line breaks. It must occur "
        "exactly once unless replace_all is true; add surrounding lines to make it unique."
    )
    new_string: str = Field(description="Text to put in its place (must differ).")
    replace_all: bool = Field(
        default=False, description="Replace every occurrence instead of exactly one."
    )


class EditTool(_FileTool[EditInput]):
    name = "Edit"
    description = (
        "Replace exact text in a file: old_string becomes new_string. old_string must match "
        "the file character for character (copy it from Read output without the line-number "
        "prefix) and occur exactly once, unless replace_all is set. Returns the changed lines."
    )
    input_model = EditInput

    def describe(self, args: EditInput) -> str:
        every = " (every occurrence)" if args.replace_all else ""
        old, new = _clip(args.old_string), _clip(args.new_string)
        return f"Edit {tidy(args.file_path)}: {old!r} -> {new!r}{every}"

    async def preview(self, args: EditInput, ctx: ToolContext) -> str:
        path = resolve_in(ctx.workdir, args.file_path)
        shown = _shown(ctx, path)

        def diff() -> str:
            text = _edit_source(path, shown, args)
            return unified_diff(text, _replace(text, shown, args).updated, shown)

        return await asyncio.to_thread(diff)

    async def run(self, args: EditInput, ctx: ToolContext) -> str:
        path = resolve_in(ctx.workdir, args.file_path)
        return await asyncio.to_thread(_edit, path, _shown(ctx, path), args)


def _clip(text: str, n: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= n else line[: n - 1] + "…"


@dataclass(frozen=True)
class _Replacement:
    updated: str  # the whole new text
    count: int  # occurrences of the old text
    at: int  # where the first one was
    new: str  # the replacement as written (line ends matched to the file's)


def _edit_source(path: Path, shown: str, args: EditInput) -> str:
    """The text an edit applies to, after the checks that need no matching."""
    if not args.old_string:
        raise ToolError("old_string is empty. To create or replace a whole file, use Write.")
    if args.old_string == args.new_string:
        raise ToolError("old_string and new_string are identical; there is nothing to change.")
    if path.is_dir():
        raise ToolError(f"{shown} is a folder, not a file.")
    if not path.exists():
        raise ToolError(f"File not found: {shown} (use Write to create it).")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _io_error("read", shown, exc) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not UTF-8 text; Edit cannot change it.") from None


def _replace(text: str, shown: str, args: EditInput) -> _Replacement:
    """The edit applied to `text`: old_string must occur once (or replace_all); in a CRLF
    file, an old_string written with LF line ends matches the CRLF text."""
    old, new = args.old_string, args.new_string
    if old not in text and "\r\n" in text and "\r\n" not in old and "\n" in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
    count = text.count(old)
    if count == 0:
        hint = (
            " The text exists but with different leading or trailing whitespace."
            if old.strip() and old.strip() in text
            else " It must match exactly, including indentation; Read the file again."
        )
        raise ToolError(f"old_string was not found in {shown}.{hint}")
    if count > 1 and not args.replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {shown}. Include more surrounding text so "
            "it matches exactly one place, or set replace_all to change all of them."
        )
    updated = text.replace(old, new) if args.replace_all else text.replace(old, new, 1)
    return _Replacement(updated, count, text.index(old), new)


def _edit(path: Path, shown: str, args: EditInput) -> str:
    with _file_lock(path):
        text = _edit_source(path, shown, args)
        done = _replace(text, shown, args)
        try:
            with path.open("w", encoding="utf-8", newline="") as f:
                f.write(done.updated)
        except OSError as exc:
            raise _io_error("write", shown, exc) from None
    count = f"{done.count} replacements" if args.replace_all and done.count > 1 else "1 replacement"
    return f"Edited {shown} ({count}).\n{_snippet(done.updated, done.at, done.new)}"


def _snippet(text: str, at: int, new: str, around: int = 3, most: int = 30) -> str:
    """Numbered lines around the first replacement, as they read now."""
    lines = text.splitlines()
    first = text.count("\n", 0, at)
    last = first + new.count("\n")
    lo, hi = max(0, first - around), min(len(lines), last + around + 1)
    hi = min(hi, lo + most)
    return "\n".join(f"{i + 1:>6}\t{lines[i][:LINE_CHARS]}" for i in range(lo, hi))
