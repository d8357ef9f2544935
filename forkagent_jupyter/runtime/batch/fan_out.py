"""Batched fan-out: many forks' first requests as one Message Batch, at half price.

`fan_out(session.batches, directives, fork=..., batch=True)` (what `Session.fan_out` calls)
starts one ordinary fork per directive (each a `Task` in the session's registry, with its
transcript), but the first model request of each goes into one batch instead of a stream:

* Identical requests. Each fork runs the ordinary loop; its model client (`BatchFirstModel`)
  takes the `ModelRequest` the loop built and turns it into the JSON body with the same
  `build_request` the real-time client uses. A batched fork's `params` are therefore
  byte-identical to a real-time fork's first request body (less `stream`), cache
  breakpoints included: the last tool, the last system block, the end of the prefix all
  siblings share, and the directive.
* Caching inside a batch. The shared prefix is marked as for a real-time fan-out, so the
  service can write it once and read it for the other requests. What is guaranteed: the
  bodies and the breakpoints (tested). What is not: the service processes a batch's requests
  concurrently and in no promised order and calls caching in batches best-effort, so how
  many requests read the prefix is up to it (the emulator's order is documented in
  `emulator/batches.py`). Batches can take longer than the 5 minute TTL: use
  `Session(cache_ttl="1h")` when the siblings should still find the prefix much later.
  Every token, cache writes and reads included, is billed at half (`BATCH_DISCOUNT`).
* Pre-warm (`prewarm=True`, the default for two forks or more, without extended thinking):
  before submitting, one real-time request with `max_tokens: 0` (the API's cache pre-warm:
  no output, cache writes only) sends the first fork's body, so the shared prefix is
  written once at the standard price and is readable when the batch starts, whatever order
  and concurrency the service then uses (as long as the batch starts within the TTL). Without
  it, a batch whose requests run concurrently while the parent's cache has expired writes
  the prefix once per request (measured in benchmarks/batch_fanout.py: 7.7x the real-time
  cost for 1,000 forks over 20k tokens). Its cost counts in `BatchRun.cost_usd`.
* After the batch. A result that ends the turn completes its fork with the text. A result
  that asks for tools is appended like a streamed reply: the fork runs the tools and carries
  on as an ordinary real-time worker from there. `errored`, `expired` and `canceled` results
  end the fork `failed` with the API's reason.
* Polling is an asyncio task (`poll_interval`, default 30 s; never blocks the loop).
  `BatchRun.stop()` cancels the batch and stops its forks; stopping every fork of a running
  batch one by one cancels the batch as well.
* Notifications (`notify`): `"digest"` (default) keeps the forks' own notifications out of
  the parent's queue and, when the last fork has ended, sends the parent one
  `<task-notification>` for the whole batch: its counts, cost, and one line for each of the
  first `DIGEST_LINES` forks, with the rest to be read with `session.batch_results(id)`.
  A thousand forks thus cost the parent one short turn, not a thousand. `"each"` leaves
  every fork's own notification (fine for a handful).
* Restarts. With transcripts on, a submitted batch is recorded in
  `<session dir>/batches/<batch id>.json` (its forks: agent id, name, directive, item). After
  a restart, `resume_batches(session.batches)` (the kernel calls it when its session
  starts) finds every batch whose results were not collected yet, brings its forks back from their
  transcripts (each ends with its directive, its first request unanswered) and polls the
  batch again; its results then complete the forks as if nothing had happened.
* Results as a table: `BatchRun.results()` / `session.batch_results(id)` -> `BatchResults`
  (a list of dict rows, `to_dataframe()`).

Here: `Batches` (a session's batches and what they use), `BatchRun` (one batch's life),
`fan_out`, `resume_batches`. The forks' model client and the SDK behind it: `client`; the
results table and the digest: `results`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, cast

from typing_extensions import TypedDict, Unpack

from ...messages_api.shapes import JSON
from ...messages_api.tokens import count_input_tokens
from ...messages_api.usage import Usage, cost_usd
from ..errors import ConfigError, ModelError, UsageError
from ..model.pacer import RateLimits
from ..secrets import redact
from ..tasks.notifications import CommandQueue
from ..tasks.registry import Task, TaskRegistry
from ..tasks.snapshot import TaskSnapshot
from ..transcripts.store import TranscriptStore
from ..workers.workers import AgentRun, Workers, new_agent_id
from .client import (
    OFFLINE_POLL_INTERVAL,
    BatchFirstModel,
    BatchResult,
    BatchSdk,
    sdk_client_of,
    wire_order,
)
from .results import DIGEST_LINES, BatchFork, BatchResults, results_table
from .results import digest as batch_digest

if TYPE_CHECKING:
    import anthropic
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
    from anthropic.types.messages import MessageBatch

__all__ = [
    "DIGEST_LINES",
    "BatchFirstModel",
    "BatchResults",
    "BatchRun",
    "Batches",
    "FanOut",
    "Fork",
    "fan_out",
    "in_batch",
    "resume_batches",
    "sdk_client_of",
    "wire_order",
]

POLL_INTERVAL = 30.0
REGISTER_TIMEOUT = 60.0
MAX_POLL_FAILURES = 5
Notify = Literal["digest", "each"]


class Fork(Protocol):
    """How a fan-out that is not batched starts each fork (`Session.fork_now`: the session's
    checks, then a fork of the parent conversation)."""

    def __call__(self, directive: str, *, name: str | None = None) -> Task: ...


class RunSettings(TypedDict, total=False):
    """The fields of a `BatchRun` that differ from one run of a session to another."""

    poll_interval: float
    notify: Notify
    prewarm: bool
    id: str
    processing_status: str


class _ForkRecord(TypedDict, total=False):
    agent_id: str
    name: str | None
    directive: str
    item: JSON


class _BatchRecord(TypedDict, total=False):
    """A batch's record file (`BatchRun._write_record`), as it is read back."""

    batch_id: str
    poll_interval: float
    notify: str
    forks: list[_ForkRecord]
    collected: bool


