"""The offline model's `call: <tool> <JSON>` lines: one call of that tool per line, with that
input, only for tools the request offers and inputs that are JSON objects; inside a code
fence a line is code, not a call."""

from __future__ import annotations

from forkagent_jupyter.messages_api.offline_reply import offline_reply


def _reply(text: str, *tools: str) -> tuple[list[dict[str, object]], str]:
    body = {
        "tools": [{"name": t, "input_schema": {"type": "object"}} for t in tools],
        "messages": [{"role": "user", "content": text}],
    }
    return offline_reply(body)


def test_call_lines_become_calls_of_offered_tools() -> None:
    text = (
        'Look it up.\ncall: mcp__db__query {"sql": "SELECT 1"}\n'
        "call: mcp__db__tables\n"
        'call: mcp__web__fetch {"url": "x"}\n'  # not offered
        "call: mcp__db__query [1, 2]\n"  # not an object
        'call: mcp__db__query {"sql": \n'  # not JSON
        '```\ncall: mcp__db__query {"sql": "in a fence"}\n```\n'
    )
    blocks, stop = _reply(text, "mcp__db__query", "mcp__db__tables")
    calls = [(b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"]
    assert calls == [("mcp__db__query", {"sql": "SELECT 1"}), ("mcp__db__tables", {})]
    assert stop == "tool_use"
    assert blocks[0] == {"type": "text", "text": "Running 2 tool calls."}
