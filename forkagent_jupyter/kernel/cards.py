"""Task cards, permission prompts and the pending-approvals strip (ipywidgets).

A card shows one worker live: status, elapsed time, the current tool, a preview of its text,
tokens in/out, cache read/write, cost, a Stop button, its transcript on demand, and at the end
its result and notification. Cards never print: everything they show is widget state, so a
worker's output never lands in whatever cell runs now.

Updates are coalesced by `CardHub`: runtime events only mark a card dirty; a flusher on the
event loop sends at most `rate` widget messages a second (final states first, then progress,
oldest first), so the IOPub rate stays bounded however many workers stream. The cards a cell
starts live in one container, so a burst of forks costs one message, not one display each.
Widgets send only values that changed.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import html
import secrets
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as w
from ipywidgets.widgets.widget_string import HTMLStyle

from ..runtime.executors import Output, StreamText
from ..runtime.permissions import Allow, Deny, PermissionRequest
from ..runtime.tasks import Task
from .markdown import markdown_html
from .parents import in_latest_request
from .safe_output import safe_bundle
from .task_line import process_text, task_figures

__all__ = ["ApprovalPrompt", "CardHub", "PendingStrip", "TaskCard"]

STATUS_COLOURS = {
    "running": "var(--jp-brand-color1, #1976d2)",
    "completed": "var(--jp-success-color1, #388e3c)",
    "failed": "var(--jp-error-color1, #d32f2f)",
    "killed": "var(--jp-warn-color1, #f57c00)",
}


CARD_OUTPUT_CHARS = 200_000
"""Text a card keeps of what its worker's code printed (displays and figures are all kept)."""


def _esc(text: object) -> str:
    return html.escape(str(text))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def notebook_output(output: Output) -> dict[str, Any]:
    """An output as nbformat writes it (what an Output widget holds); a display is cut down
    to what cannot run script in the page (`safe_output.py`)."""
    if isinstance(output, StreamText):
        return {"output_type": "stream", "name": output.name, "text": output.text}
    data = {
        mime: base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else value
        for mime, value in safe_bundle(dict(output.data)).items()
    }
    return {"output_type": "display_data", "data": data, "metadata": dict(output.metadata)}


class _WholeText:
    """ipywidgets clips a widget's `text/plain` to 110 characters and gives no `text/html`; a
    card's text is what a frontend without widgets (a saved notebook on GitHub, nbconvert, a
    terminal) reads, so the bundle carries the same facts whole, as text and as HTML."""

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        data = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]
        if isinstance(data, dict):
            data.update(self.text_bundle())
        return data

    def html_text(self) -> str:
        return f"<pre>{_esc(repr(self))}</pre>"

    def text_bundle(self) -> dict[str, str]:
        """The facts without the widget: `text/plain` and `text/html`."""
        return {"text/plain": repr(self), "text/html": self.html_text()}


