"""A fan-out as rows on a time axis, read from its transcripts (live or after a restart).

Each agent's transcript holds what `model/timing.py` recorded: a `request` event per model request
(sent, response start, first token, end, usage, broken attempts, rate-limit waits, the hold
for the lead fork), a `tool` event per tool call, a `permission` event per decision (with
`asked_at` / `answered_at` when a person or policy was asked); the parent's holds
`notification` (a task's report was queued for it) and `notifications_read` (it reached the
parent's conversation). `load_timeline` turns them into `TimelineRow`s, one lane per agent:
the parent first, then the agents in the order they started.

Forks started from the same point of a conversation share a cache prefix: the first one to
be sent (the lead) writes it, and the others read it once the lead's response has started.
For each such group, `Timeline.leads` says when the lead's write became readable and which
siblings read it (their first request read more from the cache than the lead's did); the
first request rows carry `lead` and `reads_lead` (tokens read beyond what the lead read).

Times in rows are seconds since `Timeline.t0` (a wall-clock time). Reading is blocking: on
the event loop use `aload_timeline`, which reads on a thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from typing_extensions import TypedDict, Unpack

from ..errors import UsageError
from .files import EventData
from .reading import read_metas, read_records
from .store import AgentMeta, TranscriptStore
from .writer import flush_all

__all__ = [
    "Lane",
    "Lead",
    "RowKind",
    "Timeline",
    "TimelineRow",
    "aload_timeline",
    "describe",
    "load_timeline",
]

RowKind = Literal["request", "retry", "rate_wait", "held", "tool", "approval", "notification"]


@dataclass(frozen=True)
class TimelineRow:
    """One bar of the timeline. `start`/`end` are seconds since the timeline's `t0`."""

    lane: str
    agent_id: str
    kind: RowKind
    start: float
    end: float
    label: str = ""
    first_token: float | None = None
    """request: the first text token of the attempt that answered (None: no text)."""
    readable: float | None = None
    """request: its response started; its cache writes are readable from then on."""
    message_id: str = ""
    input_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    lead: str | None = None
    """A fork's first request: the agent id of its group's lead (itself, for the lead)."""
    reads_lead: int = 0
    """A sibling's first request: tokens it read from the cache beyond what the lead read."""
    task: str | None = None
    """notification: the task it reports."""

    @property
    def duration(self) -> float:
        return self.end - self.start


class _RequestFields(TypedDict, total=False):
    """The fields of a request row beyond those of every row."""

    first_token: float | None
    readable: float | None
    message_id: str
    input_tokens: int
    cache_read: int
    cache_write: int
    output_tokens: int
    cost_usd: float


@dataclass(frozen=True)
class Lane:
    name: str
    agent_id: str
    kind: str  # "main", "fork" or the named agent's type


@dataclass(frozen=True)
class Lead:
    """A group of sibling forks: the lead, when its cache write became readable (seconds
    since t0), and the siblings that read it."""

    agent_id: str
    readable: float
    readers: tuple[str, ...]
    written: int
    """Tokens the lead's first request wrote to the cache."""


@dataclass
class Timeline:
    session_id: str
    t0: float
    lanes: list[Lane]
    rows: list[TimelineRow]
    leads: list[Lead] = field(default_factory=list)

    def lane_of(self, agent_id: str) -> str:
        return next((lane.name for lane in self.lanes if lane.agent_id == agent_id), agent_id)

    def of(self, kind: RowKind, lane: str | None = None) -> list[TimelineRow]:
        return [r for r in self.rows if r.kind == kind and (lane is None or r.lane == lane)]

    @property
    def span(self) -> float:
        return max((r.end for r in self.rows), default=0.0)

    def records(self) -> list[dict[str, object]]:
        return [asdict(r) for r in self.rows]

    def to_dataframe(self) -> Any:
        """The rows as a pandas DataFrame (pandas needed); `attrs` hold t0 and the session."""
        import pandas as pd  # type: ignore[import-untyped]

        frame = pd.DataFrame(self.records(), columns=list(TimelineRow.__dataclass_fields__))
        frame.attrs.update(t0=self.t0, session_id=self.session_id)
        return frame


