"""Kill, failure, turn limits, messages, resumes, nested owners, 50 at once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.faults import Fault
from forkagent_jupyter.runtime.config.agent_definitions import AgentFileWarning
from forkagent_jupyter.runtime.errors import UsageError
from forkagent_jupyter.runtime.tools import builtin_tools
from forkagent_jupyter.runtime.tools.base import DESCRIBE_CHARS, ToolSet
from forkagent_jupyter.runtime.workers.agent_tools import agent_tools
from tests.reported import tool_outputs

from .helpers import start_lead

pytestmark = pytest.mark.anyio

SLEEP = "`py: __import__('time').sleep({s}) or 'slept'`"


async def wait_for(predicate: Any, timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def test_stop_kills_with_partial_result_and_one_notification(make_session: Any) -> None:
    session = make_session(auto_respond=False)
    task = await session.fork("Work slowly: " + SLEEP.format(s=5))
    await wait_for(lambda: task.current_tool == "Python")
    stopped = await session.stop(task.id)
    assert stopped.status == "killed"
    assert "Running 1 Python block." in (stopped.result or "")  # the partial text
    with pytest.raises(UsageError, match="is not running"):
        await session.stop(task.id)
    notes = session.queue.drain("main")
    assert len(notes) == 1 and "<status>killed</status>" in notes[0].text
    assert "Running 1 Python block." in notes[0].text


async def test_a_message_after_a_stop_has_settled_resumes_the_agent(
    emulator: Any, make_session: Any
) -> None:
    """The soak's seed 201: a fork is stopped, has ended and reported; a message sent to it
    a moment later must resume it (it was accepted as "just ending" and then never read)."""
    session = make_session(auto_respond=False)
    task = await session.fork("Work slowly: " + SLEEP.format(s=5), name="slow")
    await wait_for(lambda: task.current_tool == "Python")
    await session.send("slow", "queued while it runs")
    await session.stop(task.id)
    assert task.status == "killed" and task.settled
    reply = await session.send(task.id, "then `py: 6 * 7`")
    assert "resumed" in reply and "just ending" not in reply
    await session.wait(task.id, timeout=30)
    assert task.run == 2 and task.status == "completed"
    assert tool_outputs(task.result or "") == ["42"], task.result
    history = str(session.history(task.id))
    assert "queued while it runs" in history and "then `py: 6 * 7`" in history
    assert len(session.queue.drain("main")) == 2  # one per run


async def test_api_failure_fails_the_task_with_the_error(emulator: Any, make_session: Any) -> None:
    session = make_session(auto_respond=False)
    emulator.faults.next(Fault.error(500, "boom", retry_after_ms=0), times=3)
    task = await session.fork("Anything.")
    [done] = await session.wait(task.id, timeout=30)
    assert done.status == "failed"
    assert "HTTP 500" in (done.error or "") and "boom" in (done.error or "")
    [note] = session.queue.drain("main")
    assert "<status>failed</status>" in note.text and "boom" in note.text


async def test_max_turns_completes_with_a_note(make_session: Any, tmp_path: Path) -> None:
    agents = tmp_path / ".forkagent" / "agents"
    agents.mkdir(parents=True)
    (agents / "counter.md").write_text(
        "---\ndescription: counts\ntools: Python\nmaxTurns: 1\n---\nYou count.\n"
    )
    session = make_session(auto_respond=False)
    counter = await session.workers.definition("counter")
    run = session.workers.named(session.main, counter, "Count `py: 1 + 1`", description="count")
    task = session.workers.start(run)
    [done] = await session.wait(task.id, timeout=30)
    assert done.status == "completed"
    assert "limit of 1 model requests" in (done.result or "")
    assert len(session.queue.drain("main")) == 1


async def test_send_to_running_then_completed_agent(emulator: Any, make_session: Any) -> None:
    session = make_session(auto_respond=False)
    # long enough that the message surely arrives while it runs, even on a loaded machine
    task = await session.fork("Take your time: " + SLEEP.format(s=3), name="slow")
    await wait_for(lambda: task.current_tool == "Python")
    reply = await session.send("slow", "also note the weather")
    assert "queued" in reply
    await session.wait(task.id, timeout=30)
    assert task.status == "completed"
    bodies = [r.body for r in emulator.api_requests()]
    assert any("also note the weather" in str(b["messages"][-1]) for b in bodies)
    assert len(session.queue.drain("main")) == 1

    before = len(emulator.ledger.entries())
    reply = await session.send(task.id, "one more thing: `py: 7 * 6`")
    assert "resumed" in reply
    await session.wait(task.id, timeout=30)
    assert task.status == "completed" and task.run == 2
    assert tool_outputs(task.result or "") == ["42"], task.result
    notes = session.queue.drain("main")
    assert len(notes) == 1  # one more notification for the new run
    resumed = emulator.ledger.entries()[before]
    assert resumed.usage["cache_read_input_tokens"] > 0  # its own earlier prefix


async def test_nested_agent_hears_from_its_own_fork(tmp_path: Path, make_session: Any) -> None:
    session = make_session(auto_respond=False)
    lead = await start_lead(session, tmp_path)
    await session.wait(lead.id, timeout=30)
    assert lead.status == "completed"
    child = next(t for t in session.tasks if t.id != lead.id)
    assert child.owner == lead.id and child.status == "completed"
    # the child's notification went to the lead (it read it before completing) ...
    lead_texts = str(session.workers.runs[lead.id].history)
    assert f"<task-id>{child.id}</task-id>" in lead_texts
    # ... and the parent hears only about the lead
    main_notes = session.queue.drain("main")
    assert [n.task_id for n in main_notes] == [lead.id]


@pytest.mark.timeout(600)
async def test_fifty_forks_finishing_together_each_notify_once(make_session: Any) -> None:
    session = make_session()
    tasks = [await session.fork(f"n{i}: `py: {i}`") for i in range(50)]
    await asyncio.wait_for(session.idle(), 540)  # 50 workers on a loaded 2-core machine
    assert all(t.status == "completed" for t in tasks)
    delivered = [t for a in session.responder.auto_turns for t in a.task_ids]
    assert sorted(delivered) == sorted(t.id for t in tasks)
    assert len(session.queue) == 0


async def test_clear_errors_for_bad_agents_and_ids(tmp_path: Path, make_session: Any) -> None:
    session = make_session(auto_respond=False)
    with pytest.raises(UsageError, match=r"No task 'ghost'\. Known tasks: none yet"):
        await session.send("ghost", "hi")
    with pytest.raises(UsageError, match="No task 'ghost'"):
        await session.stop("ghost")
    from forkagent_jupyter.runtime.tools.base import ToolError

    with pytest.raises(ToolError, match=r"Agent type 'nope' not found\. Available agents: general"):
        await session.workers.definition("nope")
    agents = tmp_path / ".forkagent" / "agents"
    agents.mkdir(parents=True)
    bad = agents / "broken.md"
    bad.write_text("---\ndescription: x\nmaxTurns: 0\n---\nbody\n")
    with pytest.warns(AgentFileWarning, match=r"broken\.md:3: field 'maxTurns'"):
        assert "broken" not in await session.workers.definitions()  # the others still load
    with pytest.raises(ToolError, match=r"'broken' cannot be used: .*broken\.md:3: field 'max"):
        await session.workers.definition("broken")
    bad.write_text("---\ndescription: x\ncolour: red\n---\nbody\n")
    with pytest.warns(AgentFileWarning, match=r"broken\.md:3: key 'colour' is not used here"):
        assert "broken" in await session.workers.definitions()  # loads; the key is ignored
    bad.write_text("no front matter")
    with pytest.warns(AgentFileWarning, match=r"broken\.md:1: has no front matter"):
        await session.workers.definitions()
    with pytest.raises(ToolError, match=r"broken\.md:1: has no front matter"):
        await session.workers.definition("broken")
    bad.write_text("---\ndescription: [x\n---\nbody\n")  # read as Claude Code reads it
    assert (await session.workers.definition("broken")).description == "[x"
    bad.write_text("---\ndescription: x\ntools:\n  - Read\n - Grep\n---\nbody\n")
    with pytest.warns(AgentFileWarning, match=r"broken\.md:5: field 'tools': front matter is not"):
        assert list(await session.workers.definitions()) == ["general-purpose"]


class SlowPolicy:
    """Never answers (a user who walked away)."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    async def decide(self, request: Any) -> Any:
        self.requests.append(request)
        await asyncio.Event().wait()


