"""Appending to a conversation without ever creating two consecutive same-role messages.

The API merges consecutive same-role turns, but the fork and resume paths promise never to
send them; `append_message` merges instead, the same way in memory and when a transcript is
loaded, so both give byte-identical histories.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "append_message",
    "blocks_of",
    "last_assistant_text",
    "unanswered_tool_uses",
    "valid_text",
]


def blocks_of(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A message's content as a list of blocks (a string is one text block)."""
    content = message["content"]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def append_message(history: list[dict[str, Any]], message: dict[str, Any]) -> None:
    """Append `message`, merging it into the last message when both have the same role.

    The merged message is a new dict (the old one may be shared with forks)."""
    if history and history[-1]["role"] == message["role"]:
        last = history[-1]
        history[-1] = {"role": last["role"], "content": [*blocks_of(last), *blocks_of(message)]}
    else:
        history.append(message)


def last_assistant_text(history: list[dict[str, Any]]) -> str:
    """The text of the last assistant message that has any ("" when none has)."""
    for message in reversed(history):
        if message["role"] == "assistant":
            text = "".join(
                str(b.get("text", "")) for b in blocks_of(message) if b.get("type") == "text"
            ).strip()
            if text:
                return text
    return ""


def unanswered_tool_uses(history: list[dict[str, Any]]) -> list[str]:
    """Ids of tool_use blocks in a final assistant message (they still need results)."""
    if not history or history[-1]["role"] != "assistant":
        return []
    return [str(b["id"]) for b in blocks_of(history[-1]) if b.get("type") == "tool_use"]


def valid_text(text: str) -> str:
    """`text` as UTF-8 encoders accept it (the API's JSON, ZMQ, transcripts): a lone surrogate
    (a file name in another encoding from `os.listdir`, half an emoji) becomes its escape,
    `\\udce9`; everything else is left as it is."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
