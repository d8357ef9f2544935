"""Sidechain transcripts: one JSON-lines file per agent, enough to resume after a restart.

    <root>/<session>/agents/<agent_id>.jsonl      records: {"type": "message"|"event", ...,
                                                  "seq": n, "t": unix time}, one per line
    <root>/<session>/agents/<agent_id>.meta.json  `AgentMeta` (kind, parent, worktree, ...)
    <root>/<session>/tasks/<agent_id>.output      plain text to `tail -f`: progress, result

Messages keep their key order and unicode, so a loaded history serializes to the bytes that
were sent and a resumed request reads the prompt cache. The files are written by the store's
own writer thread, never on the event loop: `append_*` numbers and formats the record and hands
it over, and the thread writes the records in the order they were given, each as one
unbuffered write. Called on the event loop, `append_*` returns at once; called elsewhere (a
script, a thread), when the record is on disk. `flush()` (or `await aflush()`) returns once
everything handed over before it is on disk; the store's own readers flush first,
`Session.wait` flushes before it returns, and what is left is written at `close()` and at the
end of the process. Everything written passes through `redact`. A fork does not copy what it
inherits: its meta names the parent, the number of shared messages and the parent's record
count at the start. A write that fails (a full disk) loses nothing: what could not be written
is kept in memory, in order, and written at the store's next write, flush or close once the disk
takes it again; a line in the log says when a file falls behind and when it has caught up (the
agents run on meanwhile).

Reading back (`load`, `agent_id_for`, ...) blocks until the files are read; on the event loop
the runtime calls the `a`-versions (`aload`, `aagent_id_for`), which read on a thread.
Loading replays the records as the runtime builds histories (same-role messages merge, a
`reset` event starts over, a `compacted` or `resumed` event carries the history from there),
skips a truncated last line with a warning, then repairs the end (`repair_for_resume`). The
repair only appends or drops at the end, so every message sent before stays byte-identical.
Tool calls without a result are answered with an error result saying the run was interrupted,
rather than dropped: the model learns that the call may have taken effect. Trailing assistant
messages with nothing to send back are dropped.

Here: `Transcript` and `TranscriptStore`. The files and the meta: `transcript_files`; the
writer thread: `transcript_writer`; replaying and repairing: `transcript_reading`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path

from ..errors import UsageError
from ..history import Message
from ..secrets import redact
from .files import (
    LOCK_FILE,
    RESET_EVENT,
    RESULT_EVENT,
    AgentMeta,
    LoadedTranscript,
    PastRuns,
    TeamRecord,
    TranscriptError,
    WorktreeRecord,
    fingerprint,
    is_file_id,
    meta_path,
    transcript_path,
)
from .reading import (
    INTERRUPTED_RESULT,
    answered_notifications,
    answers_covering,
    continue_at,
    past_runs,
    read_meta,
    read_metas,
    read_records,
    repair_for_resume,
    replay,
)
from .writer import MAX_OPEN_FILES, AppendFiles, Writer, dumps

__all__ = [
    "INTERRUPTED_RESULT",
    "MAX_OPEN_FILES",
    "RESET_EVENT",
    "AgentMeta",
    "LoadedTranscript",
    "PastRuns",
    "TeamRecord",
    "Transcript",
    "TranscriptError",
    "TranscriptStore",
    "WorktreeRecord",
    "answered_notifications",
    "answers_covering",
    "fingerprint",
    "repair_for_resume",
]

log = logging.getLogger(__name__)


class Transcript:
    """The files of one agent, open for appending."""

    def __init__(self, store: TranscriptStore, meta: AgentMeta, seq: int = 0) -> None:
        self.store = store
        self.meta = meta
        self.agent_id = meta.agent_id
        self.path = transcript_path(store.dir, meta.agent_id)
        self.meta_path = meta_path(store.dir, meta.agent_id)
        self.output_path = store.output_path(meta.agent_id)
        self.seq = seq

    def _append(self, path: Path, text: str) -> None:
        data = text.encode("utf-8", "backslashreplace")  # a lone surrogate, escaped
        self.store._writer.submit(lambda: self.store._write(path, data))

    def _record(self, record: Mapping[str, object]) -> None:
        self.seq += 1
        line = dumps({**record, "seq": self.seq, "t": round(time.time(), 3)})
        self._append(self.path, line + "\n")

    def append_message(self, message: Message) -> None:
        """Record one message of the agent's history (on disk when this returns)."""
        self._record({"type": "message", "message": message})

    def append_event(self, kind: str, data: Mapping[str, object] | None = None) -> None:
        """Record something that is not a message: a permission decision, a status, usage."""
        self._record({"type": "event", "kind": kind, "data": data or {}})

    def output(self, line: str) -> None:
        """Add a line to the human-readable output file (continuation lines indented)."""
        stamp = time.strftime("%H:%M:%S")
        text = line.rstrip().replace("\n", "\n" + " " * (len(stamp) + 3))
        self._append(self.output_path, redact(f"[{stamp}] {text}\n"))

    def set_result(self, text: str, status: str | None = None, *, error: str | None = None) -> None:
        """The end of a run: `text` (its result, else its error) at the end of the output
        file, and an event in the transcript with how it ended (`status`, `error`), which
        tells a run that ended from one a restart cut off (`PastRuns`)."""
        data: dict[str, str] = {"text": text}
        if status is not None:
            data["status"] = status
        if error is not None:
            data["error"] = error
        self.append_event(RESULT_EVENT, data)
        body = text.strip() or "(no text)"
        self._append(self.output_path, redact(f"[{time.strftime('%H:%M:%S')}] result:\n{body}\n"))

    def update_meta(self, **changes: object) -> None:
        """Change fields of the meta file (e.g. `worktree_path=None` once it is removed)."""
        self.meta = self.meta.model_copy(update=changes)
        self.store._submit_meta(self.meta)

    def close(self) -> None:
        """Release the file handles (a later append opens them again)."""
        paths = (self.path, self.output_path)
        self.store._writer.submit(lambda: self.store._files.close(*paths))


