"""Request validation: the Messages API's rules (spec §3), with its error messages.

Every message is in `MESSAGES` (placeholders in braces). Quoted API wording is reproduced
verbatim; where the spec marks the wording unknown ([?]) the message is ours, in the same
style. `validate_request` raises `ApiError` (400 `invalid_request_error`, or 404 for an
unknown model) at the first broken rule, in this order:

1. shape and JSON types (required fields, pydantic-style messages), then the model (404);
2. request-level rules: sampling parameters under 2026-10-21, `max_tokens` against the
   model, `max_tokens: 0` combinations, thinking settings, tools, `role: "system"` messages,
   the `strict_legacy` rules;
3. conversation rules on the merged messages (consecutive same-role turns merged; errors
   keep the original indices): content, citations/documents, cache_control, tool_use /
   tool_result pairing on every assistant->user pair, thinking blocks, tool_choice, prefill;
4. the context window: the input alone (`prompt is too long`), then, on create, the input
   plus `max_tokens` (`input length and max_tokens exceed context limit`) [I].

Choices where the spec is silent:

* A `tool_use` in the final assistant message is unanswered (rule 6, on every model and on
  count_tokens too): a prefill continues after it, and nothing could have answered it.
* The "current turn" starts after the last user message without `tool_result` blocks. The
  thinking rules 12 and 13 apply to the latest assistant message when it belongs to that
  turn (it ends the conversation, or a tool_result message follows it); rule 14 (signatures)
  checks its thinking blocks. `redacted_thinking` only has to carry a non-empty `data`.
* Thinking counts as on for `enabled`, `adaptive` and `between_tools`.
* count_tokens: no `max_tokens` (so neither its checks nor the `budget_tokens < max_tokens`
  one) and no prefill rule; everything else is the same as create.
* The automatic breakpoint counts toward the limit of 4 unless it lands on a block whose
  explicit marker has the same TTL; with 4 explicit markers, automatic caching is refused.
  Markers on blocks nested in a `tool_result` are not breakpoints (not counted).
* tool_choice `any` needs at least one tool; `tool` needs a tool of that name.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import re
from collections.abc import Mapping
from typing import Any

from .cache import auto_breakpoint
from .catalog import ModelInfo, lookup
from .errors import ApiError
from .tokens import (
    ByteTokenizer,
    MergedMessage,
    Tokenizer,
    count_input_tokens,
    current_turn_start,
    flatten,
    merge_messages,
)

__all__ = ["MESSAGES", "THINKING_SECRET", "sign_thinking", "validate_request", "verify_thinking"]

THINKING_SECRET = b"forkagent-emulator"
MAX_MESSAGES = 100_000
_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_THINKING = ("thinking", "redacted_thinking")
_THINKING_ON = ("enabled", "adaptive", "between_tools")

MESSAGES: dict[str, str] = {
    # shape and types (rule 1, 22) [?] pydantic style
    "required": "{field}: Field required",
    "type": "{field}: Input should be {expected}",
    "role": "messages.{i}.role: Input should be 'user', 'assistant' or 'system'",
    "no_messages": "messages: at least one message is required",
    "too_many_messages": "messages: List should have at most 100000 items after validation, not {n}",
    # model and limits (rules 16, 17) [I]; max_tokens wording [I]
    "too_long": "prompt is too long: {n} tokens > {max} maximum",
    "window": "input length and `max_tokens` exceed context limit: {n} + {m} > {max}, decrease input length or `max_tokens` and try again",
    "max_tokens": "max_tokens: {n} > {max}, which is the maximum allowed number of output tokens for {model}",
    # content (rules 2-4) [I]
    "empty_message": "messages.{i}: all messages must have non-empty content except for the optional final assistant message",
    "empty_text": "messages: text content blocks must be non-empty",
    "blank_text": "messages: text content blocks must contain non-whitespace text",
    "system_empty_text": "system: text content blocks must be non-empty",
    "system_blank_text": "system: text content blocks must contain non-whitespace text",
    "cache_empty_text": "messages.{i}.content.{j}.text: cache_control cannot be set for empty text blocks",
    "cache_thinking": "messages.{i}.content.{j}.thinking: cache_control cannot be set for thinking blocks",
    # cache_control limits (rule 5 [I], rules 20-21 [?])
    "too_many_breakpoints": "A maximum of 4 blocks with cache_control may be provided. Found {n}.",
    "auto_with_four": "cache_control: automatic caching cannot be used when 4 blocks already have cache_control",
    "auto_ttl_conflict": "cache_control: the last block's cache_control ttl ({block}) differs from the top-level cache_control ttl ({top})",
    "ttl_order": "cache_control: a ttl='1h' cache_control block cannot come after a ttl='5m' one; longer lifetimes must come first",
    # tool use pairing (rules 6-9, 11) [I]
    "unanswered": "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {ids}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
    "unexpected_result": "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
    "results_first": "messages.{i}: Did not find {n} `tool_result` block(s) at the beginning of this message. Messages following `tool_use` blocks must begin with a matching number of `tool_result` blocks.",
    "duplicate_id": "messages.{i}.content.{j}: `tool_use` ids must be unique",
    "bad_id": "messages.{i}.content.{j}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
    "bad_result_id": "messages.{i}.content.{j}.tool_result.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'",
    # tools and tool_choice (rules 10, 11 [I]; 22 [?])
    "duplicate_tool": "tools: Tool names must be unique.",
    "bad_tool_name": "tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'",
    "tool_choice": "tool_choice: {problem}",
    # thinking (rules 12-14 [I]/[D]; 15 [?])
    "thinking_first": "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{t}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking",
    "thinking_disabled": "messages.{i}.content.{j}: When thinking is disabled, an `assistant` message in the final position cannot contain `thinking`. To use thinking blocks, enable `thinking` in your request.",
    "thinking_modified": "messages.{i}.content.{j}: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified. These blocks must remain as they were in the original response.",
    "thinking_type": "thinking.type: Input should be 'enabled', 'adaptive', 'disabled' or 'between_tools'",
    "thinking_mode": "thinking.type: '{mode}' thinking is not supported on {model}",
    "budget": "thinking.budget_tokens: Input should be greater than or equal to 1024",
    "budget_max": "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size",
    "thinking_tool_choice": "Thinking may not be enabled when tool_choice forces tool use.",
    # version-gated and role rules (rules 16-18) [?] except system_role_model [S5]
    "sampling": "{field}: this parameter is not supported by API version {version}",
    "assistant_document": "messages.{i}.content.{j}: document blocks are not allowed in assistant messages",
    "user_citations": "messages.{i}.content.{j}.citations: citations are not allowed in user messages",
    "prefill": "This model does not support assistant message prefill. The conversation must end with a user message.",
    "system_role_model": "role 'system' is not supported on this model",
    "system_role_place": "messages.{i}: a `system` message must follow a `user` message and be followed by an `assistant` message or end the conversation",
    "system_role_content": "messages.{i}.content.{j}: a `system` message may only contain text blocks",
    # max_tokens: 0 (rule 19) [?]
    "warm_combo": "max_tokens: 0 cannot be combined with {what}",
    # strict_legacy [I]
    "alternate": 'messages: roles must alternate between "user" and "assistant", but found multiple "{role}" roles in a row',
    "first_user": 'messages: first message must use the "user" role',
}

_EXPECTED = {
    str: "a valid string",
    int: "a valid integer",
    bool: "a valid boolean",
    dict: "a valid dictionary",
    list: "a valid list",
}


def _err(key: str, **values: Any) -> ApiError:
    return ApiError(400, "invalid_request_error", MESSAGES[key].format(**values))


def sign_thinking(thinking: str, secret: bytes = THINKING_SECRET) -> str:
    """The emulator's signature of a thinking text: HMAC-SHA256(secret, text), hex."""
    return hmac.new(secret, thinking.encode("utf-8"), hashlib.sha256).hexdigest()


