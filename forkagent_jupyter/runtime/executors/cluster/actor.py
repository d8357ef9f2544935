"""The cluster side of a worker on Dask: one actor per agent, owning one process.

`DaskAgent` is a Dask actor (`client.submit(DaskAgent, actor=True)`): a stateful object on one
Dask worker that lives as long as the kernel holds it. It owns a child process
(`cluster/child.py`) in which the agent's code runs; the child holds the agent's namespace across
its tool calls. The actor's methods are coroutines, so they run on the Dask worker's event loop
concurrently: `poll` answers while `run` waits for the code, and `kill` ends the child at once
(this is how Stop interrupts code on the cluster, and why one agent's Stop never touches the
other agents or tasks on the same Dask worker).

Values come in two ways: small ones as pickles with the call that first needs them, large ones
as keys of data scattered once to the cluster (the siblings of one fork share it), fetched here
from the cluster and handed to the child.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import pickle
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from ...secrets import scrubbed_env
from ..base import Display, ExecResult, Output, StreamText
from ..process.child import describe_status
from ..wire import (
    FrameTooLargeError,
    MessageError,
    Request,
    call_result,
    encode,
    frame_limit,
    read_message,
)
from .child import bind_names

if TYPE_CHECKING:
    from dask.typing import Key

__all__ = ["DaskAgent"]

Reply = tuple[str, object, list[tuple[int, Output]]]
"""("ok", value, outputs) or ("lost", why, outputs): outputs not yet acknowledged."""


class Started(TypedDict):
    """Where an agent's child process runs: its pid, the Dask worker's address, the host."""

    pid: int
    worker: str
    host: str


class DaskAgent:
    """One agent's place on the cluster (see the module doc)."""

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.proc: subprocess.Popen[bytes] | None = None
        self.ended: str | None = None
        self.outputs: list[tuple[int, Output]] = []
        self._seq = itertools.count(1)
        self._ids = itertools.count(1)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock: asyncio.Lock | None = None
        self._killed = False

    def __del__(self) -> None:  # the kernel let go of the actor: its process goes too
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(Exception):
                self.proc.kill()

    # -- the child process -------------------------------------------------------------------

    async def start(self, nice: int = 0, workdir: str | None = None) -> Started:
        """Start the child process (once, at niceness `nice`), in `workdir` (the notebook's
        folder) when that folder exists on this machine; where it runs."""
        if self.proc is None:
            self.proc, ours = await asyncio.to_thread(_spawn_child, nice, workdir)
            self._reader, self._writer = await asyncio.open_unix_connection(sock=ours)
            self._lock = asyncio.Lock()
        from distributed import get_worker

        assert self.proc is not None
        return {"pid": self.proc.pid, "worker": get_worker().address, "host": socket.gethostname()}

    async def _request(self, message: Request, reply: str) -> tuple[object, ...]:
        assert self._reader is not None and self._writer is not None
        if self.ended is not None:
            raise _LostError(self.ended)
        limit = frame_limit(reply)
        try:
            self._writer.write(encode(message))
            await self._writer.drain()
            while True:
                received = await read_message(self._reader, limit)
                if received[0] == "output" and isinstance(received[1], (StreamText, Display)):
                    self.outputs.append((next(self._seq), received[1]))
                elif received[0] == reply and received[1:2] == message[1:2]:
                    return received
                elif received[0] not in ("done", "called", "pulled"):  # an old reply: skipped
                    raise MessageError(f"an unexpected {received[0]!r} message")
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            raise _LostError(await self._how_it_ended()) from None
        except MessageError as exc:
            await self.kill()
            self.ended = (
                f"the worker's process sent {exc}, and was ended"
                if isinstance(exc, FrameTooLargeError)
                else f"the worker's process sent what is not a message of the protocol ({exc})"
            )
            raise _LostError(self.ended) from None

    async def _how_it_ended(self) -> str:
        if self._killed:
            self.ended = "the worker was stopped"
            return self.ended
        status = None
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(self.proc.wait, 2.0)
            status = self.proc.returncode
        if status is None:
            how = "ended"
        elif status < 0:
            how = describe_status(-status & 0x7F)  # killed by a signal
        else:
            how = f"exited with code {status}"
        self.ended = f"the worker's process on the Dask cluster {how} while it ran Python code"
        return self.ended

    def _unacked(self, ack: int) -> list[tuple[int, Output]]:
        self.outputs = [(seq, out) for seq, out in self.outputs if seq > ack]
        return list(self.outputs)

    async def _bind(
        self, blobs: dict[str, bytes], keys: dict[str, tuple[str, list[str]]]
    ) -> dict[str, str]:
        """Give the child the values it needs: pickles as they came, scattered data by key."""
        errors: dict[str, str] = {}
        if keys:
            fetched = await _fetch(keys)
            for name, value in fetched.items():
                try:
                    blobs[name] = await asyncio.to_thread(
                        pickle.dumps, value, pickle.HIGHEST_PROTOCOL
                    )
                except Exception as exc:
                    errors[name] = f"could not be handed to the worker ({exc})"
        if blobs:
            called = await self._request(("call", next(self._ids), bind_names, (blobs,)), "called")
            status, value = call_result(called[2] if len(called) == 3 else None)
            errors.update(
                value if status == "ok" and isinstance(value, dict) else {"?": str(value)}
            )
        return errors

    # -- requests (from the kernel) ----------------------------------------------------------

    async def run(
        self, code: str, blobs: dict[str, bytes], keys: dict[str, tuple[str, list[str]]], ack: int
    ) -> Reply:
        await self.start()
        assert self._lock is not None
        async with self._lock:
            try:
                errors = await self._bind(dict(blobs), keys)
                done = await self._request(("run", next(self._ids), code), "done")
            except _LostError as lost:
                return ("lost", str(lost), self._unacked(ack))
        result = done[2]
        if errors and isinstance(result, ExecResult):
            note = "".join(f"[{name} was not shipped: {why}]\n" for name, why in errors.items())
            result = ExecResult(
                result.stdout, note + result.stderr, result.value_repr, result.error, result.images
            )
        return ("ok", result, self._unacked(ack))

    async def call(
        self,
        fn: Callable[..., object],
        args: tuple[object, ...],
        blobs: dict[str, bytes],
        keys: dict[str, tuple[str, list[str]]],
    ) -> Reply:
        await self.start()
        assert self._lock is not None
        async with self._lock:
            try:
                await self._bind(dict(blobs), keys)
                called = await self._request(("call", next(self._ids), fn, args), "called")
            except _LostError as lost:
                return ("lost", str(lost), [])
        return ("ok", called[2], [])

    async def pull(self, names: list[str], trust: bool = False) -> Reply:
        if self.proc is None or self.ended is not None:
            return ("lost", self.ended or "it has not run any code yet", [])
        assert self._lock is not None
        async with self._lock:
            try:
                pulled = await self._request(("pull", next(self._ids), names, trust), "pulled")
            except _LostError as lost:
                return ("lost", str(lost), [])
        return ("ok", pulled[2:], [])

    async def poll(self, ack: int) -> list[tuple[int, Output]]:
        """Outputs after `ack` (those up to it were received and are dropped here)."""
        return self._unacked(ack)

    async def kill(self) -> None:
        """End the child process now; a call waiting on it returns as stopped."""
        self._killed = True
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.kill(self.proc.pid, signal.SIGKILL)
        if self._writer is not None:
            self._writer.close()
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(self.proc.wait, 2.0)