class Batches(Mapping[str, "BatchRun"]):
    """A session's batched fan-outs, by batch id (and by local id from the start: a batch
    has its API id only once submitted), and what they use: where batches go (`sdk`), the
    parent's run its forks start from and the workers that run them (with the registry and
    queue of their tasks and notifications, and the store batches are recorded in), the
    pacer of the cache pre-warm (`rate_limits`) and where its cost is charged
    (`charge_parent`: the parent conversation's)."""

    def __init__(
        self,
        *,
        sdk: BatchSdk,
        main: AgentRun,
        workers: Workers,
        rate_limits: RateLimits,
        charge_parent: Callable[[float], None],
    ) -> None:
        self.sdk = sdk
        self.main = main
        self.workers = workers
        self.rate_limits = rate_limits
        self.charge_parent = charge_parent
        self._runs: dict[str, BatchRun] = {}

    @property
    def registry(self) -> TaskRegistry:
        return self.workers.registry

    @property
    def store(self) -> TranscriptStore | None:
        return self.workers.store

    def __getitem__(self, key: str) -> BatchRun:
        return self._runs[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._runs)

    def __len__(self) -> int:
        return len(self._runs)

    def add(self, key: str, run: BatchRun) -> None:
        self._runs[key] = run

    def new_run(self, sdk: anthropic.AsyncAnthropic, **settings: Unpack[RunSettings]) -> BatchRun:
        """A `BatchRun` of this session's (`settings`: its other fields)."""
        return BatchRun(
            sdk,
            [],
            workers=self.workers,
            registry=self.registry,
            queue=self.workers.queue,
            store=self.store,
            rate_limits=self.rate_limits,
            charge_parent=self.charge_parent,
            **settings,
        )

    async def aclose(self) -> None:
        """The session is closing: every batch stops polling (each goes on at the API), and
        the offline emulator, if started, stops."""
        for run in {id(r): r for r in self._runs.values()}.values():
            await run.close()
        await self.sdk.aclose()


