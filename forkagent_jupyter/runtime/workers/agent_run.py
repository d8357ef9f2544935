"""One agent's live state (`AgentRun`) and what is read off it: its own text, its outcome.

A fork inherits the parent's conversation up to its directive; everything a result, a
partial result or a terminal status says comes from the run's own messages after it.
"""

from __future__ import annotations

import asyncio
import secrets as _secrets
from dataclasses import dataclass, field
from typing import Literal

from ..config.agent_definitions import AgentDefinition
from ..events import Stop
from ..history import Message, last_assistant_text, own_start
from ..loop.config import AgentConfig, LoopState
from ..tasks.registry import Task, Todo
from ..transcripts.store import (
    AgentMeta,
    TeamRecord,
    Transcript,
    TranscriptStore,
    WorktreeRecord,
    fingerprint,
)
from .worktree import Worktree

__all__ = [
    "NO_OUTPUT",
    "AgentRun",
    "new_agent_id",
    "open_transcript",
    "outcome",
    "own_text",
    "team_record",
    "text_since",
]

NO_OUTPUT = "(no output)"

Ending = Literal["completed", "failed", "killed"]


def new_agent_id() -> str:
    return "a" + _secrets.token_hex(8)


@dataclass(eq=False)
class AgentRun:
    """One agent's live state."""

    id: str
    config: AgentConfig
    history: list[Message]
    state: LoopState = field(default_factory=LoopState)
    task: Task | None = None
    is_fork: bool = False
    owner: str = "main"
    definition: AgentDefinition | None = None
    inbox: list[str] = field(default_factory=list)
    runner: asyncio.Task[None] | None = None
    stop_reason: str | None = None  # why it was stopped, when not by a user's stop
    to_background: asyncio.Event = field(default_factory=asyncio.Event)  # see `background`
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    transcript: Transcript | None = None
    worktree: Worktree | None = None
    reisolate: bool = False  # its unchanged worktree was removed: create it again first
    creating: asyncio.Future[Worktree] | None = None  # that creation, while under way
    ending: bool = False  # between its terminal status and its notification
    stopping: bool = False  # killed, its loop not yet ended: it reads no more messages
    resume_with: list[str] = field(default_factory=list)  # messages that came meanwhile
    shell_groups: set[int] = field(default_factory=set)  # its Bash calls' process groups
    todos: list[Todo] = field(default_factory=list)  # its todo list (TodoWrite)
    team: str | None = None  # a teammate's team: it waits for mail between turns (teams.py)
    mailbox: list[str] = field(default_factory=list)  # <teammate-message>s not read yet
    turn_start: int = 0  # where a teammate's current turn begins in its history
    reported: bool = False  # a teammate messaged its lead during the current turn
    leaving: bool = False  # a teammate whose shutdown was approved: ends with this turn
    planning: bool = False  # a teammate in plan mode until its lead approves its plan


def team_record(run: AgentRun) -> TeamRecord | None:
    """What a teammate's transcript says of its team (None: the run is no teammate)."""
    task = run.task
    if run.team is None or task is None or task.name is None:
        return None
    return TeamRecord(name=run.team, member=task.name, plan=run.planning)


def _own_start(run: AgentRun) -> int:
    """Where the run's own messages begin (see `history.own_start`)."""
    return own_start(run.history, run.is_fork)


def own_text(run: AgentRun) -> str:
    """The run's last text of its own (never the inherited conversation's)."""
    return last_assistant_text(run.history[_own_start(run) :])


def text_since(run: AgentRun, start: int) -> str:
    """The run's last text among its messages from `start` on ("" when it wrote none)."""
    return last_assistant_text(run.history[start:])


def partial(run: AgentRun) -> str:
    """A stopped run's partial result: its own last text, or that it had none."""
    return own_text(run) or NO_OUTPUT


def outcome(run: AgentRun, stop: Stop | None) -> tuple[Ending, str | None, str | None]:
    """(status, result, error) of a run whose loop ended by itself."""
    text = own_text(run)
    if run.stop_reason is not None:  # stopped while its last request was refused
        return "killed", text or NO_OUTPUT, run.stop_reason
    if stop is not None and stop.reason in ("error", "refusal"):
        return "failed", text or None, stop.error or f"the run ended: {stop.reason}"
    if stop is not None and stop.reason == "max_turns":
        limit = run.config.max_turns
        note = f"[stopped at its limit of {limit} model requests before finishing]"
        return "completed", f"{text}\n\n{note}".strip(), None
    if not text:
        return "failed", None, "the agent produced no text"
    return "completed", text, None


def open_transcript(
    store: TranscriptStore | None, run: AgentRun, inherits: str | None, shared: int
) -> None:
    """Open the run's transcript and write what it does not inherit (the first `shared`
    messages are the parent's `inherits`); from then on the run records itself there."""
    if store is None or run.task is None:
        return
    task = run.task
    meta = AgentMeta(
        agent_id=run.id,
        kind=task.kind,
        description=task.description,
        name=task.name,
        model=run.config.model,
        owner=run.owner,
        inherits_from=inherits,
        inherits_count=shared,
        system_hash=fingerprint(run.config.system),
        tools_hash=fingerprint(run.config.tools.specs()),
        worktree_path=str(run.worktree.path) if run.worktree is not None else None,
        worktree=(WorktreeRecord(**run.worktree.fields()) if run.worktree is not None else None),
        team=team_record(run),
    )
    transcript = run.transcript = store.open(meta)
    for message in run.history[shared:]:
        transcript.append_message(message)
    run.state.on_message = transcript.append_message
    run.state.on_history_replaced = lambda messages, data: transcript.append_event(
        "compacted", {**data, "messages": messages}
    )
    run.config.gate.recorder = lambda entry: transcript.append_event("permission", entry)
    task.output_file = transcript.output_path
    transcript.output(f"started {task.kind} {task.id}: {task.description}")
