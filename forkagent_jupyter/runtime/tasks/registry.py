"""Background tasks: one vocabulary, one state machine, one notification per run.

A task is `running` until exactly one terminal transition - `completed`, `failed` or
`killed`. It has two steps: `TaskRegistry.end` sets the terminal status (the only place that
does; idempotent: a second call is a no-op and returns False), which releases `ended()`
waiters such as a blocking TaskOutput at once; `TaskRegistry.settle` then enqueues the run's
one `<task-notification>` for its owner (unless it was suppressed: read through TaskOutput,
reported as a synchronous Agent call's result, or part of a stop the user asked for) and
releases `wait()`. What a runner does in between (its worktree's clean-up) never holds up a
reader of the status. `finish` does both steps at once. A resumed task (SendMessage to a
finished agent) starts a new run: `running` again, and its end produces one more
notification.

Why `killed` and not `cancelled`: a stopped worker's partial result is still reported, and
"killed" says plainly that it did not end by itself. Why max_turns ends `completed`: the
worker did work and has a result; the summary says it hit its turn limit.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ...messages_api.usage import Usage, usage_counts
from ..errors import UsageError
from .notifications import CommandQueue, failed_calls_text, format_task_notification
from .snapshot import TaskSnapshot

if TYPE_CHECKING:
    from ..executors.memory import Rollup

__all__ = [
    "DESCRIPTION_LIMIT",
    "TERMINAL",
    "Task",
    "TaskRegistry",
    "TaskStatus",
    "Todo",
    "clip_words",
    "task_description",
    "task_snapshot",
]

TaskStatus = Literal["running", "completed", "failed", "killed"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "killed"})
DESCRIPTION_LIMIT = 60  # characters of a task's description, and of its label in a summary


def clip_words(text: str, limit: int) -> str:
    """`text` on one line and at most `limit` characters: a longer line is cut after its
    last whole word that fits and ends in "…" (mid-word only when one word fills most of
    the space)."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    head = line[: limit - 1]
    if line[limit - 1] != " ":
        space = head.rfind(" ")
        if space >= limit // 3:
            head = head[:space]
    return head.rstrip(" ,;:") + "…"


def task_description(directive: str) -> str:
    """How a task started from `directive` is described: its first line, clipped."""
    lines = [ln for ln in directive.splitlines() if ln.strip()]
    return clip_words(lines[0], DESCRIPTION_LIMIT) if lines else ""


@dataclass(frozen=True)
class Todo:
    """One item of an agent's todo list (its TodoWrite calls)."""

    content: str
    status: Literal["pending", "in_progress", "completed"]
    active_form: str | None = None

    def line(self) -> str:
        """The item as a card shows it: a box for its state, then its text."""
        mark = {"completed": "[x]", "in_progress": "[>]"}.get(self.status, "[ ]")
        text = self.active_form if self.status == "in_progress" and self.active_form else None
        return f"{mark} {text or self.content}"


@dataclass
class Task:
    """A background agent as the user and the launching model see it."""

    id: str
    kind: str
    description: str
    owner: str = "main"
    name: str | None = None
    tool_use_id: str | None = None
    output_file: Path | None = None
    status: TaskStatus = "running"
    result: str | None = None
    """The result of its latest run (None while a run is under way); see `results`."""
    results: list[str] = field(default_factory=list)
    """Every result it produced, newest first: a resumed task's new result does not replace
    the one before (`end` adds each)."""
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    tool_uses: int = 0
    tool_errors: int = 0  # its tool calls whose result was an error (is_error), of `tool_uses`
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    run: int = 1
    worktree_path: str | None = None
    worktree_branch: str | None = None
    current_tool: str | None = None
    current_input: str = ""  # the current call's one line (the tool's `describe`)
    preview: str = ""
    thinking: str = ""  # its latest extended thinking (shown collapsed on its card)
    activity: str = ""  # what holds the worker up now ("stream dropped, retrying (1/3)")
    retries: int = 0  # responses that broke off mid-stream and were sent again
    context_tokens: int = 0  # its last request's prompt size (uncached + cache)
    context_window: int = 0  # its model's context window
    compactions: int = 0  # times its conversation was compacted
    memory_mb: float | None = None  # what its finished worker process alone holds
    process: Rollup | None = None  # its running worker process's memory, sampled (memory.py)
    foreground: bool = False  # its caller waits for it (a synchronous named agent)
    team: str | None = None  # the team it is a teammate of (workers/teams.py)
    idle: bool = False  # a teammate between turns, waiting for its next message
    notes: list[str] = field(default_factory=list)
    """Lines its card shows: what its definition asked for in vain, an MCP failure during its
    call, that its earlier run was interrupted (a restart)."""
    todos: list[Todo] = field(default_factory=list)  # its todo list (TodoWrite)
    notification: str | None = None
    _notified_run: int = 0
    _settled_run: int = 0
    _suppressed_run: int = 0
    _ended: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _done: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    @property
    def elapsed(self) -> float:
        return (self.ended_at or time.time()) - self.started_at

    @property
    def settled(self) -> bool:
        """Ended, and its notification (if any) enqueued: nothing more comes of this run."""
        return self.done and self._settled_run >= self.run

    @property
    def quiet(self) -> bool:
        """The current run's notification is for no model (see `TaskRegistry.suppress`)."""
        return self._suppressed_run >= self.run

    async def wait(self) -> Task:
        """Until the run has ended and its notification is enqueued (see `settle`)."""
        await self._done.wait()
        return self

    async def ended(self) -> Task:
        """Until the run has a terminal status (before its clean-up and notification)."""
        await self._ended.wait()
        return self

    @property
    def label(self) -> str:
        """What a summary calls the task: its name, else its description (clipped)."""
        return self.name or clip_words(self.description, DESCRIPTION_LIMIT) or self.id

    @property
    def failed_calls(self) -> str:
        """ "2 of 5 tool calls failed" ("" when none did): a run that completed may still
        have failed at what it was asked (code that raised, a call that was denied)."""
        return failed_calls_text(self.tool_errors, self.tool_uses)

    def summary(self) -> str:
        label = f'Worker "{self.label}"'
        failed = self.failed_calls
        if self.status == "completed":
            return f"{label} completed" + (f", {failed}" if failed else "")
        tail = f" ({failed})" if failed else ""
        if self.status == "failed":
            return f"{label} failed: {self.error or 'unknown error'}{tail}"
        return f"{label} was stopped" + (f": {self.error}" if self.error else "") + tail