@dataclass
class FanOut:
    """What `fan_out` started: the forks' tasks and, batched, their `BatchRun`."""

    tasks: list[Task]
    batch: BatchRun | None = None

    @property
    def id(self) -> str | None:
        return self.batch.id if self.batch is not None else None


@dataclass(eq=False)
class BatchRun:
    """One batch of fork requests: submission, polling, results, cancel, digest. It stops
    its forks with `workers`, keeps their notifications back (`registry`) and sends the digest
    (`queue`), records itself in `store`, paces its cache pre-warm (`rate_limits`) and
    charges that request to the parent (`charge_parent`)."""

    sdk: anthropic.AsyncAnthropic
    forks: list[BatchFork]
    _: KW_ONLY
    workers: Workers
    registry: TaskRegistry
    queue: CommandQueue
    store: TranscriptStore | None
    rate_limits: RateLimits
    charge_parent: Callable[[float], None]
    poll_interval: float = POLL_INTERVAL
    notify: Notify = "digest"
    id: str = ""
    processing_status: str = "pending"  # then the API's: in_progress, canceling, ended
    request_counts: dict[str, int] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)
    error: str | None = None
    local_id: str = field(default_factory=lambda: "batch-" + secrets.token_hex(4))
    listeners: list[Callable[[BatchRun], None]] = field(default_factory=list)
    _registered: asyncio.Event = field(default_factory=asyncio.Event)
    _submitted: asyncio.Event = field(default_factory=asyncio.Event)
    _poller: asyncio.Task[None] | None = None
    _digest_sent: bool = False
    _cancel_sent: bool = False
    _closing: bool = False
    prewarm: bool = True
    prewarm_cost_usd: float = 0.0
    ids: set[str] = field(default_factory=set)  # the forks' task ids

    # -- what the forks call -------------------------------------------------------------

    async def submit(self, custom_id: str, body: MessageCreateParamsNonStreaming) -> BatchResult:
        fork = self._fork(custom_id)
        fork.body = body
        fork.waiter = asyncio.get_running_loop().create_future()
        self._check_registered()
        return await fork.waiter

    def _fork(self, custom_id: str) -> BatchFork:
        for fork in self.forks:
            if fork.task.id == custom_id:
                return fork
        raise KeyError(custom_id)

    def _check_registered(self) -> None:
        if all(f.body is not None or f.task.done for f in self.forks):
            self._registered.set()

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def tasks(self) -> list[Task]:
        return [f.task for f in self.forks]

    @property
    def key(self) -> str:
        return self.id or self.local_id

    @property
    def cost_usd(self) -> float:
        """What the forks have cost so far (batched turns at the batch price), and the
        pre-warm request."""
        return self.prewarm_cost_usd + sum(t.cost_usd for t in self.tasks)

    def counts(self) -> dict[str, int]:
        """The API's request_counts (all `processing` until the batch ends)."""
        keys = ("processing", "succeeded", "errored", "canceled", "expired")
        return {k: int(self.request_counts.get(k, 0)) for k in keys}

    def _changed(self) -> None:
        for listener in list(self.listeners):
            listener(self)

    async def start(self) -> None:
        """Wait until every fork has built its request, submit the batch, start polling."""
        try:
            await asyncio.wait_for(self._registered.wait(), REGISTER_TIMEOUT)
        except asyncio.TimeoutError:
            pass
        pending = [f for f in self.forks if f.body is not None and not f.task.done]
        if not pending:
            self.processing_status = "ended"
            return
        requests = [{"custom_id": f.task.id, "params": f.body} for f in pending]
        first = pending[0].body
        if self.prewarm and len(pending) > 1 and first is not None:
            await self._prewarm(first)
        try:
            created = await self.sdk.messages.batches.create(requests=requests)  # type: ignore[arg-type]
        except Exception as exc:
            self.error = redact(f"the batch could not be created: {type(exc).__name__}: {exc}")
            self.processing_status = "ended"
            self._fail_waiters(self.error)
            return
        self.id = created.id
        self._update(created)
        self._submitted.set()
        self._write_record()
        self._poller = asyncio.get_running_loop().create_task(
            self._poll(), name=f"batch-poll:{self.id}"
        )

    async def _prewarm(self, body: MessageCreateParamsNonStreaming) -> None:
        """Write the shared prefix at once with a `max_tokens: 0` request (see module doc)."""
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled"):
            return  # the API refuses max_tokens 0 with thinking on
        pacer = self.rate_limits.pacer(str(body.get("model")))  # decision 15
        ticket = await pacer.acquire(
            input_tokens=count_input_tokens(body) if pacer.known else 0, max_tokens=0
        )
        try:
            params = body.copy()
            params["max_tokens"] = 0
            raw = await self.sdk.messages.with_raw_response.create(**params)
            pacer.observe(raw.headers, ticket)
            reply = await raw.parse()
        except Exception as exc:  # not fatal: the batch goes on, maybe without cache reads
            pacer.settle(ticket, None)
            self.error = redact(f"the cache pre-warm failed: {type(exc).__name__}: {exc}")
            return
        pacer.settle(ticket, Usage.from_api(reply.usage))
        self.prewarm_cost_usd = cost_usd(Usage.from_api(reply.usage), reply.model)
        self.charge_parent(self.prewarm_cost_usd)

    def _update(self, batch: MessageBatch) -> None:
        self.processing_status = str(batch.processing_status)
        self.request_counts = batch.request_counts.model_dump()
        self._changed()

    def _fail_waiters(self, reason: str) -> None:
        for fork in self.forks:
            if fork.waiter is not None and not fork.waiter.done():
                fork.waiter.set_exception(ModelError(reason))

    async def _poll(self) -> None:
        failures = 0
        while True:
            await asyncio.sleep(self.poll_interval)
            try:
                batch = await self.sdk.messages.batches.retrieve(self.id)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                if failures >= MAX_POLL_FAILURES:
                    self.error = redact(f"polling the batch failed: {type(exc).__name__}: {exc}")
                    self._fail_waiters(self.error)
                    return
                continue
            failures = 0
            self._update(batch)
            if batch.processing_status == "ended":
                break
        await self._collect()

    def _record_path(self) -> Path | None:
        store = self.store
        return store.dir / "batches" / f"{self.id}.json" if store is not None and self.id else None

    def _write_record(self, **extra: object) -> None:
        path = self._record_path()
        store = self.store
        if path is None or store is None:
            return
        forks = [
            {
                "agent_id": f.task.id,
                "name": f.task.name,
                "directive": f.directive,
                "item": f.item if isinstance(f.item, (str, int, float, bool)) else repr(f.item),
            }
            for f in self.forks
        ]
        record = {
            "batch_id": self.id,
            "poll_interval": self.poll_interval,
            "notify": self.notify,
            "forks": forks,
            "collected": False,
            **extra,
        }
        store.write_json(path, record)

    async def _collect(self) -> None:
        try:
            decoder = await self.sdk.messages.batches.results(self.id)
            async for row in decoder:
                # the SDK's result model as its JSON: the shape `BatchResult` names
                result = cast(BatchResult, row.result.model_dump(mode="json", exclude_none=True))
                try:
                    fork = self._fork(row.custom_id)
                except KeyError:
                    continue
                fork.result = result
                if fork.waiter is not None and not fork.waiter.done():
                    fork.waiter.set_result(result)
        except Exception as exc:
            self.error = redact(f"reading the batch results failed: {type(exc).__name__}: {exc}")
        self._fail_waiters(self.error or "the batch ended without a result for this request")
        if not self._closing:
            self._write_record(collected=True)
        self._changed()

    def resume_polling(self) -> None:
        """Poll an already submitted batch (after a restart)."""
        self._registered.set()
        self._submitted.set()
        self._poller = asyncio.get_running_loop().create_task(
            self._poll(), name=f"batch-poll:{self.id}"
        )

    def on_task_change(self, task: Task) -> None:
        """Registry listener: digest notifications, cancel when every fork was stopped."""
        if self._closing or not task.done or not any(f.task is task for f in self.forks):
            return
        self._check_registered()  # a fork that ended before its request never registers
        if self.notify == "digest":
            self.registry.suppress(task)
        if all(t.done for t in self.tasks):
            ended_by_stop = self.processing_status in ("pending", "in_progress")
            if ended_by_stop and all(t.status == "killed" for t in self.tasks):
                self._cancel_in_background()
            if self.notify == "digest" and not self._digest_sent:
                self._digest_sent = True
                report = self.digest()
                self.queue.enqueue(
                    report.notification, owner="main", task_id=self.key, snapshot=report
                )
        self._changed()

    def _cancel_in_background(self) -> None:
        if self._cancel_sent:
            return
        self._cancel_sent = True
        if self._poller is not None:
            self._poller.cancel()
        if self.id:
            asyncio.get_running_loop().create_task(self._cancel_api())

    async def _cancel_api(self) -> None:
        try:
            batch = await self.sdk.messages.batches.cancel(self.id)
            self._update(batch)
        except Exception as exc:  # the session may be closing: report, never raise
            self.error = redact(f"canceling the batch failed: {type(exc).__name__}: {exc}")

    async def stop(self) -> None:
        """Cancel the batch with the API and stop its forks that still run."""
        # the poller first: a look it had in flight would otherwise land after the cancel and
        # put back the status the cancel replaced (or collect a batch being stopped)
        if self._poller is not None and not self._poller.done():
            self._poller.cancel()
            await asyncio.wait({self._poller})
        if self.id and self.processing_status == "in_progress":
            self._cancel_sent = True
            await self._cancel_api()
        for task in self.tasks:
            if not task.done:
                await self.workers.stop(task.id)

    async def close(self) -> None:
        """The session is closing: stop polling; the batch itself goes on at the API."""
        self._closing = True
        if self._poller is not None and not self._poller.done():
            self._poller.cancel()
            await asyncio.wait({self._poller})

    async def wait(self, timeout: float | None = None) -> list[Task]:
        """Wait until every fork of the batch has ended."""
        await asyncio.wait_for(asyncio.gather(*(t.wait() for t in self.tasks)), timeout)
        return self.tasks

    # -- results -------------------------------------------------------------------------

    def results(self) -> BatchResults:
        return results_table(self.forks)

    def digest(self) -> TaskSnapshot:
        """The whole batch as one ended task, with its one `<task-notification>` (see the
        module doc)."""
        return batch_digest(self.tasks, self.key, self.cost_usd)


