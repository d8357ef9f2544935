"""Running agents in the background: launch, run, message, resume, stop.

`AgentRun` is one agent's live state (its conversation, loop state, inbox, asyncio task).
`Workers` launches forks and named agents as `Task`s, runs each on the event loop, and keeps
the rules that make a fan-out cheap and its results reliable:

* Cache-aware fan-out: forks started from the same point of a parent's history form a group.
  The first one to reach the model leads; the others wait until the leader's response has
  started (only then is its cache write readable), so N siblings cost one write and N-1 reads
  even when the parent's cache has expired.
* One terminal transition per run (`_end`), whatever ends it - completion, failure, a
  refused request, a stop, a cancel: the terminal status first (a blocking TaskOutput never
  waits on git), the transcript's result, the agent's background shell commands killed, its
  worktree cleaned up (kept when it holds changes), then exactly one notification.
* A notification goes to the launching agent (`Task.owner`) while it runs, else to the
  nearest running agent above it, else to the parent; an agent with workers of its own does
  not complete until they have reported back to it.
* SendMessage to a running agent waits in its inbox for the next loop boundary; to a finished
  one resumes it in the background (from memory, or from its transcript after a restart), in
  its own worktree when it had one - never in the parent's checkout. A message that comes
  while the agent is ending resumes it once it has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import secrets as _secrets
import signal
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from .agents import AgentDefinition, AgentScan, missing_tools, unknown_agent_message
from .compaction import last_turns, window_for
from .errors import RunEndedError, UsageError
from .events import (
    AssistantMessage,
    Compacted,
    Retrying,
    Stop,
    TextDelta,
    ToolResult,
    ToolUse,
    UsageReport,
    fold_text,
)
from .fork import FORK_RECURSION_ERROR, FORK_TAG, build_fork_messages
from .history import append_message, blocks_of
from .loop import AgentConfig, LoopState, run_turn
from .model import ModelClient
from .notifications import CommandQueue
from .pacer import RATE_WAIT, wait_text
from .tasks import Task, TaskRegistry, Todo
from .timing import record_timing
from .tools.base import ToolError
from .transcripts import (
    AgentMeta,
    LoadedTranscript,
    Transcript,
    TranscriptStore,
    WorktreeRecord,
    fingerprint,
)
from .worktree import Worktree, WorktreeError, create_worktree, worktree_notice

__all__ = ["AgentRun", "ForkRefusedError", "Workers", "new_agent_id"]

log = logging.getLogger(__name__)

FORK_MAX_TURNS = 200
AUTO_BACKGROUND_AFTER = 120.0  # seconds a synchronous agent is waited for
LEADER_WAIT_SECONDS = 60.0
MESSAGE_PREFIX = "Message from the agent that started you:"


def new_agent_id() -> str:
    return "a" + _secrets.token_hex(8)


class ForkRefusedError(ToolError):
    """A fork was asked for where forking is not allowed."""


@dataclass(eq=False)
class AgentRun:
    """One agent's live state."""

    id: str
    config: AgentConfig
    history: list[dict[str, Any]]
    state: LoopState = field(default_factory=LoopState)
    task: Task | None = None
    is_fork: bool = False
    owner: str = "main"
    definition: AgentDefinition | None = None
    inbox: list[str] = field(default_factory=list)
    runner: asyncio.Task[None] | None = None
    stop_reason: str | None = None  # why it was stopped, when not by a user's stop
    to_background: asyncio.Event = field(default_factory=asyncio.Event)  # see `background`
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    transcript: Transcript | None = None
    worktree: Worktree | None = None
    reisolate: bool = False  # its unchanged worktree was removed: create it again first
    creating: asyncio.Future[Worktree] | None = None  # that creation, while under way
    ending: bool = False  # between its terminal status and its notification
    stopping: bool = False  # killed, its loop not yet ended: it reads no more messages
    resume_with: list[str] = field(default_factory=list)  # messages that came meanwhile
    shell_groups: set[int] = field(default_factory=set)  # its Bash calls' process groups
    todos: list[Todo] = field(default_factory=list)  # its todo list (TodoWrite)


