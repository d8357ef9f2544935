"""Reading a Messages API event stream: SSE lines to events, events folded into a message.

`MessageReducer.feed(event)` is a pure fold over the documented event types (message_start,
content_block_start/delta/stop, message_delta, message_stop; ping and unknown types are
ignored); it returns the text of a text delta so callers can stream it. Parsing the JSON
ourselves instead of building SDK model objects per event keeps a kernel with hundreds of
streaming workers responsive.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from typing_extensions import TypedDict

from ...messages_api.shapes import JSON, Block

__all__ = ["MessageReducer", "StreamError", "StreamEvent", "sse_events"]


class _Started(TypedDict, total=False):
    id: str
    model: str
    usage: dict[str, JSON]


class _Delta(TypedDict, total=False):
    type: str
    text: str
    partial_json: str
    thinking: str
    signature: str
    citation: dict[str, JSON]
    stop_reason: str | None


class _Error(TypedDict, total=False):
    type: str
    message: str


class StreamEvent(TypedDict, total=False):
    """One event of a Messages API stream, as its JSON data says (the fields of every type;
    `MessageReducer.feed` reads those of the event's own type)."""

    type: str
    index: int
    message: _Started
    content_block: Block
    delta: _Delta
    usage: dict[str, JSON]
    error: _Error


class StreamError(Exception):
    """An `error` event arrived in the stream (the response had already started)."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, StreamEvent]]:
    """(event name, data) for each server-sent event."""
    name = ""
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                payload: StreamEvent = json.loads("\n".join(data))
                yield name or str(payload.get("type", "")), payload
            name, data = "", []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
    if data:
        last: StreamEvent = json.loads("\n".join(data))
        yield name or str(last.get("type", "")), last


@dataclass
class MessageReducer:
    """Folds stream events into the final message."""

    id: str = ""
    model: str = ""
    content: list[Block | None] = field(default_factory=list)
    """The blocks so far, by index (None: a gap, or a start that had no block)."""
    stop_reason: str | None = None
    usage: dict[str, JSON] = field(default_factory=dict)
    started: bool = False
    finished: bool = False
    _json: dict[int, list[str]] = field(default_factory=dict)

    def feed(self, name: str, event: StreamEvent) -> str | None:
        kind = event.get("type", name)
        if kind == "message_start":
            message = event.get("message") or {}
            self.started = True
            self.id = str(message.get("id", ""))
            self.model = str(message.get("model", ""))
            self.usage = dict(message.get("usage") or {})
        elif kind == "content_block_start":
            started = event.get("content_block")
            block = started.copy() if started else None
            index = int(event.get("index", len(self.content)))
            while len(self.content) <= index:
                self.content.append(None)
            if block is not None and block.get("type") == "tool_use":
                block["input"] = {}
                self._json[index] = []
            self.content[index] = block
        elif kind == "content_block_delta":
            return self._delta(int(event.get("index", 0)), event.get("delta") or {})
        elif kind == "content_block_stop":
            index = int(event.get("index", 0))
            parts = self._json.pop(index, None)
            stopped = self.content[index] if parts is not None else None
            if parts is not None and stopped is not None:
                text = "".join(parts)
                stopped["input"] = json.loads(text) if text.strip() else {}
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            if delta.get("stop_reason") is not None:
                self.stop_reason = str(delta["stop_reason"])
            for key, value in (event.get("usage") or {}).items():
                if value is not None:
                    self.usage[key] = value
        elif kind == "message_stop":
            self.finished = True
        elif kind == "error":
            err = event.get("error") or {}
            raise StreamError(str(err.get("type", "error")), str(err.get("message", "")))
        return None

    def _delta(self, index: int, delta: _Delta) -> str | None:
        block = self.content[index]
        if block is None:
            return None
        kind = delta.get("type")
        if kind == "text_delta":
            text = str(delta.get("text", ""))
            block["text"] = block.get("text", "") + text
            return text
        if kind == "input_json_delta":
            self._json.setdefault(index, []).append(str(delta.get("partial_json", "")))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = str(delta.get("signature", ""))
        elif kind == "citations_delta":
            citation = delta.get("citation")
            if citation is not None:
                block.setdefault("citations", []).append(citation)
        return None

    def blocks(self) -> list[Block]:
        """The content as API dicts with a stable key order (what is sent back later)."""
        out: list[Block] = []
        for b in self.content:
            if b is None:
                continue
            kind = b.get("type")
            if kind == "text":
                block: Block = {"type": "text", "text": b.get("text", "")}
                if b.get("citations"):
                    block["citations"] = b["citations"]
                out.append(block)
            elif kind == "tool_use":
                out.append(
                    {"type": "tool_use", "id": b["id"], "name": b["name"], "input": b["input"]}
                )
            elif kind == "thinking":
                out.append(
                    {
                        "type": "thinking",
                        "thinking": b.get("thinking", ""),
                        "signature": b.get("signature", ""),
                    }
                )
            elif kind == "redacted_thinking":
                out.append({"type": "redacted_thinking", "data": b.get("data", "")})
            elif b:
                out.append(b)
        return out
