"""Task cards, permission prompts and the pending-approvals strip (ipywidgets).

A card shows one worker live: status, elapsed time, the current tool, a preview of its text,
tokens in/out, cache read/write, cost, a Stop button, its transcript on demand, and at the end
its result and notification. Cards never print: everything they show is widget state, so a
worker's output never lands in whatever cell runs now.

Updates are coalesced by `CardHub`: runtime events only mark a card dirty; a flusher on the
event loop refreshes at most `per_flush` dirty cards every `interval` seconds (oldest first,
status changes first), so the IOPub rate stays bounded however many workers stream. Widgets
send only values that changed, and a card's final state is re-sent once a second later in
case the server's rate limiter dropped it.
"""

from __future__ import annotations

import asyncio
import difflib
import html
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ipywidgets as w

from ..runtime.permissions import Allow, Deny, PermissionRequest
from ..runtime.tasks import Task

__all__ = ["ApprovalPrompt", "CardHub", "PendingStrip", "TaskCard", "input_preview"]

STATUS_COLOURS = {
    "running": "var(--jp-brand-color1, #1976d2)",
    "completed": "var(--jp-success-color1, #388e3c)",
    "failed": "var(--jp-error-color1, #d32f2f)",
    "killed": "var(--jp-warn-color1, #f57c00)",
}


def _esc(text: object) -> str:
    return html.escape(str(text))


def input_preview(tool: str, data: dict[str, Any], workdir: Path) -> str:
    """The full input of a call as a person should review it (a diff for file changes)."""
    if tool in ("Write", "Edit"):
        path = Path(str(data.get("file_path", "")))
        path = path if path.is_absolute() else workdir / path
        try:
            old = path.read_text() if path.is_file() else ""
        except OSError:
            old = ""
        if tool == "Write":
            new = str(data.get("content", ""))
        else:
            target = str(data.get("old_string", ""))
            repl = str(data.get("new_string", ""))
            new = (
                old.replace(target, repl)
                if data.get("replace_all")
                else old.replace(target, repl, 1)
            )
        diff = difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"a/{data.get('file_path')}",
            tofile=f"b/{data.get('file_path')}",
        )
        return "".join(diff) or "(no change)"
    if tool == "Bash":
        return str(data.get("command", ""))
    if tool == "Python":
        return str(data.get("code", ""))
    import json

    return json.dumps(data, indent=2, ensure_ascii=False)


class ApprovalPrompt(w.VBox):  # type: ignore[misc]
    """One pending approval: what the call would do, and three answers."""

    def __init__(self, request: PermissionRequest, workdir: Path) -> None:
        self.request = request
        self.future: asyncio.Future[Allow | Deny] = asyncio.get_running_loop().create_future()
        title = w.HTML(
            f"<b>{_esc(request.tool_name)}</b> wants approval"
            + (f" (worker <code>{_esc(request.task_id)}</code>)" if request.task_id else "")
        )
        body = w.HTML(
            "<pre style='max-height:16em;overflow:auto;margin:0'>"
            + _esc(input_preview(request.tool_name, dict(request.input), workdir))
            + "</pre>"
        )
        self.reason = w.Text(placeholder="reason (optional, the model reads it)")
        once = w.Button(description="Allow once", button_style="success", tooltip="Allow this call")
        always = w.Button(
            description="Allow for session",
            button_style="info",
            tooltip="Allow this and similar calls until the kernel restarts",
        )
        deny = w.Button(description="Deny", button_style="danger", tooltip="Deny this call")
        once.on_click(lambda _b: self.answer("allow"))
        always.on_click(lambda _b: self.answer("always"))
        deny.on_click(lambda _b: self.answer("deny"))
        super().__init__(
            [title, body, w.HBox([once, always, deny, self.reason])],
            _dom_classes=["forkagent-approval", f"forkagent-request-{id(self)}"],
        )

    def answer(self, choice: str, reason: str | None = None) -> None:
        if self.future.done():
            return
        why = reason if reason is not None else self.reason.value
        if choice == "deny":
            message = "The user denied this call" + (f": {why}" if why else ".")
            self.future.set_result(Deny(message=message))
        elif choice == "always":
            self.future.set_result(Allow(remember=True))
        else:
            self.future.set_result(Allow())


class PendingStrip(w.HBox):  # type: ignore[misc]
    """All approvals waiting in this kernel, one line each."""

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


