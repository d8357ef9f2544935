"""The JupyterLab extension's view of the session: task rows, pending approvals, the budget.

Each row is built here, once, as the type `comm/protocol.py` declares (and `protocol.ts` mirrors);
the table goes to connected frontends as a full snapshot at most every `TASKS_INTERVAL`.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from ...messages_api.usage import usage_counts
from ...runtime import Task, rate_wait
from ..cards.hub import ApprovalPrompt
from ..comm.protocol import Approval, Budget, TaskRow, TasksMessage

if TYPE_CHECKING:
    from ..host import ViewHost

__all__ = ["TASKS_INTERVAL", "FrontendRows"]

TASKS_INTERVAL = 0.5
PREVIEW_CHARS = 4000


class FrontendRows:
    """Typed rows for the Tasks panel and the approvals list, and their coalesced sending."""

    def __init__(self, ui: ViewHost) -> None:
        self.ui = ui
        self._flush: asyncio.TimerHandle | None = None
        self._sent_at = 0.0

    def task_row(self, task: Task) -> TaskRow:
        launch = self.ui.launches.get(task.id)
        return {
            "id": task.id,
            "name": task.name,
            "kind": task.kind,
            "status": task.status,
            "description": task.description,
            "elapsed": round(task.elapsed, 3),
            "usage": usage_counts(task.usage),
            "cost_usd": round(task.cost_usd, 6),
            "cell_id": launch.cell_id if launch else None,
            "current_tool": task.current_tool,
            "current_input": task.current_input or "",
            "started_at": task.started_at,
            "pending_approvals": sum(
                1 for p in self.ui.pending.values() if p.request.task_id == task.id
            ),
            "context_tokens": task.context_tokens,
            "context_window": task.context_window,
            "compactions": task.compactions,
            "waiting": rate_wait(task),
            "todos_done": sum(todo.status == "completed" for todo in task.todos),
            "todos_total": len(task.todos),
            "team": task.team,  # as %tasks and the team's box group it
        }

    def approval_row(self, prompt: ApprovalPrompt) -> Approval:
        request = prompt.request
        launch = self.ui.launches.get(request.task_id or "")
        return {
            "request_id": prompt.request_id,
            "task_id": request.task_id,
            "tool": request.tool_name,
            "preview": request.preview[:PREVIEW_CHARS],
            "cell_id": launch.cell_id if launch else None,
            "rule": request.suggested_rule,
        }

    def budget_row(self) -> Budget | None:
        """The session's spend against its cost budget (None: it has none)."""
        budget = self.ui.agent.session.budget
        if budget.limit is None:
            return None
        return {"spent_usd": budget.spent, "limit_usd": budget.limit, "reached": budget.reached()}

    def tasks(self) -> list[TaskRow]:
        return [self.task_row(t) for t in self.ui.agent.session.tasks]

    def approvals(self) -> list[Approval]:
        return [self.approval_row(p) for p in self.ui.pending.values()]

    def changed(self) -> None:
        """Send the task table to connected frontends, at most every TASKS_INTERVAL."""
        if self._flush is not None or not self.ui.agent.bridge.connected:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        wait = self._sent_at + TASKS_INTERVAL - time.monotonic()
        self._flush = loop.call_later(max(wait, 0.0), self._send)

    def _send(self) -> None:
        self._flush = None
        self._sent_at = time.monotonic()
        message: TasksMessage = {
            "type": "tasks",
            "tasks": self.tasks(),
            "budget": self.budget_row(),
        }
        self.ui.agent.bridge.broadcast(message)