@dataclass(eq=False)
class _ForkGroup:
    anchor: object = None
    leader: str | None = None
    started: asyncio.Event = field(default_factory=asyncio.Event)
    handoff: asyncio.Event = field(default_factory=asyncio.Event)  # the leader left, unstarted


NO_OUTPUT = "(no output)"


def _last_text(history: list[dict[str, Any]]) -> str:
    for message in reversed(history):
        if message["role"] == "assistant":
            text = "".join(
                str(b.get("text", "")) for b in blocks_of(message) if b.get("type") == "text"
            ).strip()
            if text:
                return text
    return ""


def _own_start(run: AgentRun) -> int:
    """Where the run's own messages begin: a fork's after its directive (what comes before
    is the parent's, inherited); a named agent's at the start."""
    if not run.is_fork:
        return 0
    tag = f"<{FORK_TAG}>"
    for i in range(len(run.history) - 1, -1, -1):
        message = run.history[i]
        if message["role"] == "user" and any(
            b.get("type") == "text" and tag in str(b.get("text", "")) for b in blocks_of(message)
        ):
            return i + 1
    return 0  # compacted away: everything left is its own


def _own_text(run: AgentRun) -> str:
    """The run's last text of its own (never the inherited conversation's)."""
    return _last_text(run.history[_own_start(run) :])


def _partial(run: AgentRun) -> str:
    """A stopped run's partial result: its own last text, or that it had none."""
    return _own_text(run) or NO_OUTPUT


