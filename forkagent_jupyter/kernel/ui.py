"""What the notebook shows of the runtime: the kernel's Session and its views.

`KernelUI` creates the kernel's Session (with the notebook's permission policy, see
`approvals/widget_policy.py`), shows a card per worker in the cell that launched it (once,
from the session's task event), and wires the other views: a parent turn streamed into its
cell (`views/turns.py`), the JupyterLab extension's rows (`frontend/rows.py`), notifications
and the parent's answers (`frontend/answers.py`), the `%tasks` table. It knows the agent that
builds it (`extension.KernelAgent`) as an `AgentHost`, and hands itself to the views it builds
as their `ViewHost` (`host.py`): each depends on those small types, not on the module that
builds it.
"""

from __future__ import annotations

import html
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from IPython.display import display

from ..runtime import (
    AutoTurn,
    Compacted,
    CostBudget,
    InterruptedAgent,
    Output,
    Session,
    Task,
    rate_wait,
)
from .approvals.widget_policy import WidgetPolicy, headless_notice
from .cards.hub import ApprovalPrompt, CardBox, CardHub, PendingStrip, TaskCard, card_text
from .cards.team_box import TeamBox
from .comm.protocol import Approve, State, Stop
from .frontend.answers import AnswerDelivery
from .frontend.rows import FrontendRows
from .host import Launch
from .render.task_line import (
    context_text,
    cost_text,
    memory_text,
    no_math,
    process_text,
    roster_text,
    status_text,
)
from .settings import session_settings
from .views.turns import run_turn

if TYPE_CHECKING:
    from .host import AgentHost

__all__ = ["KernelUI", "Launch", "WidgetPolicy", "budget_line", "headless_notice"]


def _esc(text: object) -> str:
    return html.escape(str(text))


def _waiting(task: Task) -> str:
    """' · waiting for rate limit (N s)' while its request waits, else ''."""
    waiting = rate_wait(task)
    return f" · {waiting}" if waiting else ""


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def _interrupted_row(agent: InterruptedAgent) -> str:
    """A row of the `%tasks` table for a worker of the last session that a restart cut off."""
    calls = f", {agent.failed_calls}" if agent.failed_calls else ""
    label = _esc(agent.label)
    return (
        f"<tr class='forkagent-interrupted'><td><code>{label}</code></td>"
        f"<td>{_esc(agent.kind)}</td><td>interrupted{_esc(calls)}</td><td colspan='5'><small>"
        f"{_esc(agent.description)} · cut off by a kernel restart; <code>%send {label} "
        "MESSAGE</code> resumes it from its transcript</small></td></tr>"
    )


def _results_html(task: Task) -> str:
    """Every result the task produced, newest first, folded under the table (a follow-up's
    result does not replace the one before)."""
    count = len(task.results)
    body = "".join(
        f"<pre style='white-space:pre-wrap;margin:2px 0 6px'>{_esc(text)}</pre>"
        for text in task.results
    )
    return (
        f"<details open class='forkagent-results'><summary><code>{_esc(task.name or task.id)}"
        f"</code>: {count} result{'s' if count != 1 else ''}, newest first</summary>{body}"
        "</details>"
    )


def budget_line(budget: CostBudget) -> str:
    """The session's spend against its budget, one line ("" without a budget)."""
    if budget.limit is None:
        return ""
    state = " - budget reached: workers stopped, new turns refused" if budget.reached() else ""
    return f"session cost ${budget.spent:.4f} of max_cost_usd ${budget.limit:.4f}{state}"


