"""Built-in tools, one module per family: the file tools (`files/`: Read, Write, Edit,
MultiEdit, NotebookEdit, Glob, Grep, LS), shell and background shells, Python, the namespace,
todos, the web. What a tool may ask of the session is declared in `services` as protocols, so
a tool imports nothing above it.

May import: model, tasks, executors, messages_api and the leaves. The Agent tools live in
workers/, the MCP tool in mcp/."""

from __future__ import annotations

from typing import Any

from .base import Tool
from .files import (
    EditTool,
    GlobTool,
    GrepTool,
    LSTool,
    MultiEditTool,
    NotebookEditTool,
    ReadTool,
    WriteTool,
)
from .namespace import DescribeDataTool, VariablesTool
from .python import PythonTool
from .shell import BashTool
from .todos import TodoWriteTool
from .web import WebFetchTool, WebSearchTool

__all__ = ["builtin_tools", "claude_code_tools"]


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


def claude_code_tools() -> list[Tool[Any]]:
    """The tools Claude Code's agent files name beyond the built-in ones: MultiEdit,
    NotebookEdit, LS, TodoWrite, WebSearch, WebFetch. A named agent gets them when its
    `tools` list names them; the parent and its forks do not carry them (every tool
    definition heads each request's cached prefix)."""
    return [
        MultiEditTool(),
        NotebookEditTool(),
        LSTool(),
        TodoWriteTool(),
        WebSearchTool(),
        WebFetchTool(),
    ]