class Workers:
    """Launches and runs background agents for one session."""

    def __init__(
        self,
        *,
        registry: TaskRegistry,
        queue: CommandQueue,
        definitions: Callable[[], AgentScan],
        named_config: Callable[[AgentRun, AgentDefinition, str, str | None], AgentConfig],
        fork_config: Callable[[AgentRun, str, str | None], AgentConfig],
        stagger: bool = True,
        forking: bool = True,
        store: TranscriptStore | None = None,
        auto_background_after: float | None = AUTO_BACKGROUND_AFTER,
    ) -> None:
        self.store = store
        self.main: AgentRun | None = None
        self.stagger = stagger
        self.forking = forking
        self.auto_background_after = auto_background_after
        """Seconds a caller waits for a synchronous agent before it moves to the background
        (None or 0: no limit)."""
        self.registry = registry
        self.queue = queue
        self._definitions = definitions
        self._named_config = named_config
        self._fork_config = fork_config
        self.runs: dict[str, AgentRun] = {}
        self._groups: dict[tuple[int, int], _ForkGroup] = {}
        self._endings: set[asyncio.Task[None]] = set()  # terminal transitions under way

    # -- launching -------------------------------------------------------------------------

    def fork(
        self,
        parent: AgentRun,
        directive: str,
        *,
        description: str,
        tool_use_id: str | None = None,
        history: list[dict[str, Any]] | None = None,
        name: str | None = None,
        agent_id: str | None = None,
        worktree: Worktree | None = None,
        namespace: str | None = None,
        turns: int | None = None,
    ) -> Task:
        """Start a fork of `parent` from `history` (default: the parent's history now); its
        code runs in a snapshot of the namespace, or in the namespace itself (`shared`).
        With `turns`, only the last `turns` turns of that history are inherited."""
        if parent.is_fork:
            raise ForkRefusedError(FORK_RECURSION_ERROR)
        if not directive.strip():
            raise UsageError("The fork directive is empty: say what the worker should do.")
        source = parent.history if history is None else history
        if turns is not None:
            source = last_turns(source, turns)
        built = build_fork_messages(source, directive, own_tool_use_id=tool_use_id)
        key = (id(source[-1]) if source else 0, len(source))
        group = self._groups.get(key)
        if group is None or group.anchor is not (source[-1] if source else None):
            group = self._groups[key] = _ForkGroup(anchor=source[-1] if source else None)
        agent_id = agent_id or new_agent_id()
        task = Task(
            id=agent_id,
            kind="fork",
            description=description,
            owner=parent.id,
            name=name,
            tool_use_id=tool_use_id,
        )
        config = self._fork_config(parent, agent_id, namespace)
        state = LoopState(cache_points=[built.shared_end] if built.shared_end else [])
        run = AgentRun(
            agent_id,
            replace(config, max_turns=FORK_MAX_TURNS),
            built.messages,
            state,
            task,
            is_fork=True,
            owner=parent.id,
        )
        self._isolate(run, worktree)
        if self.stagger:
            self._schedule(run, group)
        shared = 0
        while shared < min(len(source), len(built.messages)) and (
            built.messages[shared] is source[shared]
        ):
            shared += 1
        measured = parent.state.previous_end
        if (
            turns is None
            and measured is not None
            and parent.state.context_tokens
            and (shared > measured)
        ):  # the parent's last request is a prefix of this one: its size is known
            state.context_tokens = parent.state.context_tokens
            state.previous_end = measured
            state.token_ratio = parent.state.token_ratio
        if turns is not None:  # a window of the parent's history is no prefix of its transcript
            self._record(run, None, 0)
        else:
            self._record(run, parent.id, shared)
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
        config = self._named_config(parent, definition, agent_id, model)
        missing = missing_tools(definition, config.tools.names())
        if missing:
            task.notes.append("not available here: " + ", ".join(missing))
        if definition.permissionMode == "bypassPermissions" and config.gate.mode not in (
            "bypassPermissions",
            "plan",
        ):
            task.notes.append(
                "permissionMode bypassPermissions not applied: an agent file bypasses only "
                "while the session itself does"
            )
        if definition.initialPrompt:  # the file's initial prompt goes first
            prompt = f"{definition.initialPrompt}\n\n{prompt}"
        history = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
        run = AgentRun(
            agent_id, config, history, LoopState(), task, owner=parent.id, definition=definition
        )
        self._isolate(run, worktree)
        self._record(run, None, 0)
        return run

    @staticmethod
    def _place(run: AgentRun, worktree: Worktree) -> None:
        """Make `worktree` the run's working place."""
        run.worktree = worktree
        run.config = replace(run.config, ctx=replace(run.config.ctx, workdir=worktree.workdir))

    @classmethod
    def _isolate(cls, run: AgentRun, worktree: Worktree | None) -> None:
        """Move the run into its worktree and tell it so (its own last message)."""
        if worktree is None:
            return
        cls._place(run, worktree)
        notice = worktree_notice(worktree.parent_workdir, worktree.workdir, inherited=run.is_fork)
        append_message(run.history, {"role": "user", "content": [{"type": "text", "text": notice}]})

    def _record(self, run: AgentRun, inherits: str | None, shared: int) -> None:
        """Open the run's transcript and write what it does not inherit."""
        if self.store is None or run.task is None:
            return
        task = run.task
        meta = AgentMeta(
            agent_id=run.id,
            kind=task.kind,
            description=task.description,
            name=task.name,
            model=run.config.model,
            owner=run.owner,
            inherits_from=inherits,
            inherits_count=shared,
            system_hash=fingerprint(run.config.system),
            tools_hash=fingerprint(run.config.tools.specs()),
            worktree_path=str(run.worktree.path) if run.worktree is not None else None,
            worktree=(
                WorktreeRecord(**run.worktree.fields()) if run.worktree is not None else None
            ),
        )
        run.transcript = self.store.open(meta)
        for message in run.history[shared:]:
            run.transcript.append_message(message)
        run.state.on_message = run.transcript.append_message
        transcript = run.transcript
        run.state.on_history_replaced = lambda messages, data: transcript.append_event(
            "compacted", {**data, "messages": messages}
        )
        run.config.gate.recorder = lambda entry: transcript.append_event("permission", entry)
        task.output_file = run.transcript.output_path
        run.transcript.output(f"started {task.kind} {task.id}: {task.description}")

    def start(self, run: AgentRun) -> Task:
        return self._start(run)

    def _start(self, run: AgentRun) -> Task:
        assert run.task is not None
        run.config.ctx.services["agent_run"] = run
        run.task.context_window = window_for(run.config.model, run.config.compaction)
        self.registry.register(run.task)
        self.runs[run.id] = run
        run.state.inbox = lambda: self._take_inbox(run)
        run.state.on_rate_wait = functools.partial(self._rate_wait, run)
        self._launch(run)
        return run.task

    def _launch(self, run: AgentRun) -> None:
        """Run `run` as an asyncio task; whatever becomes of that task, the run ends once."""
        run.config.ctx.services["shell_groups"] = run.shell_groups
        runner = asyncio.get_running_loop().create_task(self._run(run), name=run.id)
        runner.add_done_callback(functools.partial(self._runner_done, run))
        run.runner = runner

    def _runner_done(self, run: AgentRun, runner: asyncio.Task[None]) -> None:
        """A runner cancelled before it started never reached `_end`: end it now."""
        task = run.task
        if task is not None and not task.done and run.runner is runner:
            self._spawn(self._end(run, "killed", result=_partial(run), error=run.stop_reason))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        job = asyncio.get_running_loop().create_task(coro)
        self._endings.add(job)
        job.add_done_callback(self._endings.discard)
        return job

    def _schedule(self, run: AgentRun, group: _ForkGroup) -> None:
        """Hold every sibling but the first until the first one's response has started."""

        def leader_ended(_runner: object) -> None:
            """A leader that ends (fails, is stopped) before its response started hands the
            lead to a waiting sibling at once, instead of holding them all until the wait
            runs out."""
            if group.leader == run.id and not group.started.is_set():
                group.leader = None
                left, group.handoff = group.handoff, asyncio.Event()
                left.set()

        async def hold() -> bool:
            """Wait for the lead's response to start (or lead); whether it waited."""
            loop = asyncio.get_running_loop()
            deadline = loop.time() + LEADER_WAIT_SECONDS
            waited = False
            while not group.started.is_set():
                if group.leader is None:  # first, or the leader ended without a response
                    group.leader = run.id
                    run.state.on_first_response_start = group.started.set
                    current = asyncio.current_task()
                    if current is not None:
                        current.add_done_callback(leader_ended)
                    return waited
                remaining = deadline - loop.time()
                if remaining <= 0 and self._rate_waiting(group.leader):
                    deadline, remaining = loop.time() + 1.0, 1.0  # its wait is not a failure
                if remaining <= 0:
                    return waited
                waited = True
                # not wait_for: on Python < 3.12 it can swallow a cancel (a stop) that arrives
                # as the leader's response starts
                started = asyncio.ensure_future(group.started.wait())
                handoff = asyncio.ensure_future(group.handoff.wait())
                try:
                    await asyncio.wait(
                        {started, handoff}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    started.cancel()
                    handoff.cancel()
            return waited

        run.state.before_first_request = hold

    # -- running ---------------------------------------------------------------------------

    def _take_inbox(self, run: AgentRun) -> list[str]:
        run.wakeup.clear()
        texts = [f"{MESSAGE_PREFIX}\n{m}" for m in run.inbox]
        run.inbox.clear()
        texts += [c.text for c in self.queue.drain(run.id)]
        return texts

    async def _run(self, run: AgentRun) -> None:
        task = run.task
        assert task is not None
        stop: Stop | None = None
        hooks = run.config.hooks
        kind = run.definition.name if run.definition is not None else "fork"
        about = {"agent_id": run.id, "agent_type": kind}
        try:
            if run.reisolate:
                await self._reisolate(run)
            if hooks is not None and hooks.has("SubagentStart"):
                await hooks.run("SubagentStart", about, kind)
            while True:
                async for event in run_turn(run.config, run.history, run.state):
                    self._observe(run, event)
                    if isinstance(event, Stop):
                        stop = event
                assert stop is not None
                if stop.reason not in ("end_turn", "max_tokens"):
                    break
                # Not done while own workers run or messages wait: continue with them.
                pending = self._take_inbox(run)
                while not pending and self.registry.running(owner=run.id):
                    await self._next_for(run)
                    pending = self._take_inbox(run)
                if not pending:
                    break
                run.state.append(
                    run.history,
                    {"role": "user", "content": [{"type": "text", "text": t} for t in pending]},
                )
        except asyncio.CancelledError:
            await self._end(run, "killed", result=_partial(run), error=run.stop_reason)
            raise
        except RunEndedError as exc:  # the agent cannot go on (its worker process died)
            await self._end(run, "failed", error=str(exc), result=_own_text(run) or None)
            return
        except Exception as exc:  # a bug or an unexpected failure: report, never hang
            await self._end(run, "failed", error=f"{type(exc).__name__}: {exc}")
            return
        status, result, error = self._outcome(run, stop)
        if hooks is not None and hooks.has("SubagentStop"):
            ended = {**about, "status": status, "result": result, "error": error}
            said = await hooks.run("SubagentStop", ended, kind)
            if said.blocked:
                hooks.note(f"SubagentStop hook of {run.id} ({kind}): {said.reason}")
        await self._end(run, status, result, error)

    @staticmethod
    def _outcome(
        run: AgentRun, stop: Stop | None
    ) -> tuple[Literal["completed", "failed", "killed"], str | None, str | None]:
        """(status, result, error) of a run whose loop ended by itself."""
        text = _own_text(run)
        if run.stop_reason is not None:  # stopped while its last request was refused
            return "killed", text or NO_OUTPUT, run.stop_reason
        if stop is not None and stop.reason in ("error", "refusal"):
            return "failed", text or None, stop.error or f"the run ended: {stop.reason}"
        if stop is not None and stop.reason == "max_turns":
            limit = run.config.max_turns
            note = f"[stopped at its limit of {limit} model requests before finishing]"
            return "completed", f"{text}\n\n{note}".strip(), None
        if not text:
            return "failed", None, "the agent produced no text"
        return "completed", text, None

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
            run.transcript.set_result(result or error or "")
        # what was sent to it and is still unread goes to whoever reads for it now
        self.queue.reroute(run.id, self.registry.recipient(task.owner))
        await asyncio.shield(self._spawn(self._settle(run)))

    async def _settle(self, run: AgentRun) -> None:
        task = run.task
        assert task is not None
        try:
            _kill_groups(run.shell_groups)
            await self._clean_worktree(run)
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

    async def _clean_worktree(self, run: AgentRun) -> None:
        """Remove the run's worktree unless it holds changes (git failing: kept)."""
        task = run.task
        if run.creating is not None:  # stopped while its worktree was being created
            creating, run.creating = run.creating, None
            with contextlib.suppress(Exception):
                self._place(run, await creating)
                run.reisolate = False
        worktree = run.worktree
        if task is None or worktree is None:
            return
        if run.reisolate:  # it was never created again: nothing to clean
            task.worktree_path = task.worktree_branch = None
        else:
            try:
                outcome = await worktree.finish()
            except Exception as exc:  # fail closed: keep it, say so
                log.warning("worktree %s kept: clean-up failed: %s", worktree.path, exc)
                task.worktree_path, task.worktree_branch = str(worktree.path), worktree.branch
            else:
                task.worktree_path = str(outcome.path) if outcome.kept else None
                task.worktree_branch = outcome.branch if outcome.kept else None
        if run.transcript is not None:
            run.transcript.update_meta(worktree_path=task.worktree_path)

    async def _reisolate(self, run: AgentRun) -> None:
        """Create the worktree of a resumed agent again (its earlier one, unchanged, was
        removed), at the same place; refuse to run anywhere else."""
        old = run.worktree
        assert old is not None
        # shielded and kept on the run: a stop meanwhile does not leave a worktree that
        # nobody cleans up (`_clean_worktree` waits for it)
        run.creating = asyncio.ensure_future(create_worktree(old.parent_workdir, run.id))
        try:
            fresh = await asyncio.shield(run.creating)
        except WorktreeError as exc:
            raise RunEndedError(
                f"cannot resume in a git worktree again ({exc}); not run in your checkout"
            ) from None
        run.creating = None
        run.reisolate = False
        self._place(run, fresh)
        if run.transcript is not None:
            run.transcript.update_meta(
                worktree_path=str(fresh.path), worktree=WorktreeRecord(**fresh.fields())
            )

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
        if run is not None:
            run.wakeup.set()

    def _observe(self, run: AgentRun, event: object) -> None:
        task = run.task
        assert task is not None
        out = run.transcript
        record_timing(out, event)
        if out is not None:
            if isinstance(event, ToolUse):
                out.output(f"tool {event.description or event.name}")
            elif isinstance(event, ToolResult):
                mark = "error" if event.is_error else "ok"
                out.output(f"  -> {mark}: {event.content[:200]}")
            elif isinstance(event, Retrying):
                out.output(f"{event.summary} in {event.delay:.1f} s")
            elif isinstance(event, Compacted):
                out.output(event.line())
            elif isinstance(event, Stop):
                out.output(f"stopped: {event.reason} {event.error or ''}")
        self._update(task, event)

    def _rate_wait(self, run: AgentRun, seconds: float | None) -> None:
        """Show on the task row that its request waits for rate-limit room (pacer.py)."""
        task = run.task
        if task is None or task.done:
            return
        if seconds is not None:
            task.activity = wait_text(seconds)
        elif task.activity.startswith(RATE_WAIT):
            task.activity = ""
        else:
            return
        self.registry.changed(task)

    def _rate_waiting(self, agent_id: str | None) -> bool:
        run = self.runs.get(agent_id or "")
        return bool(run and run.task and run.task.activity.startswith(RATE_WAIT))

    def _update(self, task: Task, event: object) -> None:
        if isinstance(event, UsageReport):
            task.activity = ""
            task.usage = task.usage + event.usage
            task.cost_usd += event.cost_usd
            task.context_tokens = event.usage.total_input_tokens
        elif isinstance(event, Compacted):
            if event.error is None:
                task.compactions += 1
                task.context_tokens = event.after_tokens
        elif isinstance(event, ToolUse):
            task.tool_uses += 1
            task.current_tool = event.name
            task.current_input = event.description
        elif isinstance(event, ToolResult):
            task.current_tool = None
            task.current_input = ""
        elif isinstance(event, TextDelta):
            task.activity = ""
            task.preview = fold_text(task.preview, event)[-400:]
        elif isinstance(event, Retrying):
            task.retries += 1
            task.activity = event.summary
            task.preview = fold_text(task.preview, event)
        elif isinstance(event, AssistantMessage):
            task.activity = ""
            thought = "\n\n".join(
                str(b.get("thinking", "")) for b in event.content if b.get("type") == "thinking"
            ).strip()
            if thought:
                task.thinking = thought
        else:
            return
        self.registry.changed(task)

    # -- messaging and stopping --------------------------------------------------------------

    async def send(self, to: str, message: str) -> str:
        """Deliver `message` to a running agent, or resume a finished one with it (one this
        session does not hold, from its transcript)."""
        reply = self.deliver(to, message)
        if reply is None:
            return await self._revive(to, message)
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

    def deliver(self, to: str, message: str) -> str | None:
        """`send` to an agent this session holds, at once (None: it holds no such agent;
        `send` resumes it from disk)."""
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
        if not task.done and not run.stopping:
            run.inbox.append(message)
            run.wakeup.set()
            return f"Message queued for {task.name or task.id}; it arrives at its next step."
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
        self._renew_worktree(run)
        previous = task.status
        self.registry.restart(task)
        run.stop_reason = None
        run.stopping = False
        # messages it accepted while running but never read come first
        texts = [f"{MESSAGE_PREFIX}\n{m}" for m in run.inbox] + messages
        run.inbox.clear()
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

    def _renew_worktree(self, run: AgentRun) -> None:
        """Before a resume: the worktree it kept must still be there (else refuse); one that
        was removed unchanged is created again when the run starts."""
        worktree = run.worktree
        if worktree is None:
            return
        fresh = Worktree.from_fields(worktree.fields())  # its clean-up runs again at the end
        removed = False
        with contextlib.suppress(Exception):
            outcome = worktree.outcome
            removed = outcome is not None and not outcome.kept
        if not removed and not run.reisolate:
            _require_dir(fresh.path, (run.task.name if run.task else None) or run.id)
        run.reisolate = run.reisolate or removed
        run.worktree = fresh

    async def _revive(self, key: str, message: str) -> str:
        """Resume an agent this session does not hold, from its transcript on disk (read on
        a thread)."""
        store = self.store
        agent_id = await store.aagent_id_for(key) if store is not None else None
        if agent_id is None or store is None or self.main is None:
            self.registry.get(key)  # raises the "No task ..." error with the known tasks
            raise UsageError(f"No transcript found for agent {key!r}.")
        loaded = await store.aload(agent_id)
        definitions = await self.definitions() if loaded.meta.kind != "fork" else {}
        reply = self.deliver(agent_id, message)  # revived meanwhile by another message
        if reply is not None:
            return reply
        meta = loaded.meta
        definition = None
        if meta.kind != "fork":
            definition = definitions.get(meta.kind) or definitions["general-purpose"]
        run, note = self.restore(loaded, definition, message=message)
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
    ) -> tuple[AgentRun, str]:
        """Bring back an agent this session does not hold from its transcript and start it:
        with `message` as its next turn, or (None) answering the request its history ends
        with. A fork gets the parent's configuration, a named agent `definition`'s; `client`
        wraps the model client. Returns the run and a note for the caller ("" when none)."""
        assert self.main is not None
        meta = loaded.meta
        agent_id = meta.agent_id
        if definition is None:
            config = replace(self._fork_config(self.main, agent_id, None), max_turns=FORK_MAX_TURNS)
        else:
            config = self._named_config(self.main, definition, agent_id, meta.model or None)
        if client is not None:
            config = replace(config, client=client(config.client))
        worktree = None
        if meta.worktree is not None:
            worktree = Worktree.from_fields(meta.worktree.model_dump())
            if meta.worktree_path is not None:
                _require_dir(Path(meta.worktree_path), meta.name or meta.agent_id)
        history = loaded.messages
        state = LoopState()
        if message is not None:
            ends = [i for i, m in enumerate(history) if m["role"] == "user"]
            state.previous_end = ends[-1] if ends else None
        task = Task(
            id=agent_id,
            kind=meta.kind,
            description=meta.description,
            owner=self.registry.recipient(meta.owner),
            name=meta.name,
        )
        run = AgentRun(
            agent_id,
            config,
            history,
            state,
            task,
            is_fork=definition is None,
            definition=definition,
        )
        if worktree is not None:  # where it worked, never the checkout
            self._place(run, worktree)
            run.reisolate = meta.worktree_path is None
        changed = meta.cache_mismatches(system=config.system, tools=config.tools.specs())
        self._record(run, None, 0)
        if message is not None:
            state.append(history, {"role": "user", "content": [{"type": "text", "text": message}]})
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
            await self._end(run, "killed", result=_partial(run))
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
            self._spawn(self._end(run, "killed", result=_partial(run), error=reason))

    async def stop_all(self) -> list[Task]:
        """Stop every running task at the user's request: each ends `killed` with one
        notification, which is not handed to any model (invariant 43). Returns the tasks it
        stopped (not those that ended by themselves meanwhile: they report as usual)."""

        async def one(task: Task) -> Task | None:
            try:
                return await self.stop(task.id, quiet=True)
            except UsageError:  # it ended by itself meanwhile
                await task.wait()
                return None

        stopped = await asyncio.gather(*(one(t) for t in self.registry.running()))
        return [t for t in stopped if t is not None]


def _require_dir(path: Path, name: str) -> None:
    """Refuse a resume whose kept worktree is gone (it would run in the checkout instead)."""
    if path.is_dir():
        return
    raise UsageError(
        f"Agent {name} worked in the git worktree {path}, which no longer exists; it is not "
        "resumed (it would run in your checkout instead). Start a new agent."
    )


def _kill_groups(groups: set[int]) -> None:
    """Kill the process groups an agent's shell commands left running (`cmd &`)."""
    killpg = getattr(os, "killpg", None)
    while groups:
        pgid = groups.pop()
        if killpg is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                killpg(pgid, signal.SIGKILL)
