"""The compute plane: which runner each agent's code gets, and the bounds on processes.

* The parent ("main") runs code in the notebook's namespace, on a thread (its turn is the
  user's own, like a cell).
* A worker gets, by default, its own process started from a snapshot of the kernel taken at
  the moment of its fork (`isolated`): parallel, killable, and unable to rebind the user's
  names; values come back only when pulled. With `shared`, a worker runs on a thread in the
  notebook's namespace like the parent, its calls serialised with everyone else's there.
* At most `max_workers` worker processes live at once. A finished worker's process is kept
  for pulls; when a new one needs room, the oldest finished one is retired first; only when
  every process belongs to a running worker does a new one wait.

Snapshots are reused while the namespace has not changed (the host says when it may have:
`namespace_changed`, e.g. before every cell), so the forks of one cell share one snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Literal

from ..secrets import redact
from .base import ClearOutput, CodeRunner, Display, Output, PullError, StreamText, valid_output
from .cluster.backend import DaskBackend, DaskRunner
from .cluster.shipping import DaskClient
from .memory import (
    Rollup,
    WorkerProcess,
    default_worker_memory_mb,
    own_memory_mb,
    read_rollups,
)
from .process.process import ProcessRunner, Snapshot, fork_supported
from .process.tree import prune_group, release_transactions
from .thread import ThreadRunner

__all__ = ["SAMPLE_SECONDS", "ComputePlane", "WorkerNamespace"]

SAMPLE_SECONDS = 2.0
"""How often a running worker's process memory is read for its card."""

WorkerNamespace = Literal["isolated", "shared"]


def redacted(output: Output) -> Output:
    """A worker's output with every known secret masked (as everything the runtime shows)."""
    if isinstance(output, ClearOutput):
        return output
    if isinstance(output, StreamText):
        return StreamText(output.name, redact(output.text))
    data = {k: redact(v) if isinstance(v, str) else v for k, v in output.data.items()}
    return Display(data, output.metadata)


