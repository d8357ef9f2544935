"""How a finished worker's notification and the parent's answer look in the notebook.

One notification is a display bundle of the MIME type `application/vnd.forkagent.notification+json`
(rendered by the JupyterLab extension) with a `text/plain` fallback for other frontends; the
parent's answer is a Markdown output after them. With the extension, they arrive as the outputs
of a new cell whose source, `%notifications ID ...`, shows them again from the transcripts
(no model call) when re-run; the cell carries `metadata.forkagent` so the frontend can tell it
apart and insert it once.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .markdown import markdown_bundle
from .protocol import CellSpec, Notification, TokenUsage
from .task_line import cost_text, tokens_detail

__all__ = [
    "DIGEST_MIME",
    "MIME",
    "answer_bundle",
    "digest_bundle",
    "digest_cell",
    "notification_bundle",
    "notification_cell",
    "plain_text",
    "replay_source",
]

MIME = "application/vnd.forkagent.notification+json"
DIGEST_MIME = "application/vnd.forkagent.digest+json"
"""One output for many notifications: `{"tasks": [notification payload, ...]}` (a table, a
row per task, each row opens to the whole notification)."""

_COUNTS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)


def _usage(task: dict[str, Any]) -> TokenUsage:
    """The snapshot's token counts in the words of `usage_counts`. Snapshots recorded before
    that shape had flat fields, with `input_tokens` counting the whole prompt."""
    given = task.get("usage")
    if isinstance(given, dict):
        counts = {key: int(given.get(key) or 0) for key in _COUNTS}
    else:
        read = int(task.get("cache_read_tokens") or 0)
        written = int(task.get("cache_write_tokens") or 0)
        counts = {
            "input_tokens": max(int(task.get("input_tokens") or 0) - read - written, 0),
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "output_tokens": int(task.get("output_tokens") or 0),
        }
    return {
        "input_tokens": counts["input_tokens"],
        "cache_creation_input_tokens": counts["cache_creation_input_tokens"],
        "cache_read_input_tokens": counts["cache_read_input_tokens"],
        "output_tokens": counts["output_tokens"],
        "total_input_tokens": counts["input_tokens"]
        + counts["cache_creation_input_tokens"]
        + counts["cache_read_input_tokens"],
    }


def _text(task: dict[str, Any], key: str) -> str:
    return str(task.get(key) or "")


def _payload(task: dict[str, Any]) -> Notification:
    name = task.get("name")
    return {
        "task_id": _text(task, "id"),
        "name": str(name) if name else None,
        "kind": _text(task, "kind"),
        "status": _text(task, "status"),
        "description": _text(task, "description"),
        "summary": _text(task, "summary"),
        "result": _text(task, "result"),
        "notification": _text(task, "notification"),
        "usage": _usage(task),
        "cost_usd": float(task.get("cost_usd") or 0.0),
        "elapsed": float(task.get("elapsed") or 0.0),
    }


def plain_text(payload: Notification) -> str:
    label = payload.get("name") or payload.get("task_id")
    u = payload["usage"]
    what = payload["summary"] or payload["description"]
    head = f"[{payload['status'] or 'finished'}] {label}: {what}"
    tokens = tokens_detail(
        u["total_input_tokens"],
        u["cache_read_input_tokens"],
        u["cache_creation_input_tokens"],
        u["output_tokens"],
    )
    cost = f"{tokens} · {cost_text(payload['cost_usd'])} · {payload['elapsed']:.1f}s"
    body = payload["result"].strip()
    return "\n".join(part for part in (head, cost, body) if part)


def notification_bundle(task: dict[str, Any]) -> dict[str, Any]:
    """The display data of one notification (a task snapshot, see `task_snapshot`)."""
    payload = _payload(task)
    return {MIME: payload, "text/plain": plain_text(payload)}


def answer_bundle(answer: str) -> dict[str, Any]:
    """The parent's answer: the model's Markdown, rendered safely (see `markdown`)."""
    return dict(markdown_bundle(answer))


def replay_source(task_ids: list[str]) -> str:
    return "%notifications " + " ".join(task_ids)


def _output(data: dict[str, Any]) -> dict[str, Any]:
    return {"output_type": "display_data", "data": data, "metadata": {}}


def notification_cell(tasks: list[dict[str, Any]], answer: str) -> CellSpec:
    """The nbformat-4 code cell that brings these notifications and the answer into the
    notebook, and its idempotence key (the same notifications give the same key)."""
    task_ids = [str(t.get("id")) for t in tasks]
    digest = hashlib.sha256(
        "\n".join([*task_ids, *(str(t.get("notification") or "") for t in tasks)]).encode()
    ).hexdigest()[:16]
    key = f"n-{digest}"
    outputs = [_output(notification_bundle(t)) for t in tasks]
    if answer.strip():
        outputs.append(_output(answer_bundle(answer)))
    return {
        "cell_type": "code",
        "source": replay_source(task_ids),
        "metadata": {"forkagent": {"kind": "notification", "key": key, "task_ids": task_ids}},
        "outputs": outputs,
    }


DIGEST_RESULT_CHARS = 2000
"""What a digest row keeps of a task's result; the whole notification is `%notifications ID`."""


def _row(task: dict[str, Any]) -> Notification:
    """A digest row: the notification payload without the XML the parent read (the same
    facts again) and with the result clipped, so the digest's size stays small per task."""
    row = _payload(task)
    result = row["result"]
    if len(result) > DIGEST_RESULT_CHARS:
        row["result"] = result[: DIGEST_RESULT_CHARS - 1] + "…"
    row["notification"] = ""
    return row


def digest_bundle(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """The display data of many notifications as one digest (task snapshots)."""
    payloads = [_row(t) for t in tasks]
    counts: dict[str, int] = {}
    for p in payloads:
        counts[p["status"] or "finished"] = counts.get(p["status"] or "finished", 0) + 1
    head = f"{len(payloads)} notifications: " + " · ".join(f"{n} {s}" for s, n in counts.items())
    lines = [
        f"[{p['status'] or 'finished'}] {p.get('name') or p['task_id']}: "
        f"{(p['summary'] or p['description'])[:120]} · ${p['cost_usd']:.4f} · "
        f"{p['elapsed']:.1f}s"
        for p in payloads
    ]
    return {DIGEST_MIME: {"tasks": payloads}, "text/plain": "\n".join([head, *lines])}


def digest_cell(tasks: list[dict[str, Any]], answer: str, key: str) -> CellSpec:
    """The code cell of a fan-out's digest: one digest output and the parent's latest answer;
    `key` stays the same as the digest grows (the frontend replaces the cell's outputs)."""
    task_ids = [str(t.get("id")) for t in tasks]
    outputs = [_output(digest_bundle(tasks))]
    if answer.strip():
        outputs.append(_output(answer_bundle(answer)))
    return {
        "cell_type": "code",
        "source": replay_source(task_ids),
        "metadata": {
            "forkagent": {"kind": "notification", "key": key, "digest": True, "task_ids": task_ids}
        },
        "outputs": outputs,
    }
