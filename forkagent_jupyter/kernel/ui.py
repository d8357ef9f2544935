"""What the notebook shows of the runtime: streamed turns, cards, approvals, notifications.

`KernelUI` creates the kernel's Session (with this module's permission policy), renders a
parent turn into the running cell, shows a card per worker in the cell that launched it, and
delivers each notification with the parent's answer: as a new cell through the JupyterLab
extension when it is connected, else in the launching cell's notification area (a display id).
"""

from __future__ import annotations

import asyncio
import html
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as w
from IPython.core.error import UsageError
from IPython.display import HTML, display

from ..runtime.budget import CostBudget
from ..runtime.events import LoopEvent, Retrying, Stop, TextDelta, ToolResult, ToolUse
from ..runtime.executors import Output
from ..runtime.permissions import Deny, PermissionRequest
from ..runtime.tasks import Task, task_snapshot
from ..runtime.transcripts import answered_notifications
from .cards import (
    ApprovalPrompt,
    CardBox,
    CardHub,
    PendingStrip,
    TaskCard,
    card_text,
)
from .delivery import answer_bundle, notification_bundle, notification_cell
from .markdown import SafeMarkdown, code_span, fenced
from .parents import in_latest_request

if TYPE_CHECKING:
    from .extension import KernelAgent

__all__ = ["KernelUI", "WidgetPolicy"]

STREAM_INTERVAL = 0.2
TASKS_INTERVAL = 0.5


def _esc(text: object) -> str:
    return html.escape(str(text))


def budget_line(budget: CostBudget) -> str:
    """The session's spend against its budget, one line ("" without a budget)."""
    if budget.limit is None:
        return ""
    state = " - budget reached: workers stopped, new turns refused" if budget.reached() else ""
    return f"session cost ${budget.spent:.4f} of max_cost_usd ${budget.limit:.4f}{state}"


def headless_notice(request: PermissionRequest, timeout: float) -> str:
    """What a headless run (nbclient, papermill, nbconvert) prints when a call needs approval."""
    who = f"worker {request.task_id}" if request.task_id else "the parent"
    return (
        f"approval needed: {request.tool_name} for {who} ({request.summary}). No frontend can "
        f"answer here: run api.allow({request.tool_name!r}) or api.answer('allow') in a cell "
        "(from forkagent_jupyter.kernel import api), or set ForkAgent.permission_mode before "
        f"the work starts. Denied in {timeout:.0f} s (ForkAgent.headless_approval_timeout)."
    )


@dataclass
class Launch:
    """Where a worker came from: the cell that started it, for its notification."""

    cell_id: str | None
    display_id: str
    run: str = ""  # the execute_request that displayed the card (its cell's output then)


class WidgetPolicy:
    """The notebook's PermissionPolicy: a prompt on the worker's card (or in the running
    cell for the parent's own calls), answered by buttons or by the JupyterLab extension."""

    def __init__(self, ui: KernelUI) -> None:
        self.ui = ui

    async def decide(self, request: PermissionRequest) -> Any:
        prompt = ApprovalPrompt(request)
        self.ui.pending[id(prompt)] = prompt
        self.ui.strip.add(prompt)
        card = self.ui.hub.cards.get(request.task_id or "")
        if card is not None:
            card.add_prompt(prompt)
        else:
            display(prompt)
        self.ui.agent.bridge.broadcast({"type": "approval", **self.ui.approval_row(prompt)})
        self.ui.tasks_changed()
        headless = self.ui.headless()
        settings = self.ui.agent.settings
        timeout = settings.headless_approval_timeout if headless else settings.approval_timeout
        if headless:
            notice = headless_notice(request, timeout)
            self.ui.headless_notices[id(prompt)] = notice
            in_latest_request(print, notice, file=sys.stderr, flush=True)
        try:
            return await asyncio.wait_for(asyncio.shield(prompt.future), timeout)
        except asyncio.TimeoutError:
            prompt.answer("deny", f"no answer within {timeout:.0f} s")
            if headless:
                return Deny(
                    message=f"Not approved: this notebook runs without a frontend (headless), "
                    f"and nobody answered within {timeout:.0f} seconds."
                )
            return Deny(message=f"Not approved: nobody answered within {timeout:.0f} seconds.")
        finally:
            self.ui.pending.pop(id(prompt), None)
            self.ui.headless_notices.pop(id(prompt), None)
            self.ui.agent.bridge.broadcast({"type": "approval_done", "request_id": str(id(prompt))})
            self.ui.tasks_changed()


