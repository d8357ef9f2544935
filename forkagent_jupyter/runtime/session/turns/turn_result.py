"""What a parent turn comes to: `Turn` (folded from its events by `fold_turn`), its tool
calls, and `AutoTurn`, the parent's automatic answer to notifications."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from ....messages_api.shapes import ToolInput
from ....messages_api.usage import Usage
from ...events import (
    LoopEvent,
    RequestSent,
    Retrying,
    Stop,
    StopReason,
    StreamedText,
    ToolResult,
    ToolUse,
    UsageReport,
)
from ...tasks.snapshot import TaskSnapshot

__all__ = ["STOPPED_BY_USER", "AutoTurn", "ToolCall", "Turn", "fold_turn", "replay"]

STOPPED_BY_USER = "*Stopped at your request: not sent to the agent.*"


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a turn and what came back."""

    id: str
    name: str
    input: ToolInput
    result: str = ""
    is_error: bool = False


@dataclass
class Turn:
    """The outcome of one `ask()`: the assistant's text, why it stopped, what it cost."""

    text: str = ""
    stop_reason: StopReason = "end_turn"
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    tool_calls: list[ToolCall] = field(default_factory=list)
    requests: int = 0
    retries: int = 0  # responses that broke off mid-stream and were sent again

    @property
    def ok(self) -> bool:
        return self.stop_reason in ("end_turn", "max_turns", "max_tokens")


@dataclass
class AutoTurn:
    """The parent's automatic answer to notifications: what it read (each reported run as it
    ended, its notification included) and its turn."""

    snapshots: list[TaskSnapshot]
    turn: Turn

    @property
    def task_ids(self) -> list[str]:
        return [s.task_id for s in self.snapshots]

    @property
    def notifications(self) -> list[str]:
        """The `<task-notification>` texts the parent read, in order."""
        return [s.notification for s in self.snapshots]


async def replay(events: list[LoopEvent]) -> AsyncIterator[LoopEvent]:
    for event in events:
        yield event


async def fold_turn(
    events: AsyncIterator[LoopEvent], on_event: Callable[[LoopEvent], None] | None = None
) -> Turn:
    """Fold a turn's events into a `Turn`."""
    turn = Turn()
    shown = StreamedText()
    calls: dict[str, ToolCall] = {}
    async for event in events:
        if on_event is not None:
            on_event(event)
        shown.apply(event)
        if isinstance(event, RequestSent):
            text = shown.text
            if text and not text.endswith("\n"):
                shown.add("\n\n")
        elif isinstance(event, Retrying):
            turn.retries += 1
        elif isinstance(event, UsageReport):
            turn.usage = turn.usage + event.usage
            turn.cost_usd += event.cost_usd
            turn.requests += 1
        elif isinstance(event, ToolUse):
            calls[event.id] = ToolCall(event.id, event.name, event.input)
        elif isinstance(event, ToolResult):
            call = calls[event.tool_use_id]
            calls[event.tool_use_id] = ToolCall(
                call.id, call.name, call.input, event.content, event.is_error
            )
        elif isinstance(event, Stop):
            turn.stop_reason = event.reason
            turn.error = event.error
    turn.text = shown.text
    turn.tool_calls = list(calls.values())
    return turn
