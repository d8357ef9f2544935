"""A record of the exact request bodies a session sends, for looking at how forks share a cache.

`RequestLog` wraps a `ModelClient`: each request is built with `build_request` (the same body
the Anthropic client sends) and kept, then passed on unchanged. Install it on a session before
the turns to look at: ``session.client = RequestLog(session.client)``.

`shared_prefix` finds where two bodies' bytes diverge, and `breakpoints` where their
`cache_control` markers sit, both over the bodies serialized in the API's order (tools,
system, messages): the order in which the prompt cache reads a prefix.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

from ..events import ModelEvent
from .client import ModelClient, ModelRequest, RequestBody, build_request

__all__ = ["Breakpoint", "RequestLog", "breakpoints", "prefix_bytes", "shared_prefix"]


class RequestLog:
    """A `ModelClient` that keeps every request body it forwards to `inner`."""

    def __init__(self, inner: ModelClient) -> None:
        self.inner = inner
        self.name = inner.name
        self.bodies: list[RequestBody] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.bodies.append(build_request(request))
        async for event in self.inner.stream(request):
            yield event

    async def aclose(self) -> None:
        await self.inner.aclose()


def prefix_bytes(body: Mapping[str, object]) -> bytes:
    """The body's cacheable part in the cache's order: tools, system, then messages."""
    ordered = {k: body.get(k) for k in ("tools", "system", "messages")}
    return json.dumps(ordered, ensure_ascii=False, separators=(",", ":")).encode()


def shared_prefix(a: Mapping[str, object], b: Mapping[str, object]) -> int:
    """How many leading bytes of `prefix_bytes` two bodies have in common."""
    x, y = prefix_bytes(a), prefix_bytes(b)
    n = min(len(x), len(y))
    for i in range(n):
        if x[i] != y[i]:
            return i
    return n


@dataclass(frozen=True)
class Breakpoint:
    """A `cache_control` marker: where it is (`tools[3]`, `messages[4].content[1]`), its TTL,
    and the byte offset in `prefix_bytes` just after the marked block."""

    where: str
    ttl: str
    end_byte: int


def breakpoints(body: Mapping[str, object]) -> list[Breakpoint]:
    """The body's cache breakpoints, in cache order."""
    found: list[Breakpoint] = []
    data = prefix_bytes(body)
    offset = 0

    def visit(block: object, where: str) -> None:
        nonlocal offset
        if isinstance(block, Mapping) and "cache_control" in block:
            encoded = json.dumps(block, ensure_ascii=False, separators=(",", ":")).encode()
            at = data.find(encoded, offset)
            end = at + len(encoded) if at >= 0 else -1
            offset = max(offset, end)
            ttl = str(block["cache_control"].get("ttl", "5m"))
            found.append(Breakpoint(where, ttl, end))

    tools = body.get("tools")
    for i, tool in enumerate(tools if isinstance(tools, list) else []):
        visit(tool, f"tools[{i}]")
    system = body.get("system")
    for i, block in enumerate(system if isinstance(system, list) else []):
        visit(block, f"system[{i}]")
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, Mapping) else None
        for j, block in enumerate(content if isinstance(content, list) else []):
            visit(block, f"messages[{i}].content[{j}]")
    return found
