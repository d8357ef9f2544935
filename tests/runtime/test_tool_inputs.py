"""Tool inputs the reference accepts: SendMessage's `summary` and `to: "*"`; Bash's
`run_in_background`, its output read with TaskOutput and stopped with TaskStop's
`shell_id`, killed when its agent ends."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain
from forkagent_jupyter.runtime.workers.agent_tools import TaskOutputTool, TaskStopTool

from .helpers import until

pytestmark = pytest.mark.anyio

SLEEP = "`py: __import__('time').sleep({s}) or 'slept'`"


async def test_send_message_to_every_running_agent_with_a_summary(
    emulator: Any, make_session: Any
) -> None:
    call = {"to": "*", "message": "ALSO NOTE THE WEATHER", "summary": "weather note"}
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("BROADCAST", Reply.tool_use("SendMessage", call), times=1)
    emulator.brain = brain
    session = make_session(auto_respond=False)
    a = await session.fork("First " + SLEEP.format(s=2), name="first")
    b = await session.fork("Second " + SLEEP.format(s=2), name="second")
    await until(lambda: a.current_tool == "Python" and b.current_tool == "Python")
    turn = await session.ask("BROADCAST it")
    [sent] = turn.tool_calls
    assert not sent.is_error, sent.result
    assert "2 running agent(s)" in sent.result and "first" in sent.result
    assert "weather note" in session.contexts.tools.describe("SendMessage", call)
    await session.wait(a.id, b.id, timeout=30)
    for task in (a, b):
        assert "ALSO NOTE THE WEATHER" in str(session.history(task.id))


async def test_a_background_shell_is_read_with_task_output_and_stopped_with_task_stop(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    command = "echo started; sleep 30; echo never"
    bash = Reply.tool_use("Bash", {"command": command, "run_in_background": True})
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("SERVE", bash, times=1)
    emulator.brain = brain
    session = make_session(auto_respond=False)
    turn = await session.ask("SERVE it")
    [started] = turn.tool_calls
    assert not started.is_error and "Started in the background as shell b" in started.result
    [shell] = session.shells.shells.values()
    ctx = session.main.config.ctx
    reader, stopper = TaskOutputTool(), TaskStopTool()
    await until(lambda: "started" in shell.output())
    out = await reader.run(reader.parse({"task_id": shell.id, "block": False}), ctx)
    assert "<retrieval_status>not_ready</retrieval_status>" in out
    assert "<status>running</status>" in out and "started" in out
    stopped = await stopper.run(stopper.parse({"shell_id": shell.id}), ctx)
    assert f"Stopped background shell {shell.id}" in stopped
    out = await reader.run(reader.parse({"task_id": shell.id}), ctx)
    assert "<status>killed</status>" in out and "never" not in out


async def test_a_background_shell_is_killed_when_its_agent_ends(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    bash = Reply.tool_use("Bash", {"command": "sleep 60", "run_in_background": True})
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("LEAVE IT RUNNING", bash, times=1)
    brain.when_last_user_contains("Started in the background", Reply.text("Done."), times=1)
    emulator.brain = brain
    session = make_session(auto_respond=False, permission_mode="bypassPermissions")
    task = await session.fork("LEAVE IT RUNNING")
    await session.wait(task.id, timeout=30)
    assert task.status == "completed"
    [shell] = session.shells.shells.values()
    assert shell.agent_id == task.id
    await asyncio.wait_for(shell.ended.wait(), 60)
    assert shell.status == "killed"
