"""The emulator's deterministic token counts and the flattened (cacheable) view of a prompt.

Every figure the emulator bills can be computed by hand from these rules (spec §6.6):

* `ByteTokenizer.count(text)` = ceil(UTF-8 bytes / 4); 0 for "". Any object with a
  `count(str) -> int` method can replace it (`Tokenizer` protocol).
* Canonical form of a block: its JSON with `cache_control` removed (also from the blocks
  nested in a `tool_result`'s content), key order kept, separators "," and ":", non-ASCII
  kept as is (`ensure_ascii=False`). A string `system` or message `content` is the block
  {"type":"text","text":...}. The canonical form is what the cache hashes.
* Billed form of a block: the canonical form with every image block removed (the block
  itself when it is an image: then the billed form is empty and counts 0; or an image inside
  a `tool_result`'s content list).
* Image tokens: ceil(width * height / 750), at most IMAGE_TOKENS, when the size can be read
  from a base64 PNG, GIF, JPEG or WebP; IMAGE_TOKENS otherwise (URL/file sources, unknown
  data).
* A tool definition (`tools[i]`): TOOL_OVERHEAD + count(canonical form).
* A system block (`system[i]`, or the `system` string): SYSTEM_BLOCK_OVERHEAD +
  count(canonical form).
* A message block: BLOCK_OVERHEAD + count(billed form) + its image tokens, plus
  MESSAGE_OVERHEAD on the first billed block of every merged message (see below).
* Thinking of earlier turns: a `thinking` / `redacted_thinking` block of an assistant message
  that comes before the last user message without `tool_result` blocks (i.e. not part of
  the current turn and its tool loop) costs 0 tokens and does not carry the
  message overhead, as in spec §8. `create` and `count_tokens` bill the same total. Models
  that strip such blocks (`strip_previous_thinking=True`) also drop them from the flattened
  prompt (so they are not hashed); others keep them as 0-token positions.
* Breakpoints are the `cache_control` markers of positions (tools, system blocks, message
  blocks); markers on blocks nested in a `tool_result` are ignored.
* Output tokens (`count_output_tokens`): count(text) of text blocks, count(name) +
  count(canonical input JSON) of tool_use blocks, count(thinking) of thinking blocks,
  count(data) of redacted_thinking blocks; at least 1.

Worked example: messages=[{"role":"user","content":"hi"}] is one block whose canonical form
'{"type":"text","text":"hi"}' has 27 bytes: 4 + 3 + ceil(27/4) = 14 input tokens.

Merging: consecutive messages with the same role become one message before anything is
counted or validated (`merge_messages`); each merged block remembers its original
(message index, block index) for error messages and `FlatBlock.where`.

Server tools (a tool whose `type` is set and is not "custom", e.g. `web_search_20250305`) are
not positions of the tools tier: they are placed at the start of the system tier, since
toggling them invalidates the system tier but not the custom tools (spec §6.2, §6.3 step 1).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = [
    "BLOCK_OVERHEAD",
    "IMAGE_PIXELS_PER_TOKEN",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "SYSTEM_BLOCK_OVERHEAD",
    "TOOL_OVERHEAD",
    "ByteTokenizer",
    "FlatBlock",
    "MergedMessage",
    "Tokenizer",
    "as_blocks",
    "canonical",
    "count_input_tokens",
    "count_output_tokens",
    "current_turn_start",
    "flatten",
    "image_size",
    "image_tokens",
    "is_server_tool",
    "merge_messages",
]

TOOL_OVERHEAD = 8
SYSTEM_BLOCK_OVERHEAD = 4
BLOCK_OVERHEAD = 4
MESSAGE_OVERHEAD = 3
IMAGE_TOKENS = 1600
IMAGE_PIXELS_PER_TOKEN = 750

_HEADER_CHARS = 262_144  # base64 characters decoded to find an image's size (192 KiB)

Tier = Literal["tools", "system", "messages"]
_THINKING = ("thinking", "redacted_thinking")


class Tokenizer(Protocol):
    """Counts the tokens of a string."""

    def count(self, text: str) -> int: ...


class ByteTokenizer:
    """ceil(UTF-8 bytes / 4): 0 for "", 1 for "abcd", 2 for "abcde", 1 for "é" (2 bytes)."""

    def count(self, text: str) -> int:
        return math.ceil(len(text.encode("utf-8", "surrogatepass")) / 4)  # lone ones too


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _without_cache_control(block: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in block.items() if k != "cache_control"}
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = [
            _without_cache_control(b) if isinstance(b, Mapping) else b for b in content
        ]
    return out


def canonical(block: Mapping[str, Any]) -> str:
    """The block as compact JSON, `cache_control` removed (also nested), key order kept."""
    return _dumps(_without_cache_control(block))


def as_blocks(content: Any) -> list[dict[str, Any]]:
    """Message or system content as a list of blocks; "" (or a non-list) is no block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [
            dict(b) if isinstance(b, Mapping) else {"type": "text", "text": str(b)} for b in content
        ]
    return []


