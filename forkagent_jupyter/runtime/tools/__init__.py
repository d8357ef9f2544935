"""Built-in tools, one module per family."""

from __future__ import annotations

from typing import Any

from .base import Tool
from .files import EditTool, GlobTool, GrepTool, ReadTool, WriteTool
from .namespace import DescribeDataTool, VariablesTool
from .python import PythonTool
from .shell import BashTool

__all__ = ["builtin_tools"]


def builtin_tools() -> list[Tool[Any]]:
    """Read, Write, Edit, Glob, Grep, Bash, Python, Variables, DescribeData - in this order
    (the order of the `tools` array the model sees)."""
    return [
        ReadTool(),
        WriteTool(),
        EditTool(),
        GlobTool(),
        GrepTool(),
        BashTool(),
        PythonTool(),
        VariablesTool(),
        DescribeDataTool(),
    ]
