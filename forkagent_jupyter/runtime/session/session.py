"""`Session`: the parent conversation and the public async API.

A Session owns the history (API-shaped dicts), the model client, the tools and the permission
gate, and the usage totals. `ask()` runs one turn to completion; `parent.stream()` yields the
same turn's events for a UI. One turn runs at a time; a second `ask()` waits for the first.

The session's parts are made in `parts.py`, each given the parts it uses; the session is the
public contract (DESIGN.md) over them, and a host reaches a part it needs as a documented
sub-object (`parent`, `responder`, `registry`, `workers`, `compute`, `contexts`, ...).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar, overload

from ...messages_api.usage import Usage
from ..batch.fan_out import BatchResults, FanOut, Notify, fan_out
from ..config.agent_definitions import AgentDefinition, AgentScan, scan_agents
from ..config.commands import CommandScan, scan_commands
from ..config.trust import describe as describe_trust
from ..config.trust import folder_trust, record_trust
from ..config.trust_asks import folder_asks
from ..errors import ConfigError, UsageError
from ..events import Compacted
from ..executors import ComputePlane, WorkerNamespace
from ..executors.cluster.shipping import DaskClient
from ..history import Message
from ..loop.compaction import CompactPolicy, last_turns, window_for
from ..loop.config import LoopState
from ..loop.prompt_size import PromptSize, prompt_size
from ..loop.thinking import with_budget
from ..mcp.servers import McpServers
from ..model.backends import Backend, select_backend
from ..model.client import CacheTTL, ModelClient
from ..model.pacer import RateLimits
from ..model.retry import StreamRetry
from ..tasks.registry import Task, TaskRegistry, task_description
from ..tools.services import ToolServices
from ..tools.shells import ShellRegistry
from ..transcripts.earlier import InterruptedAgent, ainterrupted_agents
from .compute_settings import (
    apply_compute,
    process_memory_sampled,
    worker_memory_sampled,
)
from .live_settings import requested_changes
from .options import SessionOptions
from .parts import make_parts
from .turns.turn_result import STOPPED_BY_USER, AutoTurn, ToolCall, Turn, fold_turn

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


T = TypeVar("T")


class Setting(Generic[T]):
    """An attribute of a Session that is one of its `options`: read from them, and assigned
    through `configure` (checked, then applied at once)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> Setting[T]: ...
    @overload
    def __get__(self, obj: Session, owner: type) -> T: ...
    def __get__(self, obj: Session | None, owner: type) -> Setting[T] | T:
        if obj is None:
            return self
        value: T = getattr(obj.options, self.name)
        return value

    def __set__(self, obj: Session, value: object) -> None:
        obj.configure(**{self.name: value})


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
        **settings: object,
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
        self.mcp.trusted = o.trusted
        """The MCP servers (`mcp/servers.py`): started at the first turn, closed with the
        session."""
        p = make_parts(
            o,
            options=lambda: self.options,
            client=lambda: self.client,
            cost=lambda: self.cost_usd,
            backend=self.backend,
            workdir=self.workdir,
            home=self.home,
            compute=self.compute,
            services=self.services,
            shells=self.shells,
            mcp=self.mcp,
            rate_limits=self.rate_limits,
            stream_retry=self.stream_retry,
            compaction=self.compaction,
            check_prompt=lambda text: self.check_prompt(text),
        )
        self.session_id = p.session_id
        self.store = p.store
        self._interrupted: list[InterruptedAgent] | None = None  # see `interrupted`
        self._hook_jobs = p.hook_jobs
        self._lock = p.lock
        self._changed = p.changed
        self.budget = p.budget
        self.queue = p.queue
        self.registry: TaskRegistry = p.registry
        self.contexts = p.contexts
        """Each agent's tool context, services and config, and the parent's tools (`tools`),
        the settings files' hooks (`hooks`) and the permission gate (`agent_setup.py`)."""
        self.gate = p.contexts.gate
        self.named_tools = p.contexts.named_tools
        """Only for a named agent whose file names them (`parent_tools`)."""
        self.workers = p.workers
        self.main = p.main
        """The parent's own run: its history (`messages`), config, state and transcript."""
        self.responder = p.responder
        """The parent's answers to its notifications (`auto_turns`, `on_auto_turn`)."""
        self.parent = p.parent
        """The parent conversation's turns (`stream`, `load_settings`, `reset`) and what
        they cost."""
        self.spending = p.spending
        self.live_settings = p.live_settings
        self.batches = p.batches
        """Batched fan-outs by batch id (`batch/fan_out.py`)."""

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
    trusted = Setting[bool | None]()
    """Whether the work directory's own files may grant (`config/trust.py`): None as
    `~/.claude.json` records it; True or False for this session only. From the next turn."""
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
        return self.options.system_prompt or self.contexts.default_prompt

    @system_prompt.setter
    def system_prompt(self, value: str | None) -> None:
        self.configure(system_prompt=value)

    def configure(self, options: SessionOptions | None = None, /, **changes: object) -> None:
        """Change settings while the session runs: by name (`configure(model="...",
        max_workers=4)`) or as a whole (`configure(options)`: the fields that differ). Each
        applies at once to what holds it (running workers included, see `live_settings.py`);
        a value refused - unknown name, fixed at the start, out of range, a Dask cluster that
        cannot be reached - raises one UsageError (or ConfigError) and that setting and the
        ones after it keep their values."""
        for name, value in requested_changes(self.options, options, changes).items():
            before = self.options
            self.options = before.changed(**{name: value})
            if getattr(self.options, name) == getattr(before, name) and name != "permission_mode":
                continue  # the mode in force may be the settings files' (`defaultMode`)
            try:
                self.live_settings.apply(self.options, name)
            except Exception:
                self.options = before
                raise

    # -- configuration -------------------------------------------------------------------

    @property
    def messages(self) -> list[Message]:
        """The parent conversation, as API message dicts."""
        return self.main.history

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

    async def commands(self) -> CommandScan:
        """The slash commands and skills a prompt `/name args` runs (`config/commands.py`):
        user and project, `.claude` and `.forkagent`, read now on a thread; the files that
        give none and the names given twice beside them (`describe_commands` shows it)."""
        return await asyncio.to_thread(scan_commands, self.workdir, self.home)

    # -- turns ---------------------------------------------------------------------------

    def hold_answers(self, hold: Callable[[], bool] | None) -> None:
        """Let the host hold the automatic answer to notifications back while `hold()` is
        True: the notebook does so while the person's next `%%agent` cell is on its way, not
        yet waiting for its turn here. Looked at again every few hundredths of a second
        while an answer waits, and whenever `parent.lock.wake()` says the hold may have
        ended."""
        self._lock.hold_later = hold
        self._lock.wake()

    async def trust(self) -> str:
        """Record in `~/.claude.json` that the person trusts the work directory, as Claude
        Code does (`config/trust.py`): what its files grant applies from the next turn (a
        project MCP server it unlocks starts at the next use). The line that says so;
        ConfigError (one line) when the file cannot take it."""
        said = await asyncio.to_thread(record_trust, self.workdir, self.home)
        if self.options.trusted is False:
            said += "; this session was made with trusted=False, which still holds"
        await self.mcp.reconsider()
        return said

    async def trust_report(self) -> str:
        """Whether the work directory is trusted and why, and what its files grant (`%trust`)."""
        trusted = self.options.trusted
        state = await asyncio.to_thread(folder_trust, self.workdir, self.home, trusted)
        asks = await asyncio.to_thread(folder_asks, self.workdir, self.home)
        return describe_trust(state, asks)

    async def ask(self, prompt: str) -> Turn:
        """Run one parent turn to completion and return its outcome. A prompt `/name args`
        runs that slash command or skill (`session/turns/commands.py`): inline as the turn's
        prompt, or with `context: fork` in a fork whose report is the turn's text. Its events
        as they come: `parent.stream(prompt)`."""
        return await fold_turn(self.parent.stream(prompt))

    async def compact(self, keep_turns: int | None = None) -> Compacted:
        """Compact the parent conversation now: a fork of it writes a summary (reading the
        history from the prompt cache), and the history becomes the summary plus the last
        `keep_turns` turns (default `compact_keep_turns`). Waits for a turn in flight."""
        if keep_turns is not None and (isinstance(keep_turns, bool) or keep_turns < 1):
            raise UsageError(f"keep_turns must be 1 or more; got {keep_turns!r}.")
        self.budget.check("The compaction was")
        return await self.parent.compact(keep_turns)

    async def resume(self, session_id: str) -> int:
        """Continue the parent conversation of an earlier session (by its id, under the same
        transcripts folder) as it stood at its end, compactions applied; returns the number
        of messages. Its workers are resumed one by one with `send`."""
        if self.store is None:
            raise UsageError("Resuming needs transcripts (Session(transcripts=...)).")
        return await self.parent.resume(self.store, session_id)

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

    def say_prompt_size(
        self, text: str, *, to: str | None = None, fork: bool = False, turns: int | None = None
    ) -> None:
        """`check_prompt`, its line (if any) printed on stderr."""
        line = self.check_prompt(text, to=to, fork=fork, turns=turns)
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
        items: Sequence[object] | None = None,
        poll_interval: float = 30.0,
        notify: Notify = "digest",
        prewarm: bool = True,
    ) -> FanOut:
        """One fork per directive; `batch=True` sends their first requests as one Message
        Batch (half price; see `batch/fan_out.py` for caching, notifications and tools)."""
        self.budget.check("The fan-out was")
        return await fan_out(
            self.batches,
            directives,
            fork=self.fork_now,
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

    async def pull(self, task_id: str, *names: str, trust: bool = False) -> dict[str, object]:
        """Copies of the values a worker holds under these names: plain data, arrays and
        frames, decoded without running code; other objects only with `trust` (unpickled:
        that runs code the worker chose). A PullError says which name cannot come back and
        why."""
        if not names:
            raise UsageError("Name at least one variable to pull.")
        task = self.registry.get(task_id)
        return await self.compute.pull(task.id, names, trust)

    # -- the compute plane (`compute`: the workers' processes, for hosts) ----------------

    def use_dask(self, client: DaskClient) -> None:
        """Isolated workers' code runs on the Dask cluster of this `distributed.Client`
        from the next worker on (a ConfigError when it cannot be used)."""
        self.compute.use_dask(client=client)
        self.options = self.options.model_copy(update={"executor": "dask", "dask_address": ""})

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
        what it reached. Members a restart cut off are not reached: `asend_team` resumes
        them."""
        self.budget.check("The message was")
        teams = self.workers.teams
        return teams.broadcast(None, teams.resolve(key), message, None)

    async def asend_team(self, key: str, message: str) -> str:
        """`send_team`, and the members of the team that a restart cut off (`interrupted`)
        resumed from their transcripts with the message, each back in the team (`key` may
        name a team only they were in; "" or "*" with no current team: the team of the
        newest of them). What it reached, and whom it could not resume and why."""
        self.budget.check("The message was")
        if not message.strip():
            raise UsageError("The message is empty.")
        earlier = [a for a in await self.interrupted() if a.team is not None]
        teams = self.workers.teams
        name = teams.team_name(key, [a.team for a in earlier if a.team is not None])
        cut_off = [a for a in earlier if a.team == name]
        said = []
        live = teams.teams.get(name)
        running = live is not None and any(not t.done for t in teams.members(live))
        if live is not None and (running or not cut_off):
            said.append(teams.broadcast(None, live, message, None))
        resumed, refused = [], []
        for agent in cut_off:
            if self.registry.find(agent.agent_id) is not None:
                continue  # resumed meanwhile: the broadcast reached it, or it ended here
            try:
                await self.workers.send(agent.agent_id, message)
            except UsageError as exc:
                refused.append(f"{agent.label} not resumed: {exc}")
            else:
                resumed.append(agent.label)
        if resumed:
            said.append(
                f"Resumed from their transcripts with your message, back in team {name}: "
                f"{', '.join(resumed)}."
            )
        return "\n".join(said + refused)

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

    async def interrupted(self) -> list[InterruptedAgent]:
        """The agents of the last session that a restart cut off while they ran, but those
        resumed here since (`%send NAME ...` resumes one from its transcript): what `%tasks`
        lists as interrupted. The files are read once, on a thread (transcripts/earlier.py)."""
        if self._interrupted is None and self.store is not None:
            found = await ainterrupted_agents(self.store.root, self.store.dir)
            if self._interrupted is None:
                self._interrupted = found
        return self.interrupted_known() or []

    def interrupted_known(self) -> list[InterruptedAgent] | None:
        """`interrupted()` without reading: None until it has been read once."""
        if self._interrupted is None:
            return None if self.store is not None else []
        resumed = {t.id for t in self.registry}
        return [a for a in self._interrupted if a.agent_id not in resumed]

    def on_task(self, listener: Callable[[Task], None]) -> Callable[[], None]:
        """Call `listener(task)` whenever a task starts or changes; returns the unsubscribe."""
        return self.registry.subscribe(listener)

    def history(self, task_id: str) -> list[Message]:
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
        total = self.parent.usage
        for task in self.registry:
            total = total + task.usage
        return total

    @property
    def cost_usd(self) -> float:
        """What the parent conversation and every worker have cost, in USD."""
        return self.parent.cost + sum(t.cost_usd for t in self.registry)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the workers (no automatic answer to their last notifications) and close the
        model client once nothing uses it."""
        self.options = self.options.changed(auto_respond=False)
        await self.batches.aclose()
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
