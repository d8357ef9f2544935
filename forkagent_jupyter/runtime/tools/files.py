"""File tools: Read, Write, Edit, Glob, Grep.

Relative paths resolve against the work directory. Each tool reports the paths it touches
(`paths`, resolved through symlinks) so the permission gate can keep calls inside the work
directory, and its `permission_subject` (the path relative to the work directory when inside,
absolute otherwise) for rules such as `Write(src/**)`.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .base import Tool, ToolContext, ToolError

__all__ = ["EditTool", "GlobTool", "GrepTool", "ReadTool", "WriteTool", "resolve", "subject"]

MAX_READ_LINES = 2000
MAX_LINE = 2000
MAX_MATCHES = 200


def resolve(workdir: Path, path: str) -> Path:
    p = Path(path).expanduser()
    return (p if p.is_absolute() else workdir / p).resolve()


def subject(workdir: Path, path: str) -> str:
    full = resolve(workdir, path)
    try:
        return full.relative_to(workdir.resolve()).as_posix()
    except ValueError:
        return str(full)


class _PathInput(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadInput(_PathInput):
    file_path: str = Field(
        description="Path of the file (relative to the work directory or absolute)."
    )
    offset: int | None = Field(default=None, ge=1, description="First line to read (1-based).")
    limit: int | None = Field(default=None, ge=1, description="How many lines to read.")


class ReadTool(Tool[ReadInput]):
    name = "Read"
    description = (
        "Read a text file. Lines come numbered (like `cat -n`); use offset and limit for long "
        "files."
    )
    input_model = ReadInput
    read_only = True

    def permission_subject(self, args: ReadInput) -> str:
        return args.file_path

    def paths(self, args: ReadInput, ctx: ToolContext) -> list[Path]:
        return [resolve(ctx.workdir, args.file_path)]

    async def run(self, args: ReadInput, ctx: ToolContext) -> str:
        path = resolve(ctx.workdir, args.file_path)
        return await asyncio.to_thread(self._read, path, args)

    def _read(self, path: Path, args: ReadInput) -> str:
        if path.is_dir():
            raise ToolError(f"{path} is a directory; use Glob to list files in it.")
        if not path.exists():
            raise ToolError(f"File not found: {path}")
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            raise ToolError(f"{path} looks like a binary file; Read shows text files only.")
        lines = data.decode("utf-8", errors="replace").splitlines()
        start = (args.offset or 1) - 1
        chosen = lines[start : start + (args.limit or MAX_READ_LINES)]
        if not chosen:
            return f"(empty: the file has {len(lines)} lines)"
        out = [f"{start + i + 1:6}\t{line[:MAX_LINE]}" for i, line in enumerate(chosen)]
        rest = len(lines) - start - len(chosen)
        if rest > 0:
            out.append(f"... {rest} more lines (use offset={start + len(chosen) + 1})")
        return "\n".join(out)


class WriteInput(_PathInput):
    file_path: str = Field(description="Path of the file to create or replace.")
    content: str = Field(description="The whole new content of the file.")


class WriteTool(Tool[WriteInput]):
    name = "Write"
    description = "Create a file, or replace a file's whole content. Parent folders are created."
    input_model = WriteInput

    def permission_subject(self, args: WriteInput) -> str:
        return args.file_path

    def paths(self, args: WriteInput, ctx: ToolContext) -> list[Path]:
        return [resolve(ctx.workdir, args.file_path)]

    async def run(self, args: WriteInput, ctx: ToolContext) -> str:
        path = resolve(ctx.workdir, args.file_path)

        def write() -> str:
            if path.is_dir():
                raise ToolError(f"{path} is a directory.")
            existed = path.exists()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(args.content, encoding="utf-8")
            verb = "Replaced" if existed else "Created"
            return f"{verb} {path} ({len(args.content.splitlines())} lines)."

        return await asyncio.to_thread(write)


class EditInput(_PathInput):
    file_path: str = Field(description="Path of the file to change.")
    old_string: str = Field(description="The exact text to replace (must occur once).")
    new_string: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")


class EditTool(Tool[EditInput]):
    name = "Edit"
    description = (
        "Replace an exact piece of text in a file. old_string must occur exactly once unless "
        "replace_all is true; include enough surrounding text to make it unique."
    )
    input_model = EditInput

    def permission_subject(self, args: EditInput) -> str:
        return args.file_path

    def paths(self, args: EditInput, ctx: ToolContext) -> list[Path]:
        return [resolve(ctx.workdir, args.file_path)]

    async def run(self, args: EditInput, ctx: ToolContext) -> str:
        path = resolve(ctx.workdir, args.file_path)

        def edit() -> str:
            if not path.is_file():
                raise ToolError(f"File not found: {path}")
            if args.old_string == args.new_string:
                raise ToolError("old_string and new_string are the same; nothing to change.")
            text = path.read_text(encoding="utf-8")
            count = text.count(args.old_string) if args.old_string else 0
            if count == 0:
                raise ToolError(f"old_string was not found in {path}.")
            if count > 1 and not args.replace_all:
                raise ToolError(
                    f"old_string occurs {count} times in {path}; add context to make it unique "
                    "or set replace_all."
                )
            new = text.replace(args.old_string, args.new_string, -1 if args.replace_all else 1)
            path.write_text(new, encoding="utf-8")
            return f"Edited {path}: {count if args.replace_all else 1} replacement(s)."

        return await asyncio.to_thread(edit)


class GlobInput(_PathInput):
    pattern: str = Field(description="Glob pattern, e.g. '**/*.py' or 'data/*.csv'.")
    path: str | None = Field(default=None, description="Folder to search (default: work dir).")


class GlobTool(Tool[GlobInput]):
    name = "Glob"
    description = "List files matching a glob pattern ('**' searches subfolders), sorted."
    input_model = GlobInput
    read_only = True

    def permission_subject(self, args: GlobInput) -> str:
        return args.path or "."

    def paths(self, args: GlobInput, ctx: ToolContext) -> list[Path]:
        return [resolve(ctx.workdir, args.path or ".")]

    async def run(self, args: GlobInput, ctx: ToolContext) -> str:
        base = resolve(ctx.workdir, args.path or ".")

        def glob() -> str:
            if not base.is_dir():
                raise ToolError(f"Not a folder: {base}")
            found = sorted(p for p in base.glob(args.pattern) if p.is_file())
            shown = [
                p.relative_to(base).as_posix() if p.is_relative_to(base) else str(p)
                for p in found[:MAX_MATCHES]
            ]
            if not shown:
                return f"No files match {args.pattern!r} in {base}."
            more = len(found) - len(shown)
            return "\n".join(shown) + (f"\n... {more} more" if more > 0 else "")

        return await asyncio.to_thread(glob)


class GrepInput(_PathInput):
    pattern: str = Field(description="Regular expression (Python syntax).")
    path: str | None = Field(
        default=None, description="File or folder to search (default: work dir)."
    )
    glob: str | None = Field(
        default=None, description="Only files matching this glob, e.g. '*.py'."
    )
    case_insensitive: bool = Field(default=False, description="Ignore case.")
    output_mode: Literal["content", "files_with_matches", "count"] = Field(
        default="files_with_matches", description="What to return."
    )


class GrepTool(Tool[GrepInput]):
    name = "Grep"
    description = (
        "Search file contents with a regular expression. Returns matching files (default), "
        "matching lines with line numbers (output_mode='content'), or counts."
    )
    input_model = GrepInput
    read_only = True

    def permission_subject(self, args: GrepInput) -> str:
        return args.path or "."

    def paths(self, args: GrepInput, ctx: ToolContext) -> list[Path]:
        return [resolve(ctx.workdir, args.path or ".")]

    async def run(self, args: GrepInput, ctx: ToolContext) -> str:
        try:
            regex = re.compile(args.pattern, re.IGNORECASE if args.case_insensitive else 0)
        except re.error as exc:
            raise ToolError(f"Invalid regular expression: {exc}") from None
        base = resolve(ctx.workdir, args.path or ".")
        return await asyncio.to_thread(self._grep, regex, base, args)

    def _grep(self, regex: re.Pattern[str], base: Path, args: GrepInput) -> str:
        if not base.exists():
            raise ToolError(f"Not found: {base}")
        files = [base] if base.is_file() else sorted(base.rglob(args.glob or "*"))
        out: list[str] = []
        for f in files:
            if not f.is_file() or any(
                part.startswith(".") for part in f.relative_to(base.parent).parts[1:-1]
            ):
                continue
            try:
                text = f.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            name = f.relative_to(base).as_posix() if f != base else f.name
            hits = [(i, line) for i, line in enumerate(text.splitlines(), 1) if regex.search(line)]
            if not hits:
                continue
            if args.output_mode == "files_with_matches":
                out.append(name)
            elif args.output_mode == "count":
                out.append(f"{name}:{len(hits)}")
            else:
                out.extend(f"{name}:{i}:{line[:MAX_LINE]}" for i, line in hits)
            if len(out) >= MAX_MATCHES:
                out.append("... (more matches not shown)")
                break
        return "\n".join(out) if out else f"No matches for {args.pattern!r}."