async def test_worker_approvals_bubble_with_task_id_and_time_out(make_session: Any) -> None:
    policy = SlowPolicy()
    session = make_session(auto_respond=False, permission_policy=policy, approval_timeout=0.5)
    task = await session.fork("write `py: open('x.txt', 'w').write('1')`")
    [done] = await session.wait(task.id, timeout=30)
    [request] = policy.requests
    assert request.task_id == task.id and request.tool_name == "Python"
    assert "open('x.txt', 'w')" in request.input["code"]
    assert done.status == "completed"
    assert "nobody answered within 0.5 seconds" in (done.result or "")
    assert any(e["decision"] == "deny" and e["task_id"] == task.id for e in session.gate.log)
    assert session.store is not None  # the decision is in the worker's transcript too
    lines = (session.store.dir / "agents" / f"{task.id}.jsonl").read_text().splitlines()
    events = [json.loads(x) for x in lines if '"type":"event"' in x]
    assert any(e["kind"] == "permission" and e["data"]["decision"] == "deny" for e in events)


async def test_task_output_tool_waits_and_reports(emulator: Any, make_session: Any) -> None:
    from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain

    brain = ScriptedBrain(when_empty=OfflineBrain())  # the worker gets the offline model
    brain.when_last_user_contains(
        "what did w find?",
        Reply(({"type": "tool_use", "name": "TaskOutput", "input": {"task_id": "w"}},)),
        times=1,
    )
    brain.add_rule(
        lambda req: "<retrieval_status>" in str(req["messages"][-1]), Reply.text("got it")
    )
    emulator.brain = brain
    session = make_session(auto_respond=False)
    task = await session.fork("slow " + SLEEP.format(s=0.3), name="w")
    turn = await session.ask("what did w find?")
    [call] = turn.tool_calls
    assert "<retrieval_status>success</retrieval_status>" in call.result
    assert "<status>completed</status>" in call.result and "slept" in call.result
    assert task.status == "completed"
    assert session.queue.drain("main") == []  # read through TaskOutput: not notified again


