"""Approve what you see: the preview a person approves is the change the tool makes.

Each call goes through a real session (the SDK against the emulator): the model (or an agent
in its own git worktree) asks for an Edit or a Write, the permission policy records the
request it is shown, and the previewed diff,
applied with `git apply` to the file as it was, must give the file as the tool left it, byte
for byte. A call that would fail is refused before anyone is asked.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator import Reply
from forkagent_jupyter.emulator.brains import OfflineBrain, ScriptedBrain, last_user_text
from forkagent_jupyter.runtime.permissions.gate import (
    Allow,
    CallbackPolicy,
    PermissionRequest,
    ScriptedPolicy,
)

pytestmark = pytest.mark.anyio


def apply_diff(before: bytes, diff: str, name: str, where: Path) -> bytes:
    """`before` with `diff` applied by git (as a person would apply what they approved)."""
    where.mkdir()
    target = where / name
    if before:
        target.write_bytes(before)
    patch = where.parent / f"{where.name}.patch"
    patch.write_bytes(diff.encode("utf-8"))
    subprocess.run(
        ["git", "apply", "--whitespace=nowarn", str(patch)],
        cwd=where,
        check=True,
        capture_output=True,
    )
    return target.read_bytes()


def one_call(name: str, data: dict[str, Any]) -> Reply:
    return Reply(({"type": "tool_use", "name": name, "input": data},))


async def test_crlf_edit_preview_is_the_written_change(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    before = b"title\r\nx = 1\r\ny = 2\r\nend\r\n"
    notes.write_bytes(before)
    # written with LF line ends, as models do: Edit matches it against the CRLF text
    edit = {"file_path": "notes.txt", "old_string": "x = 1\ny = 2", "new_string": "x = 10\ny = 20"}
    emulator.script(one_call("Edit", edit), Reply.text("edited"))
    policy = ScriptedPolicy([Allow()])
    session = make_session(permission_policy=policy)
    turn = await session.ask("edit the notes")
    [call] = turn.tool_calls
    assert not call.is_error, call.result
    [request] = policy.requests
    after = notes.read_bytes()
    assert after == b"title\r\nx = 10\r\ny = 20\r\nend\r\n"
    assert "-x = 1\r\n" in request.preview and "+x = 10\r\n" in request.preview
    assert apply_diff(before, request.preview, "notes.txt", tmp_path / "check") == after
    assert request.summary == "Edit notes.txt: 'x = 1 y = 2' -> 'x = 10 y = 20'"


async def test_non_unique_edit_is_refused_before_anyone_is_asked(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("x = 1\nx = 1\n")
    missing = {"file_path": "notes.txt", "old_string": "z = 3", "new_string": "z = 4"}
    twice = {"file_path": "notes.txt", "old_string": "x = 1", "new_string": "x = 2"}
    emulator.script(one_call("Edit", twice), one_call("Edit", missing), Reply.text("gave up"))
    policy = ScriptedPolicy(default=Allow())
    session = make_session(permission_policy=policy)
    turn = await session.ask("edit the notes")
    first, second = turn.tool_calls
    assert first.is_error and "old_string occurs 2 times in notes.txt" in first.result
    assert second.is_error and "old_string was not found in notes.txt" in second.result
    assert policy.requests == []  # nobody was asked to approve a change that cannot happen
    assert notes.read_text() == "x = 1\nx = 1\n"
    refusals = [e for e in session.gate.log if e["tool"] == "Edit"]
    assert [(e["decision"], e["by"]) for e in refusals] == [("deny", "preview")] * 2


async def test_write_preview_without_a_final_newline_applies_exactly(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    report = tmp_path / "report.md"
    before = b"# Report\nold line\nlast"
    report.write_bytes(before)
    content = "# Report\nnew line\nlast line without newline"
    emulator.script(
        one_call("Write", {"file_path": "report.md", "content": content}),
        one_call("Write", {"file_path": "sub/new.txt", "content": "fresh\n"}),
        Reply.text("written"),
    )
    policy = ScriptedPolicy(default=Allow())
    session = make_session(permission_policy=policy)
    await session.ask("write the report")
    overwrite, create = policy.requests
    assert report.read_bytes() == content.encode()
    assert "\\ No newline at end of file" in overwrite.preview
    assert apply_diff(before, overwrite.preview, "report.md", tmp_path / "c1") == content.encode()
    assert create.preview.startswith("--- /dev/null\n+++ b/sub/new.txt\n")
    assert create.summary == "Write sub/new.txt (1 lines)"


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


async def test_a_worktree_agents_edits_are_previewed_in_its_worktree(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    """The diff a person approves for an isolated agent is computed in the agent's worktree
    (where its first edit already changed the file), not in the session's checkout."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "T")
    (repo / "notes.txt").write_text("x = 1\ny = 1\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "notes")
    agents = tmp_path / "home" / ".forkagent" / "agents"  # an agent that asks before it edits
    agents.mkdir(parents=True)
    (agents / "editor.md").write_text(
        "---\ndescription: edits\npermissionMode: default\n---\nEdit.\n"
    )
    start = {
        "description": "edit in isolation",
        "prompt": "change the notes",
        "subagent_type": "editor",
        "isolation": "worktree",
        "run_in_background": True,
    }

    def edit(old: str, new: str) -> Reply:
        return one_call("Edit", {"file_path": "notes.txt", "old_string": old, "new_string": new})

    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("ISOLATE", one_call("Agent", start), times=1)
    in_worktree = "isolated git worktree"
    brain.add_rule(lambda req: in_worktree in last_user_text(req), edit("x = 1", "x = 2"), times=1)
    brain.add_rule(
        lambda req: "Edited notes.txt" in str(req["messages"][-1]), edit("x = 2", "x = 3"), times=1
    )
    emulator.brain = brain
    policy = ScriptedPolicy(default=Allow())
    session = make_session(workdir=repo, auto_respond=False, permission_policy=policy)
    turn = await session.ask("ISOLATE please")
    assert not turn.tool_calls[0].is_error, turn.tool_calls[0].result
    [task] = await session.wait(timeout=30)
    assert task.status == "completed" and task.worktree_path, task.error
    first, second = [r for r in policy.requests if r.tool_name == "Edit"]
    assert "-x = 2\n+x = 3\n" in second.preview  # the worktree's text, not the checkout's
    edited = Path(task.worktree_path) / "notes.txt"
    once = apply_diff(b"x = 1\ny = 1\n", first.preview, "notes.txt", tmp_path / "c1")
    assert apply_diff(once, second.preview, "notes.txt", tmp_path / "c2") == edited.read_bytes()
    assert edited.read_bytes() == b"x = 3\ny = 1\n"
    assert (repo / "notes.txt").read_text() == "x = 1\ny = 1\n"  # the checkout is untouched


async def test_a_file_changed_while_the_person_looked_is_not_edited(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    """The approval is for the diff shown: if the file changes before the answer (another
    agent wrote it), the approved change no longer holds and the call is refused."""
    notes = tmp_path / "notes.txt"
    notes.write_text("x = 1\ny = 1\n")
    shown: list[str] = []

    async def approve_after_a_concurrent_write(request: PermissionRequest) -> Allow:
        shown.append(request.preview)
        # written while the prompt was open (off the loop, as another agent's write would be)
        await asyncio.to_thread(notes.write_text, "x = 1\ny = 1\nz = 1\n")
        return Allow()

    edit = {"file_path": "notes.txt", "old_string": "y = 1", "new_string": "y = 2"}
    emulator.script(one_call("Edit", edit), Reply.text("ok"))
    session = make_session(permission_policy=CallbackPolicy(approve_after_a_concurrent_write))
    turn = await session.ask("edit the notes")
    [call] = turn.tool_calls
    assert call.is_error and "changed while the call waited for approval" in call.result
    assert notes.read_text() == "x = 1\ny = 1\nz = 1\n"  # the other write kept, no edit on it
    assert shown and "+y = 2\n" in shown[0]
