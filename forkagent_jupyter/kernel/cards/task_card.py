"""The live card of one worker (`TaskCard`): its line (status with its failed tool calls,
figures, activity, result, and the results of its earlier runs, folded), a Stop button, its
approvals when asked, what its code printed and displayed, and its transcript on demand;
`card_text` is the same card as text.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as w

from ...runtime import Block, ClearOutput, Display, Message, Output, StreamText, Task
from ..render.markdown import markdown_html
from ..render.safe_output import safe_bundle
from ..render.task_line import (
    earlier_results,
    no_math,
    process_text,
    status_text,
    task_figures,
)
from .approval_prompt import ApprovalPrompt
from .widget_parts import STATUS_COLOURS, WholeText, button_layout, esc, shared_style

if TYPE_CHECKING:
    from traitlets.utils.bunch import Bunch

__all__ = ["CARD_OUTPUT_CHARS", "TaskCard", "card_text", "notebook_output"]

CARD_OUTPUT_CHARS = 200_000
"""Text a card keeps of what its worker's code printed (displays and figures are all kept)."""


def notebook_output(output: StreamText | Display) -> dict[str, Any]:
    """An output as nbformat writes it (what an Output widget holds); a display is cut down
    to what cannot run script in the page (`render/safe_output.py`)."""
    if isinstance(output, StreamText):
        return {"output_type": "stream", "name": output.name, "text": output.text}
    data = {
        mime: base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else value
        for mime, value in safe_bundle(dict(output.data)).items()
    }
    return {"output_type": "display_data", "data": data, "metadata": dict(output.metadata)}


def card_text(task: Task, whole: bool = True) -> str:
    """A card as text: name, kind, status, tokens, context, cost, and the result's first
    lines (with `whole` false, the first line only: a row of `%tasks`)."""
    line = (
        f"{task.name or task.id} ({task.kind}) {status_text(task)} · {task.description} · "
        f"{task_figures(task)}"
    )
    if not whole:  # what it does now, on the same line while it runs
        return f"{line} · {task.activity}" if task.activity and not task.done else line
    outcome = task.result or task.error or ""
    for note in task.notes:  # tools its file names that it did not get, an interruption
        line += f"\n    ({note})"
    if process_text(task):
        line += f"\n    {process_text(task)}"
    line += "".join(f"\n    {todo.line()}" for todo in task.todos)
    if task.done and task.result and task.error:
        line += f"\n    ({task.error})"
    if task.activity and not task.done:
        line += f"\n    {task.activity}"
    if task.done and outcome:
        line += _head_lines(outcome)
    for number, earlier in enumerate(earlier_results(task), 1):
        line += f"\n    earlier result {number} (newest first):" + _head_lines(earlier, "      ")
    return line


def _head_lines(text: str, indent: str = "    ") -> str:
    """The first 10 non-blank lines of `text`, each cut at 160 characters and indented."""
    head = [line for line in text.strip().splitlines() if line.strip()][:10]
    return "".join(f"\n{indent}{line[:160]}" for line in head)


