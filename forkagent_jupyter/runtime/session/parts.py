"""How a session's parts are made and joined (`Session.__init__` calls `make_parts`).

Each part is given the parts it uses, never the session, and they are made in an order where
what a part needs exists first. Where two parts call each other, the one made first gets a
small function that calls the other once it exists: the agents' web access charges a request
to the spending, which stops the workers the contexts configure; the spending charges the
parent's requests to the turn runner, which enforces the budget through it, and tells the
responder (made after the runner, whose turns answer notifications) when the budget was
raised. What a part reads of the session itself at
the time of use comes as a function too: its options (changed by `configure`), its model
client (a `RequestLog` may replace it) and its total cost (for the budget)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ...messages_api.usage import Usage
from ..batch.client import BatchSdk
from ..batch.fan_out import Batches
from ..config.agent_definitions import scan_agents
from ..executors import ComputePlane
from ..loop.compaction import CompactPolicy
from ..loop.config import LoopState
from ..mcp.servers import McpServers
from ..model.budget import BudgetedModel, CostBudget
from ..model.client import ModelClient
from ..model.pacer import PacedModel, RateLimits
from ..model.retry import StreamRetry
from ..tasks.notifications import CommandQueue
from ..tasks.registry import TaskRegistry
from ..tools.services import ToolServices
from ..tools.shells import ShellRegistry
from ..tools.web import WebAccess
from ..transcripts.store import AgentMeta, TranscriptStore
from ..workers.workers import AgentRun, Workers
from .agent_setup import AgentContexts, ToolContexts
from .compute_settings import compute_follows
from .live_settings import LiveSettings
from .options import SessionOptions
from .place import Place
from .spending import Spending
from .turns.commands import PromptCommands
from .turns.parent_turns import ParentTurns
from .turns.responder import CommandRouter, Responder
from .turns.turn_lock import TurnLock
from .turns.turn_runner import TurnRunner
from .turns.turn_setup import TurnSetup

__all__ = ["SessionParts", "make_parts"]


@dataclass(frozen=True)
class SessionParts:
    """What `make_parts` made (the session keeps each under the same name)."""

    session_id: str
    store: TranscriptStore | None
    hook_jobs: set[asyncio.Task[object]]
    """Background jobs (Notification hooks, a named agent's MCP servers stopping), awaited
    when the session closes."""
    lock: TurnLock
    """One parent turn at a time; prompts before automatic answers."""
    changed: asyncio.Event
    """Set whenever the session may have become idle."""
    budget: CostBudget
    queue: CommandQueue
    registry: TaskRegistry
    contexts: AgentContexts
    workers: Workers
    main: AgentRun
    responder: Responder
    parent: ParentTurns
    spending: Spending
    live_settings: LiveSettings
    batches: Batches


def make_parts(
    o: SessionOptions,
    *,
    options: Callable[[], SessionOptions],
    client: Callable[[], ModelClient],
    cost: Callable[[], float],
    backend: str,
    workdir: Path,
    home: Path,
    compute: ComputePlane,
    services: ToolServices,
    shells: ShellRegistry,
    mcp: McpServers,
    rate_limits: RateLimits,
    stream_retry: StreamRetry,
    compaction: CompactPolicy,
    check_prompt: Callable[[str], str | None],
) -> SessionParts:
    """A session's task registry and queue, the agents' contexts, the workers, the parent's
    own run and turns, the answers to its notifications, the budget's enforcement, where live
    settings go and its batched fan-outs, made from its options `o` and what the session made
    before (see the module doc)."""
    session_id = uuid.uuid4().hex[:12]
    store: TranscriptStore | None = None
    if o.transcripts:
        root = o.transcripts if not isinstance(o.transcripts, bool) else None
        root = Path(root or workdir / ".forkagent" / "sessions")
        store = TranscriptStore(root, session_id)
    hook_jobs: set[asyncio.Task[object]] = set()
    lock = TurnLock()
    changed = asyncio.Event()
    budget = CostBudget(cost, o.max_cost_usd)
    queue = CommandQueue()  # its on_enqueue is the responder's (below)
    registry = TaskRegistry(queue, base=workdir)
    shells.report_to(queue, recipient=registry.recipient, files=store, base=workdir)
    mcp.on_note = registry.note
    place = Place(workdir, home, session_id)
    spending: Spending  # made after the parent's run, whose web access charges it
    runner: TurnRunner  # made after the spending, which charges the parent's requests
    responder: Responder  # made after the runner, whose turns answer notifications

    def model() -> ModelClient:
        """The model client of the session's agents as it stands: paced and budgeted."""
        return BudgetedModel(PacedModel(client(), rate_limits), budget)

    def web_usage(agent_id: str, usage: Usage, usd: float) -> None:
        spending.web_usage(agent_id, usage, usd)

    tool_contexts = ToolContexts(
        workdir=workdir,
        compute=compute,
        services=services,
        mcp=mcp,
        web=lambda: WebAccess(model(), options().model, web_usage),
    )
    contexts = AgentContexts(
        settings=options,
        model=model,
        tool_contexts=tool_contexts,
        place=place,
        stream_retry=stream_retry,
        compaction=compaction,
    )
    workers = Workers(
        registry=registry,
        store=store,
        configs=contexts,
        definitions=partial(scan_agents, workdir, home),
        settings=options,
    )
    services.workers = workers  # every agent's tools reach them (Agent, SendMessage, ...)
    main = AgentRun("main", contexts.parent_config(), [], LoopState())
    main.config.ctx.services.agent_run = main
    workers.main = main
    spending = Spending(
        budget=budget,
        workers=workers,
        charge_parent=lambda usage, usd: runner.charge(usage, usd),
        budget_raised=lambda: responder.budget_raised(),
        changed=changed,
    )
    setup = TurnSetup(contexts=contexts, mcp=mcp, place=place)
    runner = TurnRunner(
        main=main, setup=setup, contexts=contexts, spending=spending, changed=changed
    )
    responder = Responder(
        settings=options, runner=runner, queue=queue, budget=budget, lock=lock, changed=changed
    )
    router = CommandRouter(
        main=main,
        contexts=contexts,
        jobs=hook_jobs,
        workers=workers,
        responder=responder,
        changed=changed,
    )
    queue.on_enqueue = router.on_command
    parent = ParentTurns(
        runner=runner,
        commands=PromptCommands(
            place=place, setup=setup, contexts=contexts, main=main, workers=workers
        ),
        responder=responder,
        budget=budget,
        lock=lock,
        check_prompt=check_prompt,
    )
    live_settings = LiveSettings(contexts=contexts, compute=compute, spending=spending, mcp=mcp)
    batches = Batches(
        sdk=BatchSdk(client, backend),
        main=main,
        workers=workers,
        rate_limits=rate_limits,
        charge_parent=lambda usd: runner.charge(Usage(), usd),
    )
    if store is not None:  # the parent's transcript
        transcript = store.open(AgentMeta(agent_id="main", kind="main", model=o.model))
        main.transcript = transcript
        main.state.on_message = transcript.append_message
        main.state.on_history_replaced = runner.history_replaced
        contexts.gate.recorder = lambda e: transcript.append_event("permission", e)
    registry.subscribe(lambda _task: changed.set())
    registry.subscribe(partial(compute_follows, compute))
    registry.subscribe(lambda _task: spending.enforce())
    registry.subscribe(partial(mcp.follow, hook_jobs))
    return SessionParts(
        session_id=session_id,
        store=store,
        hook_jobs=hook_jobs,
        lock=lock,
        changed=changed,
        budget=budget,
        queue=queue,
        registry=registry,
        contexts=contexts,
        workers=workers,
        main=main,
        responder=responder,
        parent=parent,
        spending=spending,
        live_settings=live_settings,
        batches=batches,
    )
