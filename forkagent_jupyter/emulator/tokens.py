"""The emulator's deterministic token counter and the flattened view of a prompt.

Counting rules (so tests can compute every figure by hand):

* `ByteTokenizer.count(text)` = ceil(UTF-8 bytes / 4); 0 for "".
* A block's canonical form is its JSON with `cache_control` removed, key order kept,
  separators `,` and `:`, non-ASCII kept as is.
* Each tool definition: TOOL_OVERHEAD + count(canonical form).
* Each system block (a string `system` is one text block): BLOCK_OVERHEAD + count(text).
* Each message block: BLOCK_OVERHEAD + count(canonical form), plus MESSAGE_OVERHEAD on the
  first block of every (merged) message. An image block costs IMAGE_TOKENS whatever its
  size. Thinking blocks of assistant turns before the last one cost 0 (they are stripped, as
  the API does; create and count_tokens agree on this).
* Output: the sum of count(text) of text blocks, count(name) + count(input JSON) of tool_use
  blocks and count(thinking) of thinking blocks; at least 1.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = [
    "BLOCK_OVERHEAD",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "TOOL_OVERHEAD",
    "ByteTokenizer",
    "FlatBlock",
    "MergedMessage",
    "Tokenizer",
    "canonical",
    "count_input_tokens",
    "count_output_tokens",
    "flatten",
    "merge_messages",
]

TOOL_OVERHEAD = 8
BLOCK_OVERHEAD = 4
MESSAGE_OVERHEAD = 3
IMAGE_TOKENS = 1600

Tier = Literal["tools", "system", "messages"]


class Tokenizer(Protocol):
    def count(self, text: str) -> int: ...


class ByteTokenizer:
    """ceil(UTF-8 bytes / 4)."""

    def count(self, text: str) -> int:
        return math.ceil(len(text.encode("utf-8")) / 4)


def canonical(block: Mapping[str, Any]) -> str:
    """The block as JSON without `cache_control`, key order kept."""
    return json.dumps(
        {k: v for k, v in block.items() if k != "cache_control"},
        separators=(",", ":"),
        ensure_ascii=False,
    )


@dataclass(frozen=True)
class MergedMessage:
    """A message after merging consecutive same-role turns; `origin[j]` is the original
    (message index, block index) of block j."""

    role: str
    blocks: list[dict[str, Any]]
    origin: list[tuple[int, int]]
    first_index: int


def _as_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):  # "" is no content at all (an empty message)
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [b if isinstance(b, dict) else {"type": "text", "text": str(b)} for b in content]
    return []


def merge_messages(messages: Sequence[Mapping[str, Any]]) -> list[MergedMessage]:
    merged: list[MergedMessage] = []
    for i, message in enumerate(messages):
        role = str(message.get("role"))
        blocks = _as_blocks(message.get("content"))
        origin = [(i, j) for j in range(len(blocks))]
        if merged and merged[-1].role == role:
            merged[-1].blocks.extend(blocks)
            merged[-1].origin.extend(origin)
        else:
            merged.append(MergedMessage(role, list(blocks), origin, i))
    return merged


@dataclass(frozen=True)
class FlatBlock:
    tier: Tier
    canon: str
    tokens: int
    cache_control: dict[str, Any] | None
    where: str
    cacheable: bool
    is_image: bool = False


def _cacheable(block: Mapping[str, Any]) -> bool:
    kind = block.get("type")
    if kind in ("thinking", "redacted_thinking"):
        return False
    return not (kind == "text" and not str(block.get("text", "")).strip())


def flatten(body: Mapping[str, Any], tokenizer: Tokenizer | None = None) -> list[FlatBlock]:
    """Every cacheable position of the prompt, in prefix order: tools, system, messages."""
    tok = tokenizer or ByteTokenizer()
    out: list[FlatBlock] = []
    for i, tool in enumerate(body.get("tools") or []):
        if isinstance(tool, Mapping):
            canon = canonical(tool)
            out.append(
                FlatBlock(
                    "tools",
                    canon,
                    TOOL_OVERHEAD + tok.count(canon),
                    tool.get("cache_control"),
                    f"tools.{i}",
                    True,
                )
            )
    system = body.get("system")
    for i, block in enumerate(_as_blocks(system) if system is not None else []):
        text = str(block.get("text", ""))
        out.append(
            FlatBlock(
                "system",
                canonical(block),
                BLOCK_OVERHEAD + tok.count(text),
                block.get("cache_control"),
                f"system.{i}",
                _cacheable(block),
            )
        )
    merged = merge_messages(body.get("messages") or [])
    last_assistant = max((k for k, m in enumerate(merged) if m.role == "assistant"), default=-1)
    for k, message in enumerate(merged):
        for j, block in enumerate(message.blocks):
            kind = block.get("type")
            canon = canonical(block)
            if kind == "image":
                tokens = BLOCK_OVERHEAD + IMAGE_TOKENS
            elif kind in ("thinking", "redacted_thinking") and k != last_assistant:
                tokens = 0
            else:
                tokens = BLOCK_OVERHEAD + tok.count(canon)
            if j == 0:
                tokens += MESSAGE_OVERHEAD
            mi, bj = message.origin[j]
            out.append(
                FlatBlock(
                    "messages",
                    canon,
                    tokens,
                    block.get("cache_control"),
                    f"messages.{mi}.content.{bj}",
                    _cacheable(block),
                    kind == "image",
                )
            )
    return out


def count_input_tokens(body: Mapping[str, Any], tokenizer: Tokenizer | None = None) -> int:
    return sum(b.tokens for b in flatten(body, tokenizer))


def count_output_tokens(
    content: Sequence[Mapping[str, Any]], tokenizer: Tokenizer | None = None
) -> int:
    tok = tokenizer or ByteTokenizer()
    total = 0
    for block in content:
        kind = block.get("type")
        if kind == "text":
            total += tok.count(str(block.get("text", "")))
        elif kind == "tool_use":
            total += tok.count(str(block.get("name", "")))
            total += tok.count(json.dumps(block.get("input", {}), separators=(",", ":")))
        elif kind == "thinking":
            total += tok.count(str(block.get("thinking", "")))
    return max(total, 1)
