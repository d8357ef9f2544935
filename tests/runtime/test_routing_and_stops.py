"""No stranded or doubled notification: one report per run, to a live reader; user stops
are not handed to the model; per-type Agent rules."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain, last_user_text
from forkagent_jupyter.emulator.faults import Fault
from forkagent_jupyter.runtime.errors import UsageError
from forkagent_jupyter.runtime.session.session import STOPPED_BY_USER
from tests.reported import tool_outputs

from .helpers import start_lead

pytestmark = pytest.mark.anyio

SLEEP = "`py: __import__('time').sleep({s}) or 'slept'`"


def agent_call(agent_type: str | None, prompt: str, **extra: Any) -> Reply:
    call: dict[str, Any] = {"description": "ask the agent", "prompt": prompt, **extra}
    if agent_type is not None:
        call["subagent_type"] = agent_type
    return Reply(({"type": "tool_use", "name": "Agent", "input": call},))


async def wait_for(predicate: Any, timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def test_a_failed_synchronous_named_agent_is_reported_once(
    emulator: Any, make_session: Any
) -> None:
    brain = ScriptedBrain(when_empty=OfflineBrain())

    def delegate(request: Any) -> bool:
        if "DELEGATE" not in last_user_text(request):
            return False
        # the named agent's request (and the SDK's two retries) fail
        emulator.faults.next(Fault.error(500, "boom", retry_after_ms=0), times=3)
        return True

    brain.add_rule(delegate, agent_call("general-purpose", "check it"), times=1)
    emulator.brain = brain
    session = make_session(auto_respond=False, forking=False)
    turn = await session.ask("DELEGATE please")
    [call] = turn.tool_calls
    assert call.is_error and "failed" in call.result and "boom" in call.result
    [task] = session.tasks
    assert task.status == "failed" and task.settled
    assert session.queue.drain("main") == []  # reported as the call's result only


async def test_a_resumed_nested_worker_reports_to_the_nearest_live_owner(
    tmp_path: Path, make_session: Any
) -> None:
    session = make_session(auto_respond=False)
    lead = await start_lead(session, tmp_path)
    await session.wait(lead.id, timeout=30)
    child = next(t for t in session.tasks if t.id != lead.id)
    assert child.owner == lead.id and lead.status == "completed"
    assert [n.task_id for n in session.queue.drain("main")] == [lead.id]
    # the lead has finished: the child's next report goes to the parent, not to the lead
    await session.send(child.id, "once more `py: 2 + 3`")
    await session.wait(child.id, timeout=30)
    assert child.status == "completed" and child.run == 2
    assert session.queue.pending(lead.id) == []
    [note] = session.queue.drain("main")
    assert note.task_id == child.id and tool_outputs(note.text) == ["5"], note.text


async def test_sending_to_the_parent_is_refused(make_session: Any) -> None:
    session = make_session(auto_respond=False)
    await session.ask("Hello.")
    with pytest.raises(UsageError, match="'main' is the parent conversation itself") as info:
        await session.send("main", "hi")
    assert "\n" not in str(info.value)  # one line
    assert session.tasks == []


async def test_a_bulk_stop_is_shown_but_not_handed_to_the_model(
    emulator: Any, make_session: Any
) -> None:
    session = make_session()  # auto_respond on: the parent answers notifications by itself
    tasks = [await session.fork(f"w{i}: " + SLEEP.format(s=10)) for i in range(2)]
    await wait_for(lambda: all(t.current_tool == "Python" for t in tasks))
    shown: list[Any] = []
    session.responder.on_auto_turn = shown.append
    before = len(emulator.api_requests())
    stopped = await session.stop_all()
    await asyncio.wait_for(session.idle(), 30)
    assert sorted(t.id for t in stopped) == sorted(t.id for t in tasks)
    assert all(t.status == "killed" and t.settled for t in tasks)
    later = emulator.api_requests()[before:]
    assert not any("<task-notification>" in str(r.body["messages"][-1]) for r in later)
    [auto] = shown  # shown to the user once, with no answer of the model
    assert sorted(auto.task_ids) == sorted(t.id for t in tasks)
    assert auto.turn.text == STOPPED_BY_USER and auto.turn.requests == 0
    assert all("<status>killed</status>" in xml for xml in auto.notifications)
    assert len(session.queue) == 0


async def test_a_bulk_stop_of_a_resumed_agent_keeps_its_earlier_report(
    emulator: Any, make_session: Any
) -> None:
    """The soak's seed 201 under load: a fork ended and its report waited for the parent (busy
    elsewhere); a message resumed the fork, and a bulk stop of that second run dropped the
    first run's unread report too. Only the stopped run's report is withheld from the model."""
    session = make_session(auto_respond=False)  # the parent does not read reports by itself
    task = await session.fork("quick `py: 6 * 7`", name="twice")
    await session.wait(task.id, timeout=30)
    assert task.status == "completed" and len(session.queue) == 1  # run 1's report, unread
    await session.send("twice", "now slowly " + SLEEP.format(s=10))
    await wait_for(lambda: task.run == 2 and task.current_tool == "Python")
    [stopped] = await session.stop_all()
    assert stopped is task and task.status == "killed" and task.settled
    [report] = session.queue.drain("main")  # run 1's, still for the model; run 2's is not
    assert "<status>completed</status>" in report.text
    assert tool_outputs(report.text) == ["42"], report.text


async def test_agent_rules_match_the_agent_type(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    from forkagent_jupyter.runtime.permissions.rules import Rule
    from forkagent_jupyter.runtime.workers.agent_tools import AgentInput, AgentTool

    agents = tmp_path / ".forkagent" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text("---\ndescription: reviews\ntools: Read\n---\nReview.\n")
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("REVIEW", agent_call("reviewer", "review it"), times=1)
    brain.when_last_user_contains(
        "GENERAL", agent_call("general-purpose", "count `py: 1 + 1`"), times=1
    )
    emulator.brain = brain
    session = make_session(auto_respond=False, deny=["Agent(reviewer)"])
    turn = await session.ask("REVIEW please")
    [call] = turn.tool_calls
    assert call.is_error and "denied by the rule Agent(reviewer)" in call.result
    assert session.tasks == []
    turn = await session.ask("GENERAL please")  # another type: the rule does not apply
    [call] = turn.tool_calls
    assert not call.is_error and [t.kind for t in session.tasks] == ["general-purpose"]
    subject = AgentTool().permission_subject(
        AgentInput(description="d", prompt="p", subagent_type="reviewer")
    )
    assert Rule.parse("Agent(reviewer)").matches_text(subject)
    fork = AgentTool().permission_subject(AgentInput(description="d", prompt="p"))
    assert Rule.parse("Agent(fork)").matches_text(fork)