def _spawn_child(
    nice: int, workdir: str | None = None
) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """A fresh interpreter serving one agent (no credentials in its environment), started in
    `workdir` when this machine has it (a shared file system, a LocalCluster)."""
    ours, theirs = socket.socketpair()
    env = {k: v for k, v in scrubbed_env().items() if not k.startswith("ANTHROPIC_")}
    module = "forkagent_jupyter.runtime.executors.cluster.child"
    proc = subprocess.Popen(
        [sys.executable, "-m", module, str(theirs.fileno()), str(nice)],
        pass_fds=[theirs.fileno()],
        env=env,
        cwd=workdir if workdir and Path(workdir).is_dir() else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    theirs.close()
    return proc, ours


class _LostError(Exception):
    """The child process ended under a request."""


async def _fetch(keys: dict[str, tuple[str, list[str]]]) -> dict[str, object]:
    """The values of scattered keys, from this Dask worker's memory; a key it does not hold
    is first copied here from a worker that does (once per Dask worker: the siblings placed
    on it share that copy while the key lives)."""
    from distributed import get_worker

    worker = get_worker()
    missing: dict[Key, list[str]] = {
        key: holders for key, holders in keys.values() if key not in worker.data
    }
    if missing:
        await worker.gather(missing)
    found: dict[str, object] = {}
    for name, (key, _holders) in keys.items():
        if key not in worker.data:
            raise _LostError(
                f"the cluster lost the data of {name} (it was scattered from the kernel)"
            )
        found[name] = worker.data[key]
    return found