def verify_thinking(block: Mapping[str, Any], secret: bytes = THINKING_SECRET) -> bool:
    """Whether an echoed thinking block is unmodified (redacted: non-empty `data`)."""
    if block.get("type") == "redacted_thinking":
        data = block.get("data")
        return isinstance(data, str) and bool(data)
    expected = sign_thinking(str(block.get("thinking", "")), secret)
    return hmac.compare_digest(expected, str(block.get("signature", "")))


# --- shape --------------------------------------------------------------------------------


def _check(value: Any, kind: type, field: str) -> None:
    ok = isinstance(value, Mapping) if kind is dict else isinstance(value, kind)
    if not ok or (kind is int and isinstance(value, bool)):
        raise _err("type", field=field, expected=_EXPECTED[kind])


def _need(block: Mapping[str, Any], key: str, kind: type, field: str) -> None:
    if key not in block:
        raise _err("required", field=f"{field}.{key}")
    _check(block[key], kind, f"{field}.{key}")


def _check_cache_control(block: Mapping[str, Any], field: str) -> None:
    """`field` is the path of the block holding `cache_control` ("" for the top level)."""
    cc = block.get("cache_control")
    if cc is None:
        return
    path = f"{field}.cache_control" if field else "cache_control"
    _check(cc, dict, path)
    if cc.get("type") != "ephemeral":
        raise _err("type", field=f"{path}.type", expected="'ephemeral'")
    if "ttl" in cc and cc["ttl"] not in ("5m", "1h"):
        raise _err("type", field=f"{path}.ttl", expected="'5m' or '1h'")