async def test_plan_mode_refuses_task_stop_and_keeps_the_worker(
    emulator: Any, make_session: Any
) -> None:
    """TaskStop needs no approval, yet it ends a worker: plan mode refuses it (the model is
    told so) and the worker runs on; reading its output stays allowed."""
    from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain
    from forkagent_jupyter.runtime.permissions.gate import Allow, CallbackPolicy, PermissionRequest

    asked, answer = asyncio.Event(), asyncio.Event()

    async def approve_later(request: PermissionRequest) -> Allow:
        asked.set()  # the worker now waits here, in the middle of its run
        await answer.wait()
        return Allow()

    brain = ScriptedBrain(when_empty=OfflineBrain())  # the worker gets the offline model
    stop_and_read = Reply(
        (
            {"type": "tool_use", "name": "TaskStop", "input": {"task_id": "w"}},
            {"type": "tool_use", "name": "TaskOutput", "input": {"task_id": "w", "block": False}},
        )
    )
    brain.when_last_user_contains("stop w", stop_and_read, times=1)
    brain.add_rule(lambda req: "plan mode" in str(req["messages"][-1]), Reply.text("planned"))
    emulator.brain = brain
    session = make_session(auto_respond=False, permission_policy=CallbackPolicy(approve_later))
    task = await session.fork("slow " + SLEEP.format(s=0), name="w")
    await asyncio.wait_for(asked.wait(), 30)
    session.gate.mode = "plan"
    turn = await session.ask("stop w")
    stop, output = turn.tool_calls
    assert stop.is_error and "TaskStop is not available in plan mode" in stop.result
    assert not output.is_error and "<status>running</status>" in output.result
    assert not task.done
    answer.set()
    [done] = await session.wait(task.id, timeout=30)
    assert done.status == "completed" and "slept" in (done.result or "")  # ran to its end


