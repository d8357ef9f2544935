"""A tool of an MCP server, as the model sees it: `mcp__<server>__<tool>`, with the server's own
description and input schema. The server validates the input; what comes back (text, PNG
images, structured content) becomes the tool_result. A server that fails, hangs or answers
junk is an `is_error` result and one line for the calling agent's card (`McpServers.note`);
the run goes on. MCP tools ask for approval unless a rule (`mcp__server`, `mcp__server__*`,
`mcp__server__tool`) or the mode allows them."""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from ..config.mcp_config import tool_name
from ..output import cap_output
from ..tools.base import Tool, ToolContext, ToolError, ToolOutput
from .client import McpCallError, McpConnection, McpToolInfo

if TYPE_CHECKING:
    from mcp.types import CallToolResult

__all__ = ["McpInput", "McpTool"]

MAX_MCP_OUTPUT = 100_000


class McpInput(BaseModel):
    """Whatever the model sends: the server checks it against its schema."""

    model_config = ConfigDict(extra="allow")


class _Notes(Protocol):
    def note(self, agent_id: str, line: str) -> None: ...


class McpTool(Tool[McpInput]):
    """One tool of one connected server."""

    name: str  # type: ignore[misc]  # per instance, not per class
    description: str  # type: ignore[misc]
    input_model: ClassVar[type[BaseModel]] = McpInput
    needs_approval: ClassVar[bool] = True

    def __init__(self, server: McpConnection, info: McpToolInfo, notes: _Notes | None) -> None:
        self.server = server
        self.info = info
        self.name = tool_name(server.name, info.name)
        self.description = info.description
        self._notes = notes
        self._spec = {
            "name": self.name,
            "description": info.description,
            "input_schema": info.input_schema,
        }
        self._spec_bytes = json.dumps(self._spec)

    def spec(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self._spec_bytes)
        return result

    def describe(self, args: McpInput) -> str:
        data = json.dumps(args.model_dump(), ensure_ascii=False, default=str)
        return f"{self.name} {data}" if data != "{}" else self.name

    async def run(self, args: McpInput, ctx: ToolContext) -> str | ToolOutput:
        try:
            result = await self.server.call(self.info.name, args.model_dump())
        except McpCallError as exc:
            self._note(ctx, str(exc))
            raise ToolError(str(exc)) from None
        try:
            text, images = _result(result)
        except (TypeError, ValueError, AttributeError) as exc:
            line = f"MCP server '{self.server.name}' answered {self.info.name} with junk ({exc})."
            self._note(ctx, line)
            raise ToolError(line) from None
        text = cap_output(text, MAX_MCP_OUTPUT)
        if getattr(result, "is_error", False):
            raise ToolError(text or f"{self.name} failed (the server gave no message).")
        return ToolOutput(text, images) if images else text

    def _note(self, ctx: ToolContext, line: str) -> None:
        if self._notes is not None:
            self._notes.note(ctx.agent_id, line)


def _result(result: CallToolResult) -> tuple[str, tuple[bytes, ...]]:
    """The text and PNG images of a CallToolResult (ValueError/TypeError when it is none)."""
    content = result.content
    if not isinstance(content, list):
        raise TypeError("its content is not a list")
    parts: list[str] = []
    images: list[bytes] = []
    for block in content:
        if block.type == "text":
            parts.append(str(block.text))
        elif block.type == "image":
            if block.mime_type != "image/png":
                parts.append(f"[an image of type {block.mime_type}, not shown]")
                continue
            try:
                images.append(base64.b64decode(block.data, validate=True))
            except (binascii.Error, ValueError):
                raise ValueError("an image that is not base64") from None
        elif block.type == "resource":
            resource = block.resource
            body = getattr(resource, "text", None)
            parts.append(str(body) if body is not None else f"[resource {resource.uri}]")
        elif block.type == "resource_link":
            parts.append(f"[resource {block.uri}]")
        else:
            parts.append(f"[a {block.type} block, not shown]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, default=str))
    return "\n".join(parts), tuple(images)
