"""An MCP server over stdio, written by hand, that answers the handshake and the tool list
correctly and every tool call with junk: a result whose content is not a list, or a line
that is not JSON. Its tool with a 70-character name cannot be offered (the API takes 64);
with the argument `badlist`, its tool list itself is junk (a schema that is not an object).
"""

from __future__ import annotations

import json
import sys


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


TOOLS = [
    {"name": "weird", "description": "Answers junk.", "inputSchema": {"type": "object"}},
    {"name": "garbled", "description": "Answers noise.", "inputSchema": {"type": "object"}},
    {"name": "x" * 70, "description": "Too long a name.", "inputSchema": {"type": "object"}},
]
if sys.argv[1:] == ["badlist"]:
    TOOLS.append({"name": "broken", "inputSchema": {"type": "string"}})

for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, rid = msg.get("method"), msg.get("id")
    if rid is None:
        continue
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {
                    "protocolVersion": msg["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "junk", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "tools/call" and msg["params"]["name"] == "garbled":
        sys.stdout.write("%%% not json at all %%%\n")
        sys.stdout.flush()
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": 42, "isError": "perhaps"}})
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": "not a list"}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
