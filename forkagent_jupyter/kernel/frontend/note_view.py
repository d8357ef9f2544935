"""One worker's notification as a person reads it: a summary first (status, name, the summary
line, the result's first lines, tokens and cost), the `<task-notification>` XML the parent
read folded under it.

The XML says the same as the summary, at length: shown first, it pushed the result out of
sight. HTML folds it into a closed `<details>` (one click away), and so does Markdown; plain
text, for a frontend that cannot unfold anything, has the summary and then the XML whole. The
JupyterLab extension draws the notification MIME type the same way (`renderNotification` in
labextension/src/notification.ts) and clips the result by the same rule (`result_head`, both
checked against labextension/test/result-head.json). Only the look changes: the XML and the
snapshot the parent and `%notifications` rely on travel unchanged.
"""

from __future__ import annotations

import html

from ...runtime import TaskSnapshot
from ..cards.widget_parts import STATUS_COLOURS
from ..render.markdown import fenced, markdown_html
from ..render.task_line import NO_MATH, cost_text, tokens_detail

__all__ = [
    "RESULT_CHARS",
    "RESULT_LINES",
    "XML_LABEL",
    "note_html",
    "note_markdown",
    "note_plain",
    "result_head",
]

RESULT_LINES = 10
"""The lines of a result the summary shows; the rest is in the notification below it."""
RESULT_CHARS = 1000
"""At most this many characters of them (a result of one long line)."""
XML_LABEL = "notification XML (what the parent read)"
"""What the folded XML is called where it can be unfolded."""

_BLANK = " \t\r\n"


def result_head(result: str) -> str:
    """The first RESULT_LINES lines of `result` (at most RESULT_CHARS characters), and a last
    line saying how many more the notification holds; a result that fits is kept whole."""
    text = result.strip(_BLANK)
    lines = text.split("\n")
    head = "\n".join(lines[:RESULT_LINES])
    if len(head) > RESULT_CHARS:
        head = head[:RESULT_CHARS].rstrip(_BLANK) + "…"
    if head == text:
        return text
    left = len(lines) - (head.count("\n") + 1)
    more = f"{left} more line{'' if left == 1 else 's'}" if left > 0 else "more"
    return f"{head}\n[… {more} in the notification below]"


def _head(task: TaskSnapshot) -> str:
    """ "[completed] name: Worker "name" completed"."""
    label = task.name or task.task_id
    return f"[{task.status or 'finished'}] {label}: {task.summary or task.description}"


def _figures(task: TaskSnapshot) -> str:
    """ "tokens in 14,484 (cache read 14,200, write 200) / out 150 · $0.0123 · 3.2s"."""
    u = task.usage
    tokens = tokens_detail(
        u["total_input_tokens"],
        u["cache_read_input_tokens"],
        u["cache_creation_input_tokens"],
        u["output_tokens"],
    )
    return f"{tokens} · {cost_text(task.cost_usd)} · {task.elapsed:.1f}s"


def _xml(task: TaskSnapshot) -> str:
    return task.notification.strip(_BLANK)


def _result(task: TaskSnapshot) -> str:
    """The result's first lines under the summary; a snapshot without XML (nothing below to
    hold the rest) keeps its result whole."""
    return result_head(task.result) if _xml(task) else task.result.strip(_BLANK)


def _summary(task: TaskSnapshot) -> str:
    return "\n".join(part for part in (_head(task), _figures(task), _result(task)) if part)


def note_plain(task: TaskSnapshot) -> str:
    """For a text frontend: the summary, then the XML whole (it cannot be unfolded there)."""
    xml = _xml(task)
    return f"{_summary(task)}\n\n{xml}" if xml else _summary(task)


def note_markdown(task: TaskSnapshot) -> str:
    """The summary as a text block (model text in it stays text), the XML folded under it."""
    xml = _xml(task)
    folded = (
        f"\n\n<details><summary>{XML_LABEL}</summary>\n\n{fenced(xml, 'xml')}\n\n</details>"
        if xml
        else ""
    )
    return fenced(_summary(task), "text") + folded


def note_html(task: TaskSnapshot) -> str:
    """The summary (model text escaped), the XML in a closed `<details>` under it. Figures
    carry dollar amounts: the whole note is kept from math typesetting (`NO_MATH`)."""
    esc = html.escape
    status = task.status or "finished"
    colour = STATUS_COLOURS.get(status, "var(--jp-ui-font-color1, inherit)")
    what = task.summary or task.description
    parts = [
        f"<div class='forkagent-notification {NO_MATH}' data-status='{esc(status)}'>",
        f"<div><b>{esc(task.name or task.task_id)}</b> <small>{esc(task.kind)}</small> "
        f"<span style='color:{colour};font-weight:600'>{esc(status)}</span>"
        + (f" · {esc(what)}" if what else "")
        + "</div>",
    ]
    result = _result(task)
    if result:
        parts.append(f"<pre class='forkagent-notification-result'>{esc(result)}</pre>")
    parts.append(f"<div><small>{esc(_figures(task))}</small></div>")
    xml = _xml(task)
    if xml:
        parts.append(
            f"<details class='forkagent-notification-xml'><summary>{XML_LABEL}</summary>"
            f"{markdown_html(fenced(xml, 'xml'))}</details>"
        )
    parts.append("</div>")
    return "\n".join(parts)
