"""The files of an agent's transcript, and what they hold besides its records.

<root>/<session>/agents/<agent_id>.jsonl      records: {"type": "message"|"event", ...,
                                              "seq": n, "t": unix time}, one per line
<root>/<session>/agents/<agent_id>.meta.json  `AgentMeta` (kind, parent, worktree, ...)
<root>/<session>/tasks/<agent_id>.output      plain text to `tail -f`: progress, result
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from ...messages_api.shapes import JSON
from ..errors import AgentError
from ..history import Message

__all__ = [
    "LOCK_FILE",
    "REPLACE_EVENTS",
    "RESET_EVENT",
    "RESULT_EVENT",
    "AgentMeta",
    "EventData",
    "LoadedTranscript",
    "PastRuns",
    "Record",
    "TeamRecord",
    "TranscriptError",
    "WorktreeRecord",
    "fingerprint",
    "is_file_id",
    "meta_path",
    "transcript_path",
]

RESET_EVENT = "reset"
RESULT_EVENT = "result"
"""The event that ends a run: `{"text": its result or error, "status": how it ended}` (older
records have no status). A run that has none after its last message was cut off."""
LOCK_FILE = "session.lock"
"""In a session's folder: held (`flock`) by the process whose session it is, while it is open,
so another process can tell a session that runs from one that a restart ended."""
REPLACE_EVENTS = ("compacted", "resumed")
"""Events whose `messages` replace the history from there on (the messages before stay in
the file: a transcript keeps everything)."""
_FILE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")


class EventData(TypedDict, total=False):
    """The data of an event record as it is read back: the fields of each kind that a
    reader looks at (each kind writes its own; a reader checks what it reads)."""

    # compacted, resumed: the history from there on
    messages: list[Message]
    # result (RESULT_EVENT)
    text: str
    status: str
    error: str
    # request (model/timing.py); `started` and `ended` are a tool call's too
    sent: float | None
    started: float | None
    first_token: float | None
    ended: float | None
    retries: list[dict[str, JSON]]
    rate_waits: list[list[float | None]]
    held: list[float | None] | None
    usage: dict[str, int]
    model: str
    message_id: str
    cost_usd: float
    # tool
    name: str
    is_error: bool
    # permission
    tool: str
    decision: str
    asked_at: float | None
    answered_at: float | None
    # notification, notifications_read
    task: str
    tasks: list[str]


class Record(TypedDict, total=False):
    """One line of a transcript file (a message or an event), as it is read back."""

    type: str
    message: Message
    kind: str
    data: EventData
    seq: int
    t: float


class TranscriptError(AgentError):
    """A transcript on disk is damaged beyond its last line."""


def fingerprint(value: object) -> str:
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


class TeamRecord(BaseModel):
    """A teammate's place in its team, enough to bring it back as a teammate after a restart
    (a transcript without one is a plain agent's)."""

    model_config = ConfigDict(extra="ignore")

    name: str
    """The team's name."""
    member: str
    """The teammate's name in it: what SendMessage's `to` and `%send` name it by."""
    plan: bool = False
    """It works in plan mode until its lead approves its plan."""


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
    team: TeamRecord | None = None
    """A teammate's team (None: not a teammate); written when it joins."""
    system_hash: str | None = None
    tools_hash: str | None = None
    created_at: float = Field(default_factory=time.time)

    def cache_mismatches(self, *, system: object = None, tools: object = None) -> list[str]:
        """Which of `system`/`tools` differ from what the agent ran with (unknown: no)."""
        pairs = (("system", system, self.system_hash), ("tools", tools, self.tools_hash))
        return [n for n, value, h in pairs if value is not None and h and fingerprint(value) != h]


class PastRuns(NamedTuple):
    """What an agent's transcript says of its runs so far (not its messages)."""

    ended: bool = True
    """Its last run ended (`RESULT_EVENT` after its last message); False: cut off (the kernel
    restarted, or the process died, while it ran)."""
    results: tuple[str, ...] = ()
    """The results its runs ended with, newest first."""
    tool_uses: int = 0
    tool_errors: int = 0
    """Of its `tool_uses`, those whose result was an error, the ones cut off included (a
    resumed history answers those with an error: the model reads them as failed)."""
    cut_off: int = 0
    """Tool calls that had no result when its run was cut off."""


class LoadedTranscript(NamedTuple):
    meta: AgentMeta
    messages: list[Message]
    """The history, repaired so that a resumed request is valid."""
    session_dir: Path
    repairs: list[str]
    """What the repair changed, for people (empty when nothing)."""
    past: PastRuns = PastRuns()
    """How its runs so far went, from its own records."""


def is_file_id(agent_id: str) -> bool:
    return bool(_FILE_ID.fullmatch(agent_id))


def meta_path(session_dir: Path, agent_id: str) -> Path:
    return session_dir / "agents" / f"{agent_id}.meta.json"


def transcript_path(session_dir: Path, agent_id: str) -> Path:
    return session_dir / "agents" / f"{agent_id}.jsonl"
