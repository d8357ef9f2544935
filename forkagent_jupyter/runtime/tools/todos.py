"""TodoWrite: the agent's own todo list, shown on its task card, in `%tasks`, and kept by the
runtime (the model sends the whole list each time; the last one stands).

It changes nothing outside the agent, so it needs no approval and runs in plan mode.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..tasks.registry import Todo
from .base import Tool, ToolContext

__all__ = ["TodoWriteTool"]

MAX_TODOS = 100


class TodoInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str = Field(min_length=1, description="What to do, in the imperative.")
    status: Literal["pending", "in_progress", "completed"] = Field(description="Its state.")
    activeForm: str | None = Field(  # noqa: N815 (Claude Code's key)
        default=None, description="The same, as what is being done ('Running the tests')."
    )
    id: str | None = Field(default=None, description="An id of your choosing (optional).")
    priority: Literal["high", "medium", "low"] | None = Field(
        default=None, description="Optional priority."
    )


class TodoWriteInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    todos: list[TodoInput] = Field(
        max_length=MAX_TODOS,
        description="The whole updated list (it replaces the previous one). Keep exactly one "
        "item in_progress while you work; mark items completed as soon as they are done.",
    )


class TodoWriteTool(Tool[TodoWriteInput]):
    name = "TodoWrite"
    description = (
        "Keep a todo list for a task with several steps: send the whole list with each item's "
        "status (pending, in_progress, completed). The user sees it on your task card. Use it "
        "for work of three steps or more; skip it for a single simple step."
    )
    input_model = TodoWriteInput
    concurrency_safe = False
    needs_approval = False
    allowed_in_plan = True

    def describe(self, args: TodoWriteInput) -> str:
        done = sum(t.status == "completed" for t in args.todos)
        return f"TodoWrite: {done}/{len(args.todos)} done"

    async def run(self, args: TodoWriteInput, ctx: ToolContext) -> str:
        todos = [Todo(t.content, t.status, t.activeForm) for t in args.todos]
        run = ctx.services.agent_run
        if run is not None:
            run.todos = todos
            task = run.task
            workers = ctx.services.workers
            if task is not None:
                task.todos = todos
                if workers is not None:
                    workers.registry.changed(task)
        counts = {s: sum(t.status == s for t in todos) for s in ("in_progress", "pending")}
        done = len(todos) - counts["in_progress"] - counts["pending"]
        return (
            f"Todo list saved: {len(todos)} items, {done} completed, {counts['in_progress']} "
            f"in progress, {counts['pending']} pending. Keep it current as you work."
        )
