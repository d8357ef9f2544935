"""The offline model's reply: deterministic, from the request alone.

What it does, exactly:

* It reads the last user message. Each fenced ```python block in its text, and each inline
  span `py: <code>` in backquotes, becomes one `Python` tool call; each line
  `fork: <directive>` (outside code fences) becomes one `Agent` tool call without
  `subagent_type` (a fork); the code in a fork line is left to the fork; each line
  `call: <tool> <JSON object>` (outside code fences) becomes one call of that tool with that
  input (an MCP server's tool, say). All calls go in one assistant turn, after a short text
  saying what it is about to do. Tools missing from the request are not called.
* A user message made only of tool results gets a final answer that reports each result.
* `<task-notification>` blocks get a short summary of each worker's status and result.
* A compaction request (`<compaction-request>` in the last user message) gets a summary built
  from the conversation: how many requests and tool calls there were, the latest requests'
  first lines, and the task ids it mentions.
* A request that offers the `web_search` (`web_fetch`) server tool and whose last user
  message holds `<web-search-query>...</web-search-query>` (`<web-fetch-url>...`) calls it
  once (a `server_tool_use` block); the emulator runs it and writes what was found.
* Anything else gets an honest answer saying what the offline model can do.
* With extended thinking on (`thinking` of type enabled, adaptive or between_tools) the reply
  starts with a `thinking` block that says, deterministically, what it read and what it is
  about to do; `sign` (the emulator's or the offline model's) gives it its signature, so it
  verifies when it is sent back.

A fork child's directive arrives as text in its last user message, so it is carried out the
same way. `with_ids` gives tool_use blocks ids derived from the request, so a replay of the
same request gets the same ids. The runtime's `OfflineModel` and the emulator's
`OfflineBrain` both answer with it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .shapes import Block

__all__ = ["CAPABILITIES", "offline_reply", "with_ids"]

_FENCE = re.compile(r"```[ \t]*(python|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_FORK_LINE = re.compile(r"^[ \t]*fork:[ \t]*(\S.*?)[ \t]*$", re.MULTILINE | re.IGNORECASE)
_CALL_LINE = re.compile(r"^[ \t]*call:[ \t]*([A-Za-z0-9_-]+)[ \t]*(\{.*\})?[ \t]*$", re.MULTILINE)
_INLINE = re.compile(r"`py:[ \t]*([^`\n]+)`")
_DIRECTIVE_BLOCK = re.compile(r"<fork-directive>.*?</fork-directive>", re.DOTALL)
_DIRECTIVE = re.compile(r"^Directive:[ \t]*(.*)$", re.MULTILINE)
_NOTIFICATION = re.compile(r"<task-notification>(.*?)</task-notification>", re.DOTALL)
_MAX_REPORT = 1500
_COMPACT_REQUEST = "<compaction-request>"
_TASK_ID = re.compile(r"<task-id>(.*?)</task-id>|agent (a[0-9a-f]{16})\b")
_OWN_BLOCKS = re.compile(
    r"<(conversation-summary|compaction-request|task-notification)>.*?</\1>", re.DOTALL
)

CAPABILITIES = (
    "I am the offline model of forkagent-jupyter: no API key is set, so I cannot reason "
    "about your request. What I can do: run each ```python block you write (as a `Python` "
    "tool call) and report its output, and fork each line `fork: <directive>` into a "
    "background worker. Set ANTHROPIC_API_KEY to talk to Claude."
)


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def _tag(body: str, name: str) -> str:
    found = re.search(rf"<{name}>(.*?)</{name}>", body, re.DOTALL)
    return found.group(1).strip() if found else ""


_FENCE_LINE = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.MULTILINE)


def _clip(text: str, limit: int = _MAX_REPORT) -> str:
    """`text` cut to `limit` characters, with a note of how much was left out. A cut inside a
    code fence closes that fence after the note, so the Markdown after it stays Markdown."""
    if len(text) <= limit:
        return text
    kept = text[:limit]
    note = f"... ({len(text) - limit} more characters)"
    open_fence: str | None = None
    for match in _FENCE_LINE.finditer(kept):
        fence = match.group(1)
        if open_fence is None:
            open_fence = fence
        elif fence[0] == open_fence[0] and len(fence) >= len(open_fence):
            open_fence = None
    if open_fence is not None:
        return f"{kept}\n{note}\n{open_fence}"
    return f"{kept}\n{note}"


def _fenced(text: str) -> str:
    """`text` in a code fence longer than any backtick fence inside it."""
    longest = max(
        (len(m.group(1)) for m in _FENCE_LINE.finditer(text) if m.group(1)[0] == "`"), default=0
    )
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
    return ""


def _plan_calls(text: str, tools: set[str]) -> tuple[list[Block], str]:
    calls: list[Block] = []
    parts: list[str] = []
    if "Python" in tools:
        codes = [m.group(2) for m in _FENCE.finditer(text) if m.group(1)]
        plain = _FORK_LINE.sub("", _FENCE.sub("", text))  # a fork's code is the fork's
        codes += [m.group(1).strip() for m in _INLINE.finditer(plain)]
        calls += [{"type": "tool_use", "name": "Python", "input": {"code": c}} for c in codes]
        if codes:
            parts.append(f"{len(codes)} Python block{'s' if len(codes) > 1 else ''}")
    named: list[Block] = []
    for m in _CALL_LINE.finditer(_FENCE.sub("", text)):
        try:
            data = json.loads(m.group(2) or "{}")
        except ValueError:
            continue
        if m.group(1) in tools and isinstance(data, dict):
            named.append({"type": "tool_use", "name": m.group(1), "input": data})
    if named:
        calls += named
        parts.append(f"{len(named)} tool call{'s' if len(named) > 1 else ''}")
    if "Agent" in tools:
        outside = _FENCE.sub("", text)
        forks = [m.group(1) for m in _FORK_LINE.finditer(outside)]
        calls += [
            {"type": "tool_use", "name": "Agent", "input": {"description": d[:60], "prompt": d}}
            for d in forks
        ]
        if forks:
            parts.append(f"{len(forks)} fork{'s' if len(forks) > 1 else ''}")
    return calls, " and ".join(parts)


def _report(
    results: Sequence[Mapping[str, Any]], names: Mapping[str, str], directive: str | None
) -> str:
    lines = [f"Scope: {directive}", "Result:"] if directive else []
    lines.append("Here is what the tool calls returned:")
    for block in results:
        name = names.get(str(block.get("tool_use_id")), "tool")
        status = "failed" if block.get("is_error") else "returned"
        lines.append(f"\n**{name}** {status}:\n{_fenced(_clip(_result_text(block)).rstrip())}")
    return "\n".join(lines)


def _summarize_notifications(found: Sequence[str]) -> str:
    lines = [f"{len(found)} background task{'s' if len(found) > 1 else ''} reported back:"]
    for body in found:
        task = _tag(body, "task-id") or "?"
        status = _tag(body, "status") or "?"
        result = _tag(body, "result") or _tag(body, "summary")
        lines.append(f"- `{task}` {status}: {_clip(result, 400)}")
    return "\n".join(lines)


def _directive(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """A fork child's directive (the last one in its conversation), or None."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        for block in reversed(_blocks(message)):
            if block.get("type") == "text":
                found = _DIRECTIVE.findall(str(block.get("text", "")))
                if found and "-directive>" in str(block.get("text", "")):
                    return str(found[-1]).strip()
    return None


