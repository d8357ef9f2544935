"""How a finished worker's notification and the parent's answer look in the notebook.

One notification is a display bundle of the MIME type `application/vnd.forkagent.notification+json`
(rendered by the JupyterLab extension) with HTML and plain text for other frontends: its
summary first, the XML the parent read folded under it (`note_view`); the parent's answer is a
Markdown output after them. With the extension, they arrive as the outputs
of a new cell whose source, `%notifications ID ...`, shows them again from the transcripts
(no model call) when re-run; the cell carries `metadata.forkagent` so the frontend can tell it
apart and insert it once.
"""

from __future__ import annotations

import hashlib

from ...runtime import TaskSnapshot
from ..comm.protocol import (
    DIGEST_MIME,
    MIME,
    CellSpec,
    DigestBundle,
    DisplayData,
    MarkdownBundle,
    NotificationBundle,
)
from ..render.markdown import markdown_bundle
from .note_view import note_html, note_markdown, note_plain

__all__ = [
    "DIGEST_MIME",
    "MIME",
    "answer_bundle",
    "digest_bundle",
    "digest_cell",
    "joined",
    "notification_bundle",
    "notification_cell",
    "replay_source",
    "shown_bundle",
]


def notification_bundle(task: TaskSnapshot) -> NotificationBundle:
    """The display data of one notification (as JSON: `protocol.jsonable`): the snapshot for
    the extension, and for other frontends its summary with the XML folded (`note_view`)."""
    return {MIME: task, "text/html": note_html(task), "text/plain": note_plain(task)}


def answer_bundle(answer: str) -> MarkdownBundle:
    """The parent's answer: the model's Markdown, rendered safely (see `markdown`)."""
    bundle = markdown_bundle(answer)
    return {
        "text/html": bundle["text/html"],
        "text/markdown": bundle["text/markdown"],
        "text/plain": bundle["text/plain"],
    }


def _concat(bundles: list[MarkdownBundle], html_sep: str, text_sep: str) -> MarkdownBundle:
    return {
        "text/html": html_sep.join(b["text/html"] for b in bundles),
        "text/markdown": text_sep.join(b["text/markdown"] for b in bundles),
        "text/plain": text_sep.join(b["text/plain"] for b in bundles),
    }


def shown_bundle(tasks: list[TaskSnapshot], answer: str) -> MarkdownBundle:
    """Notifications and the parent's answer as one display, where no cell can be inserted
    (the launching cell's notification area): each summary with its XML folded, then the
    answer (model Markdown, rendered safely)."""
    bundles: list[MarkdownBundle] = [
        {"text/html": note_html(t), "text/markdown": note_markdown(t), "text/plain": note_plain(t)}
        for t in tasks
    ]
    if answer.strip():
        bundles.append(answer_bundle(answer))
    return _concat(bundles, "\n", "\n\n")


def joined(bundles: list[MarkdownBundle]) -> MarkdownBundle:
    """Several displays as one, a rule between each two."""
    return _concat(bundles, "\n<hr>\n", "\n\n---\n\n")


def replay_source(task_ids: list[str]) -> str:
    return "%notifications " + " ".join(task_ids)


def _output(data: NotificationBundle | DigestBundle | MarkdownBundle) -> DisplayData:
    return {"output_type": "display_data", "data": data, "metadata": {}}


def notification_cell(tasks: list[TaskSnapshot], answer: str) -> CellSpec:
    """The nbformat-4 code cell that brings these notifications and the answer into the
    notebook, and its idempotence key (the same notifications give the same key)."""
    task_ids = [t.task_id for t in tasks]
    digest = hashlib.sha256(
        "\n".join([*task_ids, *(t.notification for t in tasks)]).encode()
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


def _row(task: TaskSnapshot) -> TaskSnapshot:
    """A digest row: the snapshot without the XML the parent read (the same facts again) and
    with the result clipped, so the digest's size stays small per task."""
    result = task.result
    if len(result) > DIGEST_RESULT_CHARS:
        result = result[: DIGEST_RESULT_CHARS - 1] + "…"
    return task.model_copy(update={"result": result, "notification": ""})


def digest_bundle(tasks: list[TaskSnapshot]) -> DigestBundle:
    """The display data of many notifications as one digest (as JSON: `protocol.jsonable`)."""
    rows = [_row(t) for t in tasks]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status or "finished"] = counts.get(r.status or "finished", 0) + 1
    head = f"{len(rows)} notifications: " + " · ".join(f"{n} {s}" for s, n in counts.items())
    lines = [
        f"[{r.status or 'finished'}] {r.name or r.task_id}: "
        f"{(r.summary or r.description)[:120]} · ${r.cost_usd:.4f} · "
        f"{r.elapsed:.1f}s"
        for r in rows
    ]
    return {DIGEST_MIME: {"tasks": rows}, "text/plain": "\n".join([head, *lines])}


def digest_cell(tasks: list[TaskSnapshot], answer: str, key: str) -> CellSpec:
    """The code cell of a fan-out's digest: one digest output and the parent's latest answer;
    `key` stays the same as the digest grows (the frontend replaces the cell's outputs)."""
    task_ids = [t.task_id for t in tasks]
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
