"""Request validation: the Messages API's rules, with its error messages.

All messages are in `MESSAGES` (placeholders in braces). Consecutive same-role messages are
merged first (as the API does) and the rules run on the merged list; error messages keep the
original indices. `strict_legacy` restores the old rules: roles must alternate and the first
message must be a user message.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import re
from collections.abc import Mapping
from typing import Any

from .catalog import ModelInfo, lookup
from .errors import ApiError
from .tokens import ByteTokenizer, Tokenizer, count_input_tokens, merge_messages

__all__ = ["MESSAGES", "THINKING_SECRET", "sign_thinking", "validate_request", "verify_thinking"]

THINKING_SECRET = b"forkagent-emulator"
_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

MESSAGES: dict[str, str] = {
    "required": "{field}: Field required",
    "type": "{field}: Input should be {expected}",
    "empty_message": (
        "messages.{i}: all messages must have non-empty content except for the optional "
        "final assistant message"
    ),
    "empty_text": "messages: text content blocks must be non-empty",
    "blank_text": "messages: text content blocks must contain non-whitespace text",
    "cache_empty_text": (
        "messages.{i}.content.{j}.text: cache_control cannot be set for empty text blocks"
    ),
    "cache_thinking": "messages.{i}.content.{j}.thinking: cache_control cannot be set for thinking blocks",
    "too_many_breakpoints": "A maximum of 4 blocks with cache_control may be provided. Found {n}.",
    "auto_with_four": (
        "cache_control: automatic caching cannot be used when 4 blocks already have cache_control"
    ),
    "auto_ttl_conflict": (
        "cache_control: the last block's cache_control ttl ({block}) differs from the "
        "top-level cache_control ttl ({top})"
    ),
    "ttl_order": (
        "cache_control: a ttl='1h' cache_control block cannot come after a ttl='5m' one; "
        "longer lifetimes must come first"
    ),
    "unanswered": (
        "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
        "after: {ids}. Each `tool_use` block must have a corresponding `tool_result` block in "
        "the next message."
    ),
    "unexpected_result": (
        "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
        "{id}. Each `tool_result` block must have a corresponding `tool_use` block in the "
        "previous message."
    ),
    "results_first": (
        "messages.{i}: `tool_result` blocks must come first in the content of a message that "
        "answers `tool_use` blocks; found `{kind}` before them."
    ),
    "duplicate_id": "messages.{i}.content.{j}: `tool_use` ids must be unique",
    "duplicate_tool": "tools: Tool names must be unique.",
    "bad_id": "messages.{i}.content.{j}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
    "bad_tool_name": "tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'",
    "thinking_first": (
        "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        "`{t}`. When `thinking` is enabled, a final `assistant` message must start with a "
        "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). "
        "We recommend you include thinking blocks from previous turns. To avoid this "
        "requirement, disable `thinking`. Please consult our documentation at "
        "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
    ),
    "thinking_disabled": (
        "messages.{i}.content.{j}: When thinking is disabled, an `assistant` message in the "
        "final position cannot contain `thinking`. To use thinking blocks, enable `thinking` "
        "in your request."
    ),
    "thinking_modified": (
        "messages.{i}.content.{j}: `thinking` or `redacted_thinking` blocks in the latest "
        "assistant message cannot be modified. These blocks must remain as they were in the "
        "original response."
    ),
    "budget": "thinking.budget_tokens: must be at least 1024 and less than max_tokens",
    "thinking_tool_choice": ("Thinking may not be enabled when tool_choice forces tool use."),
    "too_long": "prompt is too long: {n} tokens > {max} maximum",
    "max_tokens": "max_tokens: {n} > {max}, which is the maximum allowed number of output tokens for {model}",
    "sampling": "{field}: this parameter is not supported by API version {version}",
    "assistant_document": "messages.{i}.content.{j}: document blocks are not allowed in assistant messages",
    "user_citations": "messages.{i}.content.{j}.citations: citations are not allowed in user messages",
    "prefill": "This model does not support assistant message prefill. The conversation must end with a user message.",
    "system_role_model": "role 'system' is not supported on this model",
    "system_role_place": "messages.{i}: a `system` message must follow a `user` message and be followed by an `assistant` message or end the conversation",
    "warm_combo": "max_tokens: 0 cannot be combined with {what}",
    "tool_choice": "tool_choice: {problem}",
    "alternate": 'messages: roles must alternate between "user" and "assistant", but found multiple "{role}" roles in a row',
    "first_user": 'messages: first message must use the "user" role',
    "role": "messages.{i}.role: Input should be 'user', 'assistant' or 'system'",
}


def _err(key: str, **values: Any) -> ApiError:
    return ApiError(400, "invalid_request_error", MESSAGES[key].format(**values))


def sign_thinking(thinking: str, secret: bytes = THINKING_SECRET) -> str:
    return hmac.new(secret, thinking.encode("utf-8"), hashlib.sha256).hexdigest()


def verify_thinking(block: Mapping[str, Any], secret: bytes = THINKING_SECRET) -> bool:
    if block.get("type") == "redacted_thinking":
        return isinstance(block.get("data"), str)
    expected = sign_thinking(str(block.get("thinking", "")), secret)
    return hmac.compare_digest(expected, str(block.get("signature", "")))


def _require(body: Mapping[str, Any], for_count_tokens: bool) -> None:
    fields = ["model", "messages"] if for_count_tokens else ["model", "max_tokens", "messages"]
    for name in fields:
        if name not in body:
            raise _err("required", field=name)
    if not isinstance(body["model"], str):
        raise _err("type", field="model", expected="a valid string")
    if not for_count_tokens and (
        not isinstance(body["max_tokens"], int) or isinstance(body["max_tokens"], bool)
    ):
        raise _err("type", field="max_tokens", expected="a valid integer")
    if not for_count_tokens and body["max_tokens"] < 0:
        raise _err("type", field="max_tokens", expected="greater than or equal to 0")
    if not isinstance(body["messages"], list):
        raise _err("type", field="messages", expected="a valid list")
    for i, m in enumerate(body["messages"]):
        if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
            raise _err("required", field=f"messages.{i}.content")
        if m["role"] not in ("user", "assistant", "system"):
            raise _err("role", i=i)
        if not isinstance(m["content"], (str, list)):
            raise _err("type", field=f"messages.{i}.content", expected="a valid string or list")
    if "system" in body and not isinstance(body["system"], (str, list)):
        raise _err("type", field="system", expected="a valid string or list")
    if "tools" in body and not isinstance(body["tools"], list):
        raise _err("type", field="tools", expected="a valid list")


def _tools(body: Mapping[str, Any]) -> set[str]:
    names: list[str] = []
    for i, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, Mapping):
            raise _err("type", field=f"tools.{i}", expected="an object")
        name = str(tool.get("name", ""))
        if not _TOOL_NAME.match(name):
            raise _err("bad_tool_name", i=i)
        if "type" not in tool or tool.get("type") == "custom":
            schema = tool.get("input_schema")
            if not isinstance(schema, Mapping) or schema.get("type") != "object":
                raise _err("type", field=f"tools.{i}.input_schema.type", expected="'object'")
        names.append(name)
    if len(set(names)) != len(names):
        raise _err("duplicate_tool")
    return set(names)


def _tool_choice(body: Mapping[str, Any], names: set[str], thinking_on: bool) -> None:
    choice = body.get("tool_choice")
    if choice is None:
        return
    if not isinstance(choice, Mapping) or choice.get("type") not in ("auto", "any", "tool", "none"):
        raise _err("tool_choice", problem="type must be one of 'auto', 'any', 'tool', 'none'")
    if choice["type"] == "tool" and choice.get("name") not in names:
        raise _err("tool_choice", problem=f"tool {choice.get('name')!r} is not in tools")
    flag = choice.get("disable_parallel_tool_use")
    if flag is not None and not isinstance(flag, bool):
        raise _err("tool_choice", problem="disable_parallel_tool_use must be a boolean")
    if thinking_on and choice["type"] in ("any", "tool"):
        raise _err("thinking_tool_choice")


def _cache_controls(body: Mapping[str, Any], merged: list[Any]) -> None:
    ttls: list[str] = []
    for tool in body.get("tools") or []:
        if isinstance(tool, Mapping) and tool.get("cache_control"):
            ttls.append(str(tool["cache_control"].get("ttl", "5m")))
    system = body.get("system")
    if isinstance(system, list):
        for block in system:
            if isinstance(block, Mapping) and block.get("cache_control"):
                ttls.append(str(block["cache_control"].get("ttl", "5m")))
    last_block: Mapping[str, Any] | None = None
    for message in merged:
        for j, block in enumerate(message.blocks):
            last_block = block
            cc = block.get("cache_control")
            if not cc:
                continue
            i, bj = message.origin[j]
            if block.get("type") in ("thinking", "redacted_thinking"):
                raise _err("cache_thinking", i=i, j=bj)
            if block.get("type") == "text" and not str(block.get("text", "")):
                raise _err("cache_empty_text", i=i, j=bj)
            ttls.append(str(cc.get("ttl", "5m")))
    top = body.get("cache_control")
    total = len(ttls) + (1 if isinstance(top, Mapping) else 0)
    if isinstance(top, Mapping):
        top_ttl = str(top.get("ttl", "5m"))
        if len(ttls) >= 4:
            raise _err("auto_with_four")
        last_cc = last_block.get("cache_control") if last_block else None
        if isinstance(last_cc, Mapping):
            block_ttl = str(last_cc.get("ttl", "5m"))
            if block_ttl != top_ttl:
                raise _err("auto_ttl_conflict", block=block_ttl, top=top_ttl)
            total -= 1  # the same marker: automatic caching is a no-op
        ttls.append(top_ttl)
    if total > 4:
        raise _err("too_many_breakpoints", n=total)
    seen_5m = False
    for ttl in ttls:
        if ttl == "5m":
            seen_5m = True
        elif ttl == "1h" and seen_5m:
            raise _err("ttl_order")


def _pairing(merged: list[Any]) -> None:
    seen_ids: set[str] = set()
    for k, message in enumerate(merged):
        if message.role != "assistant":
            continue
        uses = [b for b in message.blocks if b.get("type") == "tool_use"]
        for j, block in enumerate(message.blocks):
            if block.get("type") != "tool_use":
                continue
            i, bj = message.origin[j]
            if not _ID.match(str(block.get("id", ""))):
                raise _err("bad_id", i=i, j=bj)
            if block["id"] in seen_ids:
                raise _err("duplicate_id", i=i, j=bj)
            seen_ids.add(block["id"])
        if not uses:
            continue
        if k + 1 >= len(merged):
            continue  # a final assistant message with tool_use: nothing answers it yet
        nxt = merged[k + 1]
        ids = [str(b["id"]) for b in uses]
        answered = {str(b.get("tool_use_id")) for b in nxt.blocks if b.get("type") == "tool_result"}
        missing = [x for x in ids if x not in answered]
        if nxt.role != "user" or missing:
            raise _err("unanswered", i=message.first_index, ids=", ".join(missing or ids))
        in_results = True
        for block in nxt.blocks:
            if block.get("type") == "tool_result":
                if not in_results:
                    raise _err("results_first", i=nxt.first_index, kind="text")
            else:
                in_results = False
    for k, message in enumerate(merged):
        if message.role != "user":
            continue
        prev = merged[k - 1] if k > 0 else None
        prev_ids = {
            str(b.get("id")) for b in (prev.blocks if prev else []) if b.get("type") == "tool_use"
        }
        for j, block in enumerate(message.blocks):
            if block.get("type") == "tool_result" and str(block.get("tool_use_id")) not in prev_ids:
                i, bj = message.origin[j]
                raise _err("unexpected_result", i=i, j=bj, id=block.get("tool_use_id"))


def _content(merged: list[Any], version: str) -> None:
    last = len(merged) - 1
    for k, message in enumerate(merged):
        final_assistant = k == last and message.role == "assistant"
        if not message.blocks and not final_assistant:
            raise _err("empty_message", i=message.first_index)
        for j, block in enumerate(message.blocks):
            i, bj = message.origin[j]
            kind = block.get("type")
            if kind == "text" and block.get("cache_control") and not block.get("text"):
                raise _err("cache_empty_text", i=i, j=bj)
            if kind == "text":
                text = block.get("text")
                if not isinstance(text, str) or text == "":
                    raise _err("empty_text")
                if not text.strip():
                    raise _err("blank_text")
                if message.role == "user" and block.get("citations") and version != "2023-06-01":
                    raise _err("user_citations", i=i, j=bj)
            if kind == "document" and message.role == "assistant" and version != "2023-06-01":
                raise _err("assistant_document", i=i, j=bj)


def _thinking(
    body: Mapping[str, Any], merged: list[Any], secret: bytes, counting: bool = False
) -> bool:
    thinking = body.get("thinking")
    on = isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")
    if isinstance(thinking, Mapping) and thinking.get("type") == "enabled" and not counting:
        budget = thinking.get("budget_tokens")
        if (
            not isinstance(budget, int)
            or budget < 1024
            or budget >= int(body.get("max_tokens", 0) or 0)
        ):
            raise _err("budget")
    assistants = [k for k, m in enumerate(merged) if m.role == "assistant"]
    if not assistants:
        return on
    k = assistants[-1]
    message = merged[k]
    for j, block in enumerate(message.blocks):
        if block.get("type") in ("thinking", "redacted_thinking") and not verify_thinking(
            block, secret
        ):
            i, bj = message.origin[j]
            raise _err("thinking_modified", i=i, j=bj)
    in_tool_loop = k + 1 < len(merged) and any(
        b.get("type") == "tool_result" for b in merged[k + 1].blocks
    )
    if on and in_tool_loop and message.blocks:
        first = message.blocks[0].get("type")
        if first not in ("thinking", "redacted_thinking"):
            raise _err("thinking_first", i=message.first_index, t=first)
    if not on and k == len(merged) - 1:
        for j, block in enumerate(message.blocks):
            if block.get("type") in ("thinking", "redacted_thinking"):
                i, bj = message.origin[j]
                raise _err("thinking_disabled", i=i, j=bj)
    return on


def _system_role(messages: list[Any], model: ModelInfo) -> None:
    for i, m in enumerate(messages):
        if m.get("role") != "system":
            continue
        if not model.system_role:
            raise _err("system_role_model")
        before = messages[i - 1].get("role") if i > 0 else None
        after = messages[i + 1].get("role") if i + 1 < len(messages) else None
        if before != "user" or after not in (None, "assistant"):
            raise _err("system_role_place", i=i)


def validate_request(
    body: Any,
    *,
    version: str,
    catalog: Mapping[str, ModelInfo],
    strict_legacy: bool = False,
    for_count_tokens: bool = False,
    tokenizer: Tokenizer | None = None,
    thinking_secret: bytes = THINKING_SECRET,
) -> ModelInfo:
    """Check a /v1/messages (or count_tokens) body; raise ApiError with the API's message."""
    if not isinstance(body, Mapping):
        raise _err("type", field="body", expected="an object")
    _require(body, for_count_tokens)
    model = lookup(body["model"], catalog)
    if version != "2023-06-01":
        for name in ("temperature", "top_p", "top_k"):
            if name in body:
                raise _err("sampling", field=name, version=version)
    max_tokens = int(body.get("max_tokens", 1) or 0)
    if not for_count_tokens and max_tokens > model.max_output:
        raise ApiError(
            400,
            "invalid_request_error",
            MESSAGES["max_tokens"].format(n=max_tokens, max=model.max_output, model=model.name),
        )
    raw: list[Any] = body["messages"]
    _system_role(raw, model)
    conversation = [m for m in raw if m.get("role") != "system"]
    if strict_legacy:
        if conversation and conversation[0]["role"] != "user":
            raise _err("first_user")
        for a, b in itertools.pairwise(conversation):
            if a["role"] == b["role"]:
                raise _err("alternate", role=a["role"])
    merged = merge_messages(raw)
    merged = [m for m in merged if m.role != "system"]
    names = _tools(body)
    _content(merged, version)
    _cache_controls(body, merged)
    _pairing(merged)
    thinking_on = _thinking(body, merged, thinking_secret, for_count_tokens)
    _tool_choice(body, names, thinking_on)
    if merged and merged[-1].role == "assistant" and not model.prefill and not for_count_tokens:
        raise _err("prefill")
    if not for_count_tokens and max_tokens == 0:
        if body.get("stream"):
            raise _err("warm_combo", what="stream: true")
        thinking = body.get("thinking")
        if isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
            raise _err("warm_combo", what="thinking")
        if (body.get("output_config") or {}).get("format"):
            raise _err("warm_combo", what="output_config.format")
        choice = body.get("tool_choice")
        if isinstance(choice, Mapping) and choice.get("type") in ("any", "tool"):
            raise _err("warm_combo", what=f"tool_choice {choice.get('type')}")
    total = count_input_tokens(body, tokenizer or ByteTokenizer())
    if total > model.context_window:
        raise _err("too_long", n=total, max=model.context_window)
    return model
