"""Batched fan-out (`Session.fan_out(..., batch=True)`) through the real SDK and the emulator.

The emulator's default brain is the offline model: a `py: ...` span becomes a Python call."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from forkagent_jupyter.emulator import Fault
from forkagent_jupyter.messages_api.usage import Usage, cost_usd
from forkagent_jupyter.runtime.errors import UsageError
from forkagent_jupyter.runtime.loop.fork import FORK_TAG
from forkagent_jupyter.runtime.session.session import Session
from tests.reported import tool_outputs

from .helpers import breakpoint_tokens

pytestmark = pytest.mark.anyio

CONTEXT = "Context:\n" + "notes about the data set. " * 300
POLL = 0.02


def batch_params(emulator: Any) -> list[dict[str, Any]]:
    out = []
    for rec in emulator.api_requests("/v1/messages/batches"):
        if rec.method == "POST" and isinstance(rec.body, dict):
            out += [r["params"] for r in rec.body["requests"]]
    return out


def realtime_fork_bodies(emulator: Any) -> list[dict[str, Any]]:
    return [
        r.body
        for r in emulator.api_requests()
        if f"<{FORK_TAG}>" in json.dumps(r.body["messages"][-1])
    ]


async def test_batch_params_are_a_realtime_forks_first_request(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(auto_respond=False)
    await session.ask(CONTEXT)
    directive = "Summarise the notes in one line."
    task = await session.fork(directive)
    await session.wait(task.id, timeout=30)
    [realtime] = realtime_fork_bodies(emulator)
    assert realtime.pop("stream") is True

    fan = await session.fan_out([directive, "Count the notes."], batch=True, poll_interval=POLL)
    await fan.batch.wait(timeout=30)
    first, second = batch_params(emulator)
    # byte for byte: the same serialized body, cache breakpoints included
    assert json.dumps(first) == json.dumps(realtime)
    text, other = json.dumps(first), json.dumps(second)
    cut = text.index(f"<{FORK_TAG}>")
    assert other[:cut] == text[:cut] and other != text
    # the breakpoints: last tool, system, end of the shared prefix, directive
    assert len(breakpoint_tokens(first)) == 4
    assert breakpoint_tokens(first)[:3] == breakpoint_tokens(second)[:3]
    # and on the wire: the real-time body's bytes (less `stream`) sit inside the batch's
    [raw_rt] = [r.raw for r in emulator.api_requests() if r.body is realtime]
    [raw_batch] = [r.raw for r in emulator.api_requests("/v1/messages/batches")]
    assert raw_rt.replace(b'"stream":true,', b"") in raw_batch


async def test_forks_complete_at_half_price_with_one_digest(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(auto_respond=False)
    await session.ask(CONTEXT)
    directives = [f"Report on part {i} of the notes." for i in range(3)]
    fan = await session.fan_out(
        directives, batch=True, names=["p0", "p1", "p2"], poll_interval=POLL
    )
    assert fan.id and fan.id.startswith("msgbatch_")
    assert [t.name for t in fan.tasks] == ["p0", "p1", "p2"]
    assert all(t in session.tasks for t in fan.tasks)  # in the registry like forks
    tasks = await fan.batch.wait(timeout=30)
    assert [t.status for t in tasks] == ["completed"] * 3
    assert all(t.result for t in tasks)

    entries = emulator.ledger.entries()
    batched = [e for e in entries if e.service_tier == "batch"]
    assert len(batched) == 3
    for task, entry in zip(tasks, batched, strict=True):
        assert task.usage == Usage.from_api(entry.usage)
        full = cost_usd(task.usage, entry.model)
        assert task.cost_usd == pytest.approx(full / 2)
    # the shared prefix: written once by the real-time pre-warm (max_tokens 0, full price),
    # then read by every request of the batch
    [prewarm] = [e for e in entries if e.service_tier == "standard" and not e.streamed]
    assert prewarm.usage["output_tokens"] == 0 and prewarm.usage["cache_creation_input_tokens"]
    reads = [e.usage["cache_read_input_tokens"] for e in batched]
    assert reads[1] == reads[2] > 1024  # the shared prefix
    assert reads[0] > reads[1]  # the pre-warm sent the first fork's whole body
    assert fan.batch.counts()["succeeded"] == 3
    assert fan.batch.prewarm_cost_usd == pytest.approx(prewarm.cost_usd)
    expected = prewarm.cost_usd + sum(e.cost_usd for e in batched)
    assert fan.batch.cost_usd == pytest.approx(expected)

    pending = session.queue.pending("main")
    assert len(pending) == 1  # one digest, not one notification per fork
    digest = pending[0].text
    assert "Batch of 3 forks ended: 3 completed" in digest
    assert all(f"- {name} [completed]" in digest for name in ("p0", "p1", "p2"))
    # the notebook shows the batch as one ended task, with the report the parent reads
    report = pending[0].snapshot
    assert report is not None and report.notification == digest
    assert (report.task_id, report.kind, report.status) == (fan.batch.key, "batch", "completed")
    assert report.summary.startswith("Batch of 3 forks ended: 3 completed")
    assert report.cost_usd == pytest.approx(fan.batch.cost_usd, abs=1e-6)
    assert report.usage["output_tokens"] == sum(t.usage.output_tokens for t in tasks) > 0


async def test_without_prewarm_the_first_batch_request_writes_the_prefix(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(auto_respond=False)
    await session.ask(CONTEXT)
    emulator.clock.advance(3600)  # the parent's cache has expired
    before = len(emulator.ledger)
    fan = await session.fan_out(["A.", "B.", "C."], batch=True, poll_interval=POLL, prewarm=False)
    await fan.batch.wait(timeout=30)
    entries = emulator.ledger.entries()
    assert [e.service_tier for e in entries[-3:]] == ["batch"] * 3
    assert len(entries) == before + 3  # only the batch: no pre-warm request
    reads = [e.usage["cache_read_input_tokens"] for e in entries[-3:]]
    assert reads[0] == 0 < reads[1] == reads[2]


async def test_each_fork_notifies_when_asked(emulator: Any, make_session: Any) -> None:
    session = make_session(auto_respond=False)
    fan = await session.fan_out(["One.", "Two."], batch=True, poll_interval=POLL, notify="each")
    await fan.batch.wait(timeout=30)
    pending = session.queue.pending("main")
    assert sorted(c.task_id for c in pending) == sorted(t.id for t in fan.tasks)


async def test_digest_of_many_forks_is_short(emulator: Any, make_session: Any) -> None:
    session = make_session(auto_respond=False)
    fan = await session.fan_out([f"Item {i}." for i in range(30)], batch=True, poll_interval=POLL)
    await fan.batch.wait(timeout=60)
    [digest] = session.queue.pending("main")
    assert digest.text.count("[completed]") == 20
    assert "... and 10 more" in digest.text and "batch_results" in digest.text


async def test_a_tool_request_continues_as_a_realtime_worker(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(auto_respond=False, worker_namespace="shared")
    fan = await session.fan_out(
        ["Compute `py: 6 * 7` and report it."], batch=True, poll_interval=POLL
    )
    [task] = await fan.batch.wait(timeout=60)
    assert task.status == "completed", task.error
    assert tool_outputs(task.result or "") == ["42"], task.result
    assert task.tool_uses == 1
    entries = emulator.ledger.entries()
    assert [e.service_tier for e in entries] == ["batch", "standard"]
    assert entries[1].streamed  # the turn after the tool ran in real time
    expected = cost_usd(Usage.from_api(entries[0].usage), entries[0].model, "batch") + cost_usd(
        Usage.from_api(entries[1].usage), entries[1].model
    )
    assert task.cost_usd == pytest.approx(expected)


async def test_errored_and_expired_requests_fail_with_the_apis_reason(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(auto_respond=False)
    emulator.faults.next(Fault.overloaded())
    fan = await session.fan_out(
        ["First.", "Second."], batch=True, poll_interval=POLL, prewarm=False
    )
    first, second = await fan.batch.wait(timeout=30)
    assert first.status == "failed"
    assert "errored (overloaded_error)" in (first.error or "")
    assert second.status == "completed"
    assert fan.batch.results()[0]["result_type"] == "errored"

    emulator.batches.options.processing_seconds = 48 * 3600.0
    late = await session.fan_out(["Third."], batch=True, poll_interval=POLL)
    emulator.clock.advance(25 * 3600)
    [third] = await late.batch.wait(timeout=30)
    assert third.status == "failed"
    assert "expired" in (third.error or "")


async def test_stop_cancels_the_batch(emulator: Any, make_session: Any, async_client: Any) -> None:
    emulator.batches.options.processing_seconds = 3600.0
    session = make_session(auto_respond=False)
    fan = await session.fan_out(["A.", "B."], batch=True, poll_interval=POLL)
    assert fan.batch.processing_status == "in_progress"
    await fan.batch.stop()
    assert [t.status for t in fan.tasks] == ["killed", "killed"]
    assert fan.batch.processing_status == "canceling"
    batch = await async_client.messages.batches.retrieve(fan.id)
    assert batch.processing_status == "ended"
    assert batch.request_counts.canceled == 2
    assert [e.service_tier for e in emulator.ledger.entries()] == ["standard"]  # the pre-warm


async def test_stopping_every_fork_cancels_the_batch(
    emulator: Any, make_session: Any, async_client: Any
) -> None:
    emulator.batches.options.processing_seconds = 3600.0
    session = make_session(auto_respond=False)
    fan = await session.fan_out(["A.", "B."], batch=True, poll_interval=POLL)
    for task in fan.tasks:
        await session.stop(task.id)
    # the cancel goes out in the background: wait for its answer (generously: a loaded machine)
    deadline = asyncio.get_running_loop().time() + 60
    while fan.batch.processing_status == "in_progress":
        assert asyncio.get_running_loop().time() < deadline, "the batch was not canceled"
        await asyncio.sleep(0.01)
    assert fan.batch.processing_status == "canceling"
    batch = await async_client.messages.batches.retrieve(fan.id)
    assert batch.request_counts.canceled == 2


async def test_batch_results_rows_and_dataframe(emulator: Any, make_session: Any) -> None:
    session = make_session(auto_respond=False)
    items = ["alpha", "beta"]
    fan = await session.fan_out(
        [f"Describe {x}." for x in items], batch=True, items=items, poll_interval=POLL
    )
    await fan.batch.wait(timeout=30)
    rows = session.batch_results(fan.id)
    assert [r["item"] for r in rows] == items
    assert [r["result_type"] for r in rows] == ["succeeded", "succeeded"]
    assert all(r["status"] == "completed" and r["text"] for r in rows)
    frame = rows.to_dataframe()
    assert list(frame["item"]) == items
    assert frame["cost_usd"].sum() == pytest.approx(sum(t.cost_usd for t in fan.tasks), rel=1e-3)
    with pytest.raises(UsageError, match="No batch"):
        session.batch_results("msgbatch_unknown")


async def test_bad_input_and_offline_backend(tmp_path: Any, make_session: Any) -> None:
    session = make_session(auto_respond=False)
    with pytest.raises(UsageError, match="at least one"):
        await session.fan_out([], batch=True)
    with pytest.raises(UsageError, match="empty"):
        await session.fan_out(["ok", "  "], batch=True)
    with pytest.raises(UsageError, match="names"):
        await session.fan_out(["a", "b"], batch=True, names=["x"])
    with pytest.raises(UsageError, match="notify"):
        await session.fan_out(["a"], batch=True, notify="sometimes")
    with pytest.raises(UsageError, match="poll_interval"):
        await session.fan_out(["a"], batch=True, poll_interval=0)
    assert session.tasks == []


async def test_an_offline_session_batches_through_the_in_process_emulator(tmp_path: Any) -> None:
    from forkagent_jupyter.runtime.permissions.gate import AllowAll

    offline = Session(
        backend="offline", workdir=tmp_path, home=tmp_path, permission_policy=AllowAll()
    )
    try:
        await offline.ask("The items. `py: items = [1, 2, 3]`")
        fan = await offline.fan_out(
            [f"square it `py: {i} * {i}`" for i in (1, 2, 3)], batch=True, items=[1, 2, 3]
        )
        assert fan.id.startswith("msgbatch_")  # a real batch id, from the Batches API
        await offline.wait(*[t.id for t in fan.tasks])
        rows = offline.batch_results(fan.id)
        assert [r["result_type"] for r in rows] == ["succeeded"] * 3
        assert [t.status for t in fan.tasks] == ["completed"] * 3
        assert all(
            str(i * i) in (t.result or "") for i, t in zip((1, 2, 3), fan.tasks, strict=True)
        )
        assert offline.batches.sdk.offline is not None
    finally:
        await offline.aclose()
    assert offline.batches.sdk.offline is None  # the emulator stopped with the session


async def test_a_new_session_resumes_polling_from_the_transcripts(
    emulator: Any, make_session: Any, tmp_path: Any
) -> None:
    from forkagent_jupyter.runtime.batch.fan_out import resume_batches

    emulator.batches.options.processing_seconds = 600.0
    first = make_session(auto_respond=False)
    await first.ask(CONTEXT)
    fan = await first.fan_out(
        ["Report A.", "Report B."], batch=True, names=["ra", "rb"], poll_interval=POLL
    )
    batch_id = fan.id
    await first.aclose()  # a kernel restart: the batch goes on at the API
    assert [t.status for t in fan.tasks] == ["killed", "killed"]

    second = make_session(auto_respond=False)
    [run] = await resume_batches(second.batches)
    assert run.id == batch_id
    assert [t.name for t in second.tasks] == ["ra", "rb"]
    emulator.clock.advance(601)
    tasks = await run.wait(timeout=30)
    assert [t.status for t in tasks] == ["completed", "completed"]
    assert all(t.result for t in tasks)
    creates = [r for r in emulator.api_requests("/v1/messages/batches") if r.method == "POST"]
    assert len(creates) == 1  # polled again, not submitted again
    assert second.batch_results(batch_id)[0]["result_type"] == "succeeded"
    [digest] = second.queue.pending("main")
    assert "Batch of 2 forks ended: 2 completed" in digest.text
    assert await resume_batches(make_session(auto_respond=False).batches) == []  # collected now


async def test_fan_out_without_batch_starts_realtime_forks(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(auto_respond=False)
    fan = await session.fan_out(["One.", "Two."], names=["o", "t"])
    assert fan.batch is None and fan.id is None
    tasks = await session.wait(*(t.id for t in fan.tasks), timeout=30)
    assert [(t.name, t.status) for t in tasks] == [("o", "completed"), ("t", "completed")]
    assert emulator.api_requests("/v1/messages/batches") == []
    assert all(e.service_tier == "standard" and e.streamed for e in emulator.ledger.entries())
    assert len(session.queue.pending("main")) == 2  # ordinary forks: one notification each
