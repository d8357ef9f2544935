"""Sidechain transcripts: one JSON-lines file per agent, enough to resume after a restart.

Layout under the store's root (by default `<workdir>/.forkagent/sessions`):

    <session>/agents/<agent_id>.jsonl      every message appended to the agent's history
    <session>/agents/<agent_id>.meta.json  kind, name, description, model, owner, and what
                                           it inherits from its parent
    <session>/tasks/<agent_id>.output      human-readable progress and the final result

A fork's file does not copy the history it inherits: its metadata names the parent's
transcript and how many of the parent's messages it shares, and loading joins the two. Each
line is written and flushed before the runtime moves on, message dicts keep their key order
(a resumed request must be byte-identical to the earlier ones to read them from the cache),
and everything written passes through `redact` (no API key on disk). Loading replays the
appends with the same merging rule as in memory and skips a truncated last line.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import UsageError
from .history import append_message
from .secrets import redact

__all__ = ["AgentMeta", "LoadedTranscript", "Transcript", "TranscriptStore"]

log = logging.getLogger(__name__)


@dataclass
class AgentMeta:
    agent_id: str
    kind: str
    description: str = ""
    name: str | None = None
    model: str = ""
    owner: str = "main"
    inherits_from: str | None = None
    inherits_count: int = 0
    created_at: float = field(default_factory=time.time)


@dataclass
class LoadedTranscript:
    meta: AgentMeta
    messages: list[dict[str, Any]]
    session_dir: Path


def _dumps(record: dict[str, Any]) -> str:
    return redact(json.dumps(record, ensure_ascii=False, separators=(",", ":")))


class Transcript:
    """The open files of one agent."""

    def __init__(self, path: Path, output_path: Path) -> None:
        self.path = path
        self.output_path = output_path
        self._seq = 0

    @staticmethod
    def _append(path: Path, line: str) -> None:
        # Opened per line: nothing stays open, and each line is on disk when this returns.
        with path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")

    def _write(self, record: dict[str, Any]) -> None:
        self._seq += 1
        self._append(self.path, _dumps({"seq": self._seq, "t": round(time.time(), 3), **record}))

    def append_message(self, message: dict[str, Any]) -> None:
        self._write({"type": "message", "message": message})

    def append_event(self, kind: str, data: dict[str, Any] | None = None) -> None:
        self._write({"type": "event", "kind": kind, "data": data or {}})

    def output(self, line: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        self._append(self.output_path, redact(f"[{stamp}] {line.rstrip()}"))


class TranscriptStore:
    """Transcripts of one session, and lookup across earlier sessions under the same root."""

    def __init__(self, root: Path, session_id: str) -> None:
        self.root = root
        self.session_id = session_id
        self.dir = root / session_id
        (self.dir / "agents").mkdir(parents=True, exist_ok=True)
        (self.dir / "tasks").mkdir(parents=True, exist_ok=True)
        ignore = root / ".gitignore"
        if not ignore.exists():
            ignore.write_text("*\n")

    def output_path(self, agent_id: str) -> Path:
        return self.dir / "tasks" / f"{agent_id}.output"

    def open(self, meta: AgentMeta) -> Transcript:
        agents = self.dir / "agents"
        (agents / f"{meta.agent_id}.meta.json").write_text(
            redact(json.dumps(asdict(meta), ensure_ascii=False, indent=1))
        )
        return Transcript(agents / f"{meta.agent_id}.jsonl", self.output_path(meta.agent_id))

    def locate(self, key: str) -> Path | None:
        """The session folder holding agent `key` (an id or a name), newest first."""
        sessions = sorted(
            (p for p in self.root.iterdir() if p.is_dir()),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        sessions.sort(key=lambda p: p != self.dir)  # this session first
        for session in sessions:
            if (session / "agents" / f"{key}.meta.json").exists():
                return session
        for session in sessions:
            for meta_file in (session / "agents").glob("*.meta.json"):
                try:
                    if json.loads(meta_file.read_text()).get("name") == key:
                        return session
                except (OSError, json.JSONDecodeError):
                    continue
        return None

    def agent_id_for(self, key: str) -> str | None:
        session = self.locate(key)
        if session is None:
            return None
        if (session / "agents" / f"{key}.meta.json").exists():
            return key
        for meta_file in (session / "agents").glob("*.meta.json"):
            if json.loads(meta_file.read_text()).get("name") == key:
                return meta_file.name.removesuffix(".meta.json")
        return None

    def load(self, agent_id: str, session_dir: Path | None = None) -> LoadedTranscript:
        session = session_dir or self.locate(agent_id)
        if session is None:
            raise UsageError(f"No transcript found for agent {agent_id!r}.")
        meta_file = session / "agents" / f"{agent_id}.meta.json"
        meta = AgentMeta(**json.loads(meta_file.read_text()))
        messages: list[dict[str, Any]] = []
        if meta.inherits_from:
            parent = self.load(meta.inherits_from, session)
            messages = parent.messages[: meta.inherits_count]
        for record in _records(session / "agents" / f"{agent_id}.jsonl"):
            if record.get("type") == "message":
                append_message(messages, record["message"])
            elif record.get("type") == "event" and record.get("kind") == "reset":
                messages = []
        return LoadedTranscript(meta, messages, session)


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                log.warning("%s: skipping a truncated last line", path)
                continue
            raise
    return out
