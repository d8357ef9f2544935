"""A worker whose reply stream breaks off mid-way retries it and reports once (issue 14)."""

from __future__ import annotations

from typing import Any

import pytest

from forkagent_jupyter.emulator.faults import Fault
from forkagent_jupyter.runtime.tasks.registry import Task
from tests.reported import tool_outputs

pytestmark = pytest.mark.anyio

CONTEXT = "Context:\n" + "notes about the data set. " * 300


async def test_fork_retries_a_dropped_stream_and_notifies_once(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(auto_respond=False, stream_retry_delay=0.05)
    session.namespace["data"] = list(range(10))
    await session.ask(CONTEXT)
    seen: list[tuple[str, str]] = []

    def watch(task: Task) -> None:
        if not seen or seen[-1] != (task.status, task.activity):
            seen.append((task.status, task.activity))

    session.registry.subscribe(watch)
    before = len(emulator.api_requests())
    emulator.faults.next(Fault.dropped(after=2))  # the worker's first request
    task = await session.fork("sum it `py: sum(data)`")
    [done] = await session.wait(task.id, timeout=30)

    assert done.status == "completed", done.error
    assert tool_outputs(done.result or "") == ["45"], done.result
    assert done.retries == 1
    # the card's activity line said so while it waited, and is clear once done
    assert ("running", "stream dropped, retrying (1/3)") in seen
    assert done.activity == ""
    # the worker's first request went twice, byte-identical
    sent = emulator.api_requests()[before:]
    assert sent[0].raw == sent[1].raw
    # one notification, to the parent, for this task
    pending = session.queue.pending("main")
    assert [c.task_id for c in pending] == [task.id]
    # its conversation: no trace of the broken attempt
    history = session.workers.runs[task.id].history
    own = history[len(sent[0].body["messages"]) :]
    assert [m["role"] for m in own] == ["assistant", "user", "assistant"]  # call, result, report


async def test_fork_fails_cleanly_when_retries_run_out(emulator: Any, make_session: Any) -> None:
    session = make_session(auto_respond=False, stream_retries=1, stream_retry_delay=0.01)
    await session.ask(CONTEXT)
    emulator.faults.next(Fault.stream_error(after=1, error_type="api_error"), times=2)
    task = await session.fork("sum it `py: 1 + 1`")
    [done] = await session.wait(task.id, timeout=30)
    assert done.status == "failed"
    assert done.error is not None
    assert "api_error" in done.error and "retried once" in done.error
    assert done.retries == 1
    assert [c.task_id for c in session.queue.pending("main")] == [task.id]
    assert "failed" in (session.queue.pending("main")[0].text)