def _check_block(block: Any, field: str) -> None:
    _check(block, dict, field)
    _need(block, "type", str, field)
    kind = block["type"]
    if kind == "text":
        _need(block, "text", str, field)
    elif kind in ("image", "document"):
        _need(block, "source", dict, field)
    elif kind == "tool_use":
        _need(block, "id", str, field)
        _need(block, "name", str, field)
        _need(block, "input", dict, field)
    elif kind == "tool_result":
        _need(block, "tool_use_id", str, field)
        content = block.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise _err("type", field=f"{field}.content", expected="a valid string or list")
        for k, inner in enumerate(content if isinstance(content, list) else []):
            _check_block(inner, f"{field}.content.{k}")
        if block.get("is_error") is not None:
            _check(block["is_error"], bool, f"{field}.is_error")
    elif kind == "thinking":
        _need(block, "thinking", str, field)
        _need(block, "signature", str, field)
    elif kind == "redacted_thinking":
        _need(block, "data", str, field)
    _check_cache_control(block, field)


def _shape(body: Mapping[str, Any], for_count_tokens: bool) -> None:
    fields = ("model", "messages") if for_count_tokens else ("model", "max_tokens", "messages")
    for name in fields:
        if name not in body:
            raise _err("required", field=name)
    _check(body["model"], str, "model")
    if not for_count_tokens:
        _check(body["max_tokens"], int, "max_tokens")
        if body["max_tokens"] < 0:
            raise _err("type", field="max_tokens", expected="greater than or equal to 0")
    messages = body["messages"]
    _check(messages, list, "messages")
    if not messages:
        raise _err("no_messages")
    if len(messages) > MAX_MESSAGES:
        raise _err("too_many_messages", n=len(messages))
    for i, m in enumerate(messages):
        _check(m, dict, f"messages.{i}")
        for key in ("role", "content"):
            if key not in m:
                raise _err("required", field=f"messages.{i}.{key}")
        if m["role"] not in ("user", "assistant", "system"):
            raise _err("role", i=i)
        content = m["content"]
        if not isinstance(content, (str, list)):
            raise _err("type", field=f"messages.{i}.content", expected="a valid string or list")
        for j, block in enumerate(content if isinstance(content, list) else []):
            _check_block(block, f"messages.{i}.content.{j}")
    system = body.get("system")
    if system is not None:
        if not isinstance(system, (str, list)):
            raise _err("type", field="system", expected="a valid string or list")
        for j, block in enumerate(system if isinstance(system, list) else []):
            _check_block(block, f"system.{j}")
            if block["type"] != "text":
                raise _err("type", field=f"system.{j}.type", expected="'text'")
    for name, kind in (
        ("tools", list),
        ("tool_choice", dict),
        ("thinking", dict),
        ("stream", bool),
        ("stop_sequences", list),
        ("metadata", dict),
        ("output_config", dict),
    ):
        if body.get(name) is not None:
            _check(body[name], kind, name)
    for k, seq in enumerate(body.get("stop_sequences") or []):
        _check(seq, str, f"stop_sequences.{k}")
    if body.get("cache_control") is not None:
        _check_cache_control(body, "")
    effort = (body.get("output_config") or {}).get("effort")
    if effort is not None and effort not in ("low", "medium", "high", "xhigh", "max"):
        raise _err(
            "type",
            field="output_config.effort",
            expected="'low', 'medium', 'high', 'xhigh' or 'max'",
        )
    if body.get("speed") not in (None, "standard", "fast"):
        raise _err("type", field="speed", expected="'standard' or 'fast'")
    if body.get("service_tier") not in (None, "auto", "standard_only"):
        raise _err("type", field="service_tier", expected="'auto' or 'standard_only'")