class KernelUI:
    def __init__(self, agent: KernelAgent) -> None:
        self.agent = agent
        self.hub = CardHub()
        self.strip = PendingStrip()
        self.pending: dict[int, ApprovalPrompt] = {}
        self.headless_notices: dict[int, str] = {}  # pending approvals nobody can answer
        self.launches: dict[str, Launch] = {}
        # per execute_request (not per cell: a re-run clears the cell's earlier output)
        self._run_notes: dict[str, str] = {}
        self._run_cards: dict[str, w.VBox] = {}
        self._notes: dict[str, list[str]] = {}
        self.workdir = Path.cwd()
        self._tasks_flush: asyncio.TimerHandle | None = None
        self._tasks_sent_at = 0.0
        agent.bridge.on("approve", self._on_approve)
        agent.bridge.on("stop", self._on_stop)

    def make_session(self) -> Any:
        from ..runtime.session import Session

        s = self.agent.settings
        session = Session(
            s.model or None,
            backend=s.backend or None,
            permission_mode=s.permission_mode,
            permission_policy=WidgetPolicy(self),
            workdir=self.workdir,
            auto_respond=s.auto_respond,
            approval_timeout=s.approval_timeout,
            namespace=self.agent.shell.user_ns,
            cache_ttl=s.cache_ttl,
            worker_namespace=s.worker_namespace,
            max_workers=s.max_workers,
            max_cost_usd=s.max_cost_usd,
            stream_retries=s.stream_retries,
        )
        # the forks of one cell share one snapshot of the namespace (the kernel says when a
        # cell may have changed it); workers' output goes to their cards
        session.compute.reuse_snapshots = True
        session.compute.nice = s.worker_nice
        session.compute.on_output = self._on_output
        session.registry.subscribe(self._on_task)
        self.hub.history_of = lambda task_id: (
            session.workers.runs[task_id].history if task_id in session.workers.runs else []
        )
        session.on_auto_turn = self._on_auto_turn
        return session

    # -- parent turns --------------------------------------------------------------------------

    async def run_turn(self, prompt: str) -> None:
        session = self.agent.session
        handle = display(SafeMarkdown("…"), display_id=True)
        parts: list[str] = []
        last = 0.0
        try:
            async for event in session.stream(prompt):
                if isinstance(event, Retrying):  # the broken attempt's text goes again
                    shown = "".join(parts)
                    parts = [shown[: max(len(shown) - event.discarded, 0)]]
                line = self._event_markdown(event)
                if line is not None:
                    parts.append(line)
                if isinstance(event, Stop) and event.error:
                    parts.append(f"\n\n**{event.reason}:** {event.error}")
                now = time.monotonic()
                if now - last >= STREAM_INTERVAL:
                    last = now
                    handle.update(SafeMarkdown("".join(parts) or "…"))
        except asyncio.CancelledError:
            parts.append("\n\n*Interrupted. Background workers keep running.*")
            handle.update(SafeMarkdown("".join(parts)))
            return
        handle.update(SafeMarkdown("".join(parts), footer_html=self._usage_html(session)))

    def _event_markdown(self, event: LoopEvent) -> str | None:
        if isinstance(event, TextDelta):
            return event.text
        if isinstance(event, ToolUse):  # the tool's own line, its name in bold
            line = event.description or event.name
            rest = line.removeprefix(event.name).removeprefix(":").strip()
            return f"\n\n> **{event.name}**" + (f" {code_span(rest)}" if rest else "") + "\n"
        if isinstance(event, Retrying):
            return f"\n\n*{event.summary}*\n\n"
        if isinstance(event, ToolResult):
            mark = "error" if event.is_error else "ok"
            first = event.content.strip().splitlines()[0][:100] if event.content.strip() else ""
            return f"> {mark}: {first}\n\n"
        return None

    def _usage_html(self, session: Any) -> str:
        u = session.usage
        return (
            f"<p><small>tokens: {u.total_input_tokens:,} in ({u.cache_read_input_tokens:,} cache"
            f" read · {u.cache_creation_input_tokens:,} cache write) · {u.output_tokens:,} out · "
            f"session ${session.cost_usd:.4f}</small></p>"
        )

    # -- workers -------------------------------------------------------------------------------

    def _current_run(self) -> tuple[str | None, str]:
        """The running cell's id (if the frontend sends one) and its execute_request's id."""
        kernel = getattr(self.agent.shell, "kernel", None)
        try:
            parent = kernel.get_parent() if kernel is not None else {}
        except Exception:
            return None, ""
        meta = parent.get("metadata") or {}
        return meta.get("cellId"), str((parent.get("header") or {}).get("msg_id", ""))

    def _on_output(self, task_id: str, output: Output) -> None:
        """What a worker's code printed or displayed: to its card (never to a cell)."""
        self.hub.output(task_id, output)

    def _on_task(self, task: Task) -> None:
        from ..runtime.batch import in_batch

        if in_batch(self.agent.session, task.id):  # a batch has one card (batch_view.py)
            self.tasks_changed()
            return
        if task.id not in self.hub.cards and not task.done:
            self.show_card(task)
        else:
            self.hub.mark(task)
        self.tasks_changed()

    # -- the frontend's view: task rows and pending approvals ----------------------------------

    def task_row(self, task: Task) -> dict[str, Any]:
        row = task_snapshot(task)
        for key in ("result", "notification", "summary"):
            row.pop(key, None)
        launch = self.launches.get(task.id)
        row["cell_id"] = launch.cell_id if launch else None
        row["started_at"] = task.started_at
        row["pending_approvals"] = sum(
            1 for p in self.pending.values() if p.request.task_id == task.id
        )
        return row

    def approval_row(self, prompt: ApprovalPrompt) -> dict[str, Any]:
        request = prompt.request
        launch = self.launches.get(request.task_id or "")
        return {
            "request_id": str(id(prompt)),
            "task_id": request.task_id,
            "tool": request.tool_name,
            "preview": request.preview[:4000],
            "cell_id": launch.cell_id if launch else None,
        }

    def repeat_headless_notices(self) -> None:
        """At the start of a cell, say again which approvals still wait in a headless run: the
        first notice may have gone to a cell that had just finished, which a headless client
        no longer records."""
        for notice in self.headless_notices.values():
            print(notice, file=sys.stderr, flush=True)

    def headless(self) -> bool:
        """No frontend can answer an approval: the JupyterLab extension is not connected and the
        latest request came from a client that cannot take input (nbclient, papermill and
        nbconvert send `allow_stdin: false`; JupyterLab, Notebook and VS Code send true)."""
        if self.agent.bridge.connected:
            return False
        kernel = getattr(self.agent.shell, "kernel", None)
        return kernel is not None and not getattr(kernel, "_allow_stdin", True)

    def snapshot(self) -> dict[str, Any]:
        tasks = self.agent.session.tasks
        return {
            "tasks": [self.task_row(t) for t in tasks],
            "approvals": [self.approval_row(p) for p in self.pending.values()],
            "budget": self.budget_row(),
        }

    def budget_row(self) -> dict[str, Any] | None:
        """The session's spend against its cost budget, for the Tasks panel (None: none)."""
        budget = self.agent.session.budget
        if budget.limit is None:
            return None
        return {"spent_usd": budget.spent, "limit_usd": budget.limit, "reached": budget.reached()}

    def tasks_changed(self) -> None:
        """Send the task table to connected frontends, at most every TASKS_INTERVAL."""
        if self._tasks_flush is not None or not self.agent.bridge.connected:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        wait = self._tasks_sent_at + TASKS_INTERVAL - time.monotonic()
        self._tasks_flush = loop.call_later(max(wait, 0.0), self._send_tasks)

    def _send_tasks(self) -> None:
        self._tasks_flush = None
        self._tasks_sent_at = time.monotonic()
        tasks = self.agent.session.tasks
        rows = [self.task_row(t) for t in tasks]
        self.agent.bridge.broadcast({"type": "tasks", "tasks": rows, "budget": self.budget_row()})

    def _background(self, key: str) -> None:
        """The card's "Run in background" button (a task that ended meanwhile: nothing)."""
        task = self.agent.session.registry.find(key)
        if task is not None and task.foreground and not task.done:
            self.agent.session.background(key)

    def _on_stop(self, data: dict[str, Any]) -> None:
        task = self.agent.session.registry.find(str(data.get("task_id")))
        if task is not None and not task.done:
            self.agent.stop(task.id)

    def show_card(self, task: Task, note: str | None = None) -> None:
        """Display the task's card (once, where it started) or, with a note, again here."""
        card = self.hub.cards.get(task.id)
        if card is not None and note is None:
            return
        if card is None:
            card = TaskCard(
                task,
                on_stop=lambda key: self.agent.stop(key),
                on_background=self._background,
            )
            cell, run = self._current_run()
            fresh = run not in self._run_notes
            if fresh:  # once per run: the approvals strip, the cards, the notification area
                self._run_notes[run] = f"forkagent-notes-{len(self._run_notes)}-{task.id}"
                self._run_cards[run] = CardBox()
                display(self.strip)
                box = self._run_cards[run]
                box.handle = display(box, display_id=True)
                self.hub.boxes.append(box)
            self.hub.add(card, self._run_cards[run])
            launch = Launch(cell, display_id=self._run_notes[run], run=run)
            self.launches[task.id] = launch
            if fresh:
                display(HTML(""), display_id=launch.display_id)
        else:
            self.hub.mark(task)
            if note:
                display(HTML(f"<small>{_esc(note)}</small>"))
            shown = self.launches.get(task.id)
            if shown is None or shown.run != self._current_run()[1]:
                display(card)  # unless already shown by this cell (e.g. revived here)

    # -- notifications -------------------------------------------------------------------------

    def _on_auto_turn(self, auto: Any) -> None:
        """The parent answered notifications: deliver them with the answer, as a new cell
        below each launching cell (extension connected) or in that cell's notification area."""
        answer = auto.turn.text
        registry = self.agent.session.registry
        by_cell: dict[str | None, list[tuple[str, str]]] = {}
        for task_id, xml in zip(auto.task_ids, auto.notifications, strict=False):
            launch = self.launches.get(task_id)
            by_cell.setdefault(launch.cell_id if launch else None, []).append((task_id, xml))
        for cell_id, pairs in by_cell.items():
            snapshots = []
            for task_id, xml in pairs:
                task = registry.find(task_id)
                snapshots.append(
                    task_snapshot(task, xml) if task else {"id": task_id, "notification": xml}
                )
            cell = notification_cell(snapshots, answer)
            payload = {
                "type": "insert_cell",
                "key": cell["metadata"]["forkagent"]["key"],
                "after_cell_id": cell_id,
                "task_ids": [t for t, _ in pairs],
                "cell": cell,
            }
            if self.agent.bridge.broadcast(payload):
                continue
            launch = self.launches.get(pairs[0][0])
            if launch is None:
                continue
            shown = self._notes.setdefault(launch.display_id, [])
            notes = "\n\n".join(fenced(xml, "xml") for _, xml in pairs)
            shown.append(f"{notes}\n\n{answer}")
            body = SafeMarkdown("\n\n---\n\n".join(shown))
            in_latest_request(display, body, display_id=launch.display_id, update=True)

    def replay(self, keys: list[str]) -> None:
        """`%notifications ID ...`: show recorded notifications and the answer again."""
        session = self.agent.session
        ids = []
        for key in keys:
            task = session.registry.find(key)
            found = task.id if task else None
            if found is None and session.store is not None:
                found = session.store.agent_id_for(key)
            ids.append(found or key)
        root = session.store.root if session.store is not None else None
        record = answered_notifications(root, ids) if root is not None else None
        if record is None:
            raise UsageError(
                f"%notifications: no recorded notification for {' '.join(keys)} "
                "(notifications are recorded when the parent answers them)"
            )
        for snapshot in record.get("tasks") or []:
            display(notification_bundle(snapshot), raw=True)
        if str(record.get("answer") or "").strip():
            display(answer_bundle(str(record["answer"])), raw=True)

    def tasks_bundle(self, ids: list[str]) -> dict[str, str]:
        """The task table as HTML and as text (for frontends that show only text)."""
        session = self.agent.session
        tasks = [session.registry.get(i) for i in ids] if ids else session.tasks
        text = "\n".join(card_text(t) for t in tasks) if tasks else "No tasks yet."
        budget = budget_line(session.budget)
        if budget:
            text += f"\n{budget}"
        return {"text/html": self.tasks_html(ids), "text/plain": text}

    def tasks_html(self, ids: list[str]) -> str:
        session = self.agent.session
        tasks = [session.registry.get(i) for i in ids] if ids else session.tasks
        if not tasks:
            return "<i>No tasks yet.</i>"
        rows = []
        for t in tasks:
            u = t.usage
            rows.append(
                f"<tr><td><code>{_esc(t.name or t.id)}</code></td><td>{_esc(t.kind)}</td>"
                f"<td>{_esc(t.status)}</td><td>{u.total_input_tokens:,} / {u.output_tokens:,}</td>"
                f"<td>{u.cache_hit_ratio:.0%}</td><td>${t.cost_usd:.4f}</td>"
                f"<td>{t.elapsed:.1f}s</td></tr>"
            )
        head = (
            "<tr><th>task</th><th>kind</th><th>status</th><th>tokens in / out</th>"
            "<th>cache hit</th><th>cost</th><th>elapsed</th></tr>"
        )
        table = f"<table class='forkagent-tasks'>{head}{''.join(rows)}</table>"
        budget = budget_line(session.budget)
        return table + (f"<div class='forkagent-budget'>{_esc(budget)}</div>" if budget else "")

    def _on_approve(self, data: dict[str, Any]) -> None:
        prompt = self.pending.get(int(str(data.get("request_id", "0"))))
        if prompt is not None:
            prompt.answer(str(data.get("decision", "deny")), data.get("reason"))
