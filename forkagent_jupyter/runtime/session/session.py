"""`Session`: the parent conversation and the public async API.

A Session owns the history (API-shaped dicts), the model client, the tools and the permission
gate, and the usage totals. `ask()` runs one turn to completion; `stream()` yields the same
turn's events for a UI. One turn runs at a time; a second `ask()` waits for the first.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

from ...messages_api.usage import Usage
from ..batch.fan_out import BatchResults, BatchRun, FanOut, Notify, fan_out
from ..config.agent_definitions import AgentDefinition, AgentScan, scan_agents
from ..config.hooks import Hooks
from ..errors import ConfigError, UsageError
from ..events import Compacted, LoopEvent
from ..executors import ComputePlane, WorkerNamespace
from ..executors.base import Output
from ..executors.memory import Rollup, WorkerProcess
from ..loop.compaction import CompactPolicy, last_turns, window_for
from ..loop.config import LoopState
from ..loop.prompt_size import PromptSize, prompt_size
from ..loop.thinking import with_budget
from ..mcp.servers import McpServers
from ..model.backends import Backend, select_backend
from ..model.budget import CostBudget
from ..model.client import CacheTTL, ModelClient
from ..model.pacer import RateLimits
from ..model.retry import StreamRetry
from ..tasks.notifications import CommandQueue
from ..tasks.registry import Task, TaskRegistry, task_description
from ..tools.services import ToolServices
from ..tools.shells import ShellRegistry
from ..transcripts.store import AgentMeta, TranscriptStore
from ..workers.workers import AgentRun, Workers
from .agent_setup import AgentContexts, parent_tools
from .compute_settings import (
    apply_compute,
    compute_follows,
    process_memory_sampled,
    worker_memory_sampled,
)
from .live_settings import change_settings
from .options import SessionOptions, Setting
from .parent_turns import ParentTurns
from .prompts import default_system_prompt
from .responder import Responder
from .spending import Spending
from .turn_lock import TurnLock
from .turn_result import STOPPED_BY_USER, AutoTurn, ToolCall, Turn, fold_turn

__all__ = [
    "STOPPED_BY_USER",
    "AutoTurn",
    "Backend",
    "Session",
    "SessionOptions",
    "Setting",
    "ToolCall",
    "Turn",
    "fold_turn",
]


class Session:
    """The parent conversation and its background workers. See DESIGN.md, "Public contract".

    Everything runs on the event loop that calls it; blocking work (tools, file I/O) goes to
    threads. Workers keep running between calls; `idle()` waits for all of them and for the
    parent's answers to their notifications.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        options: SessionOptions | None = None,
        **settings: Any,
    ) -> None:
        """`settings` are `SessionOptions` fields by name (`api_key`, `backend`,
        `permission_mode`, `workdir`, `system_prompt`, `auto_respond`, `max_cost_usd`...);
        given with `options`, they override its values."""
        if model is not None:
            settings["model"] = model
        self.options = o = SessionOptions.of(options, settings)
        self.compaction = CompactPolicy(
            compact_at=o.compact_at,
            keep_turns=o.compact_keep_turns,
            window=o.context_window,
            task_lines=self._task_lines,
        )
        self.stream_retry = StreamRetry(retries=o.stream_retries, base_delay=o.stream_retry_delay)
        self.rate_limits = RateLimits()  # one pacer per model for every request (model/pacer.py)
        self.namespace: dict[str, Any] = o.namespace if o.namespace is not None else {}
        self.compute = ComputePlane(self.namespace)
        self.compute.on_memory = lambda a, mb: worker_memory_sampled(self.registry, a, mb)
        self.compute.on_process_memory = lambda a, r: process_memory_sampled(self.registry, a, r)
        apply_compute(o, self.compute)  # first: a Dask cluster that cannot be used fails before I/O
        self.services = replace(o.services) if o.services is not None else ToolServices()
        if self.services.shells is None:
            self.services.shells = ShellRegistry()  # Bash in the background
        self.shells = self.services.shells
        self.backend: Backend | Literal["custom"] = "custom"
        self.client: ModelClient
        if o.client is not None:
            self.client = o.client
        else:
            chosen = select_backend(
                o.backend, model=o.model, api_key=o.api_key, base_url=o.base_url
            )
            self.backend, self.client = chosen.backend, chosen.client
        self.workdir = Path(o.workdir or Path.cwd()).resolve()
        if not self.workdir.is_dir():
            raise ConfigError(f"workdir {str(self.workdir)!r} is not a directory.")
        self.home = Path(o.home).resolve() if o.home is not None else Path.home()
        self.mcp = McpServers(
            self.workdir,
            self.home,
            startup_timeout=o.mcp_startup_timeout,
            call_timeout=o.mcp_call_timeout,
        )
        """The MCP servers (`mcp/servers.py`): started at the first turn, closed with the
        session."""
        self._make_parts(o)
        self._start_main()

    def _make_parts(self, o: SessionOptions) -> None:
        """The session's tools and collaborators, its task registry and its workers."""
        self.tools, self.named_tools, self.gate = parent_tools(o)
        """`named_tools`: only for a named agent whose file names them (`parent_tools`)."""
        self._default_prompt = default_system_prompt(self.workdir)
        self.session_id = uuid.uuid4().hex[:12]
        self.hooks = Hooks([], workdir=self.workdir, session_id=self.session_id)
        """The settings files' hooks (config/hooks.py), read again at each parent turn."""
        self.offline_batches: tuple[Any, Callable[[], Awaitable[None]]] | None = None
        """An offline session's Message Batches service (batch.batch_sdk), once used."""
        self.store: TranscriptStore | None = None
        if o.transcripts:
            root = o.transcripts if not isinstance(o.transcripts, bool) else None
            root = Path(root or self.workdir / ".forkagent" / "sessions")
            self.store = TranscriptStore(root, self.session_id)
        self._hook_jobs: set[asyncio.Task[Any]] = set()
        self._lock = TurnLock()  # one parent turn at a time; prompts before automatic answers
        self._changed = asyncio.Event()  # set whenever the session may have become idle
        self.spending = Spending(self, changed=self._changed)
        """The session's totals and its budget's enforcement (`spending.py`)."""
        self.contexts = AgentContexts(self, self.spending.web_usage)
        """Each agent's tool context, services and config (`agent_setup.py`)."""
        self.parent = ParentTurns(
            self, lock=self._lock, changed=self._changed, on_cost=self.spending.enforce
        )
        """The parent conversation's turns and what they cost (`parent_turns.py`)."""
        self.responder = Responder(
            self,
            turn=self.parent.turn,
            lock=self._lock,
            changed=self._changed,
            jobs=self._hook_jobs,
        )
        """The parent's answers to its notifications (`responder.py`)."""
        self.queue = CommandQueue(on_enqueue=self.responder.on_command)
        self.registry: TaskRegistry = TaskRegistry(self.queue, base=self.workdir)
        self.shells.report_to(
            self.queue, recipient=self.registry.recipient, files=self.store, base=self.workdir
        )
        self.mcp.on_note = self.registry.note
        self.budget = CostBudget(lambda: self.cost_usd, o.max_cost_usd)
        self.workers = Workers(
            registry=self.registry,
            queue=self.queue,
            definitions=self.agent_scan,
            named_config=self.contexts.named_config,
            fork_config=self.contexts.fork_config,
            stagger=o.stagger_forks,
            forking=o.forking,
            store=self.store,
            auto_background_after=o.auto_background_after,
        )

    def _start_main(self) -> None:
        """The parent's own run, its transcript, and the session's bookkeeping."""
        self.main = AgentRun("main", self.contexts.parent_config(), [], LoopState())
        self.main.config.ctx.services.agent_run = self.main
        self.workers.main = self.main
        if self.store is not None:
            self.main.transcript = self.store.open(
                AgentMeta(agent_id="main", kind="main", model=self.model)
            )
            self.main.state.on_message = self.main.transcript.append_message
            self.main.state.on_history_replaced = self.parent.history_replaced
            main_transcript = self.main.transcript
            self.gate.recorder = lambda e: main_transcript.append_event("permission", e)
        self.batches: dict[str, BatchRun] = {}  # batched fan-outs by batch id (batch/fan_out.py)
        self.registry.subscribe(lambda _task: self._changed.set())
        self.registry.subscribe(partial(compute_follows, self.compute))
        self.registry.subscribe(lambda _task: self.spending.enforce())
        self.registry.subscribe(partial(self.mcp.follow, self._hook_jobs))

    # -- settings ------------------------------------------------------------------------

    model = Setting[str]()
    auto_respond = Setting[bool]()
    max_turns = Setting[int]()
    max_tokens = Setting[int]()
    cache_ttl = Setting[CacheTTL]()
    forking = Setting[bool]()
    """Whether an Agent call without subagent_type forks the caller (on: every agent the
    model starts runs in the background and the Agent tool does not offer
    run_in_background) or starts the general-purpose agent (off: a named agent answers in
    the call unless asked or defined to run in the background). From the next request on;
    the changed tool definition is a new prompt-cache prefix."""
    thinking = Setting[dict[str, Any] | None]()
    """The API's `thinking` parameter of the parent's requests (None: no extended thinking).
    Set it to a budget in tokens (1024 or more, added to max_tokens), "adaptive",
    None/0/"off", or the API's dict; from the next turn on. Forks send the parent's exact
    parameter; named agents follow their definition's `thinking`."""
    auto_background_after = Setting[float | None]()
    """Seconds the model waits for a synchronous agent (forking off) before the agent moves
    to the background by itself (None or 0: no limit); live."""
    stream_retries = Setting[int]()
    """How many times a response that broke off mid-stream is sent again before the run
    fails (every agent of the session, running workers too, from their next retry)."""
    compact_at = Setting[float | None]()
    """The fraction of the context window (prompt + max_tokens) at which a conversation is
    compacted before its next request (None: never); every agent, from its next request."""
    large_prompt_tokens = Setting[int | None]()
    """A prompt, directive or message of this many tokens or more is said in one line (its
    size and cost, on stderr) before it is sent (None: never); `check_prompt`."""
    max_cost_usd = Setting[float | None]()
    """The session's cost budget in USD (None: none); see `model/budget.py`. Raising it lets work
    go on: notifications that waited are read with the next turn."""

    @property
    def system_prompt(self) -> str:
        """The parent's system prompt (None or "" assigned: the built-in one); from the next
        turn on."""
        return self.options.system_prompt or self._default_prompt

    @system_prompt.setter
    def system_prompt(self, value: str | None) -> None:
        self.configure(system_prompt=value)

    def configure(self, options: SessionOptions | None = None, /, **changes: Any) -> None:
        """Change settings while the session runs: by name (`configure(model="...",
        max_workers=4)`) or as a whole (`configure(options)`: the fields that differ). Each
        applies at once to what holds it (running workers included, see `live_settings.py`);
        a value refused - unknown name, fixed at the start, out of range, a Dask cluster that
        cannot be reached - raises one UsageError (or ConfigError) and that setting and the
        ones after it keep their values."""
        change_settings(self, options, changes)

    # -- configuration -------------------------------------------------------------------

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The parent conversation, as API message dicts."""
        return self.main.history

    @property
    def context_tokens(self) -> int:
        """The parent's last request's prompt size in tokens (0 before the first)."""
        return self.main.state.context_tokens

    @property
    def context_window(self) -> int:
        """The parent model's context window in tokens."""
        return window_for(self.model, self.compaction)

    def _task_lines(self, agent_id: str) -> list[str]:
        return [
            f"- {t.id}{f' ({t.name})' if t.name else ''}: {t.status} - {t.description}"
            for t in self.registry
            if t.owner == agent_id
        ]

    def agent_scan(self) -> AgentScan:
        """The agent files (`scan_agents`): user and project, `.claude` and `.forkagent`,
        subfolders included; bad files beside the good ones, never raising."""
        return scan_agents(self.workdir, self.home)

    def agent_definitions(self) -> dict[str, AgentDefinition]:
        """Named agents that load: built-in, then user, then project
        (`config/agent_definitions.py`)."""
        return self.agent_scan().agents

    # -- listeners -----------------------------------------------------------------------

    def subscribe(self, listener: Callable[[str, LoopEvent], None]) -> Callable[[], None]:
        """Call `listener(origin, event)` for events of turns nobody is iterating: the
        parent's automatic answers to notifications (origin "notification")."""
        return self.responder.subscribe(listener)

    @property
    def auto_turns(self) -> list[AutoTurn]:
        """The parent's answers to notifications so far (and the tasks the user stopped)."""
        return self.responder.auto_turns

    @property
    def on_auto_turn(self) -> Callable[[AutoTurn], None] | None:
        """Called with each `AutoTurn` as it is made (the host shows it)."""
        return self.responder.on_auto_turn

    @on_auto_turn.setter
    def on_auto_turn(self, listener: Callable[[AutoTurn], None] | None) -> None:
        self.responder.on_auto_turn = listener

    # -- turns ---------------------------------------------------------------------------

    def stream(self, prompt: str, *, size_said: bool = False) -> AsyncIterator[LoopEvent]:
        """Run one parent turn, yielding its events. It goes before an automatic answer to
        notifications that waits (`hold_answers`). Pending notifications are delivered with
        the prompt (before it), so none is lost or read twice; with `auto_respond` on, a
        task's end is left to the automatic answer that follows the turn. A prompt that
        cannot fit the context window is refused (a UsageError, nothing sent), a large one
        said first (`check_prompt`); `size_said`: the caller has said its line already (the
        notebook does, above the answer)."""
        return self.parent.stream(prompt, size_said=size_said)

    def hold_answers(self, hold: Callable[[], bool] | None) -> None:
        """Let the host hold the automatic answer to notifications back while `hold()` is
        True: the notebook does so while the person's next `%%agent` cell is on its way, not
        yet waiting for its turn here. Looked at again every few hundredths of a second
        while an answer waits, and at `answers_may_go()`."""
        self._lock.hold_later = hold
        self._lock.wake()

    def answers_may_go(self) -> None:
        """The host's hold may have ended (`hold_answers`): look at it now."""
        self._lock.wake()

    async def load_settings(self) -> dict[str, Any]:
        """Read the settings files again (on a thread) and apply their rules, default mode
        and additional directories (`config/settings.py`); the rules in force, as
        `PermissionGate.summary` gives them. Done at the start of every parent turn."""
        return await self.parent.load_settings()

    async def ask(self, prompt: str) -> Turn:
        """Run one parent turn to completion and return its outcome."""
        return await fold_turn(self.stream(prompt))

    def reset(self) -> None:
        """Start a new parent conversation (workers keep running and report to it)."""
        self.parent.reset()

    async def compact(self, keep_turns: int | None = None) -> Compacted:
        """Compact the parent conversation now: a fork of it writes a summary (reading the
        history from the prompt cache), and the history becomes the summary plus the last
        `keep_turns` turns (default `compact_keep_turns`). Waits for a turn in flight."""
        return await self.parent.compact(keep_turns)

    async def resume(self, session_id: str) -> int:
        """Continue the parent conversation of an earlier session (by its id, under the same
        transcripts folder) as it stood at its end, compactions applied; returns the number
        of messages. Its workers are resumed one by one with `send`."""
        return await self.parent.resume(session_id)

    def prompt_size(
        self,
        text: str,
        *,
        to: str | None = None,
        fork: bool = False,
        turns: int | None = None,
    ) -> PromptSize:
        """How big `text` is where it would go, and what it costs (`loop/prompt_size.py`):
        the parent's next prompt (default), a fork's directive (`fork`, inheriting the last
        `turns` turns), or a message to the agent `to` (one this session does not hold is
        measured against an empty conversation: its transcript is not read for this)."""
        if to is not None:
            task = self.registry.find(to)
            run = self.workers.runs.get(task.id) if task is not None else None
            if task is not None and run is not None:
                holder = f"{task.name or task.id}'s conversation"
                return prompt_size(
                    "message", text, run.config, run.state, run.history, holder=holder
                )
        main = self.main
        cfg = replace(
            main.config,
            model=self.model,
            max_tokens=with_budget(self.max_tokens, self.thinking),
            cache_ttl=self.cache_ttl,
        )
        if to is not None:
            return prompt_size("message", text, cfg, LoopState(), [], holder="its conversation")
        if not fork:
            return prompt_size("prompt", text, cfg, main.state, main.history)
        history, state = main.history, main.state
        if turns is not None:  # a window of the history: counted, not predicted from the last
            history = last_turns(history, turns)
            state = LoopState(token_ratio=state.token_ratio)
        return prompt_size(
            "directive", text, cfg, state, history, holder="the worker's conversation"
        )

    def check_prompt(
        self,
        text: str,
        *,
        to: str | None = None,
        fork: bool = False,
        turns: int | None = None,
    ) -> str | None:
        """`prompt_size`'s verdict before `text` is sent: a UsageError (one line: its size,
        the context window, what to do instead) when it cannot fit the context window
        (`PromptSize.fits`); its size and cost in one line when it has `large_prompt_tokens`
        tokens or more; else None. `ask`, `fork` and `send` check this way and print that
        line on stderr."""
        size = self.prompt_size(text, to=to, fork=fork, turns=turns)
        return size.checked(self.options.large_prompt_tokens)

    def say_prompt_size(self, text: str, **where: Any) -> None:
        """`check_prompt`, its line (if any) printed on stderr."""
        line = self.check_prompt(text, **where)
        if line is not None:
            print(line, file=sys.stderr)

    # -- background work -----------------------------------------------------------------

    async def fork(
        self,
        directive: str,
        *,
        name: str | None = None,
        namespace: WorkerNamespace | None = None,
        turns: int | None = None,
    ) -> Task:
        """Fork the parent conversation into a background worker (returns at once). Its
        Python runs in its own process, from a snapshot of the namespace taken now; with
        `namespace="shared"`, on a thread in the namespace itself (the session's default is
        its `worker_namespace`). With `turns`, the worker inherits only the last `turns`
        turns of the conversation (the system prompt and tools always)."""
        return self.fork_now(directive, name=name, namespace=namespace, turns=turns)

    def fork_now(
        self,
        directive: str,
        *,
        name: str | None = None,
        namespace: WorkerNamespace | None = None,
        turns: int | None = None,
    ) -> Task:
        """`fork` for callers that cannot await (the notebook's `%fork`): the same fork, the
        task returned at once. A name a running task already has is refused (the new
        worker would hide it from `send`, `stop` and `wait`), and so is another task's id; a
        finished task's name moves to the new worker (`TaskRegistry.register`)."""
        self.budget.check("The fork was")
        if name is not None:
            if not name or len(name) > 64 or any(c.isspace() or c in "'\"`" for c in name):
                shown = name if len(name) <= 40 else name[:37] + "..."
                raise UsageError(
                    f"a worker's name is one word of at most 64 characters, without quotes, "
                    f"not {shown!r}."
                )
            problem = self.registry.name_problem(name)
            if problem is not None:
                holder = self.registry.holder(name)
                stop = f", or stop {name} first" if holder and not holder.done else ""
                raise UsageError(f"{problem}: give this worker another name{stop}.")
        self.say_prompt_size(directive, fork=True, turns=turns)
        return self.workers.fork(
            self.main,
            directive,
            description=task_description(directive),
            name=name,
            namespace=namespace,
            turns=turns,
        )

    async def fan_out(
        self,
        directives: Sequence[str],
        *,
        batch: bool = False,
        names: Sequence[str | None] | None = None,
        items: Sequence[Any] | None = None,
        poll_interval: float = 30.0,
        notify: Notify = "digest",
        prewarm: bool = True,
    ) -> FanOut:
        """One fork per directive; `batch=True` sends their first requests as one Message
        Batch (half price; see `batch/fan_out.py` for caching, notifications and tools)."""
        self.budget.check("The fan-out was")
        return await fan_out(
            self,
            directives,
            batch=batch,
            names=names,
            items=items,
            poll_interval=poll_interval,
            notify=notify,
            prewarm=prewarm,
        )

    def batch_results(self, batch_id: str) -> BatchResults:
        """One row per fork of a batched fan-out (`to_dataframe()` for pandas)."""
        run = self.batches.get(batch_id)
        if run is None:
            known = ", ".join(sorted({r.key for r in self.batches.values()})) or "none yet"
            raise UsageError(f"No batch {batch_id!r} in this session. Known batches: {known}.")
        return run.results()

    async def pull(self, task_id: str, *names: str, trust: bool = False) -> dict[str, Any]:
        """Copies of the values a worker holds under these names: plain data, arrays and
        frames, decoded without running code; other objects only with `trust` (unpickled:
        that runs code the worker chose). A PullError says which name cannot come back and
        why."""
        if not names:
            raise UsageError("Name at least one variable to pull.")
        task = self.registry.get(task_id)
        return await self.compute.pull(task.id, names, trust)

    # -- worker processes (the compute plane, for hosts) --------------------------------

    def namespace_changed(self) -> None:
        """The host's code may have changed the namespace: the next fork takes a new
        snapshot (with `reuse_snapshots`, forks until then share one)."""
        self.compute.namespace_changed()

    def on_worker_output(self, listener: Callable[[str, Output], None]) -> None:
        """Call `listener(agent_id, output)` with what a worker's code prints or displays."""
        self.compute.on_output = listener

    def use_dask(self, client: Any) -> None:
        """Isolated workers' code runs on the Dask cluster of this `distributed.Client`
        from the next worker on (a ConfigError when it cannot be used)."""
        self.compute.use_dask(client=client)
        self.options = self.options.model_copy(update={"executor": "dask", "dask_address": ""})

    def free_process(self, task_id: str) -> bool:
        """End the process a finished worker keeps for pulls (False: it has none)."""
        return self.compute.free(task_id)

    async def process_memory(self) -> tuple[Rollup | None, list[WorkerProcess]]:
        """The kernel's memory and each live worker process's (`executors/memory.py`)."""
        return await self.compute.process_memory()

    def no_process(self, task_id: str) -> str:
        """Why this task has no live worker process, in a few words."""
        return self.compute.no_process(task_id)

    async def send(self, to: str, message: str) -> str:
        """Message a running worker (queued) or a finished one (resumed; one of an earlier
        session from its transcript, read on a thread). One that cannot fit the agent's
        context window is refused, a large one said first (`check_prompt`)."""
        self.budget.check("The message was")
        self.say_prompt_size(message, to=to)
        return await self.workers.send(to, message)

    def send_now(self, to: str, message: str) -> str | None:
        """`send` for callers that cannot await, to an agent this session holds: its reply,
        or None when the agent has to be resumed from disk (then `await send(...)`)."""
        self.budget.check("The message was")
        if self.registry.find(to) is not None:  # else `send` measures it, once
            self.say_prompt_size(message, to=to)
        return self.workers.deliver(to, message)

    def background(self, task_id: str) -> Task:
        """Move a synchronous named agent to the background: the parent's Agent call that
        waits for it returns at once, and its result comes later as a notification."""
        return self.workers.background(task_id)

    async def stop(self, task_id: str) -> Task:
        return await self.workers.stop(task_id)

    def stop_now(self, task_id: str) -> None:
        """`stop` for callers that cannot await (the notebook's `%stop`): the task is killed at
        once; its clean-up and notification follow on the loop."""
        self.workers.kill(task_id, None)

    @property
    def teams(self) -> dict[str, list[Task]]:
        """Each team's members (their tasks, in the order they joined), by team name."""
        teams = self.workers.teams
        return {name: teams.members(team) for name, team in teams.teams.items()}

    def team(self, key: str) -> tuple[str, list[Task]]:
        """A team's name and members (`key`: its name, or "" for the team the parent leads
        now); a UsageError naming the teams."""
        found = self.workers.teams.resolve(key)
        return found.name, self.workers.teams.members(found)

    def send_team(self, key: str, message: str) -> str:
        """The person's message to every running member of a team (`key` as for `team`);
        what it reached."""
        self.budget.check("The message was")
        teams = self.workers.teams
        return teams.broadcast(None, teams.resolve(key), message, None)

    async def stop_team(self, key: str) -> list[Task]:
        """Shut a team down at the person's request (`key` as for `team`): its running
        members are stopped like `stop_all`'s tasks (shown, not handed to the model)."""
        members = [t.id for t in self.team(key)[1] if not t.done]
        stopped = await self.workers.stop_all(members)
        self.responder.stopped_by_user(stopped)
        return stopped

    async def stop_all(self) -> list[Task]:
        """Stop every running task at the user's request. Their notifications are not
        handed to the parent model (it did not ask; invariant 43) but still go to the host
        (`on_auto_turn`, shown with no answer), so the notebook shows how each ended."""
        stopped = await self.workers.stop_all()
        self.responder.stopped_by_user(stopped)
        return stopped

    async def wait(self, *task_ids: str, timeout: float | None = None) -> list[Task]:
        """Wait for the given tasks (default: every task of the session) to end; a teammate,
        which does not end by itself, until it is idle.

        Tasks that already ended are returned as they are, so a caller that starts work and
        then waits sees every task even when some finished before the wait began.
        """
        tasks = [self.registry.get(t) for t in task_ids] or list(self.registry)
        waiting = asyncio.gather(*(self._ended_or_idle(t) for t in tasks))
        await asyncio.wait_for(waiting, timeout)
        if self.store is not None:  # their transcripts and output files are on disk
            await self.store.aflush()
        return tasks

    async def _ended_or_idle(self, task: Task) -> None:
        """Until `task` has ended, or (a teammate, which does not end by itself) is idle."""
        if task.team is None:
            await task.wait()
            return
        while not (task.settled or task.idle):
            self._changed.clear()
            if task.settled or task.idle:
                break
            await self._changed.wait()

    @property
    def tasks(self) -> list[Task]:
        return list(self.registry)

    def task(self, key: str) -> Task:
        """The task with this id or name (a UsageError naming the known ones otherwise)."""
        return self.registry.get(key)

    def find_task(self, key: str) -> Task | None:
        """The task with this id or name, or None."""
        return self.registry.find(key)

    def running(self) -> list[Task]:
        return self.registry.running()

    def on_task(self, listener: Callable[[Task], None]) -> Callable[[], None]:
        """Call `listener(task)` whenever a task starts or changes; returns the unsubscribe."""
        return self.registry.subscribe(listener)

    def history(self, task_id: str) -> list[dict[str, Any]]:
        """A worker's conversation so far, as API message dicts ([] for an unknown id)."""
        run = self.workers.runs.get(task_id)
        return run.history if run is not None else []

    def _busy(self) -> bool:
        if self._lock.locked() or not all(t.settled or t.idle for t in self.registry):
            return True
        return self.responder.busy()

    async def idle(self) -> None:
        """Wait until no task runs (but idle teammates), no notification waits and no parent
        turn is in flight."""
        while self._busy():
            self._changed.clear()
            if not self._busy():
                break
            await self._changed.wait()

    # -- totals and budget ---------------------------------------------------------------

    @property
    def usage(self) -> Usage:
        """Tokens of the parent conversation and of every worker."""
        return self.spending.usage

    @property
    def cost_usd(self) -> float:
        return self.spending.cost_usd

    def add_parent_cost(self, cost_usd: float) -> None:
        """Charge the parent conversation for a request made on its behalf outside its turns
        (a batch's cache pre-warm)."""
        self.parent.cost += cost_usd

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the workers (no automatic answer to their last notifications) and close the
        model client once nothing uses it."""
        self.options = self.options.changed(auto_respond=False)
        for run in {id(r): r for r in self.batches.values()}.values():
            await run.close()
        if self.offline_batches is not None:
            _sdk, stop = self.offline_batches
            self.offline_batches = None
            await stop()
        await self.workers.stop_all()
        await self.mcp.aclose()
        await self.shells.aclose()
        await self.responder.aclose()
        if self._hook_jobs:  # Notification hooks still running: a moment, then stopped
            _done, late = await asyncio.wait(set(self._hook_jobs), timeout=5)
            for job in late:
                job.cancel()
            if late:
                await asyncio.wait(late)
        await self.compute.aclose()
        if self.store is not None:
            await self.store.aclose()
        await self.client.aclose()
