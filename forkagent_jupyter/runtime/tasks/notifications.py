"""The command queue and the `<task-notification>` envelope.

Commands wait in one queue. Each command names its owner: the agent that should read it
(`main` for the parent conversation). A task's notification goes to the agent that launched
the task, so a nested agent hears from its own workers and the parent never sees them.

Each command has a priority, as in the reference's message queue: `now` before `next` before
`later`, first in first out within one level. A task's end is `later` (it waits for the
person's own prompts: a prompt's turn leaves it to the automatic answer that follows); what
should be read at the next opportunity (a background command that seems to wait for input)
is `next`.

Every value interpolated into the XML is escaped, so a result that contains
`</task-notification>` cannot close the envelope early.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal
from xml.sax.saxutils import escape

from ...messages_api.usage import Usage
from .snapshot import TaskSnapshot

__all__ = [
    "PRIORITY_RANK",
    "Command",
    "CommandQueue",
    "Priority",
    "failed_calls_text",
    "format_task_notification",
]

CommandMode = Literal["prompt", "task-notification", "message"]
Priority = Literal["now", "next", "later"]
PRIORITY_RANK: dict[str, int] = {"now": 0, "next": 1, "later": 2}


@dataclass(frozen=True)
class Command:
    """Something an agent should read at its next opportunity."""

    text: str
    owner: str = "main"
    mode: CommandMode = "task-notification"
    task_id: str | None = None
    run: int | None = None
    """Which run of the task it reports (a resumed task has one report per run)."""
    snapshot: TaskSnapshot | None = None
    """The reported run as it ended (a task's notification; `text` is its `notification`)."""
    priority: Priority = "later"


@dataclass
class CommandQueue:
    """A thread-safe queue of commands, drained per owner by priority, and in the order they
    came within one priority.

    `on_enqueue` is called (outside the lock) after each enqueue, so a host can wake the
    owner; it must not block."""

    on_enqueue: Callable[[Command], None] | None = None
    _items: list[Command] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def enqueue(
        self,
        text: str,
        *,
        owner: str = "main",
        mode: CommandMode = "task-notification",
        task_id: str | None = None,
        run: int | None = None,
        snapshot: TaskSnapshot | None = None,
        priority: Priority = "later",
    ) -> Command:
        with self._lock:
            command = Command(text, owner, mode, task_id, run, snapshot, priority)
            self._items.append(command)
        if self.on_enqueue is not None:
            self.on_enqueue(command)
        return command

    def drain(self, owner: str, upto: Priority = "later") -> list[Command]:
        """Remove and return the owner's commands of priority `upto` or more urgent, the
        most urgent first, oldest first within one priority."""
        limit = PRIORITY_RANK[upto]

        def taken_here(c: Command) -> bool:
            return c.owner == owner and PRIORITY_RANK[c.priority] <= limit

        with self._lock:
            taken = [c for c in self._items if taken_here(c)]
            if taken:
                self._items = [c for c in self._items if not taken_here(c)]
        return sorted(taken, key=lambda c: PRIORITY_RANK[c.priority])

    def discard(self, task_id: str, run: int | None = None) -> int:
        """Drop a task's notifications that were not read yet (of that `run` only, if given:
        an earlier run's report is still owed); returns how many."""

        def dropped(c: Command) -> bool:
            return c.task_id == task_id and (run is None or c.run == run)

        with self._lock:
            before = len(self._items)
            self._items = [c for c in self._items if not dropped(c)]
            return before - len(self._items)

    def reroute(self, owner: str, to: str) -> int:
        """Hand `owner`'s unread commands to `to` (the owner ended); returns how many."""
        if owner == to:
            return 0
        with self._lock:
            moved = [replace(c, owner=to) if c.owner == owner else c for c in self._items]
            count = sum(1 for c in self._items if c.owner == owner)
            self._items = moved
        if count and self.on_enqueue is not None:
            for command in [c for c in moved if c.owner == to]:
                self.on_enqueue(command)
                break
        return count

    def pending(self, owner: str | None = None, upto: Priority = "later") -> list[Command]:
        limit = PRIORITY_RANK[upto]
        with self._lock:
            return [
                c
                for c in self._items
                if (owner is None or c.owner == owner) and PRIORITY_RANK[c.priority] <= limit
            ]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


def failed_calls_text(failed: int, calls: int) -> str:
    """How many of a task's tool calls failed (their result was an error), at a glance:
    "2 of 5 tool calls failed"; "" when none did. The one wording of it: the notification's
    summary (`Task.summary`) and the notebook's status (kernel/render/task_line.py)."""
    if failed <= 0:
        return ""
    calls = max(calls, failed)
    return f"{failed} of {calls} tool call{'s' if calls != 1 else ''} failed"


def format_task_notification(
    *,
    task_id: str,
    status: str | None,
    summary: str,
    output_file: str,
    tool_use_id: str | None = None,
    result: str | None = None,
    usage: Usage | None = None,
    tool_uses: int | None = None,
    duration_ms: int | None = None,
    worktree_path: str | None = None,
    worktree_branch: str | None = None,
) -> str:
    """The `<task-notification>` XML a parent reads when a background task ends. Without a
    `status` it reports a task that still runs (a background command that seems to wait for
    input): a reader takes `<status>` as the end of the task."""
    lines = ["<task-notification>", f"<task-id>{escape(task_id)}</task-id>"]
    if tool_use_id:
        lines.append(f"<tool-use-id>{escape(tool_use_id)}</tool-use-id>")
    lines.append(f"<output-file>{escape(output_file)}</output-file>")
    if status is not None:
        lines.append(f"<status>{escape(status)}</status>")
    lines.append(f"<summary>{escape(summary)}</summary>")
    if result:
        lines.append(f"<result>{escape(result)}</result>")
    if usage is not None:
        parts = [f"<total_tokens>{usage.total_input_tokens + usage.output_tokens}</total_tokens>"]
        if tool_uses is not None:
            parts.append(f"<tool_uses>{tool_uses}</tool_uses>")
        if duration_ms is not None:
            parts.append(f"<duration_ms>{duration_ms}</duration_ms>")
        lines.append("<usage>" + "".join(parts) + "</usage>")
    if worktree_path:
        branch = (
            f"<worktreeBranch>{escape(worktree_branch)}</worktreeBranch>" if worktree_branch else ""
        )
        lines.append(
            f"<worktree><worktreePath>{escape(worktree_path)}</worktreePath>{branch}</worktree>"
        )
    lines.append("</task-notification>")
    return "\n".join(lines)
