"""The parent's answers to its notifications: what happens when a command is queued (the
transcript notes it, Notification hooks run, a worker is woken or the parent answers), the
parent turns that answer them by themselves (`auto_respond`), and the `AutoTurn`s handed to
the host (the notebook shows them as cells) and kept in the parent's transcript.

An automatic answer is a `later` turn (turn_lock.py): a prompt the person is waiting to send
goes first, and leaves the notifications to the answer that follows it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ...events import LoopEvent
from ...model.budget import CostBudget
from ...tasks.notifications import Command, CommandQueue, Priority
from ...tasks.registry import Task, task_snapshot
from ...tasks.snapshot import AnsweredNotifications, TaskSnapshot
from ...workers.workers import AgentRun, Workers
from ..agent_setup import AgentContexts
from ..options import SessionOptions
from .turn_lock import TurnLock
from .turn_result import STOPPED_BY_USER, AutoTurn, Turn, fold_turn
from .turn_runner import TurnRunner

__all__ = ["CommandRouter", "Responder"]


class CommandRouter:
    """What happens when a command is queued (the queue's `on_enqueue`): the parent's
    transcript notes a notification for it, Notification hooks run, the worker it is for is
    woken, or the parent answers it (`responder`)."""

    def __init__(
        self,
        *,
        main: AgentRun,
        contexts: AgentContexts,
        jobs: set[asyncio.Task[object]],
        workers: Workers,
        responder: Responder,
        changed: asyncio.Event,
    ) -> None:
        self.main = main
        self.contexts = contexts
        """Where the settings files' hooks are (the Notification hooks)."""
        self.jobs = jobs
        """The session's background jobs (Notification hooks), awaited when it closes."""
        self.workers = workers
        """Woken when a command is queued for one of them."""
        self.responder = responder
        self.changed = changed
        """Set whenever the session may have become idle."""

    def on_command(self, command: Command) -> None:
        """A command was queued."""
        self.changed.set()
        queued = command.owner == "main" and command.mode == "task-notification"
        if queued and command.task_id and self.main.transcript is not None:
            self.main.transcript.append_event(
                "notification", {"task": command.task_id, "run": command.run}
            )
        hooks = self.contexts.hooks
        if command.owner == "main" and hooks.has("Notification"):
            about = {"agent_id": "main", "task_id": command.task_id, "message": command.text}
            try:
                job = asyncio.get_running_loop().create_task(hooks.run("Notification", about))
            except RuntimeError:  # enqueued off the event loop: no hook
                return
            self.jobs.add(job)
            job.add_done_callback(self.jobs.discard)
        if command.owner != "main":
            self.workers.wake(command.owner)
        else:
            self.responder.command_queued()


class Responder:
    """Answers the parent's notifications, each answer a turn of the parent's (`runner`,
    under the parent's `lock`); `auto_turns` are every answer so far and `on_auto_turn`
    (the host's) is called with each as it is made."""

    def __init__(
        self,
        *,
        settings: Callable[[], SessionOptions],
        runner: TurnRunner,
        queue: CommandQueue,
        budget: CostBudget,
        lock: TurnLock,
        changed: asyncio.Event,
    ) -> None:
        self.settings = settings
        """The session's options as they stand (`auto_respond`)."""
        self.runner = runner
        """Runs the parent's turns; its run (`main`) has the transcript answers are kept in."""
        self.queue = queue
        self.budget = budget
        self.lock = lock
        """The parent's turn lock: an answer waits for a turn in flight."""
        self.changed = changed
        """Set whenever the session may have become idle."""
        self.auto_turns: list[AutoTurn] = []
        """The parent's answers to notifications so far (and the tasks the user stopped)."""
        self.on_auto_turn: Callable[[AutoTurn], None] | None = None
        """Called with each `AutoTurn` as it is made (the host shows it)."""
        self.listeners: list[Callable[[str, LoopEvent], None]] = []
        self.job: asyncio.Task[None] | None = None

    def subscribe(self, listener: Callable[[str, LoopEvent], None]) -> Callable[[], None]:
        """Call `listener(origin, event)` for events of turns nobody is iterating: the
        parent's automatic answers to notifications (origin "notification")."""
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def command_queued(self) -> None:
        """A command for the parent was queued: answered by itself if it answers so
        (`auto_respond`) and no answer is under way."""
        if self.settings().auto_respond and (self.job is None or self.job.done()):
            self.job = asyncio.get_running_loop().create_task(self.respond())

    def will_answer(self) -> bool:
        """Whether notifications that wait are answered by an automatic turn (a prompt's turn
        then leaves them to it)."""
        return bool(self.settings().auto_respond) and not self.budget.reached()

    def budget_raised(self) -> None:
        """A new budget: notifications that waited are answered if it allows."""
        self.kick()

    def kick(self) -> None:
        """Answer the notifications that wait, if the parent answers by itself and none is
        being answered (after a prompt's turn, which left them to this answer)."""
        if not self.will_answer() or not self.queue.pending("main"):
            return
        if self.job is None or self.job.done():
            self.job = asyncio.get_running_loop().create_task(self.respond())

    async def respond(self) -> None:
        """Answer pending notifications in one parent turn each time the parent is free."""
        await asyncio.sleep(0)  # let notifications that arrive together be read together
        while self.queue.pending("main") and not self.budget.reached():
            async with self.lock.turn("later"):  # after the prompts that wait
                commands = self.queue.drain("main")
                if not commands:
                    break
                self.note_read(commands)
                texts = [c.text for c in commands]
                turn = await fold_turn(self.runner.turn(texts), self.emit)
            self.answered(commands, turn)
        self.changed.set()

    def read_waiting(self, upto: Priority) -> list[Command]:
        """The parent's commands that wait, of priority `upto` or more urgent, taken to be
        read with a prompt (and noted as read)."""
        commands = self.queue.drain("main", upto)
        self.note_read(commands)
        return commands

    def note_read(self, commands: list[Command]) -> None:
        """The parent's transcript notes when these notifications reached its conversation
        (the timeline draws their arrival)."""
        transcript = self.runner.main.transcript
        ids = [c.task_id for c in commands if c.task_id and c.mode == "task-notification"]
        if ids and transcript is not None:
            transcript.append_event("notifications_read", {"tasks": ids})

    def answered(self, commands: list[Command], turn: Turn) -> None:
        """The parent read these notifications in `turn`: record them with its answer and
        hand them to the host."""
        snapshots = [
            c.snapshot or TaskSnapshot(task_id=c.task_id or "", notification=c.text)
            for c in commands
        ]  # a notification that reports no task of the registry (a batch's digest): its text
        self.deliver(AutoTurn(snapshots, turn))

    def stopped_by_user(self, stopped: list[Task]) -> None:
        """Tasks the user stopped: their notifications are not handed to the parent model
        (it did not ask) but still go to the host, shown with no answer."""
        shown = [t for t in stopped if t.notification]
        if shown:
            self.deliver(AutoTurn([task_snapshot(t) for t in shown], Turn(text=STOPPED_BY_USER)))

    def deliver(self, auto: AutoTurn) -> None:
        self.auto_turns.append(auto)
        self.record(auto)
        if self.on_auto_turn is not None:
            self.on_auto_turn(auto)

    def record(self, auto: AutoTurn) -> None:
        """Keep the answered notifications in the parent's transcript, each reported run as it
        ended, so they can be shown again later (also after a restart)."""
        transcript = self.runner.main.transcript
        if transcript is None:
            return
        record = AnsweredNotifications(tasks=auto.snapshots, answer=auto.turn.text)
        transcript.append_event("notifications_answered", record.model_dump())

    def emit(self, event: LoopEvent) -> None:
        for listener in list(self.listeners):
            listener("notification", event)

    def busy(self) -> bool:
        """An answer is in flight, or notifications wait for one."""
        if self.job is not None and not self.job.done():
            return True
        waiting = self.settings().auto_respond and not self.budget.reached()
        return waiting and bool(self.queue.pending("main"))

    async def aclose(self) -> None:
        """Cancel an answer in flight."""
        if self.job is not None and not self.job.done():
            self.job.cancel()
            await asyncio.wait({self.job})