# --- request-level rules ------------------------------------------------------------------


def _warm(body: Mapping[str, Any]) -> None:
    if body.get("stream") is True:
        raise _err("warm_combo", what="stream: true")
    thinking = body.get("thinking") or {}
    if thinking.get("type") == "enabled":
        raise _err("warm_combo", what="thinking")
    if (body.get("output_config") or {}).get("format"):
        raise _err("warm_combo", what="output_config.format")
    choice = body.get("tool_choice") or {}
    if choice.get("type") in ("any", "tool"):
        raise _err("warm_combo", what=f"tool_choice {choice['type']}")


def _thinking_settings(body: Mapping[str, Any], model: ModelInfo, for_count_tokens: bool) -> bool:
    thinking = body.get("thinking")
    if thinking is None:
        return False
    mode = thinking.get("type")
    if mode not in ("enabled", "adaptive", "disabled", "between_tools"):
        raise _err("thinking_type")
    if mode not in model.thinking_modes:
        raise _err("thinking_mode", mode=mode, model=model.name)
    if thinking.get("display") not in (None, "summarized", "omitted"):
        raise _err("type", field="thinking.display", expected="'summarized' or 'omitted'")
    if mode == "enabled":
        _need(thinking, "budget_tokens", int, "thinking")
        if thinking["budget_tokens"] < 1024:
            raise _err("budget")
        if not for_count_tokens and thinking["budget_tokens"] >= body["max_tokens"]:
            raise _err("budget_max")
    return mode in _THINKING_ON


def _tools(body: Mapping[str, Any]) -> set[str]:
    names: list[str] = []
    for i, tool in enumerate(body.get("tools") or []):
        _check(tool, dict, f"tools.{i}")
        _need(tool, "name", str, f"tools.{i}")
        if not _TOOL_NAME.fullmatch(tool["name"]):
            raise _err("bad_tool_name", i=i)
        if tool.get("type") in (None, "custom"):
            _need(tool, "input_schema", dict, f"tools.{i}")
            if tool["input_schema"].get("type") != "object":
                raise _err("type", field=f"tools.{i}.input_schema.type", expected="'object'")
        _check_cache_control(tool, f"tools.{i}")
        names.append(tool["name"])
    if len(set(names)) != len(names):
        raise _err("duplicate_tool")
    return set(names)


def _system_messages(merged: list[MergedMessage], model: ModelInfo) -> None:
    for k, message in enumerate(merged):
        if message.role != "system":
            continue
        if not model.system_role:
            raise _err("system_role_model")
        before = merged[k - 1].role if k > 0 else None
        after = merged[k + 1].role if k + 1 < len(merged) else None
        if before != "user" or after not in (None, "assistant"):
            raise _err("system_role_place", i=message.first_index)
        for j, block in enumerate(message.blocks):
            if block.get("type") != "text":
                i, bj = message.origin[j]
                raise _err("system_role_content", i=i, j=bj)


def _legacy(messages: list[Mapping[str, Any]]) -> None:
    roles = [m["role"] for m in messages if m["role"] != "system"]
    if roles and roles[0] != "user":
        raise _err("first_user")
    for a, b in itertools.pairwise(roles):
        if a == b:
            raise _err("alternate", role=a)


# --- conversation rules -------------------------------------------------------------------


