"""The typed events of a conversation turn.

The loop (`loop.run_turn`) is an async iterator of these; a UI renders them one by one, the
session folds them into a `Turn`. Each is a frozen dataclass tagged by `kind`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..messages_api.shapes import JSON, Block, ToolInput
from ..messages_api.usage import Usage

__all__ = [
    "AssistantMessage",
    "Compacted",
    "LoopEvent",
    "ModelEvent",
    "ModelResponse",
    "RequestSent",
    "Retrying",
    "Stop",
    "StopReason",
    "StreamedText",
    "TextDelta",
    "ToolResult",
    "ToolUse",
    "UsageReport",
    "fold_text",
]

StopReason = Literal["end_turn", "max_turns", "max_tokens", "refusal", "error"]
"""Why a turn ended: the model finished (`end_turn`), the turn limit was hit (`max_turns`), the
reply was cut by `max_tokens`, the model refused (`refusal`; its tools are not run), or the API
failed after its retries, a stream that broke off mid-way after its own (`error`). A turn that
is stopped from outside is cancelled: it yields no `Stop`."""


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

    content: list[Block]
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

    content: list[Block]
    stop_reason: str
    kind: Literal["assistant"] = "assistant"


@dataclass(frozen=True)
class UsageReport:
    """Usage of one request, with its cost in USD."""

    usage: Usage
    model: str
    cost_usd: float
    kind: Literal["usage"] = "usage"
    message_id: str = ""
    timing: dict[str, JSON] | None = None
    """When the request was sent, started, streamed and ended, its retries and waits
    (`timing.RequestClock.summary`); None where nothing measured it."""


@dataclass(frozen=True)
class ToolUse:
    """The model asked for a tool call (input as the model sent it). `description` is the
    tool's one line about the call (`Tool.describe`), what every view shows of it."""

    id: str
    name: str
    input: ToolInput
    description: str = ""
    kind: Literal["tool_use"] = "tool_use"


@dataclass(frozen=True)
class ToolResult:
    """A tool call finished; `content` is exactly what the model will read."""

    tool_use_id: str
    name: str
    content: str
    is_error: bool = False
    kind: Literal["tool_result"] = "tool_result"
    started: float | None = None
    """When the call started (wall clock; its permission check and any approval included)."""
    ended: float | None = None


@dataclass(frozen=True)
class Retrying:
    """The response stream broke off mid-way; the same request goes again after `delay`
    seconds. `attempt` counts retries of this request (1 for the first) out of `retries`;
    `reason` says what broke ("stream dropped", "overloaded_error in the stream"). The
    `discarded` characters of text streamed by the broken attempt are void: the retry streams
    its reply from the start (a UI drops them)."""

    attempt: int
    retries: int
    delay: float
    reason: str
    discarded: int = 0
    kind: Literal["retrying"] = "retrying"

    @property
    def summary(self) -> str:
        """One line for a status display: "stream dropped, retrying (1/3)"."""
        return f"{self.reason}, retrying ({self.attempt}/{self.retries})"


@dataclass(frozen=True)
class Stop:
    """The turn ended. `error` explains an `error` stop."""

    reason: StopReason
    error: str | None = None
    turns: int = 0
    details: dict[str, JSON] = field(default_factory=dict)
    kind: Literal["stop"] = "stop"


@dataclass(frozen=True)
class Compacted:
    """The conversation was compacted: its older turns replaced by a summary the model wrote
    (see `loop/compaction.py`). Token counts are of the whole prompt (system, tools, messages);
    `after_tokens` is an estimate until the next request measures it. With `error` set the
    summary request failed and the history was left as it was."""

    trigger: Literal["threshold", "manual"]
    before_tokens: int
    after_tokens: int
    window: int
    messages_before: int
    messages_after: int
    kept_turns: int
    summary: str
    usage: Usage
    cost_usd: float
    error: str | None = None
    kind: Literal["compacted"] = "compacted"

    def line(self) -> str:
        """One line for a status display."""
        if self.error:
            return f"not compacted: {self.error}"
        return (
            f"compacted {self.messages_before} messages into a summary + the last "
            f"{self.kept_turns} turn(s) ({self.messages_after} messages): context "
            f"{self.before_tokens:,} -> ~{self.after_tokens:,} of {self.window:,} tokens; "
            f"summary request {self.usage.cache_read_input_tokens:,} cache read, "
            f"{self.usage.input_tokens + self.usage.cache_creation_input_tokens:,} in, "
            f"{self.usage.output_tokens:,} out, ${self.cost_usd:.4f}"
        )


LoopEvent = (
    RequestSent
    | Compacted
    | TextDelta
    | Retrying
    | AssistantMessage
    | UsageReport
    | ToolUse
    | ToolResult
    | Stop
)


def fold_text(text: str, event: object) -> str:
    """The text a turn shows after `event`: a `TextDelta` appends; a `Retrying` takes back the
    `discarded` characters the broken attempt streamed (the retry streams them again); any
    other event leaves it as it was. Every view of a stream folds its text with this."""
    if isinstance(event, TextDelta):
        return text + event.text
    if isinstance(event, Retrying) and event.discarded:
        return text[: max(len(text) - event.discarded, 0)]
    return text


class StreamedText:
    """`fold_text` for a long stream: appends are collected and joined once when read; a
    view adds its own pieces between the events (`add`)."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    @property
    def text(self) -> str:
        joined = "".join(self._parts)
        self._parts = [joined]
        return joined

    def add(self, piece: str) -> None:
        self._parts.append(piece)

    def apply(self, event: object) -> None:
        """Fold `event` in (see `fold_text`)."""
        if isinstance(event, TextDelta):
            self._parts.append(event.text)
        elif isinstance(event, Retrying):
            self._parts = [fold_text(self.text, event)]