def task_snapshot(task: Task, notification: str | None = None) -> TaskSnapshot:
    """What the task looks like now, with `notification` (default: its latest) as the text
    the parent read. `TaskRegistry.settle` takes one as a run ends."""
    return TaskSnapshot(
        task_id=task.id,
        name=task.name,
        kind=task.kind,
        status=task.status,
        description=task.description,
        summary=task.summary() if task.done else "",
        result=task.result or task.error or "",
        notification=(notification if notification is not None else task.notification) or "",
        usage=usage_counts(task.usage),
        cost_usd=round(task.cost_usd, 6),
        elapsed=round(task.elapsed, 3),
        tool_uses=task.tool_uses,
        tool_errors=task.tool_errors,
    )


Listener = Callable[[Task], None]


def shown_path(path: Path | None, base: Path | None) -> str:
    """`path` relative to `base` when it lies inside it (a saved notebook then carries no
    machine's temp or home folder, and tools resolve it against the work dir); else as is."""
    if path is None:
        return ""
    if base is not None:
        try:
            return str(Path(path).relative_to(base))
        except ValueError:
            pass
    return str(path)


KNOWN_SHOWN = 10
"""How many task names an unknown-task error lists (the newest; a fan-out has hundreds)."""


class TaskRegistry:
    """All tasks of a session, by id; names resolve to ids."""

    def __init__(self, queue: CommandQueue, base: Path | None = None) -> None:
        self.queue = queue
        self.base = base  # notifications show paths inside it relative to it
        self._tasks: dict[str, Task] = {}
        self._listeners: list[Listener] = []

    def __iter__(self) -> Iterator[Task]:
        return iter(list(self._tasks.values()))

    def __len__(self) -> int:
        return len(self._tasks)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(task)` on every change; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def changed(self, task: Task) -> None:
        for listener in list(self._listeners):
            listener(task)

    def register(self, task: Task) -> Task:
        """Add `task`. Its name names it from now on (see `name_problem` for the names a new
        task cannot take): a finished task that had the name keeps its id and gives the name
        up, and each card says so in one line. A name it cannot take (a caller that did not
        ask `name_problem`: a resumed agent, a batch) is left off, said on its card."""
        if task.id in self._tasks:
            raise ValueError(f"task {task.id} already exists")
        if task.name is not None:
            problem = self.name_problem(task.name)
            earlier = self.holder(task.name)
            if problem is not None:
                task.notes.append(f"not named {task.name!r}: {problem}; use its id {task.id}")
                task.name = None
            elif earlier is not None:
                earlier.name = None
                earlier.notes.append(f"its name {task.name} now names {task.id}, a later worker")
                task.notes.append(
                    f"{task.name} now names this worker; the earlier {task.name} is {earlier.id}"
                )
                self.changed(earlier)
        self._tasks[task.id] = task
        self.changed(task)
        return task

    def holder(self, name: str) -> Task | None:
        """The task `name` names: at most one task has a name at a time (`register`)."""
        return next((t for t in self._tasks.values() if t.name == name), None)

    def name_problem(self, name: str) -> str | None:
        """Why a new task cannot be named `name` (None: it can). A running task's name is
        its own until it ends (a new holder would hide it from send, stop and wait), and an
        id is no name (the id would win). A finished task's name moves to the new one."""
        if name in self._tasks:
            return f"{name!r} is the id of another task"
        holder = self.holder(name)
        if holder is not None and not holder.done:
            return f"the name {name!r} is in use by the running task {holder.id}"
        return None

    def find(self, key: str) -> Task | None:
        """The task with this id, else the one this name names now (names are never shared:
        re-running `%fork --name x` moves `x` to the new worker, the earlier one keeps its
        id)."""
        if key in self._tasks:
            return self._tasks[key]
        return self.holder(key)

    def note(self, key: str, line: str) -> bool:
        """A line on a task's card (once), such as an MCP failure during its call; False
        when no task has this id or name."""
        task = self.find(key)
        if task is None:
            return False
        if line not in task.notes:
            task.notes.append(line)
            self.changed(task)
        return True

    def get(self, key: str) -> Task:
        task = self.find(key)
        if task is None:
            names = [t.name or t.id for t in self._tasks.values()]
            known = ", ".join(names[-KNOWN_SHOWN:]) or "none yet"
            if len(names) > KNOWN_SHOWN:
                known += f" (the newest {KNOWN_SHOWN} of {len(names)})"
            shown = key if len(key) <= 80 else key[:77] + "..."
            raise UsageError(f"No task {shown!r}. Known tasks: {known}.")
        return task

    def recipient(self, owner: str) -> str:
        """Who reads a notification meant for `owner`: the owner while it runs (or when it
        is not a task of this registry), else the nearest running agent above it, else the
        parent conversation ("main")."""
        seen: set[str] = set()
        while owner != "main" and owner not in seen:
            seen.add(owner)
            task = self._tasks.get(owner)
            if task is None or task.status == "running":  # not one of ours, or live
                return owner
            owner = task.owner
        return "main"

    def running(self, owner: str | None = None) -> list[Task]:
        return [
            t for t in self._tasks.values() if not t.done and (owner is None or t.owner == owner)
        ]

    def restart(self, task: Task) -> None:
        """Start a new run of a finished task (resume)."""
        if not task.settled:
            raise ValueError(f"task {task.id} is still running")
        task.status = "running"
        task.run += 1
        task.result = task.error = None
        task.ended_at = None
        task.started_at = time.time()
        task._done = asyncio.Event()
        task._ended = asyncio.Event()
        self.changed(task)

    def finish(
        self,
        task: Task,
        status: Literal["completed", "failed", "killed"],
        *,
        result: str | None = None,
        error: str | None = None,
    ) -> bool:
        """Both steps of the terminal transition at once (`end`, then `settle`)."""
        if not self.end(task, status, result=result, error=error):
            return False
        self.settle(task)
        return True

    def end(
        self,
        task: Task,
        status: Literal["completed", "failed", "killed"],
        *,
        result: str | None = None,
        error: str | None = None,
    ) -> bool:
        """Set the run's terminal status. Returns False when the task had already ended."""
        if task.status != "running" or task._notified_run >= task.run:
            return False
        task.status = status
        task.result = result
        if result:
            task.results.insert(0, result)
        task.error = error
        task.ended_at = time.time()
        task._notified_run = task.run
        task.current_tool = None
        task.current_input = ""
        task.activity = ""
        task._ended.set()
        self.changed(task)
        return True

    def suppress(self, task: Task) -> None:
        """The current run's notification is not to be read by the model (its result went
        another way, or the user stopped it): drop it if queued, never enqueue it. Reports of
        its earlier runs that wait unread are still read (a resumed agent stopped in bulk)."""
        task._suppressed_run = task.run
        self.queue.discard(task.id, run=task.run)

    def settle(self, task: Task) -> None:
        """Format the ended run's notification and enqueue it for its owner (once, unless
        suppressed), then release `wait()`. A no-op for a running or settled task."""
        if not task.done or task._settled_run >= task.run:
            return
        task._settled_run = task.run
        status = task.status
        task.notification = format_task_notification(
            task_id=task.id,
            tool_use_id=task.tool_use_id,
            output_file=shown_path(task.output_file, self.base),
            status=status,
            summary=task.summary(),
            # a failure is told in the summary alone (no partial text passed off as a result)
            result=task.result if status != "failed" else None,
            usage=task.usage if status == "completed" else None,
            tool_uses=task.tool_uses,
            duration_ms=int(((task.ended_at or time.time()) - task.started_at) * 1000),
            worktree_path=task.worktree_path,
            worktree_branch=task.worktree_branch,
        )
        if task.foreground:  # its caller waits for it: reported as that call's result
            task._suppressed_run = task.run
        if task._suppressed_run < task.run:
            to = self.recipient(task.owner)
            self.queue.enqueue(
                task.notification,
                owner=to,
                task_id=task.id,
                run=task.run,
                snapshot=task_snapshot(task),
            )
        task._done.set()
        self.changed(task)
