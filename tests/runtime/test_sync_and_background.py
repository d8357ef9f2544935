"""Synchronous and background agents as the reference systems run them: with forking on
every agent runs in the background; with forking off a named agent answers in the call
unless the call or its definition asks for the background, moves there by itself when it
runs too long, returns its partial text when it fails, and stops with its caller's turn."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain, last_user_text
from forkagent_jupyter.emulator.faults import Fault
from forkagent_jupyter.runtime.permissions.gate import ScriptedPolicy
from forkagent_jupyter.runtime.tools import PythonTool
from forkagent_jupyter.runtime.transcripts.files import transcript_path
from forkagent_jupyter.runtime.transcripts.reading import read_records
from forkagent_jupyter.runtime.workers.agent_tools import agent_tools
from tests.reported import tool_outputs

from .helpers import make_repo, until

pytestmark = pytest.mark.anyio

SLEEP = "`py: __import__('time').sleep({s}) or 'slept'`"


def _agent_call(agent_type: str, prompt: str, **extra: Any) -> Reply:
    call = {"description": "ask the agent", "prompt": prompt, "subagent_type": agent_type}
    return Reply(({"type": "tool_use", "name": "Agent", "input": {**call, **extra}},))


def _define(folder: Path, name: str, front: str) -> None:
    agents = folder / ".forkagent" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / f"{name}.md").write_text(f"---\n{front}\n---\nYou check numbers.\n")


def _delegating(reply: Reply) -> ScriptedBrain:
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("DELEGATE", reply, times=1)
    return brain


def _agent_schema(body: dict[str, Any]) -> dict[str, Any]:
    [agent] = [t for t in body["tools"] if t["name"] == "Agent"]
    return dict(agent["input_schema"]["properties"])


async def test_with_forking_on_every_agent_runs_in_the_background(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    _define(tmp_path, "checker", "description: Checks numbers")
    # asks to wait: ignored, as the reference ignores it while forking is on
    call = _agent_call("checker", "check `py: 6 * 7`", run_in_background=False)
    emulator.brain = _delegating(call)
    session = make_session(auto_respond=False)
    turn = await session.ask("DELEGATE please")
    assert "run_in_background" not in _agent_schema(emulator.api_requests()[0].body)
    [result] = turn.tool_calls
    assert not result.is_error and "Started background agent" in result.result
    [task] = await session.wait(timeout=30)
    assert task.kind == "checker" and task.status == "completed"
    [note] = session.queue.drain("main")
    assert task.id in note.text and tool_outputs(note.text) == ["42"], note.text


@pytest.mark.parametrize(
    ("front", "extra"),
    [
        ("description: Checks numbers\nbackground: true", {"run_in_background": False}),
        ("description: Checks numbers", {"run_in_background": True}),
    ],
    ids=["definition-says-background", "call-says-background"],
)
async def test_without_forking_the_call_or_the_definition_asks_for_the_background(
    emulator: Any, make_session: Any, tmp_path: Path, front: str, extra: dict[str, Any]
) -> None:
    _define(tmp_path, "checker", front)
    emulator.brain = _delegating(_agent_call("checker", "check `py: 6 * 7`", **extra))
    session = make_session(auto_respond=False, forking=False)
    turn = await session.ask("DELEGATE please")
    assert "run_in_background" in _agent_schema(emulator.api_requests()[0].body)
    assert "Started background agent" in turn.tool_calls[0].result
    [task] = await session.wait(timeout=30)
    [note] = session.queue.drain("main")
    assert task.id in note.text and "<status>completed</status>" in note.text


async def test_forking_switched_off_live_changes_the_agent_tool(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    _define(tmp_path, "checker", "description: Checks numbers")
    emulator.brain = _delegating(_agent_call("checker", "check `py: 6 * 7`"))
    session = make_session(auto_respond=False)
    session.forking = False
    turn = await session.ask("DELEGATE please")
    assert "run_in_background" in _agent_schema(emulator.api_requests()[0].body)
    [result] = turn.tool_calls
    assert tool_outputs(result.result) == ["42"], result.result  # answered in the call
    assert "agentId: " in result.result
    session.forking = True
    await session.ask("Again.")
    assert "run_in_background" not in _agent_schema(emulator.api_requests()[-1].body)


async def test_a_long_synchronous_agent_moves_to_the_background_by_itself(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    _define(tmp_path, "checker", "description: Checks numbers")
    # it sleeps long past the move, so that it still runs when the turn returns (a loaded
    # machine can take seconds for the parent's next request)
    emulator.brain = _delegating(_agent_call("checker", "slowly " + SLEEP.format(s=8)))
    session = make_session(auto_respond=False, forking=False, auto_background_after=0.3)
    turn = await session.ask("DELEGATE please")
    [result] = turn.tool_calls
    assert "Started background agent" in result.result  # the launch text, not the answer
    [task] = session.tasks
    assert task.status == "running" and not task.foreground
    await session.wait(task.id, timeout=30)
    [note] = session.queue.drain("main")
    assert task.id in note.text and "slept" in note.text  # its result, in the notification


async def test_a_failing_synchronous_agent_returns_its_partial_text_naming_the_failure(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    _define(tmp_path, "checker", "description: Checks numbers")
    brain = _delegating(_agent_call("checker", "FIRST STEP"))

    def first_step(request: Any) -> bool:
        if "FIRST STEP" not in last_user_text(request):
            return False
        # its next request (and the SDK's retries) fail
        emulator.faults.next(Fault.error(500, "boom", retry_after_ms=0), times=3)
        return True

    step = Reply(
        (
            {"type": "text", "text": "Found so far: the total is 41."},
            {"type": "tool_use", "name": "Python", "input": {"code": "1 + 1"}},
        )
    )
    brain.add_rule(first_step, step, times=1)
    emulator.brain = brain
    session = make_session(auto_respond=False, forking=False)
    turn = await session.ask("DELEGATE please")
    [result] = turn.tool_calls
    # the text it wrote is the call's result, as the reference's; the failure is named
    assert not result.is_error, result.result
    assert result.result.startswith("Found so far: the total is 41.")
    assert "failed before it finished" in result.result and "boom" in result.result
    assert "agentId: " in result.result
    assert session.queue.drain("main") == []  # reported once


async def test_interrupting_the_turn_stops_its_synchronous_agent(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    _define(tmp_path, "checker", "description: Checks numbers")
    started = tmp_path / "started"
    code = f"open({str(started)!r}, 'w').close(); __import__('time').sleep(10)"
    emulator.brain = _delegating(_agent_call("checker", f"slowly `py: {code}`"))
    session = make_session(auto_respond=False, forking=False)
    turn = asyncio.ensure_future(session.ask("DELEGATE please"))
    await until(started.exists)  # its code runs
    [task] = session.tasks
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    [done] = await session.wait(task.id, timeout=60)
    assert done.status == "killed"
    await session.idle()
    assert session.queue.drain("main") == []  # no notification for an id it never got


async def test_a_named_agent_without_permission_mode_accepts_edits(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    _define(tmp_path, "checker", "description: Checks numbers\ntools: Write")
    write = Reply.tool_use("Write", {"file_path": "out.txt", "content": "written\n"})
    brain = _delegating(_agent_call("checker", "WRITE IT"))
    brain.when_last_user_contains("WRITE IT", write, times=1)
    emulator.brain = brain
    policy = ScriptedPolicy()  # denies whatever it is asked
    session = make_session(auto_respond=False, forking=False, permission_policy=policy)
    await session.ask("DELEGATE please")
    assert (tmp_path / "out.txt").read_text() == "written\n"
    assert policy.requests == []  # an edit: not asked in acceptEdits


async def test_a_named_agent_in_a_worktree_is_not_told_it_inherited_a_conversation(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    _define(tmp_path / "home", "checker", "description: Checks numbers")
    call = _agent_call("checker", "LOOK AROUND", isolation="worktree")
    emulator.brain = _delegating(call)
    session = make_session(auto_respond=False, workdir=repo)
    await session.ask("DELEGATE please")
    await session.wait(timeout=30)
    [first] = [r.body for r in emulator.api_requests() if "LOOK AROUND" in str(r.body)][:1]
    told = last_user_text(first)
    assert "isolated git worktree" in told and "inherited" not in told


async def test_a_named_agent_without_permission_mode_keeps_a_wider_session_mode(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    _define(tmp_path, "checker", "description: Checks numbers")
    emulator.brain = _delegating(_agent_call("checker", "check `py: 6 * 7`"))
    policy = ScriptedPolicy()  # denies whatever it is asked
    session = make_session(
        auto_respond=False,
        forking=False,
        permission_policy=policy,
        permission_mode="bypassPermissions",
    )
    turn = await session.ask("DELEGATE please")
    assert tool_outputs(turn.tool_calls[0].result) == ["42"] and policy.requests == []


AGENT_TOOLS = {"Agent", "SendMessage", "TaskStop", "TaskOutput"}


def _tool_names(emulator: Any, needle: str) -> set[str]:
    """The tools of the first request whose first message holds `needle`."""
    body = next(r.body for r in emulator.api_requests() if needle in str(r.body["messages"][0]))
    return {t["name"] for t in body["tools"]}


async def test_an_agent_file_with_every_tool_keeps_the_agent_tools(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    _define(tmp_path, "lead", "description: Leads\ntools: '*'")
    _define(tmp_path, "plain", "description: Works alone")
    lead = {"description": "lead", "prompt": "LEAD IT", "subagent_type": "lead"}
    plain = {"description": "plain", "prompt": "PLAIN IT", "subagent_type": "plain"}
    calls = tuple({"type": "tool_use", "name": "Agent", "input": c} for c in (lead, plain))
    emulator.brain = _delegating(Reply(calls))
    session = make_session(auto_respond=False, forking=False)
    await session.ask("DELEGATE please")
    assert _tool_names(emulator, "LEAD IT") >= AGENT_TOOLS  # `*`: every tool, these too
    assert not AGENT_TOOLS & _tool_names(emulator, "PLAIN IT")  # no list: all but these
    assert "Read" in _tool_names(emulator, "PLAIN IT")


def _launch_records(session: Any) -> list[dict[str, Any]]:
    path = transcript_path(session.store.dir, "main")
    return [r["data"] for r in read_records(path) if r.get("kind") == "async_launched"]


async def test_the_launch_result_carries_the_prompt_and_whether_the_output_can_be_read(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    _define(tmp_path, "checker", "description: Checks numbers")
    emulator.brain = _delegating(_agent_call("checker", "check `py: 6 * 7`"))
    session = make_session(auto_respond=False)
    turn = await session.ask("DELEGATE please")
    [result] = turn.tool_calls
    [task] = await session.wait(timeout=30)
    output = f".forkagent/sessions/{session.session_id}/tasks/{task.id}.output"
    assert f"output_file: {output}" in result.result
    assert "read the end of that file (Read or Bash)" in result.result
    await session.store.aflush()
    [launch] = _launch_records(session)
    assert launch == {
        "status": "async_launched",
        "agentId": task.id,
        "description": "ask the agent",
        "prompt": "check `py: 6 * 7`",
        "outputFile": output,
        "canReadOutputFile": True,
    }


async def test_a_caller_that_cannot_read_files_is_not_given_the_output_file(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    _define(tmp_path, "checker", "description: Checks numbers")
    emulator.brain = _delegating(_agent_call("checker", "check `py: 6 * 7`"))
    session = make_session(auto_respond=False, tools=[PythonTool(), *agent_tools()])
    turn = await session.ask("DELEGATE please")
    [result] = turn.tool_calls
    assert "Started background agent" in result.result and "output_file" not in result.result
    assert "end your reply" in result.result
    await session.wait(timeout=30)
    await session.store.aflush()
    [launch] = _launch_records(session)
    assert launch["canReadOutputFile"] is False and launch["prompt"] == "check `py: 6 * 7`"