def is_server_tool(tool: Mapping[str, Any]) -> bool:
    """A server tool has a versioned `type` (anything but a missing type or "custom")."""
    kind = tool.get("type")
    return kind is not None and kind != "custom"


# --- images -------------------------------------------------------------------------------


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, GIF, JPEG or WebP header; None when not recognised."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        w, h = struct.unpack("<HH", data[6:10])
        return int(w), int(h)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        chunk = data[12:16]
        if chunk == b"VP8X":
            w = int.from_bytes(data[24:27], "little") + 1
            h = int.from_bytes(data[27:30], "little") + 1
            return w, h
        if chunk == b"VP8 ":
            w, h = struct.unpack("<HH", data[26:30])
            return int(w) & 0x3FFF, int(h) & 0x3FFF
        if chunk == b"VP8L" and len(data) >= 25:
            bits = int.from_bytes(data[21:25], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        return None
    if data[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(data):
            if data[i] != 0xFF:
                return None
            marker = data[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            (length,) = struct.unpack(">H", data[i + 2 : i + 4])
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                h, w = struct.unpack(">HH", data[i + 5 : i + 9])
                return int(w), int(h)
            i += 2 + length
    return None


def image_tokens(block: Mapping[str, Any]) -> int:
    """Tokens of one image block: ceil(w*h/750) capped at IMAGE_TOKENS, else IMAGE_TOKENS."""
    source = block.get("source")
    if isinstance(source, Mapping) and source.get("type") == "base64":
        try:
            head = str(source.get("data", ""))[:_HEADER_CHARS]
            raw = base64.b64decode(head[: len(head) // 4 * 4], validate=False)
        except (binascii.Error, ValueError):
            return IMAGE_TOKENS
        size = image_size(raw)
        if size is not None:
            w, h = size
            return min(math.ceil(w * h / IMAGE_PIXELS_PER_TOKEN), IMAGE_TOKENS)
    return IMAGE_TOKENS


def _billed(block: Mapping[str, Any], tok: Tokenizer) -> tuple[int, bool]:
    """(count(billed form) + image tokens, whether the block holds an image)."""
    if block.get("type") == "image":
        return image_tokens(block), True
    clean = _without_cache_control(block)
    content = clean.get("content")
    images = 0
    has_image = False
    if isinstance(content, list):
        kept = []
        for inner in content:
            if isinstance(inner, Mapping) and inner.get("type") == "image":
                images += image_tokens(inner)
                has_image = True
            else:
                kept.append(inner)
        clean["content"] = kept
    return tok.count(_dumps(clean)) + images, has_image


# --- merging ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MergedMessage:
    """A message after merging consecutive same-role turns.

    `origin[j]` is the original (message index, block index) of `blocks[j]`; `first_index`
    is the index of the first original message merged into this one.
    """

    role: str
    blocks: list[dict[str, Any]]
    origin: list[tuple[int, int]]
    first_index: int
    indices: list[int] = field(default_factory=list)


def merge_messages(messages: Sequence[Mapping[str, Any]]) -> list[MergedMessage]:
    """Merge consecutive same-role messages; string content is one text block."""
    merged: list[MergedMessage] = []
    for i, message in enumerate(messages):
        role = str(message.get("role"))
        blocks = as_blocks(message.get("content"))
        origin = [(i, j) for j in range(len(blocks))]
        if merged and merged[-1].role == role:
            merged[-1].blocks.extend(blocks)
            merged[-1].origin.extend(origin)
            merged[-1].indices.append(i)
        else:
            merged.append(MergedMessage(role, blocks, origin, i, [i]))
    return merged


def current_turn_start(merged: Sequence[MergedMessage]) -> int:
    """Index (in `merged`) of the last user message without any tool_result block.

    Assistant messages after it form the current turn (its tool loop); thinking blocks of
    assistant messages before it belong to earlier turns. -1 when there is no such message.
    """
    for k in range(len(merged) - 1, -1, -1):
        message = merged[k]
        if message.role == "user" and all(b.get("type") != "tool_result" for b in message.blocks):
            return k
    return -1


# --- flattening ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FlatBlock:
    """One position of the flattened prompt (tools -> system -> messages).

    `canon` is the canonical form (hashed by the cache), `tokens` its billed tokens,
    `where` its path in the request ("tools.2", "system.0", "messages.3.content.1"),
    `cacheable` whether it may carry a breakpoint (not thinking / redacted_thinking / empty
    text), `is_image` whether it is or holds an image. `role` is the message role ("" for
    tools and system) and `starts_message` marks the first block of a merged message.
    """

    tier: Tier
    canon: str
    tokens: int
    cache_control: dict[str, Any] | None
    where: str
    cacheable: bool
    is_image: bool = False
    role: str = ""
    starts_message: bool = False


def _cacheable(block: Mapping[str, Any]) -> bool:
    kind = block.get("type")
    if kind in _THINKING:
        return False
    return not (kind == "text" and not str(block.get("text", "")).strip())


def _cc(block: Mapping[str, Any]) -> dict[str, Any] | None:
    cc = block.get("cache_control")
    return dict(cc) if isinstance(cc, Mapping) else None


def flatten(
    body: Mapping[str, Any],
    tokenizer: Tokenizer | None = None,
    *,
    strip_previous_thinking: bool = False,
) -> list[FlatBlock]:
    """Every position of the prompt in prefix order: custom tools, server tools and system
    blocks, then the blocks of the merged messages (spec §6.3 step 1)."""
    tok = tokenizer or ByteTokenizer()
    out: list[FlatBlock] = []
    tools = [(i, t) for i, t in enumerate(body.get("tools") or []) if isinstance(t, Mapping)]
    for i, tool in tools:
        if not is_server_tool(tool):
            canon = canonical(tool)
            out.append(
                FlatBlock(
                    "tools", canon, TOOL_OVERHEAD + tok.count(canon), _cc(tool), f"tools.{i}", True
                )
            )
    for i, tool in tools:
        if is_server_tool(tool):
            canon = canonical(tool)
            out.append(
                FlatBlock(
                    "system", canon, TOOL_OVERHEAD + tok.count(canon), _cc(tool), f"tools.{i}", True
                )
            )
    system = body.get("system")
    for i, block in enumerate(as_blocks(system) if system is not None else []):
        canon = canonical(block)
        out.append(
            FlatBlock(
                "system",
                canon,
                SYSTEM_BLOCK_OVERHEAD + tok.count(canon),
                _cc(block),
                f"system.{i}",
                _cacheable(block),
            )
        )
    merged = merge_messages(body.get("messages") or [])
    turn = current_turn_start(merged)
    for k, message in enumerate(merged):
        earlier = message.role == "assistant" and k < turn
        first = True  # the next billed block carries MESSAGE_OVERHEAD
        starts = True  # the next position starts the merged message
        for j, block in enumerate(message.blocks):
            mi, bj = message.origin[j]
            old_thinking = earlier and block.get("type") in _THINKING
            if old_thinking and strip_previous_thinking:
                continue
            if old_thinking:
                tokens, has_image = 0, False
            else:
                billed, has_image = _billed(block, tok)
                tokens = BLOCK_OVERHEAD + billed + (MESSAGE_OVERHEAD if first else 0)
            out.append(
                FlatBlock(
                    "messages",
                    canonical(block),
                    tokens,
                    _cc(block),
                    f"messages.{mi}.content.{bj}",
                    _cacheable(block),
                    has_image,
                    message.role,
                    starts,
                )
            )
            starts = False
            if not old_thinking:
                first = False
    return out


def count_input_tokens(body: Mapping[str, Any], tokenizer: Tokenizer | None = None) -> int:
    """Total prompt tokens: what `count_tokens` returns and `create` bills (all tiers)."""
    return sum(b.tokens for b in flatten(body, tokenizer))


def count_output_tokens(
    content: Sequence[Mapping[str, Any]], tokenizer: Tokenizer | None = None
) -> int:
    """Output tokens of a reply's content blocks (at least 1, even for an empty reply)."""
    tok = tokenizer or ByteTokenizer()
    total = 0
    for block in content:
        kind = block.get("type")
        if kind == "text":
            total += tok.count(str(block.get("text", "")))
        elif kind == "tool_use":
            total += tok.count(str(block.get("name", "")))
            total += tok.count(_dumps(block.get("input", {})))
        elif kind == "thinking":
            total += tok.count(str(block.get("thinking", "")))
        elif kind == "redacted_thinking":
            total += tok.count(str(block.get("data", "")))
    return max(total, 1)
