"""The documented tokenizer and prompt flattening (tokens.py), checked against hand counts.

Every expected figure is computed here from the rules in the tokens.py docstring: ceil(UTF-8
bytes / 4) over compact JSON, TOOL_OVERHEAD 8, SYSTEM_BLOCK_OVERHEAD 4, BLOCK_OVERHEAD 4,
MESSAGE_OVERHEAD 3, images ceil(w*h/750) capped at 1600.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from typing import Any

from forkagent_jupyter.messages_api.tokens import (
    BLOCK_OVERHEAD,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    SYSTEM_BLOCK_OVERHEAD,
    TOOL_OVERHEAD,
    ByteTokenizer,
    canonical,
    count_input_tokens,
    count_output_tokens,
    flatten,
    image_size,
    image_tokens,
    merge_messages,
)

TOK = ByteTokenizer()


def t(s: str) -> int:
    return math.ceil(len(s.encode("utf-8")) / 4)


def j(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def text(s: str, **kw: Any) -> dict[str, Any]:
    return {"type": "text", "text": s, **kw}


def png(w: int, h: int) -> str:
    raw = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", w, h)
    return base64.b64encode(raw + b"\x08\x02\x00\x00\x00").decode()


def image(data: str, media: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}


def test_constants_are_the_documented_ones() -> None:
    assert (TOOL_OVERHEAD, SYSTEM_BLOCK_OVERHEAD, BLOCK_OVERHEAD, MESSAGE_OVERHEAD) == (8, 4, 4, 3)
    assert IMAGE_TOKENS == 1600


def test_byte_tokenizer() -> None:
    assert TOK.count("") == 0
    assert TOK.count("a") == 1
    assert TOK.count("abcd") == 1
    assert TOK.count("abcde") == 2
    assert TOK.count("é") == 1  # 2 bytes
    assert TOK.count("ééé") == 2  # 6 bytes
    assert TOK.count("🙂") == 1  # 4 bytes
    assert TOK.count("x" * 4000) == 1000
    # a lone surrogate (a file name from os.listdir, half an emoji) counts, never raises
    assert TOK.count("caf\udce9") == 2  # 3 + 3 bytes
    assert count_input_tokens({"messages": [{"role": "user", "content": "\ud83d"}]}) > 0


def test_worked_example_of_the_docstring() -> None:
    assert count_input_tokens({"messages": [{"role": "user", "content": "hi"}]}) == 14


def test_canonical_drops_cache_control_keeps_key_order_and_unicode() -> None:
    block = {"type": "text", "cache_control": {"type": "ephemeral"}, "text": "é z", "b": 1}
    assert canonical(block) == '{"type":"text","text":"é z","b":1}'
    nested = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [text("x", cache_control={"type": "ephemeral"})],
        "cache_control": {"type": "ephemeral", "ttl": "1h"},
    }
    assert canonical(nested) == (
        '{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"x"}]}'
    )


def test_merge_keeps_original_indices() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "a"},
        {"role": "user", "content": [text("b"), text("c")]},
        {"role": "assistant", "content": "d"},
        {"role": "user", "content": ""},
    ]
    merged = merge_messages(messages)
    assert [m.role for m in merged] == ["user", "assistant", "user"]
    assert merged[0].blocks == [text("a"), text("b"), text("c")]
    assert merged[0].origin == [(0, 0), (1, 0), (1, 1)]
    assert merged[0].first_index == 0 and merged[0].indices == [0, 1]
    assert merged[1].origin == [(2, 0)] and merged[1].first_index == 2
    assert merged[2].blocks == [] and merged[2].first_index == 3  # "" is no content


def test_flatten_order_tiers_where_and_tokens() -> None:
    tool = {
        "name": "calc",
        "input_schema": {"type": "object"},
        "cache_control": {"type": "ephemeral"},
    }
    web = {"type": "web_search_20250305", "name": "web_search"}
    body = {
        "tools": [web, tool],
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "user", "content": [text("more", cache_control={"type": "ephemeral"})]},
            {"role": "assistant", "content": [text("ok"), text("done")]},
        ],
    }
    blocks = flatten(body, TOK)
    assert [(b.tier, b.where) for b in blocks] == [
        ("tools", "tools.1"),
        ("system", "tools.0"),  # a server tool opens the system tier
        ("system", "system.0"),
        ("messages", "messages.0.content.0"),
        ("messages", "messages.1.content.0"),
        ("messages", "messages.2.content.0"),
        ("messages", "messages.2.content.1"),
    ]
    tool_canon = '{"name":"calc","input_schema":{"type":"object"}}'
    assert blocks[0].canon == tool_canon
    assert blocks[0].tokens == 8 + t(tool_canon)
    assert blocks[0].cache_control == {"type": "ephemeral"}
    assert blocks[1].tokens == 8 + t(j(web))
    assert blocks[2].canon == '{"type":"text","text":"Be brief."}'
    assert blocks[2].tokens == 4 + t('{"type":"text","text":"Be brief."}')
    # the two user turns merge: only the first block carries MESSAGE_OVERHEAD
    assert blocks[3].tokens == 4 + 3 + t(j(text("hi")))
    assert blocks[4].tokens == 4 + t(j(text("more")))
    assert blocks[4].cache_control == {"type": "ephemeral"}
    assert blocks[5].tokens == 4 + 3 + t(j(text("ok")))
    assert blocks[6].tokens == 4 + t(j(text("done")))
    assert [b.role for b in blocks] == ["", "", "", "user", "user", "assistant", "assistant"]
    assert [b.starts_message for b in blocks] == [False] * 3 + [True, False, True, False]
    assert count_input_tokens(body, TOK) == sum(b.tokens for b in blocks)


def test_system_string_is_one_block_and_empty_string_is_none() -> None:
    body = {"system": "", "messages": [{"role": "user", "content": "x"}]}
    assert [b.tier for b in flatten(body)] == ["messages"]
    body = {"system": [text("a"), text("b")], "messages": [{"role": "user", "content": "x"}]}
    assert [b.where for b in flatten(body)] == ["system.0", "system.1", "messages.0.content.0"]


def test_cacheable_flags() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "s"},
                    {"type": "redacted_thinking", "data": "zz"},
                    text(" "),
                    text("a"),
                ],
            },
        ]
    }
    assert [b.cacheable for b in flatten(body)] == [True, False, False, False, True]


def test_image_sizes_and_tokens() -> None:
    assert image_size(base64.b64decode(png(100, 75))) == (100, 75)
    assert image_tokens(image(png(100, 75))) == math.ceil(100 * 75 / 750)  # 10
    assert image_tokens(image(png(1000, 1000))) == 1334
    assert image_tokens(image(png(4000, 3000))) == IMAGE_TOKENS  # capped
    gif = base64.b64encode(b"GIF89a" + struct.pack("<HH", 30, 25) + b"\x00" * 8).decode()
    assert image_tokens(image(gif, "image/gif")) == 1  # ceil(750/750)
    jpeg = b"\xff\xd8" + b"\xff\xe0" + struct.pack(">H", 4) + b"\x00\x00"
    jpeg += b"\xff\xc0" + struct.pack(">HBHH", 11, 8, 300, 400) + b"\x03" + b"\x00" * 8
    assert image_size(jpeg) == (400, 300)
    assert image_tokens(image(base64.b64encode(jpeg).decode(), "image/jpeg")) == 160
    webp = b"RIFF" + b"\x00" * 4 + b"WEBPVP8X" + b"\x00" * 8
    webp += (639).to_bytes(3, "little") + (479).to_bytes(3, "little")
    assert image_size(webp) == (640, 480)
    url = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    assert image_tokens(url) == IMAGE_TOKENS
    assert image_tokens(image("bm90IGFuIGltYWdl")) == IMAGE_TOKENS  # "not an image"


def test_image_blocks_are_billed_by_size_not_by_base64() -> None:
    pic = image(png(100, 75))
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [text("see"), pic]}
    body = {
        "messages": [
            {"role": "user", "content": [pic, text("what is it?")]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}],
            },
            {"role": "user", "content": [result]},
        ]
    }
    blocks = flatten(body)
    assert blocks[0].tokens == 4 + 3 + 10  # the image's JSON is not counted
    assert blocks[0].is_image and not blocks[1].is_image
    billed = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [text("see")]}
    assert blocks[3].tokens == 4 + 3 + t(j(billed)) + 10
    assert blocks[3].is_image
    assert blocks[3].canon == j(result)  # the hash still sees the image data


def _thinking_conversation() -> dict[str, Any]:
    thinking = {"type": "thinking", "thinking": "let me see", "signature": "sig"}
    use = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"x": 1}}
    return {
        "messages": [
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": [thinking, use]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
            {"role": "assistant", "content": [dict(thinking, thinking="again"), text("a1")]},
            {"role": "user", "content": "q2"},
        ]
    }


def test_thinking_of_earlier_turns_costs_nothing() -> None:
    body = _thinking_conversation()
    use = body["messages"][1]["content"][1]
    blocks = flatten(body)
    assert [b.where for b in blocks] == [
        "messages.0.content.0",
        "messages.1.content.0",
        "messages.1.content.1",
        "messages.2.content.0",
        "messages.3.content.0",
        "messages.3.content.1",
        "messages.4.content.0",
    ]
    assert blocks[1].tokens == 0 and blocks[4].tokens == 0
    assert blocks[2].tokens == 4 + 3 + t(j(use))  # the message overhead moves to the tool_use
    assert blocks[5].tokens == 4 + 3 + t(j(text("a1")))
    stripped = flatten(body, strip_previous_thinking=True)
    assert [b.where for b in stripped] == [b.where for b in blocks if b.tokens]
    assert stripped[1].starts_message  # the tool_use now opens the assistant message
    assert sum(b.tokens for b in stripped) == sum(b.tokens for b in blocks)
    assert count_input_tokens(body) == sum(b.tokens for b in blocks)


def test_thinking_of_the_current_turn_is_counted() -> None:
    body = _thinking_conversation()
    body["messages"] = body["messages"][:3]  # the tool loop is still running
    thinking = body["messages"][1]["content"][0]
    blocks = flatten(body, strip_previous_thinking=True)
    assert blocks[1].tokens == 4 + 3 + t(j(thinking))
    # a tool_result message with extra text does not start a new turn
    body["messages"][2]["content"].append(text("also this"))
    assert flatten(body)[1].tokens == 4 + 3 + t(j(thinking))


def test_output_tokens() -> None:
    assert count_output_tokens([]) == 1
    assert count_output_tokens([text("")]) == 1
    assert count_output_tokens([text("abcdefgh")]) == 2
    use = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "é"}}
    assert count_output_tokens([use]) == t("lookup") + t('{"q":"é"}')
    thinking = {"type": "thinking", "thinking": "x" * 10, "signature": "s"}
    assert count_output_tokens([thinking, text("hi")]) == 3 + 1
    assert count_output_tokens([{"type": "redacted_thinking", "data": "abcdabcd"}]) == 2
