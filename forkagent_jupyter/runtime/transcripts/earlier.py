"""What the last session left unfinished: the agents a kernel restart (or a crash) cut off.

A run of an agent ends with a result event in its transcript (`Transcript.set_result`); an
agent whose file has messages after its last result, or none, was cut off while it ran
(`PastRuns.ended`). After a restart the new session's `%tasks` lists those of the last session
as interrupted (`%send NAME ...` resumes one from its transcript): the last session is the
newest other session under the same root in which an agent ran, and that is no longer open.
A session is open while its process holds its `LOCK_FILE` (two notebooks in one folder: the
other one's workers are running, not interrupted).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

from ..tasks.notifications import failed_calls_text
from .files import LOCK_FILE, TranscriptError, transcript_path
from .reading import past_runs, read_metas, read_records
from .writer import flush_all

__all__ = ["InterruptedAgent", "ainterrupted_agents", "in_use", "interrupted_agents"]

log = logging.getLogger("forkagent_jupyter.runtime.transcripts")


@dataclass(frozen=True)
class InterruptedAgent:
    """An agent of an earlier session whose run was cut off, as its transcript has it."""

    agent_id: str
    kind: str
    description: str
    name: str | None
    session: str
    """The folder (id) of the session it ran in."""
    started_at: float
    tool_uses: int
    tool_errors: int
    """Of its `tool_uses`, those that failed, the ones cut off included."""
    cut_off: int
    """Tool calls that had no result when it was cut off."""
    results: tuple[str, ...] = ()
    """The results of its earlier runs that had ended, newest first."""
    team: str | None = None
    """A teammate's team (None: no teammate): listed under it; resumed, it rejoins it."""

    @property
    def label(self) -> str:
        return self.name or self.agent_id

    @property
    def failed_calls(self) -> str:
        """ "2 of 5 tool calls failed" ("" when none did), as a task says it."""
        return failed_calls_text(self.tool_errors, self.tool_uses)

    def line(self) -> str:
        """One line for a person: what it was, that it was cut off, how to resume it."""
        calls = f", {self.failed_calls}" if self.failed_calls else ""
        back = f", back in team {self.team}" if self.team is not None else ""
        return (
            f"{self.label} ({self.kind}) interrupted{calls} · {self.description} · cut off "
            f"by a kernel restart; %send {self.label} MESSAGE resumes it from its transcript"
            f"{back}"
        )


def in_use(session: Path) -> bool:
    """Whether another open session holds `session`'s lock (see the module doc). False where
    `flock` is not there, and for a session folder without a lock (written before them)."""
    try:
        import fcntl
    except ImportError:
        return False
    path = session / LOCK_FILE
    if not path.is_file():
        return False
    try:
        with path.open("a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def _last_session(root: Path, current: Path | None) -> Path | None:
    """The newest session under `root` but `current` in which an agent ran, unless open."""
    candidates = []
    for session in (p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        if current is not None and session.resolve() == current.resolve():
            continue
        metas = [m for m in read_metas(session) if m.agent_id != "main"]
        if metas:
            candidates.append((max(m.created_at for m in metas), session))
    for _newest, session in sorted(candidates, reverse=True):
        if not in_use(session):
            return session
    return None


def interrupted_agents(
    root: str | Path, current: str | Path | None = None
) -> list[InterruptedAgent]:
    """The agents of the last session (see the module doc) that were cut off, oldest first
    (blocking: it reads the files; on the event loop use `ainterrupted_agents`)."""
    flush_all()  # a store of this process may still be writing them
    session = _last_session(Path(root), Path(current) if current is not None else None)
    if session is None:
        return []
    found = []
    for meta in read_metas(session):
        if meta.agent_id == "main":
            continue
        try:
            records = read_records(transcript_path(session, meta.agent_id))
            past = past_runs(records, meta.kind == "fork")
        except (OSError, TranscriptError) as exc:
            log.warning("skipping %s in %s: %s", meta.agent_id, session, exc)
            continue
        if past.ended:
            continue
        found.append(
            InterruptedAgent(
                agent_id=meta.agent_id,
                kind=meta.kind,
                description=meta.description,
                name=meta.name,
                session=session.name,
                started_at=meta.created_at,
                tool_uses=past.tool_uses,
                tool_errors=past.tool_errors,
                cut_off=past.cut_off,
                results=tuple(past.results),
                team=meta.team.name if meta.team is not None else None,
            )
        )
    return found


async def ainterrupted_agents(
    root: str | Path, current: str | Path | None = None
) -> list[InterruptedAgent]:
    """`interrupted_agents` for the event loop: the files are read on a thread."""
    return await asyncio.to_thread(interrupted_agents, root, current)