class ComputePlane:
    """Runners for one session's agents (see the module doc)."""

    def __init__(
        self,
        namespace: dict[str, object],
        *,
        worker_namespace: WorkerNamespace = "isolated",
        max_workers: int = 16,
        reuse_snapshots: bool = False,
        nice: int = 0,
    ) -> None:
        self.namespace = namespace
        self.worker_namespace: WorkerNamespace = worker_namespace
        self.max_workers = max_workers
        self.reuse_snapshots = reuse_snapshots
        self.nice = nice
        self.on_output: Callable[[str, Output], None] | None = None
        """Called with (agent id, output) for what a worker's code prints or displays (the
        host shows it on that worker's card)."""
        self.main = ThreadRunner(namespace, on_ran=self.namespace_changed)
        self.runners: dict[str, CodeRunner] = {}
        self._epoch = 0
        self._snapshot: Snapshot | None = None
        self._snapshots: list[Snapshot] = []
        self._wakers: set[asyncio.Task[None]] = set()
        self._alive: list[ProcessRunner] = []  # oldest first
        self._room = asyncio.Condition()
        self.worker_memory_mb = default_worker_memory_mb()
        """What finished workers' processes may hold together (see memory.py)."""
        self.on_memory: Callable[[str, float], None] | None = None
        self.memory: dict[str, float] = {}  # agent id -> its finished process's own MB
        self.on_process_memory: Callable[[str, Rollup | None], None] | None = None
        """Told a running worker's process memory every SAMPLE_SECONDS (None: it has none
        any more: it ended, or its agent finished)."""
        self._sampler: asyncio.Task[None] | None = None
        self._used: dict[str, float] = {}  # agent id -> when it last ran or was pulled from
        self.executor: Literal["local", "dask"] = "local"
        self.dask: DaskBackend | None = None

    def use_dask(self, address: str | None = None, client: DaskClient | None = None) -> None:
        """Isolated workers' code runs on a Dask cluster from the next worker on (see
        `dask.DaskBackend`); running workers keep where they run."""
        backend = DaskBackend(address, client)  # a ConfigError when it cannot be used
        backend.nice, backend.max_workers = self.nice, self.max_workers
        if self.dask is not None:
            self.dask.close()
        self.dask, self.executor = backend, "dask"

    def use_local(self) -> None:
        """Isolated workers' code runs in local processes again (from the next worker on)."""
        self.executor = "local"

    # -- runners -----------------------------------------------------------------------------

    def namespace_changed(self) -> None:
        """The notebook's namespace may have changed: the next fork takes a new snapshot, and
        a snapshot nobody uses ends now (it would hold on to memory the kernel frees)."""
        self._epoch += 1
        if self._snapshot is not None:
            self._snapshot.current = False
            self._snapshot.retire_if_unused()

    def snapshot(self) -> Snapshot:
        """A snapshot of the namespace as it is now (the current one, if still valid)."""
        current = self._snapshot
        if (
            current is not None
            and self.reuse_snapshots
            and current.epoch == self._epoch
            and not current.closed
        ):
            return current
        if current is not None:
            current.current = False
            current.retire_if_unused()
        self._snapshot = Snapshot(self.namespace, self._epoch)
        self._snapshot.current = self.reuse_snapshots  # else it retires once unused
        self._snapshots = [s for s in self._snapshots if not s.closed]
        self._snapshots.append(self._snapshot)
        return self._snapshot

    def mode(self, requested: str | None) -> WorkerNamespace:
        chosen = requested or self.worker_namespace
        if chosen not in ("isolated", "shared"):
            raise ValueError(f"worker namespace must be 'isolated' or 'shared', not {chosen!r}")
        return "isolated" if chosen == "isolated" and fork_supported() else "shared"

    def runner_for(self, agent_id: str, requested: str | None = None) -> CodeRunner:
        """The runner of a new worker `agent_id`; an isolated one snapshots the namespace now."""
        old = self.runners.get(agent_id)
        if old is not None:
            return old

        plane = weakref.ref(self)  # no cycle through the runner (see ProcessRunner)

        def sink(output: Output) -> None:
            found = plane()
            if found is not None and found.on_output is not None:
                found.on_output(agent_id, redacted(valid_output(output)))

        runner: CodeRunner
        chosen = requested or self.worker_namespace
        if self.executor == "dask" and self.dask is not None and chosen == "isolated":
            runner = self.dask.runner(agent_id, dict(self.namespace), self._epoch, sink)
        elif self.mode(requested) == "shared":
            runner = ThreadRunner(self.namespace, sink=sink, on_ran=self.namespace_changed)
        else:
            runner = ProcessRunner(self, agent_id, self.snapshot(), sink)
        self.runners[agent_id] = runner
        return runner

    def finished(self, agent_id: str, status: str) -> None:
        """The agent's run ended: a killed one's process is killed; others are parked."""
        runner = self.runners.get(agent_id)
        if isinstance(runner, DaskRunner):
            runner.finished(status)
        if not isinstance(runner, ProcessRunner):
            return
        self._tell_memory(agent_id, None)
        if status == "killed":
            runner.kill("the worker was stopped")
        elif runner.pid is None:
            runner.kill("it ran no code")  # nothing to keep: its snapshot place is released
        elif not runner.parked:
            runner.parked = True
            self._used[agent_id] = time.monotonic()
            self._prune(runner)
            self._notify()

    def _prune(self, runner: ProcessRunner) -> None:
        """A finished worker's process stays for pulls; what its code started ends now."""

        async def prune() -> None:
            if runner.alive and runner.parked:
                with contextlib.suppress(Exception):
                    await runner.call(prune_group)
                with contextlib.suppress(Exception):
                    await runner.call(release_transactions)
            if runner.alive and runner.parked:
                with contextlib.suppress(Exception):
                    mb = await runner.call(own_memory_mb)
                    if isinstance(mb, (int, float)):  # what the worker's process said
                        self._measured(runner.agent_id, mb)

        with contextlib.suppress(RuntimeError):
            task = asyncio.get_running_loop().create_task(prune())
            self._wakers.add(task)
            task.add_done_callback(self._wakers.discard)

    def _measured(self, agent_id: str, mb: float) -> None:
        self.memory[agent_id] = mb
        self._used.setdefault(agent_id, time.monotonic())
        if self.on_memory is not None:
            self.on_memory(agent_id, mb)
        self.keep_within_memory()

    def keep_within_memory(self) -> None:
        """Retire finished workers, least recently used first, until what they hold together
        is within `worker_memory_mb`."""
        parked = [r for r in self._alive if r.parked and r.alive and r.agent_id in self.memory]
        parked.sort(key=lambda r: self._used.get(r.agent_id, 0.0))
        total = sum(self.memory[r.agent_id] for r in parked)
        for runner in parked:
            if total <= self.worker_memory_mb:
                break
            held = self.memory[runner.agent_id]
            runner.kill(
                f"its process was retired to keep finished workers within "
                f"worker_memory_mb={self.worker_memory_mb} (it held {held:,.0f} MB)"
            )
            total -= held

    def free(self, agent_id: str) -> bool:
        """A finished worker's process ends now (%stop of a finished task, %stop --all):
        True if there was one."""
        runner = self.runners.get(agent_id)
        if isinstance(runner, ProcessRunner) and runner.parked and runner.alive:
            runner.kill("its process was freed (%stop) after it finished")
            return True
        return False

    def resumed(self, agent_id: str) -> None:
        runner = self.runners.get(agent_id)
        if isinstance(runner, (ProcessRunner, DaskRunner)):
            runner.parked = False
            if isinstance(runner, ProcessRunner) and runner.alive:
                self._start_sampler()

    async def pull(
        self, agent_id: str, names: Sequence[str], trust: bool = False
    ) -> dict[str, object]:
        """Copies of a worker's values: data only, or (`trust`) anything that pickles."""
        runner = self.runners.get(agent_id)
        if runner is None:
            raise PullError(f"worker {agent_id} has run no code, so it has no values to pull")
        self._used[agent_id] = time.monotonic()
        if isinstance(runner, ThreadRunner):
            raise PullError(
                f"worker {agent_id} shares the notebook's namespace (--shared): its names are "
                "already yours"
            )
        if isinstance(runner, (ProcessRunner, DaskRunner)):
            return await runner.pull(names, trust)
        return await runner.pull(names)

    # -- process bound -----------------------------------------------------------------------

    async def acquire(self, runner: ProcessRunner) -> None:
        """Room for one more process: retire the oldest parked one, or wait."""
        async with self._room:
            while len(self._alive) >= self.max_workers:
                parked = next((r for r in self._alive if r.parked), None)
                if parked is not None:
                    parked.kill(
                        f"its process was retired to keep within max_workers={self.max_workers}"
                    )
                    continue
                await self._room.wait()
            self._alive.append(runner)
        self._start_sampler()

    def release(self, runner: ProcessRunner) -> None:
        if runner in self._alive:
            self._alive.remove(runner)
            self._tell_memory(runner.agent_id, None)
        self._notify()

    # -- what the processes hold -------------------------------------------------------------

    def _start_sampler(self) -> None:
        if self._sampler is None and self.on_process_memory is not None:
            with contextlib.suppress(RuntimeError):
                self._sampler = asyncio.get_running_loop().create_task(self._sample())

    def _tell_memory(self, agent_id: str, rollup: Rollup | None) -> None:
        if self.on_process_memory is not None:
            self.on_process_memory(agent_id, rollup)

    async def _sample(self) -> None:
        """While a worker runs in a process: read its memory every SAMPLE_SECONDS (on a
        thread) and tell `on_process_memory`."""
        try:
            while any(not r.parked for r in self._alive):
                running = [r for r in self._alive if not r.parked and r.alive and r.pid]
                pids = [r.pid for r in running if r.pid is not None]
                read = await asyncio.to_thread(read_rollups, pids) if pids else []
                for runner, rollup in zip(running, read, strict=True):
                    if runner.alive and not runner.parked and rollup is not None:
                        with contextlib.suppress(Exception):  # a listener's bug ends nothing
                            self._tell_memory(runner.agent_id, rollup)
                await asyncio.sleep(SAMPLE_SECONDS)
        finally:
            self._sampler = None

    def no_process(self, agent_id: str) -> str:
        """Why agent `agent_id` has no live process (for the memory view)."""
        runner = self.runners.get(agent_id)
        if isinstance(runner, ThreadRunner):
            return "it runs in the kernel's own namespace (--shared)"
        if isinstance(runner, DaskRunner):
            return "it runs on the Dask cluster"
        if isinstance(runner, ProcessRunner) and runner.ended:
            return f"its process has ended: {runner.ended}"
        return "it has run no Python code yet (its process starts at its first call)"

    async def process_memory(self) -> tuple[Rollup | None, list[WorkerProcess]]:
        """The kernel's own memory and each live worker process's (read now, on a thread),
        with what each holds for pulls; oldest process first."""
        runners = [r for r in self._alive if r.alive and r.pid is not None]
        pids = [os.getpid(), *(r.pid for r in runners if r.pid is not None)]
        read = await asyncio.to_thread(read_rollups, pids)
        rows = [
            WorkerProcess(r.agent_id, pid, r.parked, rollup, r.held, r.held_count)
            for r, pid, rollup in zip(runners, pids[1:], read[1:], strict=True)
        ]
        return read[0], rows

    def _notify(self) -> None:
        async def wake() -> None:
            async with self._room:
                self._room.notify_all()

        with contextlib.suppress(RuntimeError):
            task = asyncio.get_running_loop().create_task(wake())
            self._wakers.add(task)
            task.add_done_callback(self._wakers.discard)

    @property
    def processes(self) -> int:
        """Worker processes alive now."""
        return len(self._alive)

    async def aclose(self) -> None:
        """Kill every worker process and snapshot, and close the Dask client this plane
        connected (the session is closing)."""
        if self._sampler is not None:
            self._sampler.cancel()
        for runner in list(self.runners.values()):
            if isinstance(runner, ProcessRunner):
                runner.kill("the session was closed")
        for snapshot in self._snapshots:
            snapshot.current = False
            snapshot.close()
        if self.dask is not None:
            await self.dask.aclose()