_HELD_LOCKS: set[int] = set()
"""The session locks this process holds (their file descriptors)."""


def _let_go(fd: int) -> None:
    _HELD_LOCKS.discard(fd)
    os.close(fd)


def _drop_locks_in_child() -> None:
    """In a process forked from this one (a worker's snapshot, and the user's own forks):
    its copies of the sessions' locks are closed. A copy holds the lock as long as it is open,
    so a worker still dying after its kernel had gone kept the session looking open, and a
    restarted kernel did not list its interrupted agents."""
    for fd in list(_HELD_LOCKS):
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD_LOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_drop_locks_in_child)


class TranscriptStore:
    """Transcripts of one session, and lookup across earlier sessions under the same root."""

    def __init__(self, root: Path, session_id: str) -> None:
        self.root = Path(root)
        self.session_id = session_id
        self.dir = self.root / session_id
        (self.dir / "agents").mkdir(parents=True, exist_ok=True)
        (self.dir / "tasks").mkdir(parents=True, exist_ok=True)
        self._files = AppendFiles()
        self._writer = Writer(f"forkagent-transcripts-{session_id}")
        # what a failing write (a full disk) left unwritten, in order, per file; and the
        # latest whole-file replacements (metas, JSON) that failed: the writer thread's alone
        self._behind: dict[Path, list[bytes]] = {}
        self._replace_behind: dict[Path, Callable[[], None]] = {}
        self._caught_up = 0
        ignore = self.root / ".gitignore"
        if not ignore.exists():
            self._writer.submit(lambda: ignore.write_text("*\n"))
        self._transcripts: dict[str, Transcript] = {}
        self._lock: weakref.finalize[[int], TranscriptStore] | None = None  # see `_hold_lock`
        self._writer.submit(self._hold_lock)

    def _hold_lock(self) -> None:
        """Hold this session's `LOCK_FILE` (on the writer thread) until it closes, the store
        is collected or the process ends: another process then sees that it runs (`in_use`).
        Where `flock` is not there (Windows), no session is ever seen running."""
        try:
            import fcntl
        except ImportError:
            return
        path = self.dir / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            log.warning("transcripts: cannot lock %s: %s", path, exc)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            log.warning("transcripts: cannot lock %s: %s", path, exc)
            return
        _HELD_LOCKS.add(fd)
        self._lock = weakref.finalize(self, _let_go, fd)

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock()  # closes it, once

    def output_path(self, agent_id: str) -> Path:
        return self.dir / "tasks" / f"{agent_id}.output"

    def append_output(self, task_id: str, data: bytes) -> None:
        """Append `data` as it is to a task's output file, on the writer thread (a background
        command's output; `b""` creates the file)."""
        path = self.output_path(task_id)
        self._writer.submit(lambda: self._write(path, data))

    def flush(self) -> None:
        """Wait until every record and meta change handed over so far is on disk (blocking:
        from a thread, or before reading the files back); what a full disk held back is
        tried again first."""
        self._writer.submit(self._catch_up)
        self._writer.flush()

    async def aflush(self) -> None:
        """`flush()` for the event loop: waits without blocking it."""
        self._writer.submit(self._catch_up)
        await self._writer.aflush()

    @property
    def behind(self) -> int:
        """Files with writes still held in memory (a full disk); 0 when all is on disk."""
        return len(self._behind) + len(self._replace_behind)

    def _write(self, path: Path, data: bytes) -> None:
        """Append `data` to `path` after what it is behind with (on the writer thread)."""
        waiting = self._behind.get(path)
        if waiting is not None:
            waiting.append(data)
        else:
            try:
                self._files.append(path, data)
            except OSError as exc:
                self._fell_behind(path, exc)
                self._behind[path] = [getattr(exc, "unwritten", data)]
                return
        self._catch_up()

    def _fell_behind(self, path: Path, exc: OSError) -> None:
        if not self._behind and not self._replace_behind:
            log.error(
                "transcripts: cannot write %s (%s); what is not written is kept in memory and "
                "written as soon as the disk takes it again",
                path,
                exc,
            )

    def _replace(self, path: Path, write: Callable[[], None]) -> None:
        """Replace a whole file (`write` does it), or keep it for later if the disk is full."""
        self._replace_behind.pop(path, None)
        try:
            write()
        except OSError as exc:
            self._fell_behind(path, exc)
            self._replace_behind[path] = write
            return
        self._catch_up()

    def _catch_up(self) -> None:
        """Write what the disk refused before, in order, as far as it takes it now."""
        if not self._behind and not self._replace_behind:
            return
        for path in list(self._behind):
            waiting = self._behind[path]
            while waiting:
                try:
                    self._files.append(path, waiting[0])
                except OSError as exc:
                    waiting[0] = getattr(exc, "unwritten", waiting[0])
                    return
                waiting.pop(0)
                self._caught_up += 1
            del self._behind[path]
        for path, write in list(self._replace_behind.items()):
            try:
                write()
            except OSError:
                return
            del self._replace_behind[path]
            self._caught_up += 1
        log.warning(
            "transcripts: caught up, %d held-back writes are now on disk in %s",
            self._caught_up,
            self.dir,
        )
        self._caught_up = 0

    def _write_meta(self, meta: AgentMeta) -> None:
        """Replace the meta file in one step (a reader never sees half of it)."""
        text = json.dumps(meta.model_dump(mode="json"), ensure_ascii=False, indent=1)
        tmp = meta_path(self.dir, meta.agent_id).with_suffix(".tmp")
        tmp.write_text(redact(text) + "\n", encoding="utf-8")
        tmp.replace(meta_path(self.dir, meta.agent_id))

    def _submit_meta(self, meta: AgentMeta) -> None:
        path = meta_path(self.dir, meta.agent_id)
        self._writer.submit(lambda: self._replace(path, lambda: self._write_meta(meta)))

    def write_json(self, path: Path, data: object) -> None:
        """Replace the file `path` (under the root) with `data` as JSON, in one step, on the
        writer thread: in order with the transcripts, never on the event loop."""
        text = redact(json.dumps(data, ensure_ascii=False, indent=1)) + "\n"

        def write() -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)

        self._writer.submit(lambda: self._replace(path, write))

    def open(self, agent_id: str | AgentMeta, meta: AgentMeta | None = None) -> Transcript:
        """Start or continue an agent's transcript: `open(meta)` or `open(agent_id, meta)`.

        Writes the meta file and creates the output file, so both exist from the start."""
        if isinstance(agent_id, AgentMeta):
            meta = agent_id
        elif meta is None or meta.agent_id != agent_id:
            raise UsageError(f"open({agent_id!r}, meta): the meta is of another agent")
        if not is_file_id(meta.agent_id):
            raise UsageError(f"{meta.agent_id!r} cannot name a transcript file")
        parent = self._transcripts.get(meta.inherits_from or "")
        if parent is not None and meta.inherits_seq is None:
            meta = meta.model_copy(update={"inherits_seq": parent.seq})
        transcript = self._transcripts.get(meta.agent_id)
        if transcript is None:  # else: already open here, its record count carries on
            seq = continue_at(transcript_path(self.dir, meta.agent_id))
            transcript = self._transcripts[meta.agent_id] = Transcript(self, meta, seq)
        transcript.meta = meta
        self._submit_meta(meta)
        transcript._append(transcript.output_path, "")  # the output file exists from the start
        return transcript

    def close(self) -> None:
        """Close the files once what was handed over is written (this does not wait); the
        session is no longer `in_use`."""
        self._writer.submit(self._catch_up)
        self._writer.submit(self._files.close)
        self._writer.submit(self._release_lock)

    async def aclose(self) -> None:
        """`close()`, then wait (without blocking the loop) until the files are written."""
        await self.aflush()
        self.close()

    # -- finding ---------------------------------------------------------------------------

    def exists(self, agent_id: str, session_dir: Path | None = None) -> bool:
        """Whether this session (or `session_dir`) has a transcript of `agent_id`."""
        where = session_dir or self.dir
        self.flush()
        return is_file_id(agent_id) and meta_path(where, agent_id).is_file()

    def agent_ids(self) -> list[str]:
        """Agents with a transcript in this session, oldest first."""
        self.flush()
        return [m.agent_id for m in read_metas(self.dir)]

    def find(self, name_or_id: str) -> str | None:
        """The agent id in this session for an id or a name (the newest of that name)."""
        self.flush()
        found = self.search(self.root, name_or_id, sessions=[self.dir])
        return found[1] if found else None

    @staticmethod
    def search(
        root: Path, name_or_id: str, *, sessions: list[Path] | None = None
    ) -> tuple[Path, str] | None:
        """(session folder, agent id) of `name_or_id` under `root`, whatever session wrote it.

        An id wins over a name; of several matches the newest wins (a resumed agent's copy)."""
        if sessions is None:
            root = Path(root)
            sessions = [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
        found = [
            (read_meta(meta_path(s, name_or_id)), s)
            for s in sessions
            if is_file_id(name_or_id) and meta_path(s, name_or_id).is_file()
        ] or [(m, s) for s in sessions for m in read_metas(s) if m.name == name_or_id]
        if not found:
            return None
        meta, session = max(found, key=lambda pair: pair[0].created_at)
        return session, meta.agent_id

    def _anywhere(self, name_or_id: str) -> tuple[Path, str] | None:
        self.flush()
        here = self.search(self.root, name_or_id, sessions=[self.dir])
        return here or self.search(self.root, name_or_id)

    def agent_id_for(self, name_or_id: str) -> str | None:
        """The agent id for an id or a name: this session first, then the newest other."""
        found = self._anywhere(name_or_id)
        return found[1] if found else None

    async def aagent_id_for(self, name_or_id: str) -> str | None:
        """`agent_id_for` for the event loop: the files are read on a thread."""
        return await asyncio.to_thread(self.agent_id_for, name_or_id)

    # -- loading ---------------------------------------------------------------------------

    def load(self, agent_id: str, session_dir: Path | None = None) -> LoadedTranscript:
        """The agent's meta and history, repaired for resuming (this session first, else the
        newest session that has it)."""
        found = (session_dir, agent_id) if session_dir else self._anywhere(agent_id)
        if not (found and found[1] == agent_id and self.exists(agent_id, found[0])):
            raise UsageError(f"No transcript found for agent {agent_id!r}.")
        session = found[0]
        meta = read_meta(meta_path(session, agent_id))
        messages, repairs = repair_for_resume(replay(session, meta, upto=None, seen=set()))
        past = past_runs(read_records(transcript_path(session, agent_id)), meta.kind == "fork")
        return LoadedTranscript(meta, messages, session, repairs, past)

    async def aload(self, agent_id: str, session_dir: Path | None = None) -> LoadedTranscript:
        """`load` for the event loop: the files are read on a thread."""
        return await asyncio.to_thread(self.load, agent_id, session_dir)