class TaskCard(WholeText, w.VBox):
    """The live view of one worker: one HTML line with status, activity and result, a Stop
    button, approvals when asked, and the transcript, filled when it is opened."""

    def __init__(
        self,
        task: Task,
        on_stop: Callable[[str], None],
        on_background: Callable[[str], None] | None = None,
    ) -> None:
        self.task = task
        self._earlier: tuple[tuple[int, ...], str] = ((), "")  # see `_earlier_html`
        layout, html_style, button_style = shared_style()
        # every initial value goes in the widgets' comm_open: no update message at creation
        self.header = w.HTML(value=self._line(), layout=layout, style=html_style)
        self.stop_button = w.Button(
            description="Stop",
            disabled=task.done,
            button_style="warning",
            tooltip=f"Stop worker {task.id}",
            layout=button_layout(),
            style=button_style,
        )
        self.stop_button.on_click(lambda _b: on_stop(task.id))
        # a named agent that its caller waits for can be let go to the background
        self.bg_button = w.Button(
            description="Run in background",
            tooltip=f"Let the parent go on; {task.id} reports back when it is done",
            layout=button_layout(),
            style=button_style,
        )
        if on_background is not None:
            self.bg_button.on_click(lambda _b: on_background(task.id))
        self.approvals: w.VBox | None = None
        self.transcript = w.HTML(layout=layout, style=html_style)
        self.details = w.Accordion(
            children=[self.transcript], titles=("Transcript",), selected_index=None, layout=layout
        )
        self.details.observe(self._on_open, names="selected_index")
        self.history: Callable[[], list[Message]] | None = None
        # what the worker's code printed and displayed (figures too), made on first output
        self.output: w.Output | None = None
        self.queued: list[Output] = []
        self._output_chars = 0
        self._clear_due = False  # the code called clear_output(wait=True)
        super().__init__(
            self._parts(),
            _dom_classes=["forkagent-card", f"forkagent-task-{task.id}"],
            layout=layout,
        )

    def __repr__(self) -> str:
        return card_text(self.task)

    def html_text(self) -> str:
        return f"<div class='forkagent-card'>{self._line()}</div>"

    def add_prompt(self, prompt: ApprovalPrompt) -> None:
        if self.approvals is None:
            self.approvals = w.VBox(layout=shared_style()[0])
            self.children = self._parts()
        self.approvals.children = (*self.approvals.children, prompt)
        prompt.future.add_done_callback(lambda _f: self._drop(prompt))

    def _drop(self, prompt: ApprovalPrompt) -> None:
        if self.approvals is not None:
            self.approvals.children = tuple(c for c in self.approvals.children if c is not prompt)

    def _parts(self) -> tuple[w.Widget, ...]:
        """The card's rows: a finished task has no Stop button (and no approvals left)."""
        if self.task.done:
            rows: tuple[w.Widget | None, ...] = (self.header, self.output, self.details)
        else:
            bg = self.bg_button if self.task.foreground else None
            rows = (self.header, self.stop_button, bg, self.approvals, self.output, self.details)
        return tuple(r for r in rows if r is not None)

    def flush_outputs(self) -> bool:
        """Append the queued outputs to the card's output area; True if there were any."""
        if not self.queued:
            return False
        queued, self.queued = self.queued, []
        if self.output is None:
            self.output = w.Output(
                layout=w.Layout(max_height="32em", overflow="auto"),
                _dom_classes=["forkagent-worker-output"],
            )
        outputs = list(self.output.outputs)
        for item in queued:
            if isinstance(item, ClearOutput):  # the code's clear_output(), as a cell does it
                self._clear_due = True
                if item.wait:  # cleared when the next output arrives
                    continue
            if self._clear_due:
                outputs, self._output_chars, self._clear_due = [], 0, False
            if isinstance(item, ClearOutput):
                continue
            if isinstance(item, StreamText):
                if self._output_chars >= CARD_OUTPUT_CHARS:
                    continue
                text = item.text[: CARD_OUTPUT_CHARS - self._output_chars]
                self._output_chars += len(text)
                if self._output_chars >= CARD_OUTPUT_CHARS:
                    text += "\n[more output: see the transcript]\n"
                last = outputs[-1] if outputs else None
                if last and last["output_type"] == "stream" and last["name"] == item.name:
                    outputs[-1] = {**last, "text": last["text"] + text}
                    continue
                item = StreamText(item.name, text)
            outputs.append(notebook_output(item))
        self.output.outputs = tuple(outputs)
        return True

    def render(self) -> None:
        self.flush_outputs()
        self.header.value = self._line()
        parts = self._parts()
        if tuple(self.children) != parts:
            self.children = parts
        if self.details.selected_index == 0:
            self.fill_transcript()

    def _line(self) -> str:
        t = self.task
        colour = STATUS_COLOURS.get(t.status, "inherit")
        label = esc(t.name or t.id)
        line = (
            f"<b>{label}</b> <small>{esc(t.kind)} · {esc(t.description)}</small> "
            f"<span style='color:{colour};font-weight:600'>{esc(status_text(t))}</span> "
            f"<small>{no_math(f'{t.elapsed:.0f}s · {esc(task_figures(t, writes=True))}')}</small>"
        )
        for note in t.notes:  # tools its file names that it did not get, an interruption
            line += f"<div class='forkagent-note'><small>{esc(note)}</small></div>"
        if process_text(t):
            line += f"<div class='forkagent-process'><small>{esc(process_text(t))}</small></div>"
        if t.todos:
            items = "".join(f"<li>{esc(todo.line())}</li>" for todo in t.todos)
            line += (
                "<ul class='forkagent-todos' style='list-style:none;margin:2px 0;"
                f"padding-left:8px;font-family:var(--jp-code-font-family)'>{items}</ul>"
            )
        if t.done:
            body = (
                markdown_html(t.result)
                if t.result
                else no_math(f"<div style='white-space:pre-wrap'>{esc(t.error or '')}</div>")
            )
            if t.result and t.error:  # why it stopped, above what it had written
                reason = no_math(f"<small>{esc(t.error)}</small>")
                line += f"<div class='forkagent-reason'>{reason}</div>"
            line += (
                "<div class='forkagent-result' style='border-left:3px solid "
                f"{colour};padding-left:8px;overflow-x:auto'>{body}</div>"
            )
        else:
            call = t.current_input or t.current_tool
            tool = f"running <code>{esc(call)}</code> · " if call else ""
            activity = (
                f"<i class='forkagent-activity'>{esc(t.activity)}</i> · " if t.activity else ""
            )
            line += f"<div><small>{activity}{tool}{esc(t.preview[-200:])}</small></div>"
        line += self._earlier_html()
        if t.thinking:  # collapsed until opened
            line += (
                "<details class='forkagent-thinking'><summary><small>Thinking</small></summary>"
                f"<div style='white-space:pre-wrap'><small>{esc(t.thinking[-4000:])}</small>"
                "</div></details>"
            )
        return line

    def _earlier_html(self) -> str:
        """What its earlier runs returned (a follow-up replaces none of it), folded; rendered
        once per set of results, not at every update of a running card."""
        earlier = earlier_results(self.task)
        key = tuple(map(id, earlier))
        if self._earlier[0] != key:
            parts = "".join(
                "<div class='forkagent-earlier-result' style='border-left:3px solid "
                f"#999;padding-left:8px;margin-top:4px;overflow-x:auto'>{markdown_html(text)}"
                "</div>"
                for text in earlier
            )
            html = (
                "<details class='forkagent-earlier'><summary><small>earlier results "
                f"({len(earlier)}, newest first)</small></summary>{parts}</details>"
                if earlier
                else ""
            )
            self._earlier = (key, html)
        return self._earlier[1]

    def _on_open(self, change: Bunch) -> None:
        if change.get("new") == 0:
            self.fill_transcript()

    def fill_transcript(self) -> None:
        if self.history is not None:
            self.show_transcript(self.history())

    def show_transcript(self, messages: list[Message]) -> None:
        parts = []
        for m in messages[-30:]:
            content = m["content"]
            text = content if isinstance(content, str) else " ".join(map(_block_text, content))
            parts.append(f"<p><b>{esc(m['role'])}</b>: {esc(text[:600])}</p>")
        self.transcript.value = "".join(parts)


def _block_text(block: Block) -> str:
    """A content block in a line of the transcript view (images named, not inlined)."""
    if block.get("type") == "image":
        return "[image]"
    inner = block.get("content")
    if isinstance(inner, list):
        return " ".join(map(_block_text, inner))
    if block.get("type") == "thinking":
        return f"[thinking: {str(block.get('thinking', ''))[:200]}]"
    if block.get("type") == "redacted_thinking":
        return "[thinking, redacted]"
    return str(block.get("text") or block.get("name") or inner or "")[:300]