async def fan_out(
    batches: Batches,
    directives: Sequence[str],
    *,
    fork: Fork,
    batch: bool = False,
    names: Sequence[str | None] | None = None,
    items: Sequence[object] | None = None,
    poll_interval: float = POLL_INTERVAL,
    notify: Notify = "digest",
    prewarm: bool = True,
) -> FanOut:
    """Start one fork per directive (see the module doc): with `fork` each, or batched; returns
    once they are submitted. The caller has checked the budget."""
    directives = list(directives)
    if not directives:
        raise UsageError("fan_out needs at least one directive.")
    if names is not None and len(names) != len(directives):
        raise UsageError(f"fan_out got {len(names)} names for {len(directives)} directives.")
    if notify not in ("digest", "each"):
        raise UsageError(f"notify must be 'digest' or 'each', not {notify!r}.")
    if poll_interval <= 0:
        raise UsageError(f"poll_interval must be a positive number of seconds: {poll_interval!r}")
    empty = [i for i, d in enumerate(directives) if not str(d).strip()]
    if empty:
        raise UsageError(f"Directive {empty[0]} is empty: say what each worker should do.")
    if not batch:
        return FanOut([fork(d, name=names[i] if names else None) for i, d in enumerate(directives)])
    sdk = await batches.sdk.get()
    if batches.sdk.backend == "offline":  # done at the first poll: no need to wait long
        poll_interval = min(poll_interval, OFFLINE_POLL_INTERVAL)
    run = batches.new_run(sdk, poll_interval=poll_interval, notify=notify, prewarm=prewarm)
    workers = batches.workers
    ids = [new_agent_id() for _ in directives]
    run.ids.update(ids)  # known before the tasks register (a UI shows no card per fork)
    batches.add(run.local_id, run)
    stagger, workers.stagger = workers.stagger, False  # one batch, no leader to wait for
    try:
        for i, directive in enumerate(directives):
            description = directive.strip().splitlines()[0][:60]
            task = workers.fork(
                batches.main,
                directive,
                description=description,
                name=names[i] if names else None,
                agent_id=ids[i],
            )
            agent = workers.runs[task.id]
            # the runner starts at the next await: its first request goes to the batch
            agent.config = replace(
                agent.config, client=BatchFirstModel(agent.config.client, run, task.id)
            )
            run.forks.append(BatchFork(task, directive, items[i] if items is not None else None))
    finally:
        workers.stagger = stagger
    batches.registry.subscribe(run.on_task_change)
    await run.start()
    if run.id:
        batches.add(run.id, run)
    return FanOut(run.tasks, run)