class ApprovalPrompt(_WholeText, w.VBox):  # type: ignore[misc]
    """One pending approval: what the call would do (the tool's own preview: for a file
    change, the diff that would be written), and three answers."""

    def __repr__(self) -> str:
        request = self.request
        who = f"worker {request.task_id}" if request.task_id else "the parent"
        state = "waiting for an answer"
        if self.future.done() and not self.future.cancelled():
            decision = self.future.result()
            state = "allowed" if isinstance(decision, Allow) else f"denied ({decision.message})"
        return f"[approval: {request.tool_name} for {who}, {state}]\n{request.preview[:2000]}"

    def __init__(self, request: PermissionRequest) -> None:
        self.request = request
        self.request_id = secrets.token_hex(8)
        """How frontends name this request (never reused, unlike `id()`: a late answer to an
        answered request cannot reach a new one)."""
        self.future: asyncio.Future[Allow | Deny] = asyncio.get_running_loop().create_future()
        title = w.HTML(
            f"<b>{_esc(request.tool_name)}</b> wants approval"
            + (f" (worker <code>{_esc(request.task_id)}</code>)" if request.task_id else "")
        )
        body = w.HTML(
            "<pre style='max-height:16em;overflow:auto;margin:0'>"
            + _esc(request.preview)
            + "</pre>"
        )
        self.reason = w.Text(placeholder="reason (optional, the model reads it)")
        once = w.Button(description="Allow once", button_style="success", tooltip="Allow this call")
        rule = request.suggested_rule
        always = w.Button(
            description=f"Allow for session: {_clip(rule, 60)}" if rule else "Allow for session",
            button_style="info",
            disabled=rule is None,
            tooltip=f"Allow this call now, and calls matching exactly {rule} until the kernel "
            "restarts"
            if rule
            else "No rule can name exactly this call: allow it once",
            layout=w.Layout(width="auto", max_width="100%"),
        )
        if rule:  # the whole rule, however long: what the click adds
            body = w.VBox([body, w.HTML(f"Allow for session adds <code>{_esc(rule)}</code>")])
        deny = w.Button(description="Deny", button_style="danger", tooltip="Deny this call")
        once.on_click(lambda _b: self.answer("allow"))
        always.on_click(lambda _b: self.answer("always"))
        deny.on_click(lambda _b: self.answer("deny"))
        super().__init__(
            [title, body, w.HBox([once, always, deny, self.reason])],
            _dom_classes=["forkagent-approval", f"forkagent-request-{self.request_id}"],
        )

    def answer(self, choice: object, reason: str | None = None) -> None:
        """Decide the call: "allow" runs it once, "always" runs it and remembers its rule;
        "deny" and every other value deny it. A second answer does nothing."""
        if self.future.done():
            return
        if choice == "allow":
            self.future.set_result(Allow())
        elif choice == "always":
            self.future.set_result(Allow(remember=True))
        else:
            why = reason if reason is not None else self.reason.value
            message = "The user denied this call" + (f": {why}" if why else ".")
            self.future.set_result(Deny(message=message))


# What a frontend shows where it cannot draw the widgets (a saved notebook on GitHub or
# nbviewer, a client without ipywidgets, a page whose widget state was not restored).
PLAIN_CARDS = (
    "[forkagent task cards: live widgets of the kernel that ran this cell; %tasks lists the tasks]"
)


def card_text(task: Task) -> str:
    """A card as text: name, kind, status, tokens, context, cost, and the result's first
    lines."""
    line = (
        f"{task.name or task.id} ({task.kind}) {task.status} · {task.description} · "
        f"{task_figures(task)}"
    )
    outcome = task.result or task.error or ""
    for note in task.notes:  # tools its file names that it did not get
        line += f"\n    ({note})"
    if process_text(task):
        line += f"\n    {process_text(task)}"
    line += "".join(f"\n    {todo.line()}" for todo in task.todos)
    if task.done and task.result and task.error:
        line += f"\n    ({task.error})"
    if task.activity and not task.done:
        line += f"\n    {task.activity}"
    if task.done and outcome:
        head = [text for text in outcome.strip().splitlines() if text.strip()][:10]
        line += "\n" + "\n".join(f"    {text[:160]}" for text in head)
    return line


VISIBLE_CARDS = 12
"""Cards a cell shows live; the cell's further tasks collapse into one summary row (with a
button that shows the next ones), so a fan-out of hundreds keeps the page small."""


