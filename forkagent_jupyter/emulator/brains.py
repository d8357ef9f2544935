"""What the emulator answers: a `Brain` turns a request body into a `Reply`.

A `Reply` holds content blocks as API dicts. The server finishes them: a `tool_use` without
an `id` gets a deterministic `toolu_...` id, a `thinking` block without a `signature` is
signed (so it verifies when echoed back), `stop_sequences` and `max_tokens` truncate text.
`stop_reason=None` means "derive it": `tool_use` when the reply calls a tool, else `end_turn`.

Brains:

* `OfflineBrain` (the emulator's default) answers like the runtime's offline model
  (`forkagent_jupyter.messages_api.offline_reply`).
* `StaticBrain(reply)` answers the same every time; `EchoBrain` repeats the last user text.
* `ScriptedBrain` answers from rules `(matcher, reply)` first, then from a FIFO queue; when
  both have nothing it answers "ok", raises `ScriptExhaustedError`, or asks a fallback brain.
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ..messages_api.offline_reply import offline_reply

__all__ = [
    "Brain",
    "EchoBrain",
    "Matcher",
    "OfflineBrain",
    "Reply",
    "ScriptExhaustedError",
    "ScriptedBrain",
    "StaticBrain",
    "last_user_text",
]

_BLOCK_TYPES = ("text", "tool_use", "thinking", "redacted_thinking")


@dataclass(frozen=True)
class Reply:
    """One assistant answer: content blocks (API dicts), optional stop_reason/stop_details."""

    content: Sequence[Mapping[str, Any]] = field(
        default_factory=lambda: ({"type": "text", "text": "ok"},)
    )
    stop_reason: str | None = None
    stop_details: Mapping[str, Any] | None = None

    @classmethod
    def text(cls, text: str, *, stop_reason: str | None = None) -> Reply:
        return cls(({"type": "text", "text": text},), stop_reason)

    @classmethod
    def tool_use(
        cls, name: str, input: Mapping[str, Any], *, text: str | None = None, id: str | None = None
    ) -> Reply:
        block: dict[str, Any] = {"type": "tool_use", "name": name, "input": dict(input)}
        if id is not None:
            block["id"] = id
        head: tuple[dict[str, Any], ...] = ({"type": "text", "text": text},) if text else ()
        return cls((*head, block))

    @classmethod
    def from_json(cls, data: Any) -> Reply:
        """From JSON: a string (text), a list of blocks, or {content, stop_reason, ...}."""
        if isinstance(data, str):
            return cls.text(data)
        if isinstance(data, list):
            data = {"content": data}
        if not isinstance(data, Mapping):
            raise ValueError(f"a reply must be a string, a list or an object, not {data!r}")
        content = data.get("content", [{"type": "text", "text": "ok"}])
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list) or not all(isinstance(b, Mapping) for b in content):
            raise ValueError("reply content must be a list of blocks")
        for block in content:
            if block.get("type") not in _BLOCK_TYPES:
                raise ValueError(f"unsupported reply block type {block.get('type')!r}")
        details = data.get("stop_details")
        return cls(
            tuple(dict(b) for b in content),
            data.get("stop_reason"),
            dict(details) if isinstance(details, Mapping) else None,
        )

    def blocks(self) -> list[dict[str, Any]]:
        """A deep copy of the content, safe to modify."""
        return [copy.deepcopy(dict(b)) for b in self.content]

    def resolved_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        if any(b.get("type") == "tool_use" for b in self.content):
            return "tool_use"
        return "end_turn"


@runtime_checkable
class Brain(Protocol):
    def reply(self, request: Mapping[str, Any]) -> Reply: ...


Matcher = Callable[[Mapping[str, Any]], bool]


class ScriptExhaustedError(RuntimeError):
    """A `ScriptedBrain` with `when_empty="raise"` had no reply for a request."""


def last_user_text(request: Mapping[str, Any]) -> str:
    """The text of the last user message ("" if none)."""
    for message in reversed(list(request.get("messages") or [])):
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "\n".join(
                str(b.get("text", ""))
                for b in content
                if isinstance(b, Mapping) and b.get("type") == "text"
            )
    return ""


class StaticBrain:
    """The same reply to every request (default: text "ok")."""

    def __init__(self, reply: Reply | None = None) -> None:
        self._reply = reply or Reply()

    def reply(self, request: Mapping[str, Any]) -> Reply:
        return self._reply


class EchoBrain:
    """Repeats the last user text (or "ok" when there is none)."""

    def reply(self, request: Mapping[str, Any]) -> Reply:
        return Reply.text(last_user_text(request).strip() or "ok")


class OfflineBrain:
    """The offline model's reply (`messages_api.offline_reply`) as a brain."""

    def reply(self, request: Mapping[str, Any]) -> Reply:
        blocks, stop_reason = offline_reply(request)
        return Reply(tuple(blocks), stop_reason)


@dataclass
class _Rule:
    matcher: Matcher
    reply: Reply
    times: int | None


class ScriptedBrain:
    """Replies from matching rules, then a FIFO queue; thread-safe.

    `when_empty`: "ok" answers text "ok", "raise" raises `ScriptExhaustedError`, or a `Brain` to
    delegate to. Rules are tried in the order they were added; a rule with `times=None`
    matches forever, otherwise it is used at most `times` times.
    """

    def __init__(
        self,
        replies: Iterable[Reply | str] = (),
        *,
        rules: Iterable[tuple[Matcher, Reply | str]] = (),
        when_empty: Literal["ok", "raise"] | Brain = "ok",
    ) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque(_coerce(r) for r in replies)
        self._rules: list[_Rule] = [_Rule(m, _coerce(r), None) for m, r in rules]
        self.when_empty = when_empty
        self.served = 0

    def push(self, *replies: Reply | str) -> None:
        with self._lock:
            self._queue.extend(_coerce(r) for r in replies)

    def add_rule(self, matcher: Matcher, reply: Reply | str, *, times: int | None = None) -> None:
        with self._lock:
            self._rules.append(_Rule(matcher, _coerce(reply), times))

    def when_last_user_contains(
        self, needle: str, reply: Reply | str, *, times: int | None = None
    ) -> None:
        """A rule for requests whose last user text contains `needle`."""
        self.add_rule(lambda req: needle in last_user_text(req), reply, times=times)

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self._rules.clear()

    @property
    def pending(self) -> int:
        """Replies left in the FIFO queue."""
        with self._lock:
            return len(self._queue)

    def reply(self, request: Mapping[str, Any]) -> Reply:
        with self._lock:
            for rule in self._rules:
                if rule.times == 0 or not rule.matcher(request):
                    continue
                if rule.times is not None:
                    rule.times -= 1
                self.served += 1
                return rule.reply
            if self._queue:
                self.served += 1
                return self._queue.popleft()
        if self.when_empty == "ok":
            return Reply()
        if self.when_empty == "raise":
            raise ScriptExhaustedError("the emulator's script has no reply left for this request")
        return self.when_empty.reply(request)


def _coerce(reply: Reply | str) -> Reply:
    return reply if isinstance(reply, Reply) else Reply.text(reply)
