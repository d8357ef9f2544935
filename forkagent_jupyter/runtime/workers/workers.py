"""Running agents in the background: launch, run, message, resume, stop.

`Workers` launches forks and named agents (`AgentRun`, agent_run.py; made in new_runs.py) as
`Task`s, runs each on the event loop, and keeps the rules that make a fan-out cheap and its
results reliable:

* Cache-aware fan-out: siblings forked from one point wait for the first one's response to
  start (fork_groups.py).
* One terminal transition per run (`_end`), whatever ends it - completion, failure, a
  refused request, a stop, a cancel: the terminal status first (a blocking TaskOutput never
  waits on git), the transcript's result, the agent's background shell commands killed, its
  worktree cleaned up (kept when it holds changes; run_worktree.py), then exactly one
  notification.
* A notification goes to the launching agent (`Task.owner`) while it runs, else to the
  nearest running agent above it, else to the parent; an agent with workers of its own does
  not complete until they have reported back to it.
* SendMessage to a running agent waits in its inbox for the next loop boundary; to a finished
  one resumes it in the background (from memory, or from its transcript after a restart), in
  its own worktree when it had one - never in the parent's checkout. A message that comes
  while the agent is ending resumes it once it has ended.
* A teammate (teams.py) reads its mail as `<teammate-message>`s and does not end with its
  turn: it waits, idle, for the next message until it is stopped or leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any, Literal, Protocol

from ..config.agent_definitions import AgentDefinition, AgentScan, unknown_agent_message
from ..config.hooks import Hooks
from ..errors import RunEndedError, UsageError
from ..events import Stop
from ..history import Message
from ..loop.compaction import last_turns, window_for
from ..loop.config import AgentConfig
from ..loop.fork import FORK_RECURSION_ERROR
from ..loop.loop import run_turn
from ..model.client import ModelClient
from ..model.timing import record_timing
from ..permissions.limits import ToolLimit
from ..tasks.notifications import CommandQueue
from ..tasks.registry import Task, TaskRegistry
from ..tools.base import ToolError
from ..tools.shells import ShellRegistry
from ..transcripts.files import meta_path
from ..transcripts.store import LoadedTranscript, TranscriptStore
from .agent_run import AgentRun, new_agent_id, open_transcript, outcome, own_text, partial
from .fork_groups import ForkGroups
from .new_runs import fork_run, named_run, restored_run
from .run_worktree import clean_worktree, recreate_worktree, renew_worktree
from .task_progress import apply_event, log_event, show_rate_wait, waits_for_rate
from .teams import FROM_USER, Teams, teammate_message
from .worktree import Worktree

__all__ = ["AgentRun", "ForkRefusedError", "Workers", "new_agent_id"]

log = logging.getLogger(__name__)

FORK_MAX_TURNS = 200
AUTO_BACKGROUND_AFTER = 120.0  # seconds a synchronous agent is waited for
MESSAGE_PREFIX = "Message from the agent that started you:"


class ForkRefusedError(ToolError):
    """A fork was asked for where forking is not allowed."""


class AgentConfigs(Protocol):
    """Where a worker's `AgentConfig` comes from (the session's `AgentContexts`): a fork's
    and a named agent's, each derived from its parent's as the session stands now."""

    def fork_config(
        self, parent: AgentRun, agent_id: str, namespace: str | None = None
    ) -> AgentConfig: ...

    def named_config(
        self, parent: AgentRun, definition: AgentDefinition, agent_id: str, model: str | None
    ) -> AgentConfig: ...


class WorkerSettings(Protocol):
    """The session's options the workers read (`SessionOptions`), as they stand."""

    @property
    def forking(self) -> bool: ...
    @property
    def auto_background_after(self) -> float | None: ...
    @property
    def stagger_forks(self) -> bool: ...