async def test_routing_without_forking_and_inline_named_agents(
    emulator: Any, make_session: Any
) -> None:
    from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain

    # forking off: an Agent call without subagent_type runs the general-purpose agent
    session = make_session(auto_respond=False, forking=False)
    await session.ask("Delegate.\nfork: count `py: 2 + 2`")
    [task] = await session.wait(timeout=30)
    assert task.kind == "general-purpose" and task.status == "completed"
    assert tool_outputs(task.result or "") == ["4"], task.result
    first = next(
        r.body for r in emulator.api_requests() if "count `py: 2 + 2`" in str(r.body["messages"][0])
    )
    assert len(first["messages"]) == 1  # only its prompt: not the parent's history

    # a named agent with run_in_background=false answers inline, with no notification
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains(
        "INLINE",
        Reply(
            (
                {
                    "type": "tool_use",
                    "name": "Agent",
                    "input": {
                        "description": "inline check",
                        "prompt": "check `py: 3 * 3`",
                        "subagent_type": "general-purpose",
                        "run_in_background": False,
                    },
                },
            )
        ),
        times=1,
    )
    emulator.brain = brain
    other = make_session(auto_respond=False, forking=False)
    turn = await other.ask("INLINE please")
    [call] = turn.tool_calls
    assert not call.is_error, call.result
    answer, _, footer = call.result.partition("\n\nagentId: ")
    assert tool_outputs(answer) == ["9"], call.result
    assert "Started background agent" not in call.result, call.result
    assert "SendMessage" in footer and "<usage>" in footer, call.result
    assert other.queue.drain("main") == []


async def test_a_running_task_shows_its_current_call(make_session: Any) -> None:
    session = make_session(auto_respond=False)
    task = await session.fork("Work slowly: " + SLEEP.format(s=5))
    await wait_for(lambda: task.current_tool == "Python")
    assert "sleep(5)" in task.current_input
    await session.stop(task.id)
    assert task.current_tool is None and task.current_input == ""


def test_each_tool_describes_its_call_in_one_recognisable_line() -> None:
    tools = ToolSet([*builtin_tools(), *agent_tools()])
    bash = {"command": "git status", "description": "d"}
    assert tools.describe("Bash", bash) == "Bash: git status # d"
    assert tools.describe("Python", {"code": "\nx = 1\nprint(x)\n"}) == "Python: x = 1 (+1 lines)"
    assert tools.describe("Read", {"file_path": "data/./a.csv"}) == "Read: data/a.csv"
    edit = {"file_path": "a.py", "old_string": "x = 1\n", "new_string": "x = 2\n"}
    assert tools.describe("Edit", edit) == "Edit a.py: 'x = 1' -> 'x = 2'"
    assert tools.describe("TaskStop", {"task_id": "a1"}) == "TaskStop: a1"
    assert tools.describe("Agent", {"description": "d", "prompt": "p"}) == "Agent (fork): d"
    assert tools.describe("Unknown", {"q": "x"}) == "Unknown"
    assert tools.describe("Read", {"file_path": 3}) == "Read"  # invalid input: just the name
    assert len(tools.describe("Bash", {"command": "x" * 500})) == DESCRIBE_CHARS
    key = "sk-ant-" + "api03-" + "z" * 40
    assert key not in tools.describe("Bash", {"command": f"curl -H 'x-api-key: {key}'"})
