"""Where agents' Python runs: the notebook's namespace on a thread, or a worker process
started from a snapshot of the kernel (sandboxed: `sandbox`, `confine`; kept off the servers
the kernel runs: `listeners`), or a Dask cluster.
See `plane.ComputePlane`. The runtime's own git runs confined too (`own_git`).

May import: the leaves only (errors, secrets, history, output)."""

from __future__ import annotations

from .base import (
    MAX_IMAGE_BYTES,
    MAX_IMAGES,
    CallFailedError,
    ClearOutput,
    CodeRunner,
    Display,
    ExecResult,
    Output,
    OutputSink,
    PullError,
    StreamText,
    WorkerLostError,
)
from .plane import ComputePlane, WorkerNamespace
from .process import ProcessRunner, fork_supported
from .source import ExecutionInterrupted, execute_source
from .thread import DEFAULT_EXECUTOR, ThreadExecutor, ThreadRunner

__all__ = [
    "DEFAULT_EXECUTOR",
    "MAX_IMAGES",
    "MAX_IMAGE_BYTES",
    "CallFailedError",
    "ClearOutput",
    "CodeRunner",
    "ComputePlane",
    "Display",
    "ExecResult",
    "ExecutionInterrupted",
    "Output",
    "OutputSink",
    "ProcessRunner",
    "PullError",
    "StreamText",
    "ThreadExecutor",
    "ThreadRunner",
    "WorkerLostError",
    "WorkerNamespace",
    "execute_source",
    "fork_supported",
]