class Workers:
    """Launches and runs background agents for one session."""

    def __init__(
        self,
        *,
        registry: TaskRegistry,
        store: TranscriptStore | None,
        configs: AgentConfigs,
        definitions: Callable[[], AgentScan],
        settings: Callable[[], WorkerSettings],
    ) -> None:
        self.store = store
        self.main: AgentRun | None = None
        self.settings = settings
        """The session's options as they stand (`forking`, `auto_background_after`)."""
        self.stagger = settings().stagger_forks
        """Whether siblings wait for the first one's response (a batch turns it off)."""
        self.registry = registry
        self.queue: CommandQueue = registry.queue
        self._definitions = definitions
        self.configs = configs
        """A fork's and a named agent's config (`session/agent_setup.py`); a teammate's
        starts from a named agent's."""
        self.runs: dict[str, AgentRun] = {}
        self._groups = ForkGroups(self._rate_waiting)
        self._endings: set[asyncio.Task[None]] = set()  # terminal transitions under way
        self.teams = Teams(self)
        """The parent's teams and their mail (teams.py)."""

    @property
    def forking(self) -> bool:
        """Whether an Agent call without subagent_type forks the caller (`Session.forking`)."""
        return self.settings().forking

    @property
    def auto_background_after(self) -> float | None:
        """Seconds a caller waits for a synchronous agent before it moves to the background
        (None or 0: no limit)."""
        return self.settings().auto_background_after

    # -- launching -------------------------------------------------------------------------

    def fork(
        self,
        parent: AgentRun,
        directive: str,
        *,
        description: str,
        tool_use_id: str | None = None,
        history: list[Message] | None = None,
        name: str | None = None,
        agent_id: str | None = None,
        worktree: Worktree | None = None,
        namespace: str | None = None,
        turns: int | None = None,
        limit: ToolLimit | None = None,
        model: str | None = None,
        effort: str | None = None,
    ) -> Task:
        """Start a fork of `parent` from `history` (default: the parent's history now); its
        code runs in a snapshot of the namespace, or in the namespace itself (`shared`).
        With `turns`, only the last `turns` turns of that history are inherited. A command
        that forks gives its `limit` (the calls it may make), and may ask for another
        `model` or `effort` (a fork on another model reads none of the parent's cache)."""
        if parent.is_fork:
            raise ForkRefusedError(FORK_RECURSION_ERROR)
        if not directive.strip():
            raise UsageError("The fork directive is empty: say what the worker should do.")
        source = parent.history if history is None else history
        if turns is not None:
            source = last_turns(source, turns)
        group = self._groups.group_for(source)
        agent_id = agent_id or new_agent_id()
        task = Task(
            id=agent_id,
            kind="fork",
            description=description,
            owner=parent.id,
            name=name,
            tool_use_id=tool_use_id,
        )
        config = replace(
            self.configs.fork_config(parent, agent_id, namespace), max_turns=FORK_MAX_TURNS
        )
        if limit is not None:
            config = replace(config, gate=config.gate.limited(limit))
        if model is not None:
            config = replace(config, model=model)
        if effort is not None:
            config = replace(config, effort=effort)
        windowed = turns is not None
        run, shared = fork_run(
            parent, source, directive, config, task, worktree=worktree, windowed=windowed
        )
        if self.stagger:
            self._groups.schedule(run, group)
        if windowed:  # a window of the parent's history is no prefix of its transcript
            open_transcript(self.store, run, None, 0)
        else:
            open_transcript(self.store, run, parent.id, shared)
        return self._start(run)

    async def scan(self) -> AgentScan:
        """The agent files, read on a thread (they are read again at each use: an edited
        file counts from the next agent on). A bad file never stops the others."""
        return await asyncio.to_thread(self._definitions)

    async def definitions(self) -> dict[str, AgentDefinition]:
        """The named agents that load."""
        return (await self.scan()).agents

    async def definition(self, agent_type: str) -> AgentDefinition:
        """The named agent `agent_type`; a ToolError saying why the file that would define
        it does not load, or listing the available ones."""
        scan = await self.scan()
        found = scan.agents.get(agent_type)
        if found is None:
            broken = scan.broken(agent_type)
            if broken is not None:
                raise ToolError(f"Agent type '{agent_type}' cannot be used: {broken}")
            raise ToolError(unknown_agent_message(agent_type, sorted(scan.agents)))
        return found

    def named(
        self,
        parent: AgentRun,
        definition: AgentDefinition,
        prompt: str,
        *,
        description: str,
        tool_use_id: str | None = None,
        name: str | None = None,
        model: str | None = None,
        agent_id: str | None = None,
        worktree: Worktree | None = None,
    ) -> AgentRun:
        """Prepare (not start) a run of the named agent `definition` (see `definition`);
        `start` it."""
        agent_id = agent_id or new_agent_id()
        task = Task(
            id=agent_id,
            kind=definition.name,
            description=description,
            owner=parent.id,
            name=name,
            tool_use_id=tool_use_id,
        )
        config = self.configs.named_config(parent, definition, agent_id, model)
        run = named_run(parent, definition, prompt, config, task, worktree=worktree)
        open_transcript(self.store, run, None, 0)
        return run

    def start(self, run: AgentRun) -> Task:
        return self._start(run)

    def _start(self, run: AgentRun) -> Task:
        assert run.task is not None
        run.config.ctx.services.agent_run = run
        run.task.context_window = window_for(run.config.model, run.config.compaction)
        self.registry.register(run.task)
        self.runs[run.id] = run
        run.state.inbox = lambda: self.take_inbox(run)
        run.state.on_rate_wait = functools.partial(self._rate_wait, run)
        self._launch(run)
        return run.task

    def _launch(self, run: AgentRun) -> None:
        """Run `run` as an asyncio task; whatever becomes of that task, the run ends once."""
        run.config.ctx.services.shell_groups = run.shell_groups
        runner = asyncio.get_running_loop().create_task(self._run(run), name=run.id)
        runner.add_done_callback(functools.partial(self._runner_done, run))
        run.runner = runner

    def _runner_done(self, run: AgentRun, runner: asyncio.Task[None]) -> None:
        """A runner cancelled before it started never reached `_end`: end it now."""
        task = run.task
        if task is not None and not task.done and run.runner is runner:
            self._spawn(self._end(run, "killed", result=partial(run), error=run.stop_reason))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        job = asyncio.get_running_loop().create_task(coro)
        self._endings.add(job)
        job.add_done_callback(self._endings.discard)
        return job

    # -- running ---------------------------------------------------------------------------

    def take_inbox(self, run: AgentRun) -> list[str]:
        """What waits for `run`: messages (a teammate's mail as it came), then notifications."""
        run.wakeup.clear()
        texts = [f"{MESSAGE_PREFIX}\n{m}" for m in run.inbox] + run.mailbox
        run.inbox.clear()
        run.mailbox.clear()
        texts += [c.text for c in self.queue.drain(run.id)]
        return texts

    async def _run(self, run: AgentRun) -> None:
        task = run.task
        assert task is not None
        stop: Stop | None = None
        hooks = run.config.hooks
        kind = run.definition.name if run.definition is not None else "fork"
        about = {"agent_id": run.id, "agent_type": kind}
        blocked = 0  # times in a row its SubagentStop hooks sent it back to work
        checked = False  # they ran for the end it came to
        try:
            if run.reisolate:
                await recreate_worktree(run)
            if hooks is not None and hooks.has("SubagentStart"):
                await hooks.run("SubagentStart", about, kind)
            while True:
                async for event in run_turn(run.config, run.history, run.state):
                    self._observe(run, event)
                    if isinstance(event, Stop):
                        stop = event
                assert stop is not None
                if stop.reason not in ("end_turn", "max_tokens") or run.leaving:
                    break
                # Not done while own workers run or messages wait: continue with them.
                pending = self.take_inbox(run)
                while not pending and self.registry.running(owner=run.id):
                    await self._next_for(run)
                    pending = self.take_inbox(run)
                if not pending and run.team is not None and not run.leaving:
                    pending = await self.teams.idle(run)  # a teammate waits for mail
                if pending:
                    blocked = 0
                elif hooks is not None:  # its end, unless its SubagentStop hooks send it back
                    checked = True
                    feedback = await self._stop_check(run, hooks, about, stop, blocked)
                    pending = [feedback] if feedback is not None else []
                    blocked += 1
                if not pending:
                    break
                checked = False
                run.state.append(
                    run.history,
                    {"role": "user", "content": [{"type": "text", "text": t} for t in pending]},
                )
        except asyncio.CancelledError:
            await self._end(run, "killed", result=partial(run), error=run.stop_reason)
            raise
        except RunEndedError as exc:  # the agent cannot go on (its worker process died)
            await self._end(run, "failed", error=str(exc), result=own_text(run) or None)
            return
        except Exception as exc:  # a bug or an unexpected failure: report, never hang
            await self._end(run, "failed", error=f"{type(exc).__name__}: {exc}")
            return
        status, result, error = outcome(run, stop)
        if hooks is not None and not checked:  # it ended otherwise: they are told, no more
            await self._stop_check(run, hooks, about, stop, blocked, may_go_on=False)
        await self._end(run, status, result, error)

    async def _stop_check(
        self,
        run: AgentRun,
        hooks: Hooks,
        about: dict[str, Any],
        stop: Stop | None,
        blocked: int,
        *,
        may_go_on: bool = True,
    ) -> str | None:
        """Its SubagentStop hooks as its run ends: the message of another turn when they
        block (config/hooks.py, `Hooks.stop_check`), else None."""
        status, result, error = outcome(run, stop)
        ended = {
            **about,
            "status": status,
            "result": result,
            "error": error,
            "last_assistant_message": own_text(run),
        }
        return await hooks.stop_check(
            "SubagentStop", ended, about["agent_type"], blocked=blocked, may_go_on=may_go_on
        )

    async def _end(
        self,
        run: AgentRun,
        status: Literal["completed", "failed", "killed"],
        result: str | None = None,
        error: str | None = None,
    ) -> None:
        """The one terminal transition of a run (a no-op when it has already ended): the
        terminal status at once, so that readers of the status never wait on git; then, in a
        step no cancel interrupts, the transcript's result, the agent's background shell
        commands killed, its worktree cleaned up and its one notification enqueued."""
        task = run.task
        assert task is not None
        if not self.registry.end(task, status, result=result, error=error):
            return
        run.ending = True
        if run.transcript is not None:
            run.transcript.set_result(result or error or "", status, error=error)
        # what was sent to it and is still unread goes to whoever reads for it now
        self.queue.reroute(run.id, self.registry.recipient(task.owner))
        await asyncio.shield(self._spawn(self._settle(run)))

    async def _settle(self, run: AgentRun) -> None:
        task = run.task
        assert task is not None
        try:
            shells = run.config.ctx.services.shells
            if isinstance(shells, ShellRegistry):  # its background commands: not reported
                shells.stop_agent(run.id)
            _kill_groups(run.shell_groups)
            await clean_worktree(run)
        finally:
            self.registry.settle(task)
            # ended and settled: a message from now on resumes it at once (left set, a stop's
            # mark sent every later message to `resume_with`, which nothing reads any more)
            run.ending = run.stopping = False
            if run.resume_with:  # messages that came while it ended: resume with them
                messages, run.resume_with = run.resume_with, []
                try:
                    self._resume(run, messages)
                except UsageError as exc:
                    log.warning("agent %s not resumed: %s", run.id, exc)
                    if run.transcript is not None:
                        run.transcript.output(f"not resumed: {exc}")

    async def _next_for(self, run: AgentRun) -> None:
        """Wait until one of `run`'s own workers ends (its notification is then queued)."""
        children = list(self.registry.running(owner=run.id))
        waits = [asyncio.ensure_future(t.wait()) for t in children]
        inbox_wait = asyncio.ensure_future(run.wakeup.wait())
        try:
            await asyncio.wait([*waits, inbox_wait], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in [*waits, inbox_wait]:
                w.cancel()

    def wake(self, agent_id: str) -> None:
        """Something arrived for `agent_id` (a message or a notification)."""
        run = self.runs.get(agent_id)
        if run is not None and run.team is not None:
            self.teams.wake(run)
        elif run is not None:
            run.wakeup.set()

    def _observe(self, run: AgentRun, event: object) -> None:
        task = run.task
        assert task is not None
        record_timing(run.transcript, event)
        if run.transcript is not None:
            log_event(run.transcript, event)
        if apply_event(task, event):
            self.registry.changed(task)

    def _rate_wait(self, run: AgentRun, seconds: float | None) -> None:
        """Show on the task row that its request waits for rate-limit room (model/pacer.py)."""
        task = run.task
        if task is not None and show_rate_wait(task, seconds):
            self.registry.changed(task)

    def _rate_waiting(self, agent_id: str | None) -> bool:
        run = self.runs.get(agent_id or "")
        return run is not None and waits_for_rate(run.task)

    # -- messaging and stopping --------------------------------------------------------------

    async def send(
        self, to: str, message: str, *, sender: str | None = None, summary: str | None = None
    ) -> str:
        """Deliver `message` to a running agent, or resume a finished one with it (one this
        session does not hold, from its transcript). `sender` signs it for a teammate's
        mailbox (None: the person), with `summary`."""
        reply = self.deliver(to, message, sender=sender, summary=summary)
        if reply is None:
            return await self._revive(to, message, sender=sender, summary=summary)
        return reply

    def broadcast(self, message: str, *, sender: str) -> str:
        """`message` to every running agent of the session but `sender` (SendMessage to
        "*"); each reads it at its next step."""
        if not message.strip():
            raise UsageError("The message is empty.")
        reached = []
        for task in self.registry.running():
            run = self.runs.get(task.id)
            if run is None or task.id == sender:
                continue
            run.inbox.append(message)
            run.wakeup.set()
            reached.append(task.name or task.id)
        if not reached:
            raise UsageError("No agent is running: the message reached no one.")
        return f"Message queued for {len(reached)} running agent(s): {', '.join(reached)}."

    def deliver(
        self, to: str, message: str, *, sender: str | None = None, summary: str | None = None
    ) -> str | None:
        """`send` to an agent this session holds, at once (None: it holds no such agent;
        `send` resumes it from disk). A teammate gets it in its mailbox, signed by `sender`
        (None: the person)."""
        if not message.strip():
            raise UsageError("The message is empty.")
        if to == "main" or (self.main is not None and to == self.main.id):
            raise UsageError(
                "'main' is the parent conversation itself, not a background agent: messages "
                "go to the agents it started (by id or name)."
            )
        task_or_none = self.registry.find(to)
        if task_or_none is None:
            return None
        task = task_or_none
        run = self.runs.get(task.id)
        if run is None:
            raise UsageError(f"Agent {to!r} has no conversation to resume.")
        mail = None
        if run.team is not None:  # a teammate: its mailbox, the sender named
            mail = teammate_message(sender or FROM_USER, message, summary)
        if not task.done and not run.stopping:
            if mail is not None:
                self.teams.post(run, mail)
                return f"Message sent to {task.name or task.id}'s mailbox."
            run.inbox.append(message)
            run.wakeup.set()
            return f"Message queued for {task.name or task.id}; it arrives at its next step."
        if mail is not None:
            message = mail
        if run.ending or run.stopping or not task.settled:
            run.resume_with.append(message)
            state = "stopping" if not task.done else task.status
            return (
                f"Agent {task.name or task.id} is just ending ({state}); it resumes with "
                "your message as soon as it has ended, and will report back when it finishes."
            )
        return self._resume(run, [message])

    def _resume(self, run: AgentRun, messages: list[str]) -> str:
        """Start a new run of a finished agent with `messages`, where it worked before."""
        task = run.task
        assert task is not None
        renew_worktree(run)
        previous = task.status
        self.registry.restart(task)
        run.stop_reason = None
        run.stopping = False
        # messages it accepted while running but never read come first
        texts = [f"{MESSAGE_PREFIX}\n{m}" for m in run.inbox] + run.mailbox + messages
        run.inbox.clear()
        run.mailbox.clear()
        run.turn_start = len(run.history)
        run.leaving = run.reported = False
        run.state.append(
            run.history, {"role": "user", "content": [{"type": "text", "text": t} for t in texts]}
        )
        if run.transcript is not None:
            run.transcript.output(f"resumed with a message: {messages[-1][:200]}")
        self._launch(run)
        return (
            f"Agent {task.name or task.id} had {previous}; it was resumed in the background "
            f"with your message and will report back when it finishes."
        )

    async def _revive(
        self, key: str, message: str, *, sender: str | None = None, summary: str | None = None
    ) -> str:
        """Resume an agent this session does not hold, from its transcript on disk (read on
        a thread); a teammate rejoins its team and reads `message` as mail from `sender`."""
        store = self.store
        agent_id = await store.aagent_id_for(key) if store is not None else None
        if agent_id is None or store is None or self.main is None:
            self.registry.get(key)  # raises the "No task ..." error with the known tasks
            raise UsageError(f"No transcript found for agent {key!r}.")
        loaded = await store.aload(agent_id)
        definitions = await self.definitions() if loaded.meta.kind != "fork" else {}
        # revived meanwhile by another message
        reply = self.deliver(agent_id, message, sender=sender, summary=summary)
        if reply is not None:
            return reply
        meta = loaded.meta
        definition = None
        if meta.kind != "fork":
            definition = definitions.get(meta.kind) or definitions["general-purpose"]
        run, note = self.restore(
            loaded, definition, message=message, sender=sender, summary=summary
        )
        if run.team is not None:
            return (
                f"Teammate {meta.name or run.id} had no running task here; it was resumed from "
                f"its transcript in the background, back in team {run.team}: it reads your "
                f"message in its mailbox and waits for mail after its turn.{note}"
            )
        return (
            f"Agent {meta.name or run.id} had no running task here; it was resumed from its "
            f"transcript in the background with your message and will report back.{note}"
        )

    def restore(
        self,
        loaded: LoadedTranscript,
        definition: AgentDefinition | None = None,
        *,
        message: str | None = None,
        client: Callable[[ModelClient], ModelClient] | None = None,
        sender: str | None = None,
        summary: str | None = None,
    ) -> tuple[AgentRun, str]:
        """Bring back an agent this session does not hold from its transcript and start it:
        with `message` as its next turn, or (None) answering the request its history ends
        with. A fork gets the parent's configuration, a named agent `definition`'s, a
        teammate (its transcript names its team) a teammate's: it rejoins its team and reads
        `message` as mail from `sender` (None: the person) with `summary`. `client` wraps
        the model client. Returns the run and a note for the caller ("" when none)."""
        assert self.main is not None
        meta = loaded.meta
        agent_id = meta.agent_id
        team = meta.team if definition is not None else None  # a teammate is a named agent
        if team is not None:
            assert definition is not None
            source = str(meta_path(loaded.session_dir, agent_id))
            config = self.teams.restored_config(
                definition, agent_id, meta.model or None, team, source
            )
        elif definition is None:
            config = replace(
                self.configs.fork_config(self.main, agent_id, None), max_turns=FORK_MAX_TURNS
            )
        else:
            config = self.configs.named_config(self.main, definition, agent_id, meta.model or None)
        if client is not None:
            config = replace(config, client=client(config.client))
        run = restored_run(
            loaded,
            config,
            definition,
            owner=self.registry.recipient(meta.owner),
            answering=message is not None,
        )
        if team is not None:
            self.teams.rejoin(run, team)  # refused here when its name is taken: nothing started
        changed = meta.cache_mismatches(system=config.system, tools=config.tools.specs())
        open_transcript(self.store, run, None, 0)
        if message is not None:
            if run.team is not None:  # mail, signed; its turn starts here
                message = teammate_message(sender or FROM_USER, message, summary)
                run.turn_start = len(run.history)
            run.state.append(
                run.history, {"role": "user", "content": [{"type": "text", "text": message}]}
            )
        self._start(run)
        note = ""
        if message is not None and changed and run.transcript is not None:
            note = (
                f" Its {' and '.join(changed)} changed since it last ran, so this resume cannot "
                "read its earlier requests from the prompt cache (a full-price first request)."
            )
            run.transcript.output(note.strip())
        return run, note

    async def stop(self, key: str, *, quiet: bool = False) -> Task:
        """Stop a running task (killed, its partial result reported) and wait until it has
        ended. `quiet`: the user stopped it among others; its notification is not for the
        model (it is still shown to the user)."""
        task = self.registry.get(key)
        if task.done:
            raise UsageError(f"Task {task.id} is not running (status: {task.status}).")
        run = self.runs[task.id]
        if quiet:
            self.registry.suppress(task)
        run.stopping = True
        runner = run.runner
        if runner is not None and not runner.done():
            runner.cancel()
            await asyncio.wait({runner})
        if not task.done:
            await self._end(run, "killed", result=partial(run))
        await task.wait()
        return task

    def background(self, key: str) -> Task:
        """Let the caller of a synchronous agent go on: its Agent call returns now, as if the
        agent had been started in the background, and its result comes later as a
        notification (exactly one report either way)."""
        task = self.registry.get(key)
        run = self.runs.get(task.id)
        if task.done or run is None or not task.foreground:
            raise UsageError(
                f"Task {task.id} is not running in the foreground (status: {task.status}); "
                "only a named agent that its caller waits for can be moved to the background."
            )
        task.foreground = False
        run.to_background.set()
        self.registry.changed(task)
        return task

    def kill(self, key: str, reason: str | None = None) -> None:
        """Stop a running task without waiting (`reason`, if given, is named in its
        notification; none: the user stopped it). A task that has ended: nothing."""
        task = self.registry.get(key)
        run = self.runs.get(task.id)
        if task.done or run is None:
            return
        run.stop_reason = reason
        run.stopping = True  # a message sent from now on resumes it once it has ended
        if run.runner is not None and not run.runner.done():
            run.runner.cancel()
        else:
            self._spawn(self._end(run, "killed", result=partial(run), error=reason))

    async def stop_all(self, keys: list[str] | None = None) -> list[Task]:
        """Stop every running task (or those of `keys`) at the user's request: each ends
        `killed` with one notification, which is not handed to any model (invariant 43).
        Returns the tasks it stopped (not those that ended by themselves meanwhile: they
        report as usual)."""

        async def one(task: Task) -> Task | None:
            try:
                return await self.stop(task.id, quiet=True)
            except UsageError:  # it ended by itself meanwhile
                await task.wait()
                return None

        chosen = self.registry.running()
        if keys is not None:
            chosen = [t for t in chosen if t.id in keys]
        stopped = await asyncio.gather(*(one(t) for t in chosen))
        return [t for t in stopped if t is not None]


def _kill_groups(groups: set[int]) -> None:
    """Kill the process groups an agent's shell commands left running (`cmd &`)."""
    killpg = getattr(os, "killpg", None)
    while groups:
        pgid = groups.pop()
        if killpg is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                killpg(pgid, signal.SIGKILL)
