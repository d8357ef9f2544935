"""Workers' code on a Dask cluster (the kernel's side): `ForkAgent.executor = "dask"`.

`DaskBackend` is the connection to one cluster: a `distributed.Client` made from a scheduler
address (or one the user gave, `api.use_dask(client)`), where new workers are placed, and the
fork groups whose values are shipped once (`shipping.ShipGroup`). A `DaskRunner` is one
agent's runner there: an `actor.DaskAgent` actor on one Dask worker, owning the process
that holds the agent's namespace across its calls. It behaves as a local worker process does:

* the code was approved in the kernel before `run` is called; only then is it sent;
* outputs (prints, displays, figures) come back while the code runs (the runner polls the
  actor every `POLL_SECONDS`, slowing to `POLL_SECONDS_MAX` while nothing comes) and go to
  the card; the result goes to the model;
* cancelling a call (Stop) kills the actor's process at once, and the call ends `killed`;
* a Dask worker or scheduler that goes away, or an actor that stops answering polls within
  `LOST_AFTER` seconds, ends the call with `WorkerLostError` (the task fails, with that
  message) instead of waiting.

Every blocking step of the client (connecting, scattering, pickling) runs on a worker thread,
and actor calls are awaited on the client's own loop: the kernel's event loop never waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ...errors import ConfigError
from ..base import (
    CallFailedError,
    ExecResult,
    Output,
    OutputSink,
    PullError,
    StreamText,
    WorkerLostError,
)
from ..pulled import decode_pulled
from ..wire import call_result
from .shipping import DaskClient, DaskFuture, ShipGroup, Shipment, referenced_names, shippable

__all__ = ["DaskBackend", "DaskRunner", "require_dask"]

POLL_SECONDS = 0.1
POLL_SECONDS_MAX = 1.0  # polls slow down to this while the code prints nothing
LOST_AFTER = 15.0
CONNECT_TIMEOUT = 10.0
_T = TypeVar("_T")
INSTALL_HINT = (
    'the Dask executor needs the optional dependencies: pip install "forkagent-jupyter[dask]" '
    "(distributed and cloudpickle)"
)


def require_dask() -> None:
    """A ConfigError that says how to install the Dask extra, if it is missing."""
    try:
        import cloudpickle  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"{INSTALL_HINT}; {exc}") from None


class DaskBackend:
    """The cluster the workers' code runs on (see the module doc)."""

    def __init__(self, address: str | None = None, client: DaskClient | None = None) -> None:
        require_dask()
        if client is None and not address:
            raise ConfigError(
                "the Dask executor needs a scheduler: set ForkAgent.dask_address "
                '(e.g. "tcp://10.0.0.5:8786") or call api.use_dask(client)'
            )
        self.address = address or str(getattr(getattr(client, "scheduler", None), "address", ""))
        self._client = client
        self._owns_client = client is None
        self._connecting: asyncio.Future[DaskClient] | None = None
        self._groups: dict[int, ShipGroup] = {}
        self.runners: list[DaskRunner] = []
        self.inline_bytes = 0
        self.nice = 0  # added to the workers' processes (ForkAgent.worker_nice)
        self.max_workers = 16  # live processes before finished ones are retired

    # -- the client --------------------------------------------------------------------------

    async def client(self) -> DaskClient:
        """The connected client (connecting on first use, off the event loop)."""
        if self._client is not None:
            return self._client
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(asyncio.to_thread(self._connect))
        client = await asyncio.shield(self._connecting)
        self._client = client
        return client

    def _connect(self) -> DaskClient:
        import distributed

        make: Any = distributed.Client  # its constructor is untyped
        try:
            client: DaskClient = make(
                self.address,
                timeout=CONNECT_TIMEOUT,
                set_as_default=False,
                direct_to_workers=True,
            )
            return client
        except Exception as exc:
            raise WorkerLostError(
                f"cannot reach the Dask scheduler at {self.address}: {type(exc).__name__}: {exc}"
            ) from None

    def group(self, epoch: int, client: DaskClient) -> ShipGroup:
        found = self._groups.get(epoch)
        if found is None:
            self._groups = {e: g for e, g in self._groups.items() if e >= epoch - 1}
            found = self._groups[epoch] = ShipGroup(client)
        return found

    @property
    def shipped_bytes(self) -> int:
        """Bytes of values sent from the kernel to the cluster so far (pickles inline with
        calls, plus each scattered value once)."""
        return self.inline_bytes + sum(g.scattered_bytes for g in self._groups.values())

    async def await_on_client(
        self, make: Callable[[], Awaitable[_T]], timeout: float | None = None
    ) -> _T:
        """Await an actor call made by `make()` on the client's loop, from the kernel's loop."""
        client = await self.client()

        async def on_client_loop() -> _T:
            return await make()

        running = asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(on_client_loop(), client.loop.asyncio_loop)
        )
        # not asyncio.wait_for: before Python 3.12 it can swallow a cancellation (Stop) that
        # arrives as the call completes
        try:
            done, _ = await asyncio.wait({running}, timeout=timeout)
        except asyncio.CancelledError:
            running.cancel()
            raise
        if not done:
            running.cancel()
            raise asyncio.TimeoutError
        return running.result()

    async def place(self, runner: DaskRunner) -> str:
        """Choose the Dask worker for a new agent's actor (the one holding the fewest of our
        live agents) and record it on the runner at once, so that agents starting together
        spread over the cluster."""
        client = await self.client()
        info = await asyncio.to_thread(client.scheduler_info)
        workers = sorted(info.get("workers", {}))
        if not workers:
            raise WorkerLostError(f"the Dask cluster at {self.address} has no workers")
        load = dict.fromkeys(workers, 0)
        for other in self.runners:
            if other.ended is None and other.where in load:
                load[other.where] += 1
        runner.where = str(min(workers, key=lambda w: load[w]))
        return runner.where

    def make_room(self, max_workers: int) -> None:
        """Retire the oldest finished agents' processes while `max_workers` or more live."""
        live = [r for r in self.runners if r.alive]
        for runner in live:
            if len(live) < max_workers:
                break
            if runner.parked:
                runner.kill(f"its process was retired to keep within max_workers={max_workers}")
                live.remove(runner)

    def runner(
        self, agent_id: str, snapshot: dict[str, object], epoch: int, sink: OutputSink
    ) -> DaskRunner:
        runner = DaskRunner(self, agent_id, snapshot, epoch, sink)
        self.runners = [r for r in self.runners if r.ended is None]
        self.runners.append(runner)
        return runner

    def close(self) -> None:
        """Kill the runners; a client this backend connected is closed on a thread of its own
        (closing waits for the scheduler: not on the event loop, and not waited for here)."""
        client = self._release()
        if client is not None:
            threading.Thread(
                target=_close_client, args=(client,), name="forkagent-dask-close", daemon=True
            ).start()

    async def aclose(self) -> None:
        """`close`, returning once the client is closed (waiting off the event loop)."""
        client = self._release()
        if client is not None:
            await asyncio.to_thread(_close_client, client)

    def _release(self) -> DaskClient | None:
        """Kill the runners; the client to close (one this backend connected), if any."""
        for runner in self.runners:
            runner.kill("the session was closed")
        self._groups.clear()
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            return client
        return None