def _worker_answer(directive: str) -> str:
    return (
        f"Scope: {directive}\nResult: nothing to run - the offline model carries out only "
        "code it is given (```python blocks or `py: ...` spans in the directive).\n"
    )


def _offline_summary(messages: Sequence[Mapping[str, Any]]) -> str:
    """A deterministic summary of a conversation, for a compaction request."""
    requests: list[str] = []
    calls: dict[str, int] = {}
    tasks: list[str] = []
    for message in messages:
        for block in _blocks(message):
            kind = block.get("type")
            text = str(block.get("text", "")) if kind == "text" else _result_text(block)
            for found in _TASK_ID.finditer(text):
                task = found.group(1) or found.group(2)
                if task and task not in tasks:
                    tasks.append(task)
            if kind == "tool_use":
                name = str(block.get("name"))
                calls[name] = calls.get(name, 0) + 1
            elif kind == "text" and message.get("role") == "user":
                plain = _OWN_BLOCKS.sub("", _DIRECTIVE_BLOCK.sub("", text)).strip()
                if plain:
                    requests.append(plain.splitlines()[0][:80])
    lines = [f"Earlier requests: {len(requests)}."]
    lines += [f"- {r}" for r in requests[-5:]]
    used = ", ".join(f"{name} x{n}" for name, n in sorted(calls.items())) or "none"
    lines.append(f"Tool calls: {used}.")
    if tasks:
        lines.append(f"Background tasks mentioned: {', '.join(tasks)}.")
    return "\n".join(lines)