class CardBox(_WholeText, w.VBox):  # type: ignore[misc]
    """The cards started by one run of a cell: the first `VISIBLE_CARDS` as cards, the rest
    as one summary row (counts by status) until shown."""

    def __init__(self, visible: int = VISIBLE_CARDS) -> None:
        super().__init__(_dom_classes=["forkagent-cards"])
        self.handle: Any = None  # its display, updated with the cards' text as they end
        self.visible = visible
        self.shown: list[TaskCard] = []
        self.hidden: list[Task] = []  # collapsed into the summary row, in launch order
        self.summary: w.HTML | None = None
        self.more: w.Button | None = None
        self.row: w.VBox | None = None
        self.on_more: Callable[[CardBox], None] | None = None  # the "Show more" click
        self.final_text = False  # the display's text was updated with every task ended

    def __repr__(self) -> str:
        tasks = self.tasks()
        if not tasks:
            return PLAIN_CARDS
        return "\n".join(card_text(t) for t in tasks)

    def cards(self) -> list[TaskCard]:
        return [c for c in self.children if isinstance(c, TaskCard)]

    def tasks(self) -> list[Task]:
        """Every task of the box: the shown cards' and the collapsed ones, in launch order."""
        return [c.task for c in self.shown] + list(self.hidden)

    @property
    def full(self) -> bool:
        return len(self.shown) >= self.visible

    def html_text(self) -> str:
        tasks = self.tasks()
        if not tasks:
            return f"<pre>{_esc(PLAIN_CARDS)}</pre>"
        shown = "".join(card.html_text() for card in self.shown)
        return shown + "".join(f"<pre>{_esc(card_text(t))}</pre>" for t in self.hidden)

    def layout_children(self) -> bool:
        """Set the children (the shown cards, then the summary row while tasks are
        collapsed); True if they changed (one message)."""
        rows: list[w.Widget] = list(self.shown)
        if self.hidden:
            if self.row is None:
                layout, html_style, button_style = _shared()
                self.summary = w.HTML(value=self.summary_html(), layout=layout, style=html_style)
                self.more = w.Button(
                    description=self._more_label(),
                    tooltip="Show the next collapsed tasks as cards",
                    layout=_button_layout(),
                    style=button_style,
                )
                self.more.on_click(lambda _b: self.on_more(self) if self.on_more else None)
                self.row = w.VBox([self.summary, self.more], _dom_classes=["forkagent-cards-more"])
            rows.append(self.row)
        current: tuple[w.Widget, ...] = tuple(self.children)  # type: ignore[has-type]
        if current == tuple(rows):
            return False
        self.children = tuple(rows)
        return True

    def _more_label(self) -> str:
        return f"Show {min(self.visible, len(self.hidden))} more"

    def summary_html(self) -> str:
        counts = dict.fromkeys(("running", "completed", "failed", "killed"), 0)
        for t in self.hidden:
            counts[t.status] = counts.get(t.status, 0) + 1
        parts = " · ".join(
            f"<span class='forkagent-{s}-count' style='color:{STATUS_COLOURS.get(s, 'inherit')}'"
            f">{n}</span> {s}"
            for s, n in counts.items()
            if n
        )
        return (
            f"<div class='forkagent-cards-summary'><b>{len(self.hidden)} more tasks</b> "
            f"<small>(collapsed; each has a row in the Tasks panel and in %tasks)</small>: "
            f"{parts}</div>"
        )

    def refresh_summary(self) -> None:
        if self.summary is not None:
            self.summary.value = self.summary_html()
        if self.more is not None:
            label = self._more_label()
            if self.more.description != label:
                self.more.description = label


class PendingStrip(w.HBox):  # type: ignore[misc]
    """All approvals waiting in this kernel, one line each."""

    def __repr__(self) -> str:
        return "[forkagent pending approvals]"

    def __init__(self) -> None:
        self.label = w.HTML()
        super().__init__([self.label])
        self.prompts: list[ApprovalPrompt] = []
        self.refresh()

    def add(self, prompt: ApprovalPrompt) -> None:
        self.prompts.append(prompt)
        prompt.future.add_done_callback(lambda _f: self.remove(prompt))
        self.refresh()

    def remove(self, prompt: ApprovalPrompt) -> None:
        if prompt in self.prompts:
            self.prompts.remove(prompt)
        self.refresh()

    def refresh(self) -> None:
        if not self.prompts:
            self.layout.display = "none"
            return
        self.layout.display = "flex"
        items = ", ".join(
            f"{_esc(p.request.tool_name)} ({_esc(p.request.task_id or 'main')})"
            for p in self.prompts
        )
        self.label.value = f"<b>{len(self.prompts)} pending approval(s):</b> {items}"


@functools.cache
def _shared() -> tuple[w.Layout, HTMLStyle, w.ButtonStyle]:
    """One Layout and one style model for every card part: a card then opens 5 widget
    models instead of about 20 (each part would otherwise bring its own layout and style)."""
    return w.Layout(), HTMLStyle(), w.ButtonStyle()


@functools.cache
def _button_layout() -> w.Layout:
    """The cards' Stop buttons: as wide as their label, not a full-width bar."""
    return w.Layout(width="auto", align_self="flex-start", margin="2px 0")