def _content(body: Mapping[str, Any], merged: list[MergedMessage], version: str) -> None:
    system = body.get("system")
    for block in system if isinstance(system, list) else []:
        if block["text"] == "":
            raise _err("system_empty_text")
        if not block["text"].strip():
            raise _err("system_blank_text")
    gated = version != "2023-06-01"
    for k, message in enumerate(merged):
        final_assistant = k == len(merged) - 1 and message.role == "assistant"
        if not message.blocks and not final_assistant:
            raise _err("empty_message", i=message.first_index)
        for j, block in enumerate(message.blocks):
            i, bj = message.origin[j]
            kind = block.get("type")
            if block.get("cache_control") is not None:
                if kind in _THINKING:
                    raise _err("cache_thinking", i=i, j=bj)
                if kind == "text" and block["text"] == "":
                    raise _err("cache_empty_text", i=i, j=bj)
            if kind == "text":
                if block["text"] == "":
                    raise _err("empty_text")
                if not block["text"].strip():
                    raise _err("blank_text")
                if gated and message.role == "user" and block.get("citations"):
                    raise _err("user_citations", i=i, j=bj)
            if gated and kind == "document" and message.role == "assistant":
                raise _err("assistant_document", i=i, j=bj)


def _breakpoints(body: Mapping[str, Any], tokenizer: Tokenizer) -> None:
    blocks = flatten(body, tokenizer)
    marks = [
        (i, str(b.cache_control.get("ttl", "5m"))) for i, b in enumerate(blocks) if b.cache_control
    ]
    top = body.get("cache_control")
    if top is not None:
        top_ttl = str(top.get("ttl", "5m"))
        if len(marks) >= 4:
            raise _err("auto_with_four")
        at = auto_breakpoint(blocks)
        explicit = dict(marks)
        if at in explicit and explicit[at] != top_ttl:
            raise _err("auto_ttl_conflict", block=explicit[at], top=top_ttl)
        if at >= 0 and at not in explicit:
            marks = sorted([*marks, (at, top_ttl)])
    if len(marks) > 4:
        raise _err("too_many_breakpoints", n=len(marks))
    seen_5m = False
    for _, ttl in marks:
        if ttl == "1h" and seen_5m:
            raise _err("ttl_order")
        seen_5m = seen_5m or ttl == "5m"


def _pairing(merged: list[MergedMessage]) -> None:
    seen: set[str] = set()
    for k, message in enumerate(merged):
        for j, block in enumerate(message.blocks):
            i, bj = message.origin[j]
            if block.get("type") == "tool_result" and not _ID.fullmatch(block["tool_use_id"]):
                raise _err("bad_result_id", i=i, j=bj)
            if message.role != "assistant" or block.get("type") != "tool_use":
                continue
            if not _ID.fullmatch(block["id"]):
                raise _err("bad_id", i=i, j=bj)
            if block["id"] in seen:
                raise _err("duplicate_id", i=i, j=bj)
            seen.add(block["id"])
        if message.role == "user":
            prev = merged[k - 1] if k > 0 and merged[k - 1].role == "assistant" else None
            ids = {b["id"] for b in prev.blocks if b.get("type") == "tool_use"} if prev else set()
            for j, block in enumerate(message.blocks):
                if block.get("type") == "tool_result" and block["tool_use_id"] not in ids:
                    i, bj = message.origin[j]
                    raise _err("unexpected_result", i=i, j=bj, id=block["tool_use_id"])
    for k, message in enumerate(merged):
        uses = [(j, b) for j, b in enumerate(message.blocks) if b.get("type") == "tool_use"]
        if message.role != "assistant" or not uses:
            continue
        nxt = merged[k + 1] if k + 1 < len(merged) else None
        answered = {
            b["tool_use_id"]
            for b in (nxt.blocks if nxt and nxt.role == "user" else [])
            if b.get("type") == "tool_result"
        }
        missing = [(j, b) for j, b in uses if b["id"] not in answered]
        if missing:
            i = message.origin[missing[0][0]][0]
            raise _err("unanswered", i=i, ids=", ".join(b["id"] for _, b in missing))
        assert nxt is not None
        kinds = [b.get("type") for b in nxt.blocks]
        last_result = max(j for j, t in enumerate(kinds) if t == "tool_result")
        if any(t != "tool_result" for t in kinds[:last_result]):
            raise _err("results_first", i=nxt.first_index, n=len(uses))


