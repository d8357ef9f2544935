"""The file tools and what they share: Read, Write and Edit (`read_write`), MultiEdit and
NotebookEdit (`edits`), Glob and Grep (`search`), LS (`listing`), the unified diff a file
change is previewed as (`diff`), and resolving paths, containment and globs (`paths`, which
the permission rules use too).

May import: `tools/base` and `tools/services`, messages_api and the leaves (output); like the
rest of `tools/`, nothing above it."""

from __future__ import annotations

from .edits import MultiEditTool, NotebookEditTool
from .listing import LSTool
from .read_write import EditTool, ReadTool, WriteTool
from .search import GlobTool, GrepTool

__all__ = [
    "EditTool",
    "GlobTool",
    "GrepTool",
    "LSTool",
    "MultiEditTool",
    "NotebookEditTool",
    "ReadTool",
    "WriteTool",
]
