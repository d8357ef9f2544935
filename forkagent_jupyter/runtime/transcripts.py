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
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import json
import logging
import os
import queue
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from .errors import AgentError, UsageError
from .history import append_message, blocks_of
from .secrets import redact

__all__ = [
    "RESET_EVENT",
    "AgentMeta",
    "LoadedTranscript",
    "Transcript",
    "TranscriptError",
    "TranscriptStore",
    "WorktreeRecord",
    "answered_notifications",
    "fingerprint",
    "repair_for_resume",
]

log = logging.getLogger(__name__)

RESET_EVENT = "reset"
REPLACE_EVENTS = ("compacted", "resumed")
"""Events whose `messages` replace the history from there on (the messages before stay in
the file: a transcript keeps everything)."""
INTERRUPTED_RESULT = (
    "The run was interrupted before this tool call's result was recorded; it may or may not "
    "have taken effect. Check before relying on it."
)
MAX_OPEN_FILES = 64
_FILE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")


class TranscriptError(AgentError):
    """A transcript on disk is damaged beyond its last line."""


def fingerprint(value: Any) -> str:
    """sha256 of `value`'s exact JSON (key order kept), e.g. of the system blocks or tools."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class WorktreeRecord(BaseModel):
    """An agent's git worktree, enough to work in it again after a restart."""

    model_config = ConfigDict(extra="ignore")

    repo_root: str
    path: str
    branch: str
    base_commit: str
    parent_workdir: str
    workdir: str


class AgentMeta(BaseModel):
    """What a transcript needs besides its messages to resume the agent."""

    model_config = ConfigDict(extra="ignore")

    agent_id: str
    kind: str
    """Either 'fork', 'main', or the agent type's name."""
    description: str = ""
    name: str | None = None
    model: str = ""
    owner: str = "main"
    """The parent: the agent that launched this one and receives its notification."""
    inherits_from: str | None = None
    inherits_count: int = 0
    inherits_seq: int | None = None
    """The parent's last record number when this agent was opened (None: not known)."""
    worktree_path: str | None = None
    """The agent's git worktree while it exists (None once removed, or never isolated)."""
    worktree: WorktreeRecord | None = None
    """Where the agent was isolated (kept after the worktree is removed): a resume runs
    there again, never in the parent's checkout."""
    system_hash: str | None = None
    tools_hash: str | None = None
    created_at: float = Field(default_factory=time.time)

    def cache_mismatches(self, *, system: Any | None = None, tools: Any | None = None) -> list[str]:
        """Which of `system`/`tools` differ from what the agent ran with (unknown: no)."""
        pairs = (("system", system, self.system_hash), ("tools", tools, self.tools_hash))
        return [n for n, value, h in pairs if value is not None and h and fingerprint(value) != h]


class LoadedTranscript(NamedTuple):
    meta: AgentMeta
    messages: list[dict[str, Any]]
    """The history, repaired so that a resumed request is valid."""
    session_dir: Path
    repairs: list[str]
    """What the repair changed, for people (empty when nothing)."""


# Characters that `str.splitlines` (and many editors) treat as line breaks although JSON
# leaves them raw: escaped, so every record stays on one line for every reader.
_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def _dumps(record: dict[str, Any]) -> str:
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=_unknown)
    return redact(text.translate(_LINE_BREAKS))


def _unknown(value: Any) -> str:
    log.warning("transcript: %s written as text (not JSON)", type(value).__name__)
    return str(value)


class _Files:
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
_STOP = object()