class KernelUI:
    def __init__(self, agent: AgentHost) -> None:
        self.agent = agent
        self.hub = CardHub()
        self.hub.headless = self.headless
        self.hub.make_card = self.make_card
        self.strip = PendingStrip()
        self.pending: dict[str, ApprovalPrompt] = {}  # by request id
        self.headless_notices: dict[str, str] = {}  # pending approvals nobody can answer
        self.launches: dict[str, Launch] = {}
        # per execute_request (not per cell: a re-run clears the cell's earlier output)
        self._run_notes: dict[str, str] = {}
        self._run_cards: dict[str, CardBox] = {}
        self.team_boxes: dict[str, TeamBox] = {}  # by team name (cards/team_box.py)
        self.workdir = Path.cwd()
        self.rows = FrontendRows(self)
        self.answers = AnswerDelivery(self)
        agent.bridge.on_approve = self._on_approve
        agent.terminal.who = self._who
        agent.bridge.on_stop = self._on_stop

    def make_session(self) -> Session:
        session = Session(
            **session_settings(self.agent.settings),
            permission_policy=WidgetPolicy(self, self.rows),
            workdir=self.workdir,
            approval_timeout=None,  # one clock: the approval card's (approvals/widget_policy.py)
            namespace=self.agent.shell.user_ns,
            # the forks of one cell share one snapshot of the namespace (the kernel says
            # when a cell may have changed it)
            reuse_snapshots=True,
        )
        session.compute.on_output = self._on_output  # workers' output goes to their cards
        session.on_task(self._on_task)
        self.hub.history_of = session.history
        session.responder.on_auto_turn = self._on_auto_turn
        return session

    # -- parent turns --------------------------------------------------------------------------

    async def run_turn(self, prompt: str) -> None:
        """An `%%agent` turn, its prompt checked and its size said by the cell already."""
        await run_turn(self.agent.session, prompt, size_said=True)

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
        """The one place a card is first shown: the session's event for a new task."""
        from ..runtime import in_batch

        if in_batch(self.agent.session.batches, task.id):  # one card a batch (views/batch_view.py)
            self.tasks_changed()
            return
        if task.id not in self.hub.cards and task.id not in self.hub.hidden and not task.done:
            self.show_card(task)
        else:
            self.hub.mark(task)
        if task.team is not None and task.team in self.team_boxes:
            self.team_boxes[task.team].refresh_roster()
        self.tasks_changed()

    # -- the frontend's view (frontend/rows.py) ----------------------------------------------------

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

    def snapshot(self) -> State:
        """What a connecting frontend is told at once (the `welcome` message's state)."""
        return {
            "tasks": self.rows.tasks(),
            "approvals": self.rows.approvals(),
            "budget": self.rows.budget_row(),
        }

    def tasks_changed(self) -> None:
        self.rows.changed()

    def _background(self, key: str) -> None:
        """The card's "Run in background" button (a task that ended meanwhile: nothing)."""
        task = self.agent.session.find_task(key)
        if task is not None and task.foreground and not task.done:
            self.agent.session.background(key)

    def _on_stop(self, message: Stop) -> None:
        task = self.agent.session.find_task(message["task_id"])
        if task is not None and not task.done:
            self.agent.stop(task.id)

    def launched(self, run: str) -> int:
        """How many workers the cell run `run` (an execute_request id) launched."""
        box = self._run_cards.get(run)
        return len(box.tasks()) if box is not None else 0

    def make_card(self, task: Task) -> TaskCard:
        return TaskCard(
            task, on_stop=lambda key: self.agent.stop(key), on_background=self._background
        )

    def show_card(self, task: Task, note: str | None = None) -> None:
        """Display the task's card (once, where it started) or, with a note, again here."""
        card = self.hub.cards.get(task.id)
        if card is None and task.id in self.hub.hidden:  # collapsed in its cell's summary row
            if note is None:
                self.hub.mark(task)
                return
            card = self.hub.reveal(task.id)
        if card is not None and note is None:
            return
        if card is None:
            cell, run = self._current_run()
            fresh = run not in self._run_notes
            if fresh:  # once per run: the cards, the notification area, and the approvals
                # strip while any approval waits (an empty one is not shown: it took a row of
                # every %fork cell's output, and printed its name in a text frontend)
                self._run_notes[run] = f"forkagent-notes-{len(self._run_notes)}-{task.id}"
                if self.strip.prompts:
                    display(self.strip)
            box = self._box_for(task, run)
            launch = Launch(cell, display_id=self._run_notes[run], run=run)
            self.launches[task.id] = launch
            if not self.hub.collapse(task, box):
                self.hub.add(self.make_card(task), box)
            if fresh:
                # empty until a notification comes (a text frontend prints nothing for it)
                empty = {"text/html": "", "text/plain": ""}
                display(empty, raw=True, display_id=launch.display_id)
        else:
            self.hub.mark(task)
            if note:  # the same words for a text frontend, not an object's repr
                display({"text/html": f"<small>{_esc(note)}</small>", "text/plain": note}, raw=True)
            shown = self.launches.get(task.id)
            if shown is None or shown.run != self._current_run()[1]:
                display(card)  # unless already shown by this cell (e.g. revived here)

    def _box_for(self, task: Task, run: str) -> CardBox:
        """Where a new task's card goes: its team's box (shown where the team's first member
        was spawned), else the box of the cell run that started it; each shown when made."""
        team = task.team
        if team is not None:
            box: CardBox | None = self.team_boxes.get(team)
            if box is None:
                session = self.agent.session
                box = self.team_boxes[team] = TeamBox(team, lambda: session.teams.get(team, []))
        else:
            box = self._run_cards.get(run)
            if box is None:
                box = self._run_cards[run] = CardBox()
        if box.handle is None:
            box.handle = display(box, display_id=True)
            self.hub.boxes.append(box)
        return box

    # -- notifications (frontend/answers.py) -------------------------------------------------

    def _on_auto_turn(self, auto: AutoTurn) -> None:
        self.answers.deliver(auto)

    async def replay(self, keys: list[str]) -> None:
        await self.answers.replay(keys)

    # -- %tasks ----------------------------------------------------------------------------------

    def show_compaction(self, event: Compacted) -> None:
        """What `%compact` did: messages and tokens before and after, the summary's cost,
        the summary itself (folded)."""
        if event.error:
            display({"text/plain": f"%compact: {event.line()}"}, raw=True)
            return
        u = event.usage
        rows = [
            ("messages", f"{event.messages_before:,}", f"{event.messages_after:,}"),
            ("context tokens", f"{event.before_tokens:,}", f"~{event.after_tokens:,}"),
            (
                "of the window",
                f"{event.before_tokens / event.window:.0%}",
                f"{event.after_tokens / event.window:.0%}",
            ),
        ]
        table = "".join(
            f"<tr><td>{name}</td><td>{before}</td><td>{after}</td></tr>"
            for name, before, after in rows
        )
        cost = (
            f"summary request: {u.cache_read_input_tokens:,} tokens read from cache, "
            f"{u.input_tokens + u.cache_creation_input_tokens:,} written or uncached, "
            f"{u.output_tokens:,} out, ${event.cost_usd:.4f}"
        )
        kept = f"kept: the summary + the last {event.kept_turns} turn(s)"
        page = no_math(
            f"<div class='forkagent-compaction'><b>Compacted the conversation</b> "
            f"({event.window:,}-token window)<table><tr><th></th><th>before</th>"
            f"<th>after</th></tr>{table}</table><small>{_esc(kept)}<br>{_esc(cost)}</small>"
            f"<details><summary>summary</summary><pre style='white-space:pre-wrap'>"
            f"{_esc(event.summary)}</pre></details></div>",
            "div",
        )
        text = f"{event.line()}\n{kept}\n{cost}\nsummary:\n{event.summary}"
        display({"text/html": page, "text/plain": text}, raw=True)

    def _parent_context(self) -> str:
        session = self.agent.session
        return context_text(session.main.state.context_tokens, session.context_window)

    def tasks_bundle(self, ids: list[str]) -> dict[str, str]:
        """The task table as HTML and as text (for frontends that show only text)."""
        session = self.agent.session
        tasks = [session.task(i) for i in ids] if ids else session.tasks
        cut_off = [] if ids else session.interrupted_known() or []
        text = f"main (parent) · {self._parent_context()}\n"
        lines = []
        for team, group, cut in self._by_team(tasks, cut_off):
            if team is not None:  # a team: its roster, then its members' lines, indented
                lines.append(self._roster(team, group, cut))
            shown = [card_text(t, whole=bool(ids)) for t in group]  # %tasks NAME: whole
            shown += [agent.line() for agent in cut]
            lines += shown if team is None else [_indent(line) for line in shown]
        text += "\n".join(lines) if lines else "No tasks yet."
        if tasks and not ids:
            text += "\n(%tasks NAME shows one task whole: its results, notes and todos)"
        budget = budget_line(session.budget)
        if budget:
            text += f"\n{budget}"
        for line in session.rate_limits.describe():
            text += f"\n{line}"
        for line in self.waiting_lines():
            text += f"\n{line}"
        return {"text/html": self.tasks_html(ids), "text/plain": text}

    def _by_team(
        self, tasks: list[Task], cut_off: list[InterruptedAgent]
    ) -> list[tuple[str | None, list[Task], list[InterruptedAgent]]]:
        """`tasks` and the workers a restart `cut_off` grouped for %tasks: those in no team,
        then each team's, teams in the order they were made (members in the order they
        joined), then the teams only a restart's interrupted members were in; in each group,
        the interrupted after the tasks."""
        groups: dict[str | None, tuple[list[Task], list[InterruptedAgent]]] = {None: ([], [])}
        groups.update({team: ([], []) for team in self.agent.session.teams})
        for t in tasks:
            groups.setdefault(t.team, ([], []))[0].append(t)
        for agent in cut_off:
            groups.setdefault(agent.team, ([], []))[1].append(agent)
        return [(team, group, cut) for team, (group, cut) in groups.items() if group or cut]

    def _roster(self, team: str, group: list[Task], cut: list[InterruptedAgent]) -> str:
        """A team's roster line: its members here, then those a restart cut off."""
        members = self.agent.session.teams.get(team, group)
        return roster_text(team, members, [agent.label for agent in cut])

    def waiting_lines(self) -> list[str]:
        """One line per approval still waiting for an answer (%tasks shows them)."""
        return [
            f"approval waiting: {self._who(p)} asks to run {p.request.summary}"
            for p in self.pending.values()
            if not p.future.done()
        ]

    def tasks_html(self, ids: list[str]) -> str:
        """The task table, parent context, budget, rate limits and waiting approvals: all
        ours, so none of it is typeset as math (`no_math`)."""
        return no_math(self._tasks_html(ids), "div")

    def _tasks_html(self, ids: list[str]) -> str:
        session = self.agent.session
        tasks = [session.task(i) for i in ids] if ids else session.tasks
        cut_off = [] if ids else session.interrupted_known() or []
        parent = f"<div class='forkagent-context'>parent: {_esc(self._parent_context())}</div>"
        if not tasks and not cut_off:
            return f"{parent}<i>No tasks yet.</i>"
        rows = []
        for team, group, cut in self._by_team(tasks, cut_off):
            if team is not None:
                roster = self._roster(team, group, cut)
                rows.append(
                    f"<tr class='forkagent-team-row'><td colspan='8'><b>{_esc(roster)}</b>"
                    "</td></tr>"
                )
            rows += [self._task_row(t) for t in group]
            rows += [_interrupted_row(agent) for agent in cut]
        head = (
            "<tr><th>task</th><th>kind</th><th>status</th><th>tokens in / out</th>"
            "<th>cache hit</th><th>context</th><th>cost</th><th>elapsed</th></tr>"
        )
        table = f"{parent}<table class='forkagent-tasks'>{head}{''.join(rows)}</table>"
        if ids:  # `%tasks NAME`: the whole of each, every result; `%tasks`: a row each
            table += "".join(_results_html(t) for t in tasks if t.results)
        budget = budget_line(session.budget)
        rates = "".join(
            f"<div class='forkagent-rate-limits'>{_esc(line)}</div>"
            for line in session.rate_limits.describe()
        )
        spent = f"<div class='forkagent-budget'>{_esc(budget)}</div>" if budget else ""
        waiting = "".join(
            f"<div class='forkagent-waiting'>{_esc(line)}</div>" for line in self.waiting_lines()
        )
        return table + spent + rates + waiting

    def _task_row(self, t: Task) -> str:
        """One task's row of the %tasks table."""
        u = t.usage
        done = sum(todo.status == "completed" for todo in t.todos)
        todos = f" · todos {done}/{len(t.todos)}" if t.todos else ""
        state = " (idle)" if t.idle else ""
        process = " · " + process_text(t) if process_text(t) else ""
        return (
            f"<tr><td><code>{_esc(t.name or t.id)}</code></td><td>{_esc(t.kind)}</td>"
            f"<td>{_esc(status_text(t))}{state}{todos}{_esc(_waiting(t))}</td>"
            f"<td>{u.total_input_tokens:,} / {u.output_tokens:,}</td>"
            f"<td>{u.cache_hit_ratio:.0%}</td>"
            f"<td>{_esc(context_text(t.context_tokens, t.context_window, t.compactions))}"
            f"{_esc(memory_text(t))}{_esc(process)}</td>"
            f"<td>{cost_text(t.cost_usd)}</td><td>{t.elapsed:.1f}s</td></tr>"
        )

    def _who(self, prompt: ApprovalPrompt) -> str:
        """Who asks for an approval, as a terminal question names it."""
        task_id = prompt.request.task_id
        if not task_id:
            return "the parent"
        task = self.agent.session.find_task(task_id)
        name = task.name if task is not None and task.name else task_id
        return f"worker {name}"

    def _on_approve(self, message: Approve) -> None:
        """An answer from the JupyterLab extension (validated by the bridge). One to a request
        that is not pending (unknown, or answered meanwhile) does nothing."""
        prompt = self.pending.get(message["request_id"])
        if prompt is None or prompt.future.done():
            self.agent.bridge.log.info(
                "forkagent comm: an answer to approval %r, which is not pending, was ignored",
                message["request_id"][:80],
            )
            return
        prompt.answer(message["decision"], message.get("reason"))
