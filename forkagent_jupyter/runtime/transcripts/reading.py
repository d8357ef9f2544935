"""Reading transcripts back: their records, an agent's history replayed as the runtime built
it (inherited messages, resets, compactions), repaired at its end so that a resumed request
is valid, and the parent's recorded answers to notifications.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from pydantic import ValidationError

from ..history import Block, Message, append_message, blocks_of, own_start, tool_calls
from ..tasks.snapshot import AnsweredNotifications
from .files import (
    REPLACE_EVENTS,
    RESET_EVENT,
    RESULT_EVENT,
    AgentMeta,
    EventData,
    PastRuns,
    Record,
    TranscriptError,
    meta_path,
    transcript_path,
)
from .writer import flush_all

__all__ = [
    "INTERRUPTED_RESULT",
    "answered_notifications",
    "answers_covering",
    "continue_at",
    "past_runs",
    "read_meta",
    "read_metas",
    "read_records",
    "repair_for_resume",
    "replay",
]

log = logging.getLogger("forkagent_jupyter.runtime.transcripts")  # one log for all transcripts

INTERRUPTED_RESULT = (
    "The run was interrupted before this tool call's result was recorded; it may or may not "
    "have taken effect. Check before relying on it."
)


def _answers(root: Path) -> list[tuple[float, AnsweredNotifications]]:
    """Every recorded answer of the parent to notifications, with when it was recorded, from
    any session's parent transcript under `root`."""
    root = Path(root)
    flush_all()
    found: list[tuple[float, AnsweredNotifications]] = []
    sessions = [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    for session in sessions:
        try:
            records = read_records(transcript_path(session, "main"))
        except (OSError, TranscriptError) as exc:
            log.warning("skipping %s: %s", session, exc)
            continue
        for record in records:
            if record.get("kind") != "notifications_answered":
                continue
            try:
                answered = AnsweredNotifications.model_validate(record.get("data"))
            except ValidationError as exc:
                log.warning("skipping a notifications record in %s: %s", session, exc)
                continue
            found.append((float(record.get("t", 0)), answered))
    return found


def answered_notifications(root: Path, task_ids: list[str]) -> AnsweredNotifications | None:
    """The newest recorded answer of the parent to notifications of exactly these tasks (or,
    failing that, of any of them), from any session's parent transcript under `root`."""
    wanted = set(task_ids)
    best: tuple[int, float, AnsweredNotifications] | None = None
    for t, answered in _answers(root):
        ids = {s.task_id for s in answered.tasks}
        score = 2 if ids == wanted else 1 if ids & wanted else 0
        if score and (best is None or (score, t) > best[:2]):
            best = (score, t, answered)
    return best[2] if best else None


def answers_covering(root: Path, task_ids: list[str]) -> list[AnsweredNotifications]:
    """For each of these tasks, the newest recorded answer of the parent to a notification of
    it; each answer once, oldest first (tasks answered in separate turns give one each)."""
    answers = _answers(root)
    chosen: dict[int, tuple[float, AnsweredNotifications]] = {}
    for task_id in dict.fromkeys(task_ids):
        covering = [(t, a) for t, a in answers if any(s.task_id == task_id for s in a.tasks)]
        if covering:
            newest = max(covering, key=lambda pair: pair[0])
            chosen[id(newest[1])] = newest
    return [a for _, a in sorted(chosen.values(), key=lambda pair: pair[0])]


def continue_at(path: Path) -> int:
    """The number of records in `path`, after cutting off a truncated last line (a crash)."""
    if not path.exists():
        return 0
    flush_all()  # another store of this process may still be writing it
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        log.warning("%s: removing a truncated last line before appending", path)
        os.truncate(path, keep)
        data = data[:keep]
    return sum(1 for line in data.split(b"\n") if line.strip())


def read_meta(path: Path) -> AgentMeta:
    try:
        return AgentMeta.model_validate_json(path.read_bytes())
    except ValueError as exc:
        raise TranscriptError(f"{path}: not a valid meta file ({exc})") from None


def read_metas(session: Path) -> list[AgentMeta]:
    metas = []
    for path in (session / "agents").glob("*.meta.json") if (session / "agents").is_dir() else []:
        try:
            metas.append(read_meta(path))
        except (OSError, TranscriptError) as exc:
            log.warning("skipping %s: %s", path, exc)
    return sorted(metas, key=lambda m: m.created_at)


def past_runs(records: list[Record], is_fork: bool) -> PastRuns:
    """What an agent's records (its file) say of its runs: whether the last one ended, their
    results, its tool calls and how they came back. Only the agent's own calls count: a
    fork's file written when it was resumed in a later session starts with its parent's
    conversation (`own_start`)."""
    messages = [
        r["message"]
        for r in records
        if r.get("type") == "message" and isinstance(r.get("message"), dict)
    ]
    messages = messages[own_start(messages, is_fork) :]
    results: list[str] = []
    ended = False
    for record in records:
        if record.get("type") == "message":
            ended = False  # a new run (or more of this one) after the last result
        elif record.get("type") == "event" and record.get("kind") == RESULT_EVENT:
            ended = True
            raw = record.get("data")
            data: EventData = raw if isinstance(raw, dict) else {}
            text = data.get("text")
            if isinstance(text, str) and text and text != data.get("error"):
                results.insert(0, text)  # a result (a run that had none recorded its error)
    calls = tool_calls(messages)
    cut_off = 0 if ended else calls.unanswered
    return PastRuns(ended, tuple(results), calls.made, calls.failed + cut_off, cut_off)


def read_records(path: Path) -> list[Record]:
    """The records of a transcript file, read line by line (a long file is never one string:
    a reading thread lets the event loop in between lines)."""
    if not path.exists():
        return []
    records: list[Record] = []
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


def replay(session: Path, meta: AgentMeta, upto: int | None, seen: set[str]) -> list[Message]:
    """The agent's history as the runtime built it, from its records up to seq `upto`."""
    if meta.agent_id in seen:
        raise TranscriptError(f"transcripts of {sorted(seen)} inherit from each other")
    seen.add(meta.agent_id)
    messages: list[Message] = []
    if meta.inherits_from:
        parent_meta = meta_path(session, meta.inherits_from)
        if not parent_meta.is_file():
            raise TranscriptError(
                f"{meta.agent_id} inherits from {meta.inherits_from}, whose transcript is missing"
            )
        parent = replay(session, read_meta(parent_meta), meta.inherits_seq, seen)
        messages = parent[: meta.inherits_count]
    for record in read_records(transcript_path(session, meta.agent_id)):
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


def _is_empty_assistant(message: Message) -> bool:
    """An assistant message with nothing to send back: no text, no tool use, only thinking."""
    for block in blocks_of(message):
        kind = block.get("type")
        if kind == "text" and str(block.get("text", "")).strip():
            return False
        if kind not in ("text", "thinking", "redacted_thinking"):
            return False
    return True


def repair_for_resume(
    messages: list[Message],
) -> tuple[list[Message], list[str]]:
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
    results: list[Block] = [
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
