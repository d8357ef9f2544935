"""`TaskSnapshot`: the one shape of an ended task on its way out.

A run's snapshot is taken when its notification is formatted (`TaskRegistry.settle`) and
travels unchanged: in its `Command`, in the parent's `AutoTurn`, in the parent's transcript
(`notifications_answered`, read back by `%notifications` after a restart) and, as JSON, in
the notification cell the JupyterLab extension inserts (the payload of the notification MIME
type; `ITaskSnapshot` in `labextension/src/protocol.ts` names the same keys).

Reading a stored one is lenient: records written before this type named the id `id` and had
further keys (ignored); the oldest held flat token counts, `input_tokens` being the whole
prompt. Each is read as this type, its counts in the words of `usage_counts`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from ...messages_api.usage import UsageCounts

__all__ = ["AnsweredNotifications", "TaskSnapshot"]

_COUNTS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _counts(data: Mapping[str, object]) -> UsageCounts:
    """The token counts of a snapshot as given (`usage`), or of a record with flat fields."""
    given = data.get("usage")
    if isinstance(given, dict):
        parts = [_int(given.get(key)) for key in _COUNTS]
    else:
        read = _int(data.get("cache_read_tokens"))
        written = _int(data.get("cache_write_tokens"))
        whole = _int(data.get("input_tokens"))
        parts = [max(whole - read - written, 0), written, read, _int(data.get("output_tokens"))]
    uncached, created, read, output = parts
    return {
        "input_tokens": uncached,
        "cache_creation_input_tokens": created,
        "cache_read_input_tokens": read,
        "output_tokens": output,
        "total_input_tokens": uncached + created + read,
    }


class TaskSnapshot(BaseModel):
    """An ended run of a task as the notebook shows it, with the notification the parent read.

    A notification that reports no task of the registry (a batch's digest) has only its id
    and `notification`; everything else keeps its neutral default."""

    model_config = ConfigDict(frozen=True)

    task_id: str = Field(validation_alias=AliasChoices("task_id", "id"))
    name: str | None = None
    kind: str = ""
    status: str = ""
    """`completed`, `failed` or `killed`; `running` for a report of a task that still runs (a
    background command that seems to wait for input); "" for a notification that reports no
    task."""
    description: str = ""
    summary: str = ""
    result: str = ""
    """Its result, or the error it failed with."""
    notification: str = ""
    """The `<task-notification>` text the parent model read."""
    usage: UsageCounts = Field(default_factory=lambda: _counts({"usage": {}}))
    cost_usd: float = 0.0
    elapsed: float = 0.0
    tool_uses: int = 0
    tool_errors: int = 0
    """Of its `tool_uses`, those whose result was an error (code that raised, a denial)."""

    @model_validator(mode="before")
    @classmethod
    def _normal_counts(cls, data: Any) -> Any:
        """Token counts in the words of `usage_counts`, whatever a record held; a missing
        text field (None in old records) is empty."""
        if not isinstance(data, dict):
            return data
        texts = ("kind", "status", "description", "summary", "result", "notification")
        fixed = {key: "" for key in texts if key in data and data[key] is None}
        return {**data, **fixed, "usage": _counts(data)}


class AnsweredNotifications(BaseModel):
    """The parent's answer to notifications, as its transcript records it."""

    model_config = ConfigDict(frozen=True)

    tasks: list[TaskSnapshot]
    answer: str = ""
