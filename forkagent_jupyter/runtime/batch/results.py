"""A batch's results: one row per fork (`BatchResults`, a table for pandas), and the one
digest notification that reports the whole batch to the parent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...messages_api.usage import Usage, usage_counts
from ..errors import ConfigError
from ..tasks.notifications import format_task_notification
from ..tasks.registry import Task
from ..tasks.snapshot import TaskSnapshot
from .client import BatchResult

if TYPE_CHECKING:
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

__all__ = ["DIGEST_LINES", "BatchFork", "BatchResults", "digest", "results_table"]

DIGEST_LINES = 20


@dataclass(eq=False)
class BatchFork:
    """One fork of a batch: its task, what it was asked, its request and its result."""

    task: Task
    directive: str
    item: object = None
    body: MessageCreateParamsNonStreaming | None = None
    result: BatchResult | None = None
    waiter: asyncio.Future[BatchResult] | None = None


class BatchResults(list[dict[str, object]]):
    """One row per fork of a batch (a plain list of dicts); `to_dataframe()` for pandas."""

    COLUMNS = (
        "custom_id",
        "task_id",
        "name",
        "directive",
        "item",
        "result_type",
        "status",
        "text",
        "error",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "cost_usd",
    )

    def to_dataframe(self) -> Any:
        try:
            import pandas as pd  # type: ignore[import-untyped]
        except ImportError:  # pragma: no cover - pandas ships with the dev and examples extras
            raise ConfigError("to_dataframe() needs pandas: pip install pandas") from None
        return pd.DataFrame(list(self), columns=list(self.COLUMNS))


def results_table(forks: Sequence[BatchFork]) -> BatchResults:
    """One row per fork."""
    rows = BatchResults()
    for fork in forks:
        task = fork.task
        u = task.usage
        rows.append(
            {
                "custom_id": task.id,
                "task_id": task.id,
                "name": task.name,
                "directive": fork.directive,
                "item": fork.item,
                "result_type": (fork.result or {}).get("type"),
                "status": task.status,
                "text": task.result,
                "error": task.error,
                "input_tokens": u.total_input_tokens,
                "output_tokens": u.output_tokens,
                "cache_read_tokens": u.cache_read_input_tokens,
                "cache_write_tokens": u.cache_creation_input_tokens,
                "cost_usd": round(task.cost_usd, 6),
            }
        )
    return rows


def digest(tasks: list[Task], key: str, cost: float) -> TaskSnapshot:
    """The whole batch `key` as one ended task: its `notification` is the one
    `<task-notification>` the parent reads for it (see fan_out.py's module doc)."""
    by_status = {s: sum(t.status == s for t in tasks) for s in ("completed", "failed", "killed")}
    done = ", ".join(f"{n} {s}" for s, n in by_status.items() if n)
    status = "completed" if by_status["completed"] else "failed"
    if by_status["killed"] == len(tasks):
        status = "killed"
    lines = []
    for task in tasks[:DIGEST_LINES]:
        text = (task.result or task.error or "").strip().splitlines()
        first = text[0] if text else ""
        first = first if len(first) <= 160 else first[:159] + "…"
        failed = f", {task.failed_calls}" if task.failed_calls else ""
        lines.append(f"- {task.name or task.id} [{task.status}{failed}]: {first}")
    if len(tasks) > DIGEST_LINES:
        lines.append(
            f"... and {len(tasks) - DIGEST_LINES} more: "
            f"session.batch_results({key!r}) has every row."
        )
    usage = Usage()
    for task in tasks:
        usage = usage + task.usage
    summary = f"Batch of {len(tasks)} forks ended: {done}; cost ${cost:.4f} at the batch price"
    result = "\n".join(lines)
    notification = format_task_notification(
        task_id=key,
        status=status,
        summary=summary,
        output_file="",
        result=result,
        usage=usage,
        tool_uses=sum(t.tool_uses for t in tasks),
    )
    started = min((t.started_at for t in tasks), default=0.0)
    ended = max((t.ended_at or t.started_at for t in tasks), default=started)
    return TaskSnapshot(
        task_id=key,
        kind="batch",
        status=status,
        description=f"{len(tasks)} forks through the Message Batches API",
        summary=summary,
        result=result,
        notification=notification,
        usage=usage_counts(usage),
        cost_usd=round(cost, 6),
        elapsed=round(ended - started, 3),
        tool_uses=sum(t.tool_uses for t in tasks),
        tool_errors=sum(t.tool_errors for t in tasks),
    )