class TaskCard(w.VBox):  # type: ignore[misc]
    """The live view of one worker."""

    def __init__(self, task: Task, on_stop: Callable[[str], None]) -> None:
        self.task = task
        self.header = w.HTML()
        self.activity = w.HTML()
        self.stop_button = w.Button(
            description="Stop", button_style="warning", tooltip=f"Stop worker {task.id}"
        )
        self.stop_button.on_click(lambda _b: on_stop(task.id))
        self.approvals = w.VBox()
        self.result = w.HTML()
        self.transcript = w.HTML()
        self.details = w.Accordion(children=[self.transcript], selected_index=None)
        self.details.set_title(0, "Transcript")
        super().__init__(
            [
                w.HBox([self.header, self.stop_button]),
                self.activity,
                self.approvals,
                self.result,
                self.details,
            ],
            _dom_classes=["forkagent-card", f"forkagent-task-{task.id}"],
        )
        self.final_sent_at: float | None = None
        self.render()

    def add_prompt(self, prompt: ApprovalPrompt) -> None:
        self.approvals.children = (*self.approvals.children, prompt)
        prompt.future.add_done_callback(lambda _f: self._drop(prompt))

    def _drop(self, prompt: ApprovalPrompt) -> None:
        self.approvals.children = tuple(c for c in self.approvals.children if c is not prompt)

    def render(self) -> None:
        t = self.task
        u = t.usage
        colour = STATUS_COLOURS.get(t.status, "inherit")
        label = _esc(t.name or t.id)
        self.header.value = (
            f"<b>{label}</b> <small>{_esc(t.kind)} · {_esc(t.description)}</small> "
            f"<span style='color:{colour};font-weight:600'>{_esc(t.status)}</span> "
            f"<small>{t.elapsed:.0f}s · in {u.total_input_tokens:,}"
            f" / out {u.output_tokens:,} tok · cache read {u.cache_read_input_tokens:,}"
            f" / write {u.cache_creation_input_tokens:,} · ${t.cost_usd:.4f}</small>"
        )
        if t.done:
            self.activity.value = ""
            self.stop_button.disabled = True
            body = t.result or t.error or ""
            self.result.value = (
                "<div style='white-space:pre-wrap;border-left:3px solid "
                f"{colour};padding-left:6px'>{_esc(body)}</div>"
            )
        else:
            tool = f"running <code>{_esc(t.current_tool)}</code> · " if t.current_tool else ""
            self.activity.value = f"<small>{tool}{_esc(t.preview[-200:])}</small>"
            self.stop_button.disabled = False

    def show_transcript(self, messages: list[dict[str, Any]]) -> None:
        parts = []
        for m in messages[-30:]:
            content = m["content"]
            text = (
                content
                if isinstance(content, str)
                else " ".join(
                    str(b.get("text") or b.get("name") or b.get("content") or "")[:300]
                    for b in content
                )
            )
            parts.append(f"<p><b>{_esc(m['role'])}</b>: {_esc(text[:600])}</p>")
        self.transcript.value = "".join(parts)


class CardHub:
    """Owns the cards and coalesces their updates (see the module doc)."""

    def __init__(self, *, interval: float = 0.25, per_flush: int = 10) -> None:
        self.interval = interval
        self.per_flush = per_flush
        self.cards: dict[str, TaskCard] = {}
        self._dirty: dict[str, float] = {}
        self._final: dict[str, float] = {}
        self._flusher: asyncio.Task[None] | None = None
        self.flushes = 0
        self.renders = 0
        self.history_of: Callable[[str], list[dict[str, Any]]] | None = None

    def add(self, card: TaskCard) -> None:
        self.cards[card.task.id] = card

    def mark(self, task: Task) -> None:
        if task.id in self.cards:
            self._dirty.setdefault(task.id, time.monotonic())
            self._ensure_flusher()

    def _ensure_flusher(self) -> None:
        if self._flusher is None or self._flusher.done():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            self._flusher = loop.create_task(self._run())

    async def _run(self) -> None:
        while self._dirty or self._final:
            await asyncio.sleep(self.interval)
            self.flush()

    def flush(self) -> None:
        """Render the dirty cards within budget: final states first (up to `per_flush` * 4),
        then progress of running cards (up to `per_flush`), oldest first."""
        self.flushes += 1
        now = time.monotonic()
        dirty = sorted(self._dirty.items(), key=lambda kv: kv[1])
        done = [t for t, _ in dirty if self.cards[t].task.done][: self.per_flush * 4]
        running = [t for t, _ in dirty if not self.cards[t].task.done][: self.per_flush]
        for task_id in [*done, *running]:
            del self._dirty[task_id]
            card = self.cards[task_id]
            card.render()
            self.renders += 1
            if card.task.done:
                self._final[task_id] = now + 1.0
                if self.history_of is not None:
                    card.show_transcript(self.history_of(task_id))
        for task_id, due in list(self._final.items()):
            if due <= now and task_id not in self._dirty:
                del self._final[task_id]
                self.cards[task_id].header.send_state()  # re-send the final state once
