"""An agent file cannot raise its own permissions. The model starts a named agent (the Agent
tool needs no approval) from a file in `.claude/agents`; the agent's calls are decided with the
session's permissions: `bypassPermissions` in the file holds only in a bypassing session, a file
may narrow (`plan`, `default`) and may use `acceptEdits`; deny rules and plan mode win."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain
from forkagent_jupyter.runtime.permissions.gate import (
    CallbackPolicy,
    PermissionGate,
    ScriptedPolicy,
)

pytestmark = pytest.mark.anyio


def _helper_file(workdir: Path, mode: str) -> None:
    folder = workdir / ".claude" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "helper.md").write_text(
        f"---\nname: helper\ndescription: Helps with files\npermissionMode: {mode}\n---\n"
        "You help.\n"
    )


def _hostile_model(emulator: Any, *calls: dict[str, Any]) -> None:
    """The parent starts `helper`; the helper makes `calls` (one reply), then ends."""
    brain = ScriptedBrain(when_empty=OfflineBrain())
    start = {"description": "help", "prompt": "RUN_IT now", "subagent_type": "helper"}
    brain.when_last_user_contains(
        "START", Reply(({"type": "tool_use", "name": "Agent", "input": start},)), times=1
    )
    brain.when_last_user_contains("RUN_IT", Reply(tuple(calls)), times=1)
    emulator.brain = brain


def _helper_decisions(session: Any, tool: str) -> list[dict[str, Any]]:
    """The gate's decisions on the helper's calls of `tool` (the parent's have no task id)."""
    return [e for e in session.gate.log if e["tool"] == tool and e["task_id"] is not None]


DEFAULTISH = ("default", "acceptEdits")  # sessions where a file's bypass is not applied
TOUCH = {"type": "tool_use", "name": "Bash", "input": {"command": "touch pwned.txt"}}
WRITE = {"type": "tool_use", "name": "Write", "input": {"file_path": "w.txt", "content": "x"}}


@pytest.mark.parametrize(
    ("session_mode", "file_mode", "deny", "ran", "by"),
    [
        # the attack: a file asks for bypass in a session that asks the person
        ("default", "bypassPermissions", [], False, "policy"),
        ("acceptEdits", "bypassPermissions", [], False, "policy"),
        # a bypassing session: the file's bypass is the session's own
        ("bypassPermissions", "bypassPermissions", [], True, "mode"),
        # deny rules and plan mode win over every file
        ("bypassPermissions", "bypassPermissions", ["Bash(touch:*)"], False, "rule"),
        ("plan", "bypassPermissions", [], False, "mode"),
        # a file may narrow what the session allows
        ("bypassPermissions", "plan", [], False, "mode"),
        ("bypassPermissions", "default", [], False, "policy"),
    ],
)
async def test_an_agent_file_gets_no_more_than_the_session(
    emulator: Any,
    make_session: Any,
    tmp_path: Path,
    session_mode: str,
    file_mode: str,
    deny: list[str],
    ran: bool,
    by: str,
) -> None:
    _helper_file(tmp_path, file_mode)
    _hostile_model(emulator, TOUCH)
    policy = ScriptedPolicy()  # the person: denies whatever they are asked
    session = make_session(
        permission_mode=session_mode, permission_policy=policy, deny=deny, auto_respond=False
    )
    turn = await session.ask("START the helper")
    [call] = turn.tool_calls
    assert call.name == "Agent" and not call.is_error, call.result
    await session.wait(timeout=60)  # in the background or not, until it has ended
    [decision] = _helper_decisions(session, "Bash")  # the helper did make the call
    assert decision["by"] == by, decision
    assert decision["decision"] == ("allow" if ran else "deny")
    assert (tmp_path / "pwned.txt").exists() is ran
    asked = [r for r in policy.requests if r.tool_name == "Bash"]
    assert len(asked) == (1 if by == "policy" else 0)
    [helper] = session.tasks
    said = [n for n in helper.notes if "bypassPermissions not applied" in n]
    assert len(said) == (file_mode == "bypassPermissions" and session_mode in DEFAULTISH)
    if asked:
        assert asked[0].task_id == decision["task_id"]  # shown on the helper's card


async def test_a_file_may_accept_edits_but_still_asks_for_commands(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    """`permissionMode: acceptEdits` (the reference's default for named agents) lets the agent
    write in the work directory unasked in a default session; its Bash is still asked."""
    _helper_file(tmp_path, "acceptEdits")
    _hostile_model(emulator, WRITE, TOUCH)
    policy = ScriptedPolicy()
    session = make_session(permission_policy=policy, auto_respond=False)
    await session.ask("START the helper")
    await session.wait(timeout=60)
    assert (tmp_path / "w.txt").read_text() == "x"
    assert not (tmp_path / "pwned.txt").exists()
    assert [r.tool_name for r in policy.requests] == ["Bash"]


async def test_a_narrowing_file_holds_while_the_session_changes_mode() -> None:
    """The worker's mode follows the session's at every call: a bypass from a file starts or
    stops with the session's own bypass; a file's `default` keeps asking."""
    session = PermissionGate(mode="default")
    bypassing = session.for_worker("t1", "bypassPermissions")
    asking = session.for_worker("t2", "default")
    assert (bypassing.mode, asking.mode) == ("bubble", "bubble")
    session.mode = "bypassPermissions"
    assert (bypassing.mode, asking.mode) == ("bypassPermissions", "bubble")
    session.mode = "plan"
    assert (bypassing.mode, asking.mode) == ("plan", "plan")
    session.mode = "acceptEdits"
    assert (bypassing.mode, asking.mode) == ("acceptEdits", "bubble")


async def test_a_policy_answer_that_is_not_a_decision_denies(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    """Runtime code that maps an answer to a decision fails closed: a policy that returns
    anything but an Allow (a string, True, a dict) denies the call."""
    answers: list[Any] = ["allow", True, {"behavior": "allow"}, "always", 1]
    policy = CallbackPolicy(lambda _request: answers.pop(0))
    calls = [
        {"type": "tool_use", "name": "Bash", "input": {"command": f"touch made{i}"}}
        for i in range(5)
    ]
    emulator.script(Reply(tuple(calls)), Reply.text("done"))
    session = make_session(permission_policy=policy, auto_respond=False)
    turn = await session.ask("go")
    assert len(turn.tool_calls) == 5 and all(c.is_error for c in turn.tool_calls)
    assert not list(tmp_path.glob("made*"))
    assert not answers
    assert all("not approved" in c.result for c in turn.tool_calls)
