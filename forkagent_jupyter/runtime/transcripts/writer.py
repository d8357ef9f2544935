"""How transcripts reach the disk: one writer thread per store, raw append-only descriptors.

Records are handed to the writer thread and written in the order given, each as one
unbuffered write, never on the event loop; what is left is written at the end of the process.
Every line passes through `redact`, and the few characters other readers take for line breaks
are escaped so a record stays on one line.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import queue
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path

from ..secrets import redact

__all__ = ["MAX_OPEN_FILES", "AppendFiles", "Writer", "dumps", "flush_all"]

log = logging.getLogger("forkagent_jupyter.runtime.transcripts")  # one log for all transcripts

MAX_OPEN_FILES = 64


# Characters that `str.splitlines` (and many editors) treat as line breaks although JSON
# leaves them raw: escaped, so every record stays on one line for every reader.
_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def dumps(record: Mapping[str, object]) -> str:
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=_unknown)
    return redact(text.translate(_LINE_BREAKS))


def _unknown(value: object) -> str:
    log.warning("transcript: %s written as text (not JSON)", type(value).__name__)
    return str(value)


class AppendFiles:
    """Append-only file descriptors, at most MAX_OPEN_FILES open at once (hundreds of agents).

    Raw descriptors in O_APPEND mode: one unbuffered write per line (nothing to flush), and
    the descriptors are closed with the store or when it is garbage collected."""

    _FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)

    def __init__(self) -> None:
        self._open: OrderedDict[Path, int] = OrderedDict()
        self._finalizer = weakref.finalize(self, _close_all, self._open)

    def append(self, path: Path, data: bytes) -> None:
        """Write `data` at the end of `path`. An OSError part-way carries what was not
        written as `unwritten` (the bytes before it are on disk)."""
        fd = self._open.pop(path, None)
        if fd is None:
            if len(self._open) >= MAX_OPEN_FILES:
                os.close(self._open.popitem(last=False)[1])
            try:
                fd = os.open(path, self._FLAGS | getattr(os, "O_BINARY", 0), 0o644)
            except OSError as exc:
                exc.unwritten = data  # type: ignore[attr-defined]
                raise
        self._open[path] = fd
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view) :]
            except OSError as exc:
                exc.unwritten = bytes(view)  # type: ignore[attr-defined]
                raise

    def close(self, *paths: Path) -> None:
        for path in paths or list(self._open):
            fd = self._open.pop(path, None)
            if fd is not None:
                os.close(fd)


def _close_all(fds: OrderedDict[Path, int]) -> None:
    while fds:
        os.close(fds.popitem()[1])


_Job = Callable[[], object]


class Writer:
    """One thread that runs a store's file writes, in the order they were submitted.

    Submitting never waits (an unbounded queue), so the event loop hands records over and goes
    on; the thread starts with the first write and ends when the writer is garbage collected."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()  # None: stop
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def submit(self, job: _Job) -> None:
        """Hand `job` over; off the event loop (no loop running in this thread), also wait
        until it is done, so a script's write is on disk when its call returns."""
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    thread = threading.Thread(
                        target=_drain, args=(self._jobs,), name=self.name, daemon=True
                    )
                    thread.start()
                    self._thread = thread
                    _live_writers.add(self)
                    stop = weakref.finalize(self, self._jobs.put, None)
                    stop.atexit = False  # at exit the thread writes what is left first
        self._jobs.put(job)
        if not _on_event_loop():
            self.flush()

    def flush(self) -> None:
        """Wait (blocking) until every write submitted before is done."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            return
        done = threading.Event()
        self._jobs.put(done.set)
        while not done.wait(0.5) and thread.is_alive():
            pass

    async def aflush(self) -> None:
        """Wait, without blocking the event loop, until every write submitted before is done."""
        if self._thread is None or not self._thread.is_alive():
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def resolve() -> None:
            if not done.done():
                done.set_result(None)

        def signal() -> None:
            try:
                loop.call_soon_threadsafe(resolve)
            except RuntimeError:  # the loop is closed: nobody waits
                pass

        self._jobs.put(signal)
        await done


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _drain(jobs: queue.SimpleQueue[_Job | None]) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        try:
            job()
        except Exception:  # a bug in one write must not stop the others
            log.exception("transcript writer: a write failed")


_live_writers: weakref.WeakSet[Writer] = weakref.WeakSet()


@atexit.register
def flush_all() -> None:
    """At the end of the process, what the stores were given reaches the disk."""
    for writer in list(_live_writers):
        writer.flush()
