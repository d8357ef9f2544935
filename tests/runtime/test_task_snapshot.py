"""A run's `TaskSnapshot` is taken as the run ends and travels unchanged: in its command, in
the parent's AutoTurn, into the parent's transcript and back out of it (`%notifications`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.runtime.tasks.registry import task_snapshot
from forkagent_jupyter.runtime.tasks.snapshot import AnsweredNotifications, TaskSnapshot
from forkagent_jupyter.runtime.transcripts.store import (
    AgentMeta,
    TranscriptStore,
    answered_notifications,
)

pytestmark = pytest.mark.anyio


async def test_the_snapshot_of_the_ended_run_is_what_the_parent_answers_and_records(
    make_session: Any,
) -> None:
    session = make_session(auto_respond=False)
    task = await session.fork("count `py: 6 * 7`")
    await session.wait(task.id, timeout=60)
    first_result = task.result
    assert task.status == "completed" and first_result
    [command] = session.queue.pending("main")
    taken = command.snapshot
    assert isinstance(taken, TaskSnapshot)
    assert taken == task_snapshot(task) and taken.notification == command.text
    assert taken.task_id == task.id and taken.summary.endswith("completed")

    # the task runs again before the parent reads the first report: that report is still
    # of the first run as it ended
    await session.send(task.id, "and now `py: 6 * 8`")
    assert task.run == 2
    turn = await session.ask("What came back?")
    assert turn.ok
    auto = session.responder.auto_turns[0]
    assert auto.snapshots[0] is taken  # one object from the registry to the host
    assert auto.snapshots[0].status == "completed" and auto.snapshots[0].result == first_result
    assert auto.task_ids[0] == task.id and auto.notifications[0] == command.text

    assert session.store is not None
    await session.store.aflush()
    recorded = await asyncio.to_thread(answered_notifications, session.store.root, auto.task_ids)
    assert recorded == AnsweredNotifications(tasks=auto.snapshots, answer=turn.text)


def test_records_written_before_the_type_are_read_as_it(tmp_path: Path) -> None:
    """Older transcripts named the id `id`, carried keys the type no longer has and, oldest,
    flat token counts (`input_tokens` the whole prompt); a record that is not one is skipped
    with a log line, not raised."""
    store = TranscriptStore(tmp_path, "s1")
    main = store.open(AgentMeta(agent_id="main", kind="main"))
    main.append_event("notifications_answered", {"tasks": "not a list", "answer": 3})
    old = {
        "id": "a1",
        "name": None,
        "kind": "fork",
        "status": "completed",
        "description": "count",
        "summary": 'Worker "count" completed',
        "result": None,
        "input_tokens": 14_484,
        "output_tokens": 150,
        "cache_read_tokens": 14_200,
        "cache_write_tokens": 200,
        "current_tool": None,
        "foreground": False,
        "notification": "<task-notification>a1</task-notification>",
    }
    main.append_event("notifications_answered", {"tasks": [old], "answer": "Done."})
    store.flush()

    found = answered_notifications(tmp_path, ["a1"])
    assert found is not None and found.answer == "Done."
    [snapshot] = found.tasks
    assert snapshot.task_id == "a1" and snapshot.result == "" and snapshot.name is None
    assert snapshot.usage == {
        "input_tokens": 84,
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 14_200,
        "output_tokens": 150,
        "total_input_tokens": 14_484,
    }
    assert json.loads(snapshot.model_dump_json())["task_id"] == "a1"  # written as `task_id`
    assert answered_notifications(tmp_path, ["b2"]) is None


async def test_failed_tool_calls_are_counted_and_said_in_the_summary_and_snapshot(
    make_session: Any,
) -> None:
    """Code that raised, or a call that was denied, still ended `completed` with nothing to
    say so: the task, its summary (the notification's) and its snapshot now count them."""
    session = make_session(auto_respond=False)
    task = await session.fork("try `py: 1 / 0` then `py: 2 + 2`")
    await session.wait(task.id, timeout=60)
    assert task.status == "completed"
    assert (task.tool_uses, task.tool_errors) == (2, 1)
    assert task.failed_calls == "1 of 2 tool calls failed"
    assert task.summary().endswith("completed, 1 of 2 tool calls failed")
    [command] = session.queue.pending("main")
    assert "<summary>Worker" in command.text and "1 of 2 tool calls failed" in command.text
    assert command.snapshot is not None
    assert (command.snapshot.tool_uses, command.snapshot.tool_errors) == (2, 1)
    clean = await session.fork("fine `py: 3 + 3`")
    await session.wait(clean.id, timeout=60)
    assert clean.tool_errors == 0 and clean.failed_calls == ""
    assert clean.summary().endswith("completed")


async def test_a_denied_call_counts_as_a_failed_call(make_session: Any) -> None:
    from forkagent_jupyter.runtime.permissions.policies import DenyAll

    session = make_session(auto_respond=False, permission_policy=DenyAll())
    task = await session.fork("write `py: open('x.txt', 'w').write('x')`")
    await session.wait(task.id, timeout=60)
    assert task.status == "completed"
    assert task.failed_calls == "1 of 1 tool call failed", task.summary()
    assert "1 of 1 tool call failed" in (task.notification or "")


async def test_every_result_of_a_task_stays_readable_newest_first(make_session: Any) -> None:
    """A follow-up's result replaced the first one (a cross-validation summary became the
    follow-up's one number)."""
    session = make_session(auto_respond=False)
    task = await session.fork("first `py: 'summary ' + str(6 * 7)`")
    await session.wait(task.id, timeout=60)
    first = task.result
    assert first and "summary 42" in first and task.results == [first]
    await session.send(task.id, "then `py: 0.0207`")
    await session.wait(task.id, timeout=60)
    second = task.result
    assert second and "0.0207" in second and second != first
    assert task.results == [second, first]
    assert task_snapshot(task).result == second