class _Writer:
    """One thread that runs a store's file writes, in the order they were submitted.

    Submitting never waits (an unbounded queue), so the event loop hands records over and goes
    on; the thread starts with the first write and ends when the writer is garbage collected."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
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
                    stop = weakref.finalize(self, self._jobs.put, _STOP)
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


def _drain(jobs: queue.SimpleQueue[Any]) -> None:
    while True:
        job = jobs.get()
        if job is _STOP:
            return
        try:
            job()
        except Exception:  # a bug in one write must not stop the others
            log.exception("transcript writer: a write failed")


_live_writers: weakref.WeakSet[_Writer] = weakref.WeakSet()


@atexit.register
def _flush_all() -> None:
    """At the end of the process, what the stores were given reaches the disk."""
    for writer in list(_live_writers):
        writer.flush()


class Transcript:
    """The files of one agent, open for appending."""

    def __init__(self, store: TranscriptStore, meta: AgentMeta, seq: int = 0) -> None:
        self.store = store
        self.meta = meta
        self.agent_id = meta.agent_id
        self.path = _transcript_path(store.dir, meta.agent_id)
        self.meta_path = _meta_path(store.dir, meta.agent_id)
        self.output_path = store.output_path(meta.agent_id)
        self.seq = seq

    def _append(self, path: Path, text: str) -> None:
        data = text.encode("utf-8", "backslashreplace")  # a lone surrogate, escaped
        self.store._writer.submit(lambda: self.store._write(path, data))

    def _record(self, record: dict[str, Any]) -> None:
        self.seq += 1
        line = _dumps({**record, "seq": self.seq, "t": round(time.time(), 3)})
        self._append(self.path, line + "\n")

    def append_message(self, message: dict[str, Any]) -> None:
        """Record one message of the agent's history (on disk when this returns)."""
        self._record({"type": "message", "message": message})

    def append_event(self, kind: str, data: dict[str, Any] | None = None) -> None:
        """Record something that is not a message: a permission decision, a status, usage."""
        self._record({"type": "event", "kind": kind, "data": data or {}})

    def output(self, line: str) -> None:
        """Add a line to the human-readable output file (continuation lines indented)."""
        stamp = time.strftime("%H:%M:%S")
        text = line.rstrip().replace("\n", "\n" + " " * (len(stamp) + 3))
        self._append(self.output_path, redact(f"[{stamp}] {text}\n"))

    def set_result(self, text: str) -> None:
        """The final result: the end of the output file, and an event in the transcript."""
        self.append_event("result", {"text": text})
        body = text.strip() or "(no text)"
        self._append(self.output_path, redact(f"[{time.strftime('%H:%M:%S')}] result:\n{body}\n"))

    def update_meta(self, **changes: Any) -> None:
        """Change fields of the meta file (e.g. `worktree_path=None` once it is removed)."""
        self.meta = self.meta.model_copy(update=changes)
        self.store._submit_meta(self.meta)

    def close(self) -> None:
        """Release the file handles (a later append opens them again)."""
        paths = (self.path, self.output_path)
        self.store._writer.submit(lambda: self.store._files.close(*paths))


class TranscriptStore:
    """Transcripts of one session, and lookup across earlier sessions under the same root."""

    def __init__(self, root: Path, session_id: str) -> None:
        self.root = Path(root)
        self.session_id = session_id
        self.dir = self.root / session_id
        (self.dir / "agents").mkdir(parents=True, exist_ok=True)
        (self.dir / "tasks").mkdir(parents=True, exist_ok=True)
        self._files = _Files()
        self._writer = _Writer(f"forkagent-transcripts-{session_id}")
        # what a failing write (a full disk) left unwritten, in order, per file; and the
        # latest whole-file replacements (metas, JSON) that failed: the writer thread's alone
        self._behind: dict[Path, list[bytes]] = {}
        self._replace_behind: dict[Path, Callable[[], None]] = {}
        self._caught_up = 0
        ignore = self.root / ".gitignore"
        if not ignore.exists():
            self._writer.submit(lambda: ignore.write_text("*\n"))
        self._transcripts: dict[str, Transcript] = {}

    def output_path(self, agent_id: str) -> Path:
        return self.dir / "tasks" / f"{agent_id}.output"

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
        tmp = _meta_path(self.dir, meta.agent_id).with_suffix(".tmp")
        tmp.write_text(redact(text) + "\n", encoding="utf-8")
        tmp.replace(_meta_path(self.dir, meta.agent_id))

    def _submit_meta(self, meta: AgentMeta) -> None:
        path = _meta_path(self.dir, meta.agent_id)
        self._writer.submit(lambda: self._replace(path, lambda: self._write_meta(meta)))

    def write_json(self, path: Path, data: Any) -> None:
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
        if not _is_file_id(meta.agent_id):
            raise UsageError(f"{meta.agent_id!r} cannot name a transcript file")
        parent = self._transcripts.get(meta.inherits_from or "")
        if parent is not None and meta.inherits_seq is None:
            meta = meta.model_copy(update={"inherits_seq": parent.seq})
        transcript = self._transcripts.get(meta.agent_id)
        if transcript is None:  # else: already open here, its record count carries on
            seq = _continue(_transcript_path(self.dir, meta.agent_id))
            transcript = self._transcripts[meta.agent_id] = Transcript(self, meta, seq)
        transcript.meta = meta
        self._submit_meta(meta)
        transcript._append(transcript.output_path, "")  # the output file exists from the start
        return transcript

    def close(self) -> None:
        """Close the files once what was handed over is written (this does not wait)."""
        self._writer.submit(self._catch_up)
        self._writer.submit(self._files.close)

    async def aclose(self) -> None:
        """`close()`, then wait (without blocking the loop) until the files are written."""
        await self.aflush()
        self.close()

    # -- finding ---------------------------------------------------------------------------

    def exists(self, agent_id: str, session_dir: Path | None = None) -> bool:
        """Whether this session (or `session_dir`) has a transcript of `agent_id`."""
        where = session_dir or self.dir
        self.flush()
        return _is_file_id(agent_id) and _meta_path(where, agent_id).is_file()

    def agent_ids(self) -> list[str]:
        """Agents with a transcript in this session, oldest first."""
        self.flush()
        return [m.agent_id for m in _metas(self.dir)]

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
            (_read_meta(_meta_path(s, name_or_id)), s)
            for s in sessions
            if _is_file_id(name_or_id) and _meta_path(s, name_or_id).is_file()
        ] or [(m, s) for s in sessions for m in _metas(s) if m.name == name_or_id]
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
        meta = _read_meta(_meta_path(session, agent_id))
        messages, repairs = repair_for_resume(_replay(session, meta, upto=None, seen=set()))
        return LoadedTranscript(meta, messages, session, repairs)

    async def aload(self, agent_id: str, session_dir: Path | None = None) -> LoadedTranscript:
        """`load` for the event loop: the files are read on a thread."""
        return await asyncio.to_thread(self.load, agent_id, session_dir)


