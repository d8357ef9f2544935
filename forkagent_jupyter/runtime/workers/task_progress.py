"""What a running agent's loop events do to its task row and its transcript's output log.

`apply_event` folds one event into the `Task` (usage, cost, context size, the current tool,
the streamed preview, retries, thinking) and says whether the row changed; `log_event`
writes the lines a person reads in the task's output file; `show_rate_wait` marks the row
while its request waits for rate-limit room (model/pacer.py).
"""

from __future__ import annotations

from ..events import (
    AssistantMessage,
    Compacted,
    Retrying,
    Stop,
    TextDelta,
    ToolResult,
    ToolUse,
    UsageReport,
    fold_text,
)
from ..model.pacer import RATE_WAIT, wait_text
from ..tasks.registry import Task
from ..transcripts.store import Transcript

__all__ = ["apply_event", "log_event", "show_rate_wait", "waits_for_rate"]


def log_event(out: Transcript, event: object) -> None:
    """The event's line in the task's output file (none for most events)."""
    if isinstance(event, ToolUse):
        out.output(f"tool {event.description or event.name}")
    elif isinstance(event, ToolResult):
        mark = "error" if event.is_error else "ok"
        out.output(f"  -> {mark}: {event.content[:200]}")
    elif isinstance(event, Retrying):
        out.output(f"{event.summary} in {event.delay:.1f} s")
    elif isinstance(event, Compacted):
        out.output(event.line())
    elif isinstance(event, Stop):
        out.output(f"stopped: {event.reason} {event.error or ''}")


def apply_event(task: Task, event: object) -> bool:
    """Fold `event` into the task's row; whether it changed."""
    if isinstance(event, UsageReport):
        task.activity = ""
        task.usage = task.usage + event.usage
        task.cost_usd += event.cost_usd
        task.context_tokens = event.usage.total_input_tokens
    elif isinstance(event, Compacted):
        if event.error is None:
            task.compactions += 1
            task.context_tokens = event.after_tokens
    elif isinstance(event, ToolUse):
        task.tool_uses += 1
        task.current_tool = event.name
        task.current_input = event.description
    elif isinstance(event, ToolResult):
        task.current_tool = None
        task.current_input = ""
        task.tool_errors += int(event.is_error)
    elif isinstance(event, TextDelta):
        task.activity = ""
        task.preview = fold_text(task.preview, event)[-400:]
    elif isinstance(event, Retrying):
        task.retries += 1
        task.activity = event.summary
        task.preview = fold_text(task.preview, event)
    elif isinstance(event, AssistantMessage):
        task.activity = ""
        thought = "\n\n".join(
            str(b.get("thinking", "")) for b in event.content if b.get("type") == "thinking"
        ).strip()
        if thought:
            task.thinking = thought
    else:
        return False
    return True


def show_rate_wait(task: Task, seconds: float | None) -> bool:
    """Mark the row as waiting `seconds` for rate-limit room (None: the wait is over);
    whether it changed."""
    if task.done:
        return False
    if seconds is not None:
        task.activity = wait_text(seconds)
    elif task.activity.startswith(RATE_WAIT):
        task.activity = ""
    else:
        return False
    return True


def waits_for_rate(task: Task | None) -> bool:
    """Whether the task's request waits for rate-limit room now."""
    return bool(task and task.activity.startswith(RATE_WAIT))
