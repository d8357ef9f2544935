"""Messages and content blocks as the runtime and the emulator hold them: the wire shape.

The `anthropic` SDK types what it sends (`MessageParam`: a union of fifteen block TypedDicts
with `Iterable` content) and what it receives (pydantic models), but not what a conversation
is once it is kept: a list of plain dicts that is sent again, written to a transcript, read
back and forked. `Message` and `Block` are that shape. `Block` names every field a block of
any type may carry, so a reader of a history gets its keys checked (a typo is a type error)
without narrowing each block first; the API's own rules for which fields go with which type
are checked where they matter, by `validation` (the emulator in strict mode) and by the API.

`JSON` is a value a JSON document can hold: a tool's input, a structured result.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from typing_extensions import Required, TypedDict

__all__ = ["JSON", "Block", "CacheControl", "Message", "Role", "Source", "ToolInput"]

JSON: TypeAlias = str | int | float | bool | list["JSON"] | dict[str, "JSON"] | None

ToolInput: TypeAlias = dict[str, Any]
"""A tool call's input as the model wrote it: any JSON object (each tool validates its own
with pydantic before it runs)."""

Role: TypeAlias = Literal["user", "assistant"]


class CacheControl(TypedDict, total=False):
    type: Required[Literal["ephemeral"]]
    ttl: str


class Source(TypedDict, total=False):
    """Where an image's or a document's bytes are: inline (base64) or at a URL."""

    type: Required[str]
    media_type: str
    data: str
    url: str


class Block(TypedDict, total=False):
    """One content block of any type: text, image, document, tool_use, tool_result,
    thinking, redacted_thinking, server tool blocks."""

    type: Required[str]
    text: str
    cache_control: CacheControl
    citations: list[dict[str, JSON]]
    # tool_use, server_tool_use
    id: str
    name: str
    input: ToolInput
    # tool_result
    tool_use_id: str
    content: str | list[Block]
    is_error: bool
    # thinking, redacted_thinking
    thinking: str
    signature: str
    data: str
    # image, document
    source: Source
    title: str


class Message(TypedDict):
    """One message of a conversation."""

    role: Role
    content: str | list[Block]