def _close_client(client: DaskClient) -> None:
    with contextlib.suppress(Exception):
        client.close(timeout=2)


class DaskRunner:
    """One agent's code on the cluster (see the module doc)."""

    kind = "dask"

    def __init__(
        self,
        backend: DaskBackend,
        agent_id: str,
        snapshot: dict[str, object],
        epoch: int,
        sink: OutputSink,
    ) -> None:
        self.backend = backend
        self.agent_id = agent_id
        self.snapshot = snapshot
        self.epoch = epoch
        self.sink = sink
        self.actor: Any = None  # a distributed.Actor: the DaskAgent's methods, called remotely
        self.where: str | None = None  # the Dask worker's address
        self.pid: int | None = None  # of the process on that worker
        self.ended: str | None = None
        self.parked = False
        self.acked = 0
        self.shipped: set[str] = set()
        self._future: DaskFuture | None = None
        self._lock = asyncio.Lock()

    @property
    def alive(self) -> bool:
        return self.actor is not None and self.ended is None

    # -- the actor ---------------------------------------------------------------------------

    async def _ensure(self) -> None:
        if self.alive:
            return
        from .actor import DaskAgent

        if self.actor is not None:  # a lost one: start anew (a resumed agent)
            self.kill("its place on the cluster was replaced")
        self.shipped, self.acked, self.ended = set(), 0, None
        if self not in self.backend.runners:
            self.backend.runners.append(self)
        self.backend.make_room(self.backend.max_workers)
        client = await self.backend.client()
        where = await self.backend.place(self)
        future = client.submit(
            DaskAgent,
            self.agent_id,
            actor=True,
            workers=[where],
            allow_other_workers=False,
            pure=False,
            key=f"forkagent-{self.agent_id}-{uuid.uuid4().hex[:8]}",
        )
        actor: Any = await asyncio.to_thread(future.result, LOST_AFTER * 4)
        if getattr(actor, "_client", None) is None:  # bind it to our client, not a default one
            actor._client, actor._future = client, future
        self._future, self.actor, self.where, self.ended = future, actor, where, None
        started = await self._call("start", self.backend.nice, str(Path.cwd()))
        self.pid = int(started["pid"])

    async def _call(self, method: str, *args: object, timeout: float | None = None) -> Any:
        """The actor's `method(*args)` (what it returns: distributed does not type it)."""
        actor = self.actor
        if actor is None:
            raise WorkerLostError(self.ended or "the worker has no place on the cluster")
        try:
            return await self.backend.await_on_client(
                lambda: getattr(actor, method)(*args), timeout
            )
        except (asyncio.CancelledError, WorkerLostError):
            raise
        except Exception as exc:
            raise self._lost(exc) from None

    def _lost(self, exc: BaseException) -> WorkerLostError:
        if isinstance(exc, asyncio.TimeoutError):
            why = f"it did not answer within {LOST_AFTER:.0f} s"
        else:
            why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        reason = f"the Dask worker {self.where} that ran this worker's code was lost ({why})"
        self._end(reason)
        return WorkerLostError(reason)

    async def _invoke(self, method: str, *args: object, poll: bool = True) -> object:
        """Call the actor; while it runs, bring its outputs to the sink and watch it lives."""
        call = asyncio.ensure_future(self._call(method, *args))
        interval = POLL_SECONDS
        try:
            while True:
                done, _ = await asyncio.wait({call}, timeout=interval)
                if done:
                    break
                if poll:
                    outputs = await self._call("poll", self.acked, timeout=LOST_AFTER)
                    self._deliver(outputs)
                    interval = POLL_SECONDS if outputs else min(interval * 1.5, POLL_SECONDS_MAX)
                client = self.backend._client
                if client is not None and client.status in ("closing", "closed"):
                    raise self._lost(ConnectionError("the connection to the scheduler closed"))
            status, value, outputs = call.result()
        except asyncio.CancelledError:
            call.cancel()
            self.kill("the worker was stopped")
            raise
        except BaseException:
            call.cancel()
            raise
        self._deliver(outputs)
        if status == "lost":
            self._end(str(value))
            raise WorkerLostError(str(value))
        return value

    def _deliver(self, outputs: list[tuple[int, Output]]) -> None:
        for seq, output in outputs:
            if seq > self.acked:
                self.acked = seq
                self.sink(output)

    async def _shipment(self, names: set[str]) -> Shipment:
        wanted = {n for n in names if n in self.snapshot and n not in self.shipped and shippable(n)}
        if not wanted:
            return Shipment()
        group = self.backend.group(self.epoch, await self.backend.client())
        shipment = await asyncio.to_thread(group.pack, wanted, self.snapshot)
        self.backend.inline_bytes += shipment.bytes_inline
        self.shipped |= wanted
        for name, why in shipment.left_out.items():
            self.sink(StreamText("stderr", f"[{name} was not shipped to the cluster: {why}]\n"))
        return shipment

    # -- CodeRunner --------------------------------------------------------------------------

    async def run(self, code: str) -> ExecResult:
        async with self._lock:
            await self._ensure()
            shipment = await self._shipment(referenced_names(code))
            result = await self._invoke("run", code, shipment.blobs, shipment.keys, self.acked)
            assert isinstance(result, ExecResult)
            if shipment.left_out:
                note = "".join(
                    f"[{name} was not shipped to the cluster: {why}]\n"
                    for name, why in shipment.left_out.items()
                )
                result = ExecResult(
                    result.stdout,
                    note + result.stderr,
                    result.value_repr,
                    result.error,
                    result.images,
                )
            return result

    async def call(self, fn: Callable[..., object], *args: object) -> object:
        async with self._lock:
            await self._ensure()
            shipment = await self._shipment({a for a in args if isinstance(a, str)})
            reply = await self._invoke("call", fn, args, shipment.blobs, shipment.keys)
            status, value = call_result(reply)
            if status != "ok":
                raise CallFailedError(str(value))
            return value

    async def pull(self, names: Sequence[str], trust: bool = False) -> dict[str, object]:
        if not self.alive:
            why = self.ended or "it has not run any code yet"
            raise PullError(f"worker {self.agent_id} has no process to pull from: {why}")
        async with self._lock:
            try:
                reply = await self._invoke("pull", list(names), trust, poll=False)
            except WorkerLostError as exc:
                why = f"worker {self.agent_id} has no process to pull from: {exc}"
                raise PullError(why) from None
        return await decode_pulled(reply, names, trust)

    # -- lifecycle ---------------------------------------------------------------------------

    def _end(self, why: str) -> None:
        self.ended = self.ended or why

    def kill(self, why: str = "it was stopped") -> None:
        """End the process on the cluster now and let go of the actor."""
        self._end(why)
        actor, self.actor, self._future = self.actor, None, None
        client = self.backend._client
        if actor is None or client is None:
            return

        async def kill_it() -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(actor.kill(), LOST_AFTER)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(kill_it(), client.loop.asyncio_loop)

    def finished(self, status: str) -> None:
        if status == "killed":
            self.kill("the worker was stopped")
        else:
            self.parked = True

    def resumed(self) -> None:
        self.parked = False
