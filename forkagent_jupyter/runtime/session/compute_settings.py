"""The session's side of the compute plane: its worker settings pushed to the plane, and the
plane's memory samples and process life following the tasks of the registry."""

from __future__ import annotations

from ..executors import ComputePlane
from ..executors.memory import Rollup
from ..tasks.registry import Task, TaskRegistry
from .options import SessionOptions

__all__ = [
    "COMPUTE_SETTINGS",
    "apply_compute",
    "compute_follows",
    "process_memory_sampled",
    "worker_memory_sampled",
]

COMPUTE_SETTINGS = frozenset(
    {
        "worker_namespace",
        "max_workers",
        "worker_memory_mb",
        "worker_nice",
        "reuse_snapshots",
        "executor",
        "dask_address",
    }
)
"""The settings that the compute plane holds (`apply_compute`)."""


def apply_compute(o: SessionOptions, compute: ComputePlane, name: str | None = None) -> None:
    """The worker settings, to the compute plane (all of them at the start: `name` None)."""
    compute.worker_namespace = o.worker_namespace
    compute.max_workers = o.max_workers
    compute.nice = o.worker_nice
    compute.reuse_snapshots = o.reuse_snapshots
    if compute.dask is not None:
        compute.dask.max_workers, compute.dask.nice = o.max_workers, o.worker_nice
    if o.worker_memory_mb is not None and o.worker_memory_mb != compute.worker_memory_mb:
        compute.worker_memory_mb = o.worker_memory_mb
        compute.keep_within_memory()
    if name in (None, "executor", "dask_address") and (name or o.executor != "local"):
        if o.executor == "local":
            compute.use_local()
        elif compute.dask is not None and o.dask_address in ("", compute.dask.address):
            compute.executor = "dask"  # the cluster already connected (or given)
        else:
            compute.use_dask(o.dask_address or None)


def worker_memory_sampled(registry: TaskRegistry, agent_id: str, mb: float) -> None:
    """A worker's memory in MB, onto its task."""
    task = registry.find(agent_id)
    if task is not None:
        task.memory_mb = mb
        registry.changed(task)


def process_memory_sampled(registry: TaskRegistry, agent_id: str, rollup: Rollup | None) -> None:
    """A running worker's process memory, sampled: its card changes when what it shows
    (whole MB) does."""
    task = registry.find(agent_id)
    if task is None:
        return
    before = task.process.shown if task.process is not None else None
    task.process = rollup
    if (rollup.shown if rollup is not None else None) != before:
        registry.changed(task)


def compute_follows(compute: ComputePlane, task: Task) -> None:
    """A worker's process follows its task: killed with it, kept for pulls otherwise."""
    if task.done:
        compute.finished(task.id, task.status)
    else:
        compute.resumed(task.id)
