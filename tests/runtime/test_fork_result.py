"""A fork's result is its own: taken from the messages it wrote, never from the conversation
it inherited (the parent's last answer is not a fork's partial result)."""

from __future__ import annotations

from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain
from tests.reported import tool_outputs

from .helpers import until

pytestmark = pytest.mark.anyio

PARENT_SAYS = "The parent's own answer, which no fork wrote."
SLEEP = "__import__('time').sleep(5) or 'slept'"


def _brain() -> ScriptedBrain:
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("HELLO", Reply.text(PARENT_SAYS))
    # tool calls only, no text of its own
    brain.when_last_user_contains("SILENT", Reply.tool_use("Python", {"code": SLEEP}), times=1)
    brain.when_last_user_contains("BLANK", Reply.text("   \n "), times=1)
    return brain


async def test_a_stopped_fork_without_text_reports_no_output(
    emulator: Any, make_session: Any
) -> None:
    emulator.brain = _brain()
    session = make_session(auto_respond=False)
    assert (await session.ask("HELLO")).text == PARENT_SAYS
    task = await session.fork("SILENT work")
    await until(lambda: task.current_tool == "Python")
    stopped = await session.stop(task.id)
    assert stopped.status == "killed" and stopped.result == "(no output)"
    [note] = session.queue.drain("main")
    assert "<result>(no output)</result>" in note.text and PARENT_SAYS not in note.text


async def test_a_fork_whose_reply_is_blank_does_not_pass_off_the_parents_text(
    emulator: Any, make_session: Any
) -> None:
    emulator.brain = _brain()
    session = make_session(auto_respond=False)
    await session.ask("HELLO")
    task = await session.fork("BLANK answer")
    [done] = await session.wait(task.id, timeout=30)
    assert PARENT_SAYS not in (done.result or "")
    assert done.status == "failed" and "no text" in (done.error or "")
    [note] = session.queue.drain("main")
    assert PARENT_SAYS not in note.text


async def test_a_forks_own_text_is_its_result(emulator: Any, make_session: Any) -> None:
    emulator.brain = _brain()
    session = make_session(auto_respond=False)
    await session.ask("HELLO")
    task = await session.fork("Report `py: 6 * 7`")
    [done] = await session.wait(task.id, timeout=30)
    assert done.status == "completed"
    assert tool_outputs(done.result or "") == ["42"], done.result
    assert PARENT_SAYS not in (done.result or "")