_WEB = (
    ("web_search", re.compile(r"<web-search-query>(.*?)</web-search-query>", re.S), "query"),
    ("web_fetch", re.compile(r"<web-fetch-url>(.*?)</web-fetch-url>", re.S), "url"),
)


_THINKING_ON = ("enabled", "adaptive", "between_tools")


def _thinks(body: Mapping[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") in _THINKING_ON


def _thought(body: Mapping[str, Any], blocks: Sequence[Mapping[str, Any]]) -> str:
    """What the offline model 'thinks' before a reply: what it read and what it will do."""
    messages = list(body.get("messages") or [])
    last = _blocks(messages[-1]) if messages else []
    text = " ".join(str(b.get("text", "")) for b in last if b.get("type") == "text").split()
    read = " ".join(text[:12]) + (" ..." if len(text) > 12 else "")
    results = sum(1 for b in last if b.get("type") == "tool_result")
    calls = [str(b.get("name")) for b in blocks if b.get("type") == "tool_use"]
    seen = f"{results} tool result{'s' if results != 1 else ''}" if results else f"'{read}'"
    plan = f"call {', '.join(calls)}" if calls else "answer in text"
    return f"I read {seen} in message {len(messages)}. I will {plan}."


def offline_reply(
    body: Mapping[str, Any], sign: Callable[[str], str] | None = None
) -> tuple[list[Block], str]:
    """The offline model's reply to a request body: (content blocks without ids, stop_reason).
    With thinking on, a thinking block comes first (signed by `sign`, if given)."""
    blocks, stop_reason = _reply(body)
    if _thinks(body):
        thought = _thought(body, blocks)
        block: Block = {"type": "thinking", "thinking": thought}
        if sign is not None:
            block["signature"] = sign(thought)
        blocks = [block, *blocks]
    return blocks, stop_reason


def _reply(body: Mapping[str, Any]) -> tuple[list[Block], str]:
    messages = list(body.get("messages") or [])
    tools = {str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, Mapping)}
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users:
        return [{"type": "text", "text": CAPABILITIES}], "end_turn"
    last = users[-1]
    blocks = _blocks(messages[last])
    text = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    results = [b for b in blocks if b.get("type") == "tool_result"]

    if _COMPACT_REQUEST in text:
        return [{"type": "text", "text": _offline_summary(messages)}], "end_turn"
    for name, pattern, key in _WEB:
        found = pattern.search(text)
        if name in tools and found is not None:
            use: Block = {
                "type": "server_tool_use",
                "name": name,
                "input": {key: found.group(1).strip()},
            }
            return [use], "end_turn"
    notes = _NOTIFICATION.findall(text)
    if notes:
        return [{"type": "text", "text": _summarize_notifications(notes)}], "end_turn"
    directive = _directive(messages)
    if text.strip():
        calls, what = _plan_calls(_DIRECTIVE_BLOCK.sub("", text), tools)
        if calls:
            return [{"type": "text", "text": f"Running {what}."}, *calls], "tool_use"
        if "-directive>" in text:
            return [{"type": "text", "text": _worker_answer(directive or "")}], "end_turn"
        if not results:
            return [{"type": "text", "text": CAPABILITIES}], "end_turn"
    if results:
        names: dict[str, str] = {}
        for message in messages[:last]:
            for b in _blocks(message):
                if b.get("type") == "tool_use":
                    names[str(b.get("id"))] = str(b.get("name"))
        return [{"type": "text", "text": _report(results, names, directive)}], "end_turn"
    return [{"type": "text", "text": CAPABILITIES}], "end_turn"


def with_ids(body: Mapping[str, Any], blocks: list[Block]) -> list[Block]:
    seed = hashlib.sha256(
        json.dumps(body.get("messages"), sort_keys=True, default=str).encode()
    ).hexdigest()
    out: list[Block] = []
    for i, block in enumerate(blocks):
        if block["type"] == "tool_use" and "id" not in block:
            digest = hashlib.sha256(f"{seed}:{i}".encode()).hexdigest()[:24]
            block = {"type": "tool_use", "id": f"toolu_off{digest}", **block}
            block = {
                "type": block["type"],
                "id": block["id"],
                "name": block["name"],
                "input": block["input"],
            }
        out.append(block)
    return out
