"""The fan-out timeline: rows read from the transcripts, checked against the emulator's ledger
(real SDK over HTTP), drawn with matplotlib, and read again by a later session."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator import Emulator, WallClock
from forkagent_jupyter.emulator.faults import Fault
from forkagent_jupyter.messages_api.ratelimits import RateLimit
from forkagent_jupyter.runtime.permissions.gate import Allow, Deny, PermissionRequest
from forkagent_jupyter.runtime.session.session import Session
from forkagent_jupyter.runtime.tasks.registry import Task
from forkagent_jupyter.runtime.transcripts.timeline import aload_timeline, describe
from forkagent_jupyter.runtime.transcripts.timeline_figure import details, draw, png, row_at

from .helpers import paced_session

pytestmark = pytest.mark.anyio

CONTEXT = "Context for the workers:\n" + "rows of the sales table, region by region. " * 250
APPROVAL_SECONDS = 0.3


class SlowPerson:
    """Answers each approval it is asked after a pause (a person reading the card)."""

    def __init__(self) -> None:
        self.asked: list[PermissionRequest] = []

    async def decide(self, request: PermissionRequest) -> Allow | Deny:
        self.asked.append(request)
        await asyncio.sleep(APPROVAL_SECONDS)
        return Allow()


def drop_one_request_after_a_worker_answers(session: Session, emulator: Any) -> None:
    """Once a worker's first request has been answered, the next request to reach the
    emulator breaks off mid-stream (it is sent again)."""
    done: list[str] = []

    def watch(task: Task) -> None:
        if not done and task.usage.output_tokens:
            done.append(task.id)
            emulator.faults.next(Fault.dropped(after=2))

    session.registry.subscribe(watch)


async def test_eight_forks_one_approval_one_retry_match_the_ledger(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    person = SlowPerson()
    # every worker's code is allowed by a rule but the last one's: it waits for the person
    session = make_session(
        permission_policy=person, allow=["Python(6 * 7)"], stream_retry_delay=0.05
    )
    await session.ask(CONTEXT)
    before = len(emulator.ledger)
    drop_one_request_after_a_worker_answers(session, emulator)
    tasks = []
    for i in range(8):
        code = "6 * 7" if i < 7 else "6 * 8"
        tasks.append(await session.fork(f"Part {i}: compute it `py: {code}`", name=f"w{i}"))
    await session.wait(*(t.id for t in tasks), timeout=90)
    await session.idle()
    assert [t.status for t in tasks] == ["completed"] * 8, [t.error for t in tasks]
    assert len(person.asked) == 1 and person.asked[0].task_id == tasks[7].id

    timeline = await aload_timeline(session.store.root, current=session.store.dir)
    rows = timeline.rows
    assert [lane.name for lane in timeline.lanes] == ["parent"] + [f"w{i}" for i in range(8)]

    # every request billed since the fan-out began is one request row, with its cache tokens
    entries = emulator.ledger.entries()[before:]
    answered = {e.message_id: e for e in entries if e.complete}
    requests = timeline.of("request")
    assert sorted(r.message_id for r in requests) == sorted(answered)
    for row in requests:
        usage = answered[row.message_id].usage
        assert row.cache_read == usage["cache_read_input_tokens"], row
        assert row.cache_write == usage["cache_creation_input_tokens"], row
        assert row.input_tokens == usage["input_tokens"], row
        assert row.output_tokens == usage["output_tokens"], row
        assert row.start <= (row.first_token or row.start) <= row.end
        assert row.readable is not None and row.start <= row.readable <= row.end
    for task in tasks:  # each worker: a call, then its report
        assert len(timeline.of("request", task.name)) == 2
    assert len(timeline.of("request", "parent")) >= 1  # the parent answering reports

    # the broken attempt: one retry row, the request the emulator cut short
    [broken] = [e for e in entries if not e.complete]
    [retry] = timeline.of("retry")
    assert retry.label == "stream dropped"
    again = [r for r in requests if r.agent_id == retry.agent_id and r.start >= retry.end]
    assert again, "the retried request answered after the broken attempt"
    assert broken.message_id not in answered

    # the one approval: on the last worker's lane, inside its tool call, as long as it waited
    [approval] = timeline.of("approval")
    assert approval.lane == "w7" and approval.label == "Python: allow"
    assert approval.duration >= APPROVAL_SECONDS - 0.01
    [tool] = timeline.of("tool", "w7")
    assert tool.start <= approval.start and approval.end <= tool.end
    assert len(timeline.of("tool")) == 8

    # the lead's cache write: readable once its response started; the others read it. The
    # lead is the worker whose response the emulator started first (the ledger's order)
    lead = [next(r.agent_id for r in requests if r.message_id == entries[0].message_id)]
    [group] = timeline.leads
    assert group.agent_id == lead[0]
    firsts = {
        t.id: min((r for r in requests if r.agent_id == t.id), key=lambda r: r.start) for t in tasks
    }
    assert group.readable == firsts[lead[0]].readable
    assert group.written == firsts[lead[0]].cache_write > 0
    siblings = {t.id for t in tasks} - {lead[0]}
    assert set(group.readers) == siblings
    for sibling in siblings:
        first = firsts[sibling]
        assert first.lead == lead[0]
        assert first.reads_lead > 0 and first.cache_read > firsts[lead[0]].cache_read
        assert first.start >= group.readable  # held until the lead's write was readable

    # each report: queued when the worker ended, then read by the parent
    notes = timeline.of("notification")
    assert sorted(n.task or "" for n in notes) == sorted(t.id for t in tasks)
    assert all(n.lane == "parent" and n.start <= n.end for n in notes)

    # the figure: one lane per agent, one bar per row, named after its row
    fig = draw(timeline)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [lane.name for lane in timeline.lanes]
    gids = [p.get_gid() for p in ax.patches]
    assert sorted(g.split(":", 2)[2] for g in gids if g.startswith("request:")) == sorted(answered)
    assert sum(g.startswith("retry:") for g in gids) == 1
    assert gids.count(f"approval:{tasks[7].id}:1") == 1
    assert sum(g.startswith("tool:") for g in gids) == 8
    assert sum(g.startswith("streaming:") for g in gids) == len(answered)
    # what an interactive canvas names under the pointer: the row of the bar drawn there
    by_message = {e.message_id: e.usage for e in entries}
    for patch in ax.patches:
        gid = str(patch.get_gid())
        if not gid.startswith(("request:", "approval:", "retry:")):
            continue
        centre = (patch.get_x() + patch.get_width() / 2, patch.get_y() + patch.get_height() / 2)
        hit = row_at(timeline, *centre)
        assert hit is not None and hit.kind == gid.split(":")[0], gid
        assert ax.format_coord(*centre) == details(timeline, hit)
        if hit.kind == "request":
            assert gid == f"request:{hit.agent_id}:{hit.message_id}"
            usage = by_message[hit.message_id]
            assert (
                f"cache read {usage['cache_read_input_tokens']:,}, "
                f"written {usage['cache_creation_input_tokens']:,} tokens"
            ) in details(timeline, hit)
    [resent] = [r for r in again if r.start == min(a.start for a in again)]
    assert "s (stream dropped)" in details(timeline, resent)
    assert details(timeline, approval).startswith("w7: approval Python: allow, waited ")
    assert row_at(timeline, timeline.span * 1.01, 0.2) is None
    assert ax.format_coord(timeline.span * 1.01, 0.2).startswith("t=")
    image = await asyncio.to_thread(png, fig)  # rendering reads fonts: off the event loop
    assert image[:8] == b"\x89PNG\r\n\x1a\n"
    frame = timeline.to_dataframe()
    assert len(frame) == len(rows) and set(frame["kind"]) >= {"request", "retry", "approval"}
    lead_name = timeline.lane_of(lead[0])
    assert f"{lead_name} led: its cache write ({group.written:,} tokens)" in describe(timeline)


async def test_a_later_session_draws_the_same_timeline_from_the_transcripts(
    emulator: Any, make_session: Any
) -> None:
    first = make_session(allow=["Python"])
    await first.ask(CONTEXT)
    tasks = [await first.fork(f"Part {i}: `py: {i} + 1`", name=f"p{i}") for i in range(3)]
    await first.wait(*(t.id for t in tasks), timeout=60)
    await first.idle()
    live = await aload_timeline(first.store.root, current=first.store.dir)
    await first.aclose()

    later = make_session()  # a restarted kernel: a new session under the same folder
    assert later.session_id != first.session_id
    await later.resume(first.session_id)
    by_default = await aload_timeline(later.store.root, current=later.store.dir)
    by_name = await aload_timeline(later.store.root, ["p0", "p2"], current=later.store.dir)

    assert by_default.session_id == first.session_id
    assert by_default.rows == live.rows and by_default.leads == live.leads
    assert [lane.name for lane in by_name.lanes] == ["parent", "p0", "p2"]
    assert {r.lane for r in by_name.rows} <= {"parent", "p0", "p2"}
    assert len(by_name.of("request", "p0")) == 2
    assert {n.task for n in by_name.of("notification")} == {tasks[0].id, tasks[2].id}
    frame = by_default.to_dataframe()
    assert frame.attrs["session_id"] == first.session_id
    assert frame[frame["kind"] == "request"]["message_id"].tolist() == [
        r.message_id for r in live.of("request")
    ]


async def test_unknown_agents_and_no_fan_out_are_one_clear_error(make_session: Any) -> None:
    from forkagent_jupyter.runtime.errors import UsageError

    session = make_session()
    with pytest.raises(UsageError, match="No fan-out to draw"):
        await aload_timeline(session.store.root, current=session.store.dir)
    with pytest.raises(UsageError, match="No transcript found for agent 'nobody'"):
        await aload_timeline(session.store.root, ["nobody"], current=session.store.dir)


async def test_rate_limit_waits_and_a_429_are_rows_before_their_requests(
    tmp_path: Path,
) -> None:
    # 2 requests per rate-limit minute, which lasts 5 real seconds here: the forks wait
    with Emulator(strict=True, seed=0, clock=WallClock(scale=12.0)) as emu:
        emu.rate_limits.configure({"claude-sonnet-5-5": RateLimit(2, 100_000, 100_000)})
        session = paced_session(emu.base_url, tmp_path, "claude-sonnet-5-5", 5.0)
        try:
            await session.ask("Some context to fork from. " * 50)
            emu.faults.next(Fault.rate_limited(retry_after=0.2), times=3)  # past the SDK's 2
            tasks = [await session.fork(f"Part {i}: summarise.", name=f"r{i}") for i in range(3)]
            await session.wait(*(t.id for t in tasks), timeout=90)
            timeline = await aload_timeline(session.store.root, current=session.store.dir)
        finally:
            await session.aclose()
        emu.check()
    assert [t.status for t in tasks] == ["completed"] * 3
    waits = timeline.of("rate_wait")
    assert waits, "at 2 requests a minute some fork waited for room"
    refused = timeline.of("retry")  # 429s the SDK's own retries did not get past
    assert refused and {r.label for r in refused} == {"rate limited (429)"}
    for row in [*waits, *refused]:  # each is followed on its lane by the request it held
        later = [r for r in timeline.of("request") if r.agent_id == row.agent_id]
        assert any(r.start >= row.end for r in later), row