def _thinking_blocks(merged: list[MergedMessage], thinking_on: bool, secret: bytes | None) -> None:
    turn = current_turn_start(merged)
    k = max((n for n, m in enumerate(merged) if m.role == "assistant"), default=-1)
    if k < 0 or k < turn:
        return
    message = merged[k]
    if secret is not None:
        for j, block in enumerate(message.blocks):
            if block.get("type") in _THINKING and not verify_thinking(block, secret):
                i, bj = message.origin[j]
                raise _err("thinking_modified", i=i, j=bj)
    if thinking_on and message.blocks:
        first = message.blocks[0].get("type")
        if first not in _THINKING:
            raise _err("thinking_first", i=message.origin[0][0], t=first)
    if not thinking_on:
        for j, block in enumerate(message.blocks):
            if block.get("type") in _THINKING:
                i, bj = message.origin[j]
                raise _err("thinking_disabled", i=i, j=bj)


def _tool_choice(body: Mapping[str, Any], names: set[str], thinking_on: bool) -> None:
    choice = body.get("tool_choice")
    if choice is None:
        return
    kind = choice.get("type")
    if kind not in ("auto", "any", "tool", "none"):
        raise _err("tool_choice", problem="type must be one of 'auto', 'any', 'tool', 'none'")
    if kind == "tool" and choice.get("name") not in names:
        raise _err("tool_choice", problem=f"tool {choice.get('name')!r} is not in tools")
    if kind == "any" and not names:
        raise _err("tool_choice", problem="'any' requires at least one tool")
    flag = choice.get("disable_parallel_tool_use")
    if flag is not None and not isinstance(flag, bool):
        raise _err("tool_choice", problem="disable_parallel_tool_use must be a boolean")
    if thinking_on and kind in ("any", "tool"):
        raise _err("thinking_tool_choice")


# --- entry point --------------------------------------------------------------------------


def validate_request(
    body: Any,
    *,
    version: str,
    catalog: Mapping[str, ModelInfo],
    strict_legacy: bool = False,
    for_count_tokens: bool = False,
    tokenizer: Tokenizer | None = None,
    thinking_secret: bytes | None = THINKING_SECRET,
) -> ModelInfo:
    """Check a /v1/messages (or /v1/messages/count_tokens) body; return the model's entry.

    Raises `ApiError` with the API's status, type and message at the first broken rule.
    `version` is the `anthropic-version` header ("2023-06-01" accepts the sampling
    parameters, assistant documents and user citations). `thinking_secret=None` skips the
    signature check of echoed thinking blocks.
    """
    tok = tokenizer or ByteTokenizer()
    if not isinstance(body, Mapping):
        raise _err("type", field="body", expected="a valid dictionary")
    _shape(body, for_count_tokens)
    model = lookup(body["model"], catalog)
    if version != "2023-06-01":
        for name in ("temperature", "top_p", "top_k"):
            if name in body:
                raise _err("sampling", field=name, version=version)
    if not for_count_tokens:
        if body["max_tokens"] > model.max_output:
            raise _err("max_tokens", n=body["max_tokens"], max=model.max_output, model=model.name)
        if body["max_tokens"] == 0:
            _warm(body)
    thinking_on = _thinking_settings(body, model, for_count_tokens)
    names = _tools(body)
    raw: list[Mapping[str, Any]] = body["messages"]
    all_merged = merge_messages(raw)
    _system_messages(all_merged, model)
    if strict_legacy:
        _legacy(raw)
    merged = [m for m in all_merged if m.role != "system"]
    _content(body, merged, version)
    _breakpoints(body, tok)
    _pairing(merged)
    _thinking_blocks(merged, thinking_on, thinking_secret)
    _tool_choice(body, names, thinking_on)
    if not for_count_tokens and merged and merged[-1].role == "assistant" and not model.prefill:
        raise _err("prefill")
    total = count_input_tokens(body, tok)
    if total > model.context_window:
        raise _err("too_long", n=total, max=model.context_window)
    if not for_count_tokens and total + body["max_tokens"] > model.context_window:
        raise _err("window", n=total, m=body["max_tokens"], max=model.context_window)
    return model