def answered_notifications(root: Path, task_ids: list[str]) -> dict[str, Any] | None:
    """The newest recorded answer of the parent to notifications of exactly these tasks (or,
    failing that, of any of them): {"tasks": [...], "answer": str}, from any session's
    parent transcript under `root`."""
    root = Path(root)
    _flush_all()
    wanted = set(task_ids)
    best: tuple[float, int, dict[str, Any]] | None = None
    sessions = [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    for session in sessions:
        try:
            records = _records(_transcript_path(session, "main"))
        except (OSError, TranscriptError) as exc:
            log.warning("skipping %s: %s", session, exc)
            continue
        for record in records:
            data = record.get("data") or {}
            if record.get("kind") != "notifications_answered" or not isinstance(data, dict):
                continue
            ids = {str(t.get("id")) for t in data.get("tasks") or [] if isinstance(t, dict)}
            score = 2 if ids == wanted else 1 if ids & wanted else 0
            if score and (best is None or (score, record.get("t", 0)) > (best[1], best[0])):
                best = (float(record.get("t", 0)), score, data)
    return best[2] if best else None


def _is_file_id(agent_id: str) -> bool:
    return bool(_FILE_ID.fullmatch(agent_id))


def _meta_path(session_dir: Path, agent_id: str) -> Path:
    return session_dir / "agents" / f"{agent_id}.meta.json"


def _transcript_path(session_dir: Path, agent_id: str) -> Path:
    return session_dir / "agents" / f"{agent_id}.jsonl"


def _continue(path: Path) -> int:
    """The number of records in `path`, after cutting off a truncated last line (a crash)."""
    if not path.exists():
        return 0
    _flush_all()  # another store of this process may still be writing it
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        log.warning("%s: removing a truncated last line before appending", path)
        os.truncate(path, keep)
        data = data[:keep]
    return sum(1 for line in data.split(b"\n") if line.strip())


def _read_meta(path: Path) -> AgentMeta:
    try:
        return AgentMeta.model_validate_json(path.read_bytes())
    except ValueError as exc:
        raise TranscriptError(f"{path}: not a valid meta file ({exc})") from None


def _metas(session: Path) -> list[AgentMeta]:
    metas = []
    for path in (session / "agents").glob("*.meta.json") if (session / "agents").is_dir() else []:
        try:
            metas.append(_read_meta(path))
        except (OSError, TranscriptError) as exc:
            log.warning("skipping %s: %s", path, exc)
    return sorted(metas, key=lambda m: m.created_at)


def _records(path: Path) -> list[dict[str, Any]]:
    """The records of a transcript file, read line by line (a long file is never one string:
    a reading thread lets the event loop in between lines)."""
    if not path.exists():
        return []
    records = []
    number, broken = 0, 0  # `broken`: a line that is not JSON, allowed only as the last one
    with path.open(encoding="utf-8", errors="replace", newline="\n") as lines:
        for line in lines:
            if not line.strip():  # we never write blank lines
                continue
            number += 1
            if broken:
                raise TranscriptError(f"{path}: line {broken} is not valid JSON")
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                broken = number
    if broken:
        log.warning("%s: skipping a truncated last line (line %d)", path, broken)
    return [r for r in records if isinstance(r, dict)]


def _replay(
    session: Path, meta: AgentMeta, upto: int | None, seen: set[str]
) -> list[dict[str, Any]]:
    """The agent's history as the runtime built it, from its records up to seq `upto`."""
    if meta.agent_id in seen:
        raise TranscriptError(f"transcripts of {sorted(seen)} inherit from each other")
    seen.add(meta.agent_id)
    messages: list[dict[str, Any]] = []
    if meta.inherits_from:
        parent_meta = _meta_path(session, meta.inherits_from)
        if not parent_meta.is_file():
            raise TranscriptError(
                f"{meta.agent_id} inherits from {meta.inherits_from}, whose transcript is missing"
            )
        parent = _replay(session, _read_meta(parent_meta), meta.inherits_seq, seen)
        messages = parent[: meta.inherits_count]
    for record in _records(_transcript_path(session, meta.agent_id)):
        if upto is not None and int(record.get("seq", 0)) > upto:
            break
        if record.get("type") == "message" and isinstance(record.get("message"), dict):
            append_message(messages, record["message"])
        elif record.get("type") == "event" and record.get("kind") == RESET_EVENT:
            messages = []
        elif record.get("type") == "event" and record.get("kind") in REPLACE_EVENTS:
            data = record.get("data") or {}
            if isinstance(data, dict) and isinstance(data.get("messages"), list):
                messages = [m for m in data["messages"] if isinstance(m, dict)]
    return messages


def _is_empty_assistant(message: dict[str, Any]) -> bool:
    """An assistant message with nothing to send back: no text, no tool use, only thinking."""
    for block in blocks_of(message):
        kind = block.get("type")
        if kind == "text" and str(block.get("text", "")).strip():
            return False
        if kind not in ("text", "thinking", "redacted_thinking"):
            return False
    return True


def repair_for_resume(
    messages: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[str]]:
    """`messages` made valid to continue: only the end changes, the rest stays identical.

    Drops trailing assistant messages that carry nothing usable (whitespace, thinking only),
    and answers tool_use blocks of the last assistant message that have no tool_result with
    an error result. Never leaves two messages of one role next to each other."""
    out = list(messages)
    repairs: list[str] = []
    while out and out[-1].get("role") == "assistant" and _is_empty_assistant(out[-1]):
        out.pop()
        repairs.append("dropped an empty assistant message at the end")
    last = max((i for i, m in enumerate(out) if m.get("role") == "assistant"), default=None)
    if last is None:
        return out, repairs
    asked = [str(b.get("id")) for b in blocks_of(out[last]) if b.get("type") == "tool_use"]
    answered = {
        str(b.get("tool_use_id"))
        for m in out[last + 1 :]
        for b in blocks_of(m)
        if b.get("type") == "tool_result"
    }
    missing = [i for i in asked if i not in answered]
    if not missing:
        return out, repairs
    results = [
        {"type": "tool_result", "tool_use_id": i, "content": INTERRUPTED_RESULT, "is_error": True}
        for i in missing
    ]
    if last + 1 < len(out):  # a user message with some results: add the others after them
        blocks = blocks_of(out[last + 1])
        at = sum(1 for b in blocks if b.get("type") == "tool_result")
        out[last + 1] = {**out[last + 1], "content": [*blocks[:at], *results, *blocks[at:]]}
    else:
        append_message(out, {"role": "user", "content": results})
    repairs.append(f"answered {len(missing)} interrupted tool call(s) with an error result")
    return out, repairs
