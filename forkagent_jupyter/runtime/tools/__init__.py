"""Built-in tools, one module per family."""

from __future__ import annotations

from typing import Any

from .base import Tool
from .files import EditTool, GlobTool, GrepTool, ReadTool, WriteTool
from .python import PythonTool
from .shell import BashTool

__all__ = ["builtin_tools"]


def builtin_tools() -> list[Tool[Any]]:
    """Read, Write, Edit, Glob, Grep, Bash, Python - in this order (the `tools` array)."""
    return [ReadTool(), WriteTool(), EditTool(), GlobTool(), GrepTool(), BashTool(), PythonTool()]