class TaskCard(_WholeText, w.VBox):  # type: ignore[misc]
    """The live view of one worker: one HTML line with status, activity and result, a Stop
    button, approvals when asked, and the transcript, filled when it is opened."""

    def __init__(
        self,
        task: Task,
        on_stop: Callable[[str], None],
        on_background: Callable[[str], None] | None = None,
    ) -> None:
        self.task = task
        layout, html_style, button_style = _shared()
        # every initial value goes in the widgets' comm_open: no update message at creation
        self.header = w.HTML(value=self._line(), layout=layout, style=html_style)
        self.stop_button = w.Button(
            description="Stop",
            disabled=task.done,
            button_style="warning",
            tooltip=f"Stop worker {task.id}",
            layout=_button_layout(),
            style=button_style,
        )
        self.stop_button.on_click(lambda _b: on_stop(task.id))
        # a named agent that its caller waits for can be let go to the background
        self.bg_button = w.Button(
            description="Run in background",
            tooltip=f"Let the parent go on; {task.id} reports back when it is done",
            layout=_button_layout(),
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
        self.history: Callable[[], list[dict[str, Any]]] | None = None
        # what the worker's code printed and displayed (figures too), made on first output
        self.output: w.Output | None = None
        self.queued: list[Output] = []
        self._output_chars = 0
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
            self.approvals = w.VBox(layout=_shared()[0])
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
        label = _esc(t.name or t.id)
        line = (
            f"<b>{label}</b> <small>{_esc(t.kind)} · {_esc(t.description)}</small> "
            f"<span style='color:{colour};font-weight:600'>{_esc(t.status)}</span> "
            f"<small>{t.elapsed:.0f}s · {_esc(task_figures(t, writes=True))}</small>"
        )
        for note in t.notes:  # tools its file names that it did not get
            line += f"<div class='forkagent-note'><small>{_esc(note)}</small></div>"
        if process_text(t):
            line += f"<div class='forkagent-process'><small>{_esc(process_text(t))}</small></div>"
        if t.todos:
            items = "".join(f"<li>{_esc(todo.line())}</li>" for todo in t.todos)
            line += (
                "<ul class='forkagent-todos' style='list-style:none;margin:2px 0;"
                f"padding-left:8px;font-family:var(--jp-code-font-family)'>{items}</ul>"
            )
        if t.done:
            body = (
                markdown_html(t.result)
                if t.result
                else f"<div style='white-space:pre-wrap'>{_esc(t.error or '')}</div>"
            )
            if t.result and t.error:  # why it stopped, above what it had written
                line += f"<div class='forkagent-reason'><small>{_esc(t.error)}</small></div>"
            line += (
                "<div class='forkagent-result' style='border-left:3px solid "
                f"{colour};padding-left:8px;overflow-x:auto'>{body}</div>"
            )
        else:
            call = t.current_input or t.current_tool
            tool = f"running <code>{_esc(call)}</code> · " if call else ""
            activity = (
                f"<i class='forkagent-activity'>{_esc(t.activity)}</i> · " if t.activity else ""
            )
            line += f"<div><small>{activity}{tool}{_esc(t.preview[-200:])}</small></div>"
        if t.thinking:  # collapsed until opened
            line += (
                "<details class='forkagent-thinking'><summary><small>Thinking</small></summary>"
                f"<div style='white-space:pre-wrap'><small>{_esc(t.thinking[-4000:])}</small>"
                "</div></details>"
            )
        return line

    def _on_open(self, change: dict[str, Any]) -> None:
        if change.get("new") == 0:
            self.fill_transcript()

    def fill_transcript(self) -> None:
        if self.history is not None:
            self.show_transcript(self.history())

    def show_transcript(self, messages: list[dict[str, Any]]) -> None:
        parts = []
        for m in messages[-30:]:
            content = m["content"]
            text = content if isinstance(content, str) else " ".join(map(_block_text, content))
            parts.append(f"<p><b>{_esc(m['role'])}</b>: {_esc(text[:600])}</p>")
        self.transcript.value = "".join(parts)


def _block_text(block: dict[str, Any]) -> str:
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


# IOPub messages a render costs: a running card's line; a final card's line and its rows
# (the Stop button goes).
RUNNING_COST = 1
FINAL_COST = 2


class CardHub:
    """Owns the cards and coalesces their updates (see the module doc)."""

    def __init__(self, *, interval: float = 0.25, rate: float = 200.0) -> None:
        self.interval = interval
        self.rate = rate
        self.cards: dict[str, TaskCard] = {}
        self._dirty: dict[str, float] = {}
        self._pending: dict[int, tuple[w.VBox, list[TaskCard]]] = {}
        self._flusher: asyncio.Task[None] | None = None
        self.flushes = 0
        self.renders = 0
        self.history_of: Callable[[str], list[dict[str, Any]]] | None = None
        self.boxes: list[CardBox] = []
        # between cells nothing is running to own a message: headless clients (nbclient)
        # drop what is sent then, so lasting changes sent then are sent again in the next cell
        self.in_cell = False
        self._unseen: dict[int, tuple[w.Widget, tuple[str, ...]]] = {}
        self._debt = 0.0  # messages sent outside a flush, taken from the next flushes' budget
        # True when no frontend can draw or click the widgets (nbclient, papermill, nbconvert)
        self.headless: Callable[[], bool] = lambda: False
        self._unseen_boxes: dict[int, CardBox] = {}
        self.hidden: dict[str, CardBox] = {}  # collapsed tasks (no card yet) -> their box
        self._summaries: dict[int, CardBox] = {}  # boxes whose summary row is due
        self.make_card: Callable[[Task], TaskCard] | None = None  # a card for a shown task

    def collapse(self, task: Task, box: CardBox) -> bool:
        """Collapse `task` into `box`'s summary row if the box shows all the cards it may
        (True); False: the caller makes it a card."""
        if not box.full:
            return False
        box.hidden.append(task)
        box.final_text = False
        box.on_more = self.show_more
        self.hidden[task.id] = box
        self._summary_due(box)
        return True

    def _summary_due(self, box: CardBox) -> None:
        self._summaries[id(box)] = box
        self._ensure_flusher()

    def reveal(self, task_id: str) -> TaskCard | None:
        """Show a collapsed task as a card in its box (an approval for it, a "Show more")."""
        box = self.hidden.pop(task_id, None)
        if box is None or self.make_card is None:
            return None
        task = next(t for t in box.hidden if t.id == task_id)
        box.hidden.remove(task)
        card = self.make_card(task)
        self.add(card, box)
        self._summary_due(box)
        return card

    def show_more(self, box: CardBox) -> None:
        """The summary row's button: the next `box.visible` collapsed tasks become cards."""
        for task in list(box.hidden[: box.visible]):
            self.reveal(task.id)

    def add(self, card: TaskCard, container: w.VBox | None = None) -> None:
        """Register a card; with a container, append it there at the next flush (all cards
        started together then cost one message, not one display each)."""
        self.cards[card.task.id] = card
        task_id = card.task.id
        card.history = lambda: self.history_of(task_id) if self.history_of is not None else []
        if container is None:
            return
        if isinstance(container, CardBox):
            container.shown.append(card)
            container.final_text = False
        self._pending.setdefault(id(container), (container, []))[1].append(card)
        if not self._ensure_flusher():
            self._append_pending()

    def output(self, task_id: str, output: Output) -> None:
        """Queue what a worker's code printed or displayed for its card's next render."""
        card = self.cards.get(task_id)
        if card is None:
            return
        card.queued.append(output)
        self.mark(card.task)

    def mark(self, task: Task) -> None:
        if task.id in self.cards:
            self._dirty.setdefault(task.id, time.monotonic())
            self._ensure_flusher()
        elif task.id in self.hidden:
            self._summary_due(self.hidden[task.id])

    def _ensure_flusher(self) -> bool:
        if self._flusher is None or self._flusher.done():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return False
            self._flusher = in_latest_request(loop.create_task, self._run())
        return True

    async def _run(self) -> None:
        while self._dirty or self._pending or self._summaries:
            await asyncio.sleep(self.interval)
            self.flush()

    def _append_pending(self) -> int:
        sent = 0
        for container, cards in self._pending.values():
            if isinstance(container, CardBox):
                if not container.layout_children():
                    continue
            else:
                container.children = (*container.children, *cards)
            sent += 1
            self._sent(container, "children")
        self._pending.clear()
        return sent

    def _sent(self, widget: w.Widget, *names: str) -> None:
        if not self.in_cell:
            self._unseen[id(widget)] = (widget, names)

    def settle(self) -> None:
        """At the end of a cell: put the cards it started into their containers now, and send
        again the final states sent while no cell ran, so a client that keeps only the
        messages of the running cell (nbclient, papermill) saves them. Costs one message per
        container and per card that ended between cells, taken from the next flushes' budget
        so the rate stays bounded; progress waits for the flusher."""
        sent = self._append_pending()
        unseen, self._unseen = self._unseen, {}
        for widget, names in unseen.values():
            widget.send_state(list(names))
        boxes, self._unseen_boxes = self._unseen_boxes, {}
        for box in boxes.values():
            self._show_text(box)
        self._debt += sent + len(unseen) + len(boxes)
        self.in_cell = False

    async def drained(self) -> None:
        """Return once every ended task's card has sent its final state."""
        while self._pending or self._summaries or any(self.cards[t].task.done for t in self._dirty):
            if not self._ensure_flusher():
                self.flush()
            await asyncio.sleep(self.interval / 2)

    def flush(self) -> None:
        """Send what is due within the budget of `rate * interval` messages: new cards into
        their containers, then final states, then progress of running cards, oldest first.
        Nothing is dropped: what does not fit stays dirty for the next flush, and final
        states go first, so every card reaches its final state. The budget keeps the whole
        kernel far below the server's IOPub rate limit, so no state needs re-sending."""
        self.flushes += 1
        budget = self.rate * self.interval - self._append_pending() - self._debt
        self._debt = max(0.0, -budget)  # what settle() sent counts against the rate too
        dirty = sorted(self._dirty.items(), key=lambda kv: kv[1])
        done = [t for t, _ in dirty if self.cards[t].task.done]
        running = [t for t, _ in dirty if not self.cards[t].task.done]
        ended: set[int] = set()
        for task_id in done:
            budget = self._render(task_id, budget, ended)
        budget = self._flush_summaries(budget, ended)
        for task_id in running:
            budget = self._render(task_id, budget, ended)
        self._retext(ended)

    def _flush_summaries(self, budget: float, ended: set[int]) -> float:
        """Refresh the summary rows that are due (their counts; the row itself when the box
        first collapses a task); one or two messages each. Returns the budget left."""
        for key, box in list(self._summaries.items()):
            if budget < 2:
                return -1
            del self._summaries[key]
            budget -= 1 + box.layout_children()
            box.refresh_summary()
            if box.summary is not None:
                self._sent(box.summary, "value")
            if box.row is not None and any(t.done for t in box.hidden):
                ended.add(id(box.row))
        return budget

    def _render(self, task_id: str, budget: float, ended: set[int]) -> float:
        """Render one dirty card if the budget allows; returns the budget left (-1 once a
        card did not fit: the cards after it wait for the next flush, in order)."""
        if budget < 0:
            return budget
        card = self.cards[task_id]
        cost = (FINAL_COST if card.task.done else RUNNING_COST) + (1 if card.queued else 0)
        if budget < cost:
            return -1
        budget -= cost
        del self._dirty[task_id]
        card.render()
        self.renders += 1
        if card.task.done:
            self._sent(card.header, "value")
            self._sent(card, "children")
            if card.output is not None:
                self._sent(card.output, "outputs")
            ended.add(id(card))
        return budget

    def _retext(self, ended: set[int]) -> None:
        """Give the displays of the containers whose cards just ended their new text (what a
        saved notebook shows where widgets are not drawn). With a live frontend, once, when
        all of a box's tasks have ended: the frontend draws a display update as a new view of
        the whole box (the old one is not released), so one per ended card would grow with
        the square of the cards."""
        headless = self.headless()
        for box in self.boxes:
            if box.handle is None or not any(id(c) in ended for c in box.children):
                continue
            if not headless:
                if box.final_text or not all(t.done for t in box.tasks()):
                    continue
                box.final_text = True
            self._show_text(box)
            self._debt += 1  # within the same message budget
            if not self.in_cell:
                self._unseen_boxes[id(box)] = box

    def _show_text(self, box: CardBox) -> None:
        """Update a container's display with its cards' text. In a headless run, once all its
        cards have ended, the display keeps only the text and HTML: an HTML export draws a
        saved widget view and nothing else, and there no script may run to draw it."""
        if self.headless() and all(task.done for task in box.tasks()):
            box.handle.update(box.text_bundle(), raw=True)
        else:
            box.handle.update(box)
