"""LS: the entries of one folder, as Claude Code's agents list folders.

Folders end in `/`; version-control folders, caches and virtual environments are left out
(as Glob and Grep leave them), and so are entries that `ignore` globs match or that a deny
rule for reading hides (`ctx.services.read_guard`). Reading, so it needs no approval and
may run in plan mode; its folder must be inside the work directory like every path.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ..base import Tool, ToolContext, ToolError
from .paths import NOISE_DIRS, glob_match, resolve_in
from .search import display_path, tidy

__all__ = ["LSTool"]

MAX_LS_ENTRIES = 500


class LSInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        default=".", description="The folder to list (relative to the work directory or absolute)."
    )
    ignore: list[str] = Field(
        default_factory=list, description="Glob patterns of names to leave out, e.g. '*.pyc'."
    )


class LSTool(Tool[LSInput]):
    name = "LS"
    description = (
        "List the files and folders in one folder (folders end in '/'), sorted. Leaves out "
        ".git, caches and virtual environments. For files by pattern across folders use Glob."
    )
    input_model = LSInput
    concurrency_safe = True
    needs_approval = False
    allowed_in_plan = True

    def permission_subject(self, args: LSInput) -> str:
        return tidy(args.path)

    def paths(self, args: LSInput, ctx: ToolContext) -> list[Path]:
        return [resolve_in(ctx.workdir, args.path)]

    async def run(self, args: LSInput, ctx: ToolContext) -> str:
        folder = resolve_in(ctx.workdir, args.path)
        return await asyncio.to_thread(_list, ctx, folder, args.ignore)


def _list(ctx: ToolContext, folder: Path, ignore: list[str]) -> str:
    shown = display_path(ctx, folder)
    if not folder.is_dir():
        raise ToolError(f"Not a folder: {shown}" if folder.exists() else f"Not found: {shown}")
    guard = ctx.services.read_guard
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        raise ToolError(f"Could not list {shown}: {exc.strerror or exc}") from None
    lines: list[str] = []
    for entry in entries:
        if entry.name in NOISE_DIRS or any(glob_match(p, entry.name) for p in ignore):
            continue
        path = Path(entry.path)
        if guard is not None and not guard(resolve_in(ctx.workdir, path)):
            continue
        lines.append(entry.name + ("/" if entry.is_dir() else ""))
    if not lines:
        return f"{shown}/ is empty."
    more = len(lines) - MAX_LS_ENTRIES
    tail = f"\n... and {more} more" if more > 0 else ""
    return f"{shown}/\n" + "\n".join(f"  {line}" for line in lines[:MAX_LS_ENTRIES]) + tail
