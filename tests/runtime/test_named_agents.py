"""Named agents as the reference systems run them: listed to the model in the conversation,
synchronous unless asked or defined otherwise, reported exactly once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain
from tests.reported import tool_outputs

pytestmark = pytest.mark.anyio

LISTING = "Agent types available to the Agent tool"


def _agent_call(agent_type: str, prompt: str, **extra: Any) -> Reply:
    call = {"description": "ask the agent", "prompt": prompt, "subagent_type": agent_type}
    return Reply(({"type": "tool_use", "name": "Agent", "input": {**call, **extra}},))


def _define(workdir: Path, name: str, front: str) -> None:
    folder = workdir / ".forkagent" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(f"---\n{front}\n---\nYou check numbers.\n")


async def test_the_listing_is_in_the_conversation_shared_by_forks_and_cache_stable(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    _define(tmp_path, "checker", "description: Checks numbers\ntools: Read, Python")
    session = make_session(auto_respond=False)
    await session.ask("Hello.")
    first = emulator.api_requests()[-1].body
    [turn1] = emulator.ledger.entries()
    shown = first["messages"][0]["content"][0]["text"]
    assert LISTING in shown and "- checker: Checks numbers (Tools: Read, Python)" in shown
    assert "- general-purpose: " in shown
    # sibling forks inherit it: their requests are byte-identical up to the directives
    a = await session.fork("count `py: 1`")
    b = await session.fork("count `py: 2`")
    await session.wait(a.id, b.id, timeout=30)
    bodies = [  # each fork's first request: its directive is the last message
        r.raw
        for r in emulator.api_requests()
        if "<fork-directive>" in json.dumps(r.body["messages"][-1])
    ]
    assert len(bodies) == 2 and LISTING.encode() in bodies[0]
    assert bodies[0].split(b"count `py:")[0] == bodies[1].split(b"count `py:")[0]
    # an agent file added mid-session: said once in the next turn, the cached prefix kept
    _define(tmp_path, "summarizer", "description: Summarizes tables")
    await session.ask("Again.")
    second = emulator.api_requests()[-1].body
    assert second["tools"] == first["tools"]  # the tools (head of the prefix) did not change
    newest = second["messages"][-1]["content"]
    assert "- summarizer: Summarizes tables" in newest[0]["text"]
    assert sum(LISTING in json.dumps(m) for m in second["messages"]) == 2
    u1, u2 = turn1.usage, emulator.ledger.entries()[-1].usage
    prompt1 = u1["input_tokens"] + u1["cache_creation_input_tokens"] + u1["cache_read_input_tokens"]
    assert u2["cache_read_input_tokens"] >= prompt1  # all of turn 1's prompt read from cache
    await session.ask("Once more.")  # unchanged: not said again
    last = emulator.api_requests()[-1].body["messages"][-1]["content"]
    assert all(LISTING not in block.get("text", "") for block in last)


async def test_without_forking_a_named_agent_answers_in_the_same_turn_by_default(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    _define(tmp_path, "checker", "description: Checks numbers")
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("CHECK", _agent_call("checker", "check `py: 6 * 7`"), times=1)
    emulator.brain = brain
    session = make_session(auto_respond=False, forking=False)
    turn = await session.ask("CHECK the numbers")
    [call] = turn.tool_calls
    assert not call.is_error
    assert tool_outputs(call.result) == ["42"], call.result
    assert "agentId: " in call.result and "<usage>total_tokens: " in call.result
    assert "tool_uses: 1" in call.result and "duration_ms: " in call.result
    [task] = session.tasks
    assert task.kind == "checker" and task.status == "completed"
    assert session.queue.drain("main") == []  # reported once: as the call's result


async def test_a_background_definition_notifies_later(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    _define(tmp_path, "checker", "description: Checks numbers\nbackground: true")
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("CHECK", _agent_call("checker", "check `py: 6 * 7`"), times=1)
    emulator.brain = brain
    session = make_session(auto_respond=False)
    turn = await session.ask("CHECK the numbers")
    assert "Started background agent" in turn.tool_calls[0].result
    [task] = await session.wait(timeout=30)
    [note] = session.queue.drain("main")
    assert task.id in note.text and "<status>completed</status>" in note.text


async def test_a_failed_synchronous_agent_is_reported_once(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    _define(tmp_path, "checker", "description: Checks numbers\nmaxTurns: 1")
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("CHECK", _agent_call("checker", "fail please"), times=1)
    brain.when_last_user_contains("fail please", Reply.text(""), times=1)  # no text: fails
    emulator.brain = brain
    session = make_session(auto_respond=False, forking=False)
    turn = await session.ask("CHECK the numbers")
    [call] = turn.tool_calls
    assert call.is_error and "failed" in call.result
    assert session.queue.drain("main") == []  # not reported a second time
