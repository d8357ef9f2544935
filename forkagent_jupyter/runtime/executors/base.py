"""What every place that runs code shares: its outputs, its result, and the runner protocol.

A `CodeRunner` is one agent's place to run Python: the notebook's namespace on a thread (the
parent, and workers forked with `--shared`), or a worker process started from a snapshot of
the kernel (every other worker). Runners report what the code printed and displayed as it
happens (`Output`s, for the worker's card) and return an `ExecResult` (for the model).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from ..errors import AgentError, RunEndedError
from ..history import valid_text

__all__ = [
    "MAX_IMAGES",
    "MAX_IMAGE_BYTES",
    "CallFailedError",
    "ClearOutput",
    "CodeRunner",
    "Display",
    "ExecResult",
    "Output",
    "OutputSink",
    "PullError",
    "StreamText",
    "WorkerLostError",
    "png_of",
    "valid_output",
]

MAX_IMAGES = 4
"""Figures of one call that go back to the model as image blocks (the first ones)."""
MAX_IMAGE_BYTES = 1_000_000
"""A figure larger than this (PNG bytes) is shown on the card but not sent to the model."""


@dataclass(frozen=True)
class StreamText:
    """Text the code wrote to stdout or stderr."""

    name: Literal["stdout", "stderr"]
    text: str


@dataclass(frozen=True)
class Display:
    """One rich output, as IPython's display() publishes it: a MIME bundle."""

    data: dict[str, object]
    metadata: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class ClearOutput:
    """The code called IPython's `clear_output()`: what the output area shows goes; with
    `wait`, when the next output arrives (as in a notebook cell)."""

    wait: bool = False


Output = StreamText | Display | ClearOutput
OutputSink = Callable[[Output], None]


def valid_output(output: Output) -> Output:
    """The output with its text as the frontend's JSON can carry it (see `valid_text`)."""
    if isinstance(output, ClearOutput):
        return output
    if isinstance(output, StreamText):
        return StreamText(output.name, valid_text(output.text))
    data = {k: valid_text(v) if isinstance(v, str) else v for k, v in output.data.items()}
    return Display(data, output.metadata)


@dataclass(frozen=True)
class ExecResult:
    """What one execution produced. `value_repr` is None when the code did not end with an
    expression (or it was None); `error` holds a formatted traceback; `images` are the PNG
    figures it displayed, in order."""

    stdout: str = ""
    stderr: str = ""
    value_repr: str | None = None
    error: str | None = None
    images: tuple[bytes, ...] = ()


class WorkerLostError(RunEndedError):
    """The worker's process ended while it ran code (a crash, os._exit, killed from outside).
    This ends the agent's run: it fails with this message."""


class CallFailedError(Exception):
    """A function run in the worker raised; the message is its error."""


class PullError(AgentError):
    """Values could not be brought back from a worker (the message says which and why)."""


def png_of(bundle: Mapping[str, object]) -> bytes | None:
    """The PNG bytes of a display bundle (IPython gives base64 text; some give bytes)."""
    data = bundle.get("image/png")
    if isinstance(data, bytes):
        return data if data.startswith(b"\x89PNG") else base64.b64decode(data)
    if isinstance(data, str):
        try:
            return base64.b64decode(data)
        except ValueError:
            return None
    return None


@runtime_checkable
class CodeRunner(Protocol):
    """One agent's place to run code. Calls on one runner run one at a time."""

    kind: str
    """"thread" (the notebook's own namespace) or "process" (a worker's own copy)."""

    async def run(self, code: str) -> ExecResult:
        """Run `code` like a notebook cell; outputs go to the runner's sink as they happen."""
        ...

    async def call(self, fn: Callable[..., object], *args: object) -> object:
        """`fn(namespace, *args)` where the code runs (fn and its result must pickle). From a
        worker's process the result is what it sent: the caller checks it is what `fn`
        returns."""
        ...

    async def pull(self, names: Sequence[str]) -> dict[str, object]:
        """Copies of these names' values; a PullError names what cannot come back."""
        ...
