"""The typed events of a conversation turn.

The loop (`loop.run_turn`) is an async iterator of these; a UI renders them one by one, the
session folds them into a `Turn`. Each is a frozen dataclass tagged by `kind`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .usage import Usage

__all__ = [
    "AssistantMessage",
    "LoopEvent",
    "ModelEvent",
    "ModelResponse",
    "RequestSent",
    "Stop",
    "StopReason",
    "TextDelta",
    "ToolResult",
    "ToolUse",
    "UsageReport",
]

StopReason = Literal["end_turn", "max_turns", "max_tokens", "refusal", "aborted", "error"]
"""Why a turn ended: the model finished (`end_turn`), the turn limit was hit (`max_turns`), the
reply was cut by `max_tokens`, the model refused (`refusal`; its tools are not run), the caller
aborted (`aborted`), or the API failed after its retries (`error`)."""


@dataclass(frozen=True)
class RequestSent:
    """A request is about to go to the model (`index` counts requests within the turn)."""

    index: int
    model: str
    message_count: int
    kind: Literal["request"] = "request"


@dataclass(frozen=True)
class TextDelta:
    """A piece of streamed assistant text."""

    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True)
class ModelResponse:
    """A complete assistant reply as the API returned it (content as API dicts)."""

    content: list[dict[str, Any]]
    stop_reason: str
    usage: Usage
    model: str
    message_id: str = ""
    kind: Literal["response"] = "response"
    service_tier: str | None = None  # "batch": answered through the Message Batches API


ModelEvent = TextDelta | ModelResponse
"""What a ModelClient stream yields: text deltas, then exactly one ModelResponse."""


@dataclass(frozen=True)
class AssistantMessage:
    """The assistant message that was appended to the history."""

    content: list[dict[str, Any]]
    stop_reason: str
    kind: Literal["assistant"] = "assistant"


@dataclass(frozen=True)
class UsageReport:
    """Usage of one request, with its cost in USD."""

    usage: Usage
    model: str
    cost_usd: float
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True)
class ToolUse:
    """The model asked for a tool call (input as the model sent it)."""

    id: str
    name: str
    input: dict[str, Any]
    kind: Literal["tool_use"] = "tool_use"


@dataclass(frozen=True)
class ToolResult:
    """A tool call finished; `content` is exactly what the model will read."""

    tool_use_id: str
    name: str
    content: str
    is_error: bool = False
    kind: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True)
class Stop:
    """The turn ended. `error` explains an `error` or `aborted` stop."""

    reason: StopReason
    error: str | None = None
    turns: int = 0
    details: dict[str, Any] = field(default_factory=dict)
    kind: Literal["stop"] = "stop"


LoopEvent = RequestSent | TextDelta | AssistantMessage | UsageReport | ToolUse | ToolResult | Stop
