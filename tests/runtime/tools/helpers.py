"""Calling a tool the way the loop does: validate the raw input, then run it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forkagent_jupyter.runtime.tools.base import Tool, ToolContext, ToolOutcome, run_parsed


async def call(tool: Tool[Any], ctx: ToolContext, **raw: Any) -> ToolOutcome:
    return await run_parsed(tool, tool.parse(raw), ctx)


def make_ctx(workdir: Path, **kw: Any) -> ToolContext:
    return ToolContext(workdir=workdir, **kw)