def in_batch(batches: Batches, task_id: str) -> bool:
    """Whether `task_id` is a fork of one of a session's batched fan-outs."""
    return any(task_id in run.ids for run in batches.values())


def _pending_records(root: Path) -> list[tuple[Path, _BatchRecord]]:
    found: list[tuple[Path, _BatchRecord]] = []
    for path in sorted(root.glob("*/batches/*.json")):
        try:
            record: _BatchRecord = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and not record.get("collected") and record.get("batch_id"):
            found.append((path, record))
    return found


async def resume_batches(batches: Batches) -> list[BatchRun]:
    """Poll again every batch of earlier sessions (same transcript root) whose results were
    never collected, its forks brought back from their transcripts (see the module doc)."""
    store = batches.store
    if store is None:
        return []
    try:
        sdk = sdk_client_of(batches.sdk.client())
    except ConfigError:
        return []
    resumed = []
    for path, record in await asyncio.to_thread(_pending_records, store.root):
        batch_id = str(record["batch_id"])
        if batch_id in batches or path.parent.parent == store.dir:
            continue
        notify: Notify = "each" if record.get("notify") == "each" else "digest"
        run = batches.new_run(
            sdk,
            poll_interval=float(record.get("poll_interval") or POLL_INTERVAL),
            notify=notify,
            id=batch_id,
            processing_status="in_progress",
        )
        workers = batches.workers
        for fork in record.get("forks") or []:
            agent_id = str(fork.get("agent_id"))
            try:
                loaded = await store.aload(agent_id)
            except UsageError:
                continue
            run.ids.add(agent_id)  # before its task registers (a UI shows no card per fork)
            batches.add(batch_id, run)
            agent, _note = workers.restore(
                loaded, client=functools.partial(BatchFirstModel, run=run, custom_id=agent_id)
            )
            assert agent.task is not None
            run.forks.append(
                BatchFork(agent.task, str(fork.get("directive") or ""), fork.get("item"))
            )
        if not run.forks:
            continue
        # this session now owns the batch: its record moves here, the old one is closed
        store.write_json(path, {**record, "collected": True, "moved_to": str(store.dir)})
        run._write_record()
        batches.registry.subscribe(run.on_task_change)
        batches.add(batch_id, run)
        run.resume_polling()
        resumed.append(run)
    return resumed
