"""A small MCP server built with the SDK's MCPServer (FastMCP), for the tests: stdio by default,
streamable HTTP with `--http PORT`. It writes its process id to the file named by `$PID_FILE`
(when set) so a test can check that the process ended."""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer

app = MCPServer("demo")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


@app.tool()
def crash() -> str:
    """The server process exits in the middle of the call."""
    os._exit(3)


@app.tool()
def hang() -> str:
    """Never answers (in time)."""
    time.sleep(600)
    return "late"


if __name__ == "__main__":
    pid_file = os.environ.get("PID_FILE")
    if pid_file:
        with open(pid_file, "a") as f:
            f.write(f"{os.getpid()}\n")
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
