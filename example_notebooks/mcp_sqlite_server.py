"""A small MCP server over a SQLite file, built with the `mcp` SDK's MCPServer (FastMCP).

    python mcp_sqlite_server.py sales.db

It speaks MCP over stdin/stdout and offers two tools: `tables` (the tables and their columns)
and `query` (one read-only SQL statement; the rows as a small table). The file is opened
read-only: a statement that would change it fails, and the model reads why.
"""

from __future__ import annotations

import sqlite3
import sys

from mcp.server.mcpserver import MCPServer

DB = sys.argv[1] if len(sys.argv) > 1 else "data.db"
MAX_ROWS = 200

app = MCPServer("sqlite")


def _connect() -> sqlite3.Connection:
    return sqlite3.connect(f"file:{DB}?mode=ro", uri=True)


@app.tool()
def tables() -> str:
    """The tables of the database, each with its columns and their types."""
    with _connect() as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        lines = []
        for name in names:
            cols = db.execute(f"PRAGMA table_info({name!r})").fetchall()
            lines.append(f"{name}(" + ", ".join(f"{c[1]} {c[2]}" for c in cols) + ")")
    return "\n".join(lines) or "(no tables)"


@app.tool()
def query(sql: str) -> str:
    """Run one read-only SQL statement (SELECT) and return the rows as a table (at most 200)."""
    with _connect() as db:
        cursor = db.execute(sql)
        header = [d[0] for d in cursor.description or []]
        rows = cursor.fetchmany(MAX_ROWS + 1)
    lines = [" | ".join(header)] + [" | ".join(str(v) for v in row) for row in rows[:MAX_ROWS]]
    if len(rows) > MAX_ROWS:
        lines.append(f"... (more than {MAX_ROWS} rows)")
    return "\n".join(lines)


if __name__ == "__main__":
    app.run()
