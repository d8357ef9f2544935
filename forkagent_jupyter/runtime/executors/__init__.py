"""Where agents' Python runs: the notebook's namespace on a thread (`thread`), or a worker
process started from a snapshot of the kernel (`process/`), confined away from the kernel's
secrets and servers (`confinement/`), or a Dask cluster (`cluster/`). `plane.ComputePlane`
chooses among them. The runtime's own git runs confined too (`confinement/own_git.py`).

The modules here are what every kind of worker shares: the results and outputs (`base`),
running a cell's source (`source`), displays and progress bars (`display`, `progress`), the
wire and the data a worker sends back (`wire`, `datacodec`, `pulled`), process memory
(`memory`). The subpackages build on them: `confinement/` imports none of them, `process/`
imports `confinement/`, `cluster/` imports both; `plane` imports `process/` and `cluster/`.

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
from .process.process import ProcessRunner, fork_supported
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
