"""Appending to a conversation without ever creating two consecutive same-role messages.

The API merges consecutive same-role turns, but the fork and resume paths promise never to
send them; `append_message` merges instead, the same way in memory and when a transcript is
loaded, so both give byte-identical histories.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ..messages_api.shapes import Block, Message

__all__ = [
    "FORK_TAG",
    "Block",
    "Message",
    "ToolCalls",
    "append_message",
    "blocks_of",
    "last_assistant_text",
    "own_start",
    "tool_calls",
    "unanswered_tool_uses",
    "valid_text",
]


FORK_TAG = "fork-directive"
"""The tag around a fork's directive (loop/fork.py writes it): a fork's own messages begin after
the last user message that holds one (`own_start`)."""


def blocks_of(message: Message) -> list[Block]:
    """A message's content as a list of blocks (a string is one text block)."""
    content = message["content"]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def append_message(history: list[Message], message: Message) -> None:
    """Append `message`, merging it into the last message when both have the same role.

    The merged message is a new dict (the old one may be shared with forks)."""
    if history and history[-1]["role"] == message["role"]:
        last = history[-1]
        history[-1] = {"role": last["role"], "content": [*blocks_of(last), *blocks_of(message)]}
    else:
        history.append(message)


def last_assistant_text(history: Sequence[Message]) -> str:
    """The text of the last assistant message that has any ("" when none has)."""
    for message in reversed(history):
        if message["role"] == "assistant":
            text = "".join(
                str(b.get("text", "")) for b in blocks_of(message) if b.get("type") == "text"
            ).strip()
            if text:
                return text
    return ""


def own_start(history: Sequence[Message], is_fork: bool) -> int:
    """Where an agent's own messages begin in `history`: a fork's after its directive (what
    comes before is the parent's, inherited); a named agent's at the start."""
    if not is_fork:
        return 0
    tag = f"<{FORK_TAG}>"
    for i in range(len(history) - 1, -1, -1):
        message = history[i]
        if message.get("role") == "user" and any(
            b.get("type") == "text" and tag in str(b.get("text", "")) for b in blocks_of(message)
        ):
            return i + 1
    return 0  # compacted away: everything left is its own


def unanswered_tool_uses(history: Sequence[Message]) -> list[str]:
    """Ids of tool_use blocks in a final assistant message (they still need results)."""
    if not history or history[-1]["role"] != "assistant":
        return []
    return [str(b["id"]) for b in blocks_of(history[-1]) if b.get("type") == "tool_use"]


class ToolCalls(NamedTuple):
    """An agent's tool calls as its messages record them."""

    made: int
    failed: int
    """Of `made`, those whose result was an error (is_error)."""
    unanswered: int
    """Of `made`, those with no result at all (the run was cut off while they ran)."""


def tool_calls(messages: Iterable[Message]) -> ToolCalls:
    """The tool calls the assistant messages of `messages` made, and how they came back. A
    result for a call not made in `messages` (a fork's placeholder for its parent's call) is
    not counted."""
    made: list[str] = []
    failed: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        for block in blocks_of(message):
            if message.get("role") == "assistant" and block.get("type") == "tool_use":
                made.append(str(block.get("id")))
            elif block.get("type") == "tool_result":
                answered.add(str(block.get("tool_use_id")))
                if block.get("is_error"):
                    failed.add(str(block.get("tool_use_id")))
    return ToolCalls(
        len(made), sum(1 for i in made if i in failed), sum(1 for i in made if i not in answered)
    )


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
