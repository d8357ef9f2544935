"""The `forkagent` comm protocol (version 2) and the notification MIME payload, as types.

These mirror `labextension/src/protocol.ts` (and `INotification` in `notification.ts`) key for
key; `tests/kernel/test_protocol.py` checks that both sides name the same keys. The kernel
builds every payload it sends as one of these, so mypy checks the keys where they are made.

Frontend to kernel: comm_open `Hello`; `Approve`; `Stop`; `Inserted`.
Kernel to frontend: `Welcome` on every open; `TasksMessage` (a full snapshot, at most twice a
second, when something changed); `ApprovalMessage` and `ApprovalDone`; `InsertCellMessage`.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

__all__ = [
    "TARGET",
    "VERSION",
    "Approval",
    "ApprovalDone",
    "ApprovalMessage",
    "Budget",
    "CellSpec",
    "InsertCell",
    "InsertCellMessage",
    "Notification",
    "TaskRow",
    "TasksMessage",
    "TokenUsage",
    "Welcome",
]

TARGET = "forkagent"
VERSION = 2


class TokenUsage(TypedDict):
    """Token counts in the Messages API's words (`messages_api.usage.usage_counts`)."""

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int
    total_input_tokens: int


class TaskRow(TypedDict):
    """One row of the Tasks panel (`ITaskRow`)."""

    id: str
    name: str | None
    kind: str
    status: str
    description: str
    elapsed: float
    usage: TokenUsage
    cost_usd: float
    cell_id: str | None
    current_tool: str | None
    current_input: str
    started_at: float
    pending_approvals: int
    context_tokens: int
    """The prompt size of its last request (what it holds in context)."""
    context_window: int
    """Its model's context window (0: unknown)."""
    compactions: int


class Approval(TypedDict):
    """A pending permission request (`IApproval`)."""

    request_id: str
    task_id: str | None
    tool: str
    preview: str
    cell_id: str | None


class Budget(TypedDict):
    """The session's spend against `max_cost_usd` (`IBudget`)."""

    spent_usd: float
    limit_usd: float
    reached: bool


class CellSpec(TypedDict):
    """A complete nbformat code cell (`ICellSpec`)."""

    cell_type: Literal["code"]
    source: str
    metadata: dict[str, Any]
    outputs: list[dict[str, Any]]


class InsertCell(TypedDict):
    """Where and what to insert (`IInsertCell`)."""

    key: str
    after_cell_id: str | None
    task_ids: list[str]
    cell: CellSpec


class Notification(TypedDict):
    """The payload of the notification MIME type (`INotification`)."""

    task_id: str
    name: str | None
    kind: str
    status: str
    description: str
    summary: str
    result: str
    notification: str
    usage: TokenUsage
    cost_usd: float
    elapsed: float


class Welcome(TypedDict):
    type: Literal["welcome"]
    version: int
    tasks: list[TaskRow]
    approvals: list[Approval]
    budget: Budget | None


class TasksMessage(TypedDict):
    type: Literal["tasks"]
    tasks: list[TaskRow]
    budget: Budget | None


class ApprovalMessage(Approval):
    type: Literal["approval"]


class ApprovalDone(TypedDict):
    type: Literal["approval_done"]
    request_id: str


class InsertCellMessage(InsertCell):
    type: Literal["insert_cell"]