# -- finding the fan-out -------------------------------------------------------------------


def _session_of(root: Path, here: Path | None, keys: Sequence[str]) -> tuple[Path, list[str]]:
    """The session folder that holds the agents `keys` (ids or names), and their ids."""
    found: list[tuple[Path, str]] = []
    for key in keys:
        hit = (TranscriptStore.search(root, key, sessions=[here]) if here else None) or (
            TranscriptStore.search(root, key)
        )
        if hit is None:
            raise UsageError(f"No transcript found for agent {key!r}.")
        found.append(hit)
    sessions = {s for s, _ in found}
    if len(sessions) > 1:
        names = ", ".join(sorted(s.name for s in sessions))
        raise UsageError(f"Those agents ran in different sessions ({names}): give one's agents.")
    return found[0][0], [a for _, a in found]


def _latest_with_agents(root: Path, here: Path | None) -> Path:
    if here is not None and any(m.agent_id != "main" for m in read_metas(here)):
        return here
    candidates = []
    for session in (p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        metas = [m for m in read_metas(session) if m.agent_id != "main"]
        if metas:
            candidates.append((max(m.created_at for m in metas), session))
    if not candidates:
        raise UsageError("No fan-out to draw: no agent has run in this session or an earlier one.")
    return max(candidates)[1]


def load_timeline(
    root: str | Path,
    ids: Sequence[str] = (),
    *,
    session_dir: str | Path | None = None,
    current: str | Path | None = None,
) -> Timeline:
    """The timeline of the agents `ids` (ids or names; default: every agent of the session)
    and of the parent that launched them, from the transcripts under `root`.

    `session_dir`: read that session. Otherwise the session that holds `ids` (`current`, the
    running session's folder, first); without ids, `current` if an agent ran there, else the
    newest session under `root` in which one did (a finished fan-out after a restart)."""
    flush_all()
    root = Path(root)
    here = Path(current) if current is not None else None
    if session_dir is not None:
        session = Path(session_dir)
        chosen = [_resolve(session, key) for key in ids]
    elif ids:
        session, chosen = _session_of(root, here, ids)
    else:
        session, chosen = _latest_with_agents(root, here), []
    metas = {m.agent_id: m for m in read_metas(session)}
    if not chosen:
        chosen = [a for a in metas if a != "main"]
    if not chosen:
        raise UsageError(f"No agent ran in session {session.name}: nothing to draw.")
    return _build(session, metas, chosen)


async def aload_timeline(
    root: str | Path,
    ids: Sequence[str] = (),
    *,
    session_dir: str | Path | None = None,
    current: str | Path | None = None,
) -> Timeline:
    """`load_timeline` for the event loop: the files are read on a thread."""
    return await asyncio.to_thread(
        load_timeline, root, ids, session_dir=session_dir, current=current
    )


def _resolve(session: Path, key: str) -> str:
    hit = TranscriptStore.search(session.parent, key, sessions=[session])
    if hit is None:
        raise UsageError(f"No transcript of agent {key!r} in session {session.name}.")
    return hit[1]


# -- building the rows ---------------------------------------------------------------------


def _lane_name(meta: AgentMeta) -> str:
    if meta.agent_id == "main":
        return "parent"
    return meta.name or meta.agent_id


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _events(session: Path, agent_id: str) -> list[tuple[float, str, EventData]]:
    path = session / "agents" / f"{agent_id}.jsonl"
    out = []
    for record in read_records(path):
        data = record.get("data")
        if record.get("type") == "event" and isinstance(data, dict):
            out.append((float(record.get("t", 0.0)), str(record.get("kind")), data))
    return out


def _pair(value: object) -> tuple[object, object]:
    return (value[0], value[1]) if isinstance(value, list) and len(value) == 2 else (None, None)


def _agent_rows(
    lane: str, agent_id: str, events: list[tuple[float, str, EventData]]
) -> list[TimelineRow]:
    rows: list[TimelineRow] = []

    def span(
        kind: RowKind, start: object, end: object, label: str, **more: Unpack[_RequestFields]
    ) -> None:
        s, e = _num(start), _num(end)
        if s is not None and e is not None:
            rows.append(TimelineRow(lane, agent_id, kind, s, e, label, **more))

    for _t, kind, data in events:
        if kind == "request":
            for wait in data.get("rate_waits") or []:
                span("rate_wait", *_pair(wait), "waiting for rate limit")
            span("held", *_pair(data.get("held")), "held for the lead's response")
            for attempt in data.get("retries") or []:
                if isinstance(attempt, dict):
                    why = str(attempt.get("error") or "retried")
                    span("retry", attempt.get("sent"), attempt.get("ended"), why)
            raw = data.get("usage")
            usage: dict[str, int] = raw if isinstance(raw, dict) else {}
            span(  # the attempt that answered (those before it are `retry` rows)
                "request",
                data.get("sent"),
                data.get("ended"),
                str(data.get("model") or ""),
                first_token=_num(data.get("first_token")),
                readable=_num(data.get("started")),
                message_id=str(data.get("message_id") or ""),
                input_tokens=int(usage.get("input_tokens") or 0),
                cache_read=int(usage.get("cache_read_input_tokens") or 0),
                cache_write=int(usage.get("cache_creation_input_tokens") or 0),
                output_tokens=int(usage.get("output_tokens") or 0),
                cost_usd=float(data.get("cost_usd") or 0.0),
            )
        elif kind == "tool":
            mark = " (error)" if data.get("is_error") else ""
            span("tool", data.get("started"), data.get("ended"), f"{data.get('name')}{mark}")
        elif kind == "permission":
            label = f"{data.get('tool')}: {data.get('decision')}"
            span("approval", data.get("asked_at"), data.get("answered_at"), label)
    return rows


def _notification_rows(
    events: list[tuple[float, str, EventData]], wanted: set[str], lanes: dict[str, str]
) -> list[TimelineRow]:
    """The parent's lane: each report of a wanted task, from when it was queued for the parent
    to when it reached the parent's conversation."""
    queued: dict[str, list[float]] = {}
    rows = []
    for t, kind, data in events:
        if kind == "notification" and str(data.get("task")) in wanted:
            queued.setdefault(str(data.get("task")), []).append(t)
        elif kind == "notifications_read":
            for task in data.get("tasks") or []:
                waiting = queued.get(str(task))
                if waiting:
                    start = waiting.pop(0)
                    label = f"report of {lanes.get(str(task), str(task))}"
                    rows.append(
                        TimelineRow(
                            "parent", "main", "notification", start, t, label, task=str(task)
                        )
                    )
    return rows


def _answering(
    events: list[tuple[float, str, EventData]], wanted: set[str]
) -> list[tuple[float, float]]:
    """When the parent was answering reports of wanted tasks: from reading them to its
    recorded answer."""
    windows, since = [], None
    for t, kind, data in events:
        if kind == "notifications_read" and wanted & {str(x) for x in data.get("tasks") or []}:
            since = t if since is None else since
        elif kind == "notifications_answered" and since is not None:
            windows.append((since, t))
            since = None
    return windows


def _build(session: Path, metas: dict[str, AgentMeta], chosen: list[str]) -> Timeline:
    order = sorted(chosen, key=lambda a: metas[a].created_at if a in metas else 0.0)
    lanes = [Lane("parent", "main", "main")] + [
        Lane(_lane_name(metas[a]), a, metas[a].kind) for a in order if a in metas
    ]
    names = {lane.agent_id: lane.name for lane in lanes}
    raw: list[TimelineRow] = []
    for agent_id in order:
        raw += _agent_rows(names.get(agent_id, agent_id), agent_id, _events(session, agent_id))
    main_events = _events(session, "main")
    raw += _notification_rows(main_events, set(order), names)
    if raw:  # the parent's own rows within the span of the chosen agents' work
        lo = min(r.start for r in raw)
        created = [metas[a].created_at for a in order if a in metas]
        lo = min([lo, *created])
        hi = max(r.end for r in raw)
        windows = [(lo, hi), *_answering(main_events, set(order))]
        parent = _agent_rows("parent", "main", main_events)
        raw += [r for r in parent if any(r.end >= a and r.start <= b for a, b in windows)]
    if not raw:
        raise UsageError(
            f"No timings recorded for these agents in session {session.name} (their transcripts "
            "were written by a version that did not record them)."
        )
    t0 = min(r.start for r in raw)
    rows = [_shift(r, t0) for r in raw]
    rows, leads = _leads(rows, metas, order)
    rows.sort(key=lambda r: (r.start, r.lane))
    return Timeline(session.name, t0, lanes, rows, leads)


def _shift(row: TimelineRow, t0: float) -> TimelineRow:
    def moved(at: float | None) -> float | None:
        return None if at is None else round(at - t0, 3)

    return replace(
        row,
        start=round(row.start - t0, 3),
        end=round(row.end - t0, 3),
        first_token=moved(row.first_token),
        readable=moved(row.readable),
    )


def _leads(
    rows: list[TimelineRow], metas: dict[str, AgentMeta], order: list[str]
) -> tuple[list[TimelineRow], list[Lead]]:
    """Mark each sibling group's lead and readers on their first requests (see module doc)."""
    groups: dict[tuple[str, int, int | None], list[str]] = {}
    for agent_id in order:
        meta = metas.get(agent_id)
        if meta is not None and meta.kind == "fork" and meta.inherits_from:
            key = (meta.inherits_from, meta.inherits_count, meta.inherits_seq)
            groups.setdefault(key, []).append(agent_id)
    firsts: dict[str, TimelineRow] = {}
    for row in rows:
        if row.kind == "request" and row.agent_id not in firsts:
            firsts[row.agent_id] = row
    for row in rows:  # rows are not sorted yet: the earliest request of each agent
        if row.kind == "request" and row.start < firsts[row.agent_id].start:
            firsts[row.agent_id] = row
    leads: list[Lead] = []
    marked: dict[int, TimelineRow] = {}
    for members in groups.values():
        present = [m for m in members if m in firsts]
        if not present:
            continue
        lead_id = min(present, key=lambda m: firsts[m].start)
        lead = firsts[lead_id]
        readers = []
        for member in present:
            first = firsts[member]
            beyond = max(first.cache_read - lead.cache_read, 0) if member != lead_id else 0
            if beyond:
                readers.append(member)
            marked[id(first)] = TimelineRow(
                **{**asdict(first), "lead": lead_id, "reads_lead": min(beyond, lead.cache_write)}
            )
        if lead.readable is not None:
            leads.append(Lead(lead_id, lead.readable, tuple(readers), lead.cache_write))
    return [marked.get(id(r), r) for r in rows], leads


def describe(timeline: Timeline) -> str:
    """A few lines for a text frontend: the lanes, the requests, the lead's cache write."""
    lines = [
        f"timeline of session {timeline.session_id}: {len(timeline.lanes)} lanes, "
        f"{len(timeline.of('request'))} requests over {timeline.span:.2f} s"
    ]
    for lead in timeline.leads:
        readers = ", ".join(timeline.lane_of(r) for r in lead.readers) or "none"
        lines.append(
            f"{timeline.lane_of(lead.agent_id)} led: its cache write ({lead.written:,} tokens) "
            f"readable at {lead.readable:.2f} s; read by {readers}"
        )
    return "\n".join(lines)
