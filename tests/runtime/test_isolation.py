"""Worktree isolation for agents started with isolation='worktree'."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain, last_user_text

from .helpers import git, make_repo

pytestmark = pytest.mark.anyio


def brain(write: bool) -> ScriptedBrain:
    b = ScriptedBrain(when_empty=OfflineBrain())
    b.when_last_user_contains(
        "ISOLATE",
        Reply(
            (
                {
                    "type": "tool_use",
                    "name": "Agent",
                    "input": {
                        "description": "edit in isolation",
                        "prompt": "change the data",
                        "subagent_type": "general-purpose",
                        "isolation": "worktree",
                        "run_in_background": True,
                    },
                },
            )
        ),
        times=1,
    )
    if write:
        b.add_rule(
            lambda req: "isolated git worktree" in last_user_text(req),
            Reply(
                (
                    {
                        "type": "tool_use",
                        "name": "Write",
                        "input": {"file_path": "result.txt", "content": "done"},
                    },
                )
            ),
            times=1,
        )
    return b


async def test_changed_worktree_is_kept_and_reported(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    emulator.brain = brain(write=True)
    session = make_session(workdir=repo, auto_respond=False, permission_mode="bypassPermissions")
    turn = await session.ask("ISOLATE please")
    assert not turn.tool_calls[0].is_error, turn.tool_calls[0].result
    [task] = await session.wait(timeout=30)
    assert task.status == "completed"
    assert task.worktree_path and task.worktree_branch == f"forkagent/agent-{task.id[1:9]}"
    wt = Path(task.worktree_path)
    assert (wt / "result.txt").read_text() == "done"
    assert not (repo / "result.txt").exists()  # the parent's tree is untouched
    assert git(repo, "status", "--porcelain") == ""  # and still clean
    [note] = session.queue.drain("main")
    assert f"<worktreePath>{wt}</worktreePath>" in note.text
    assert session.store is not None
    meta = (session.store.dir / "agents" / f"{task.id}.meta.json").read_text()
    assert str(wt) in meta  # the kept worktree is recorded for a later resume


async def test_unchanged_worktree_is_removed(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    emulator.brain = brain(write=False)
    session = make_session(workdir=repo, auto_respond=False, permission_mode="bypassPermissions")
    await session.ask("ISOLATE please")
    [task] = await session.wait(timeout=30)
    assert task.status == "completed" and task.worktree_path is None
    assert "forkagent/" not in git(repo, "branch", "--list")
    assert git(repo, "worktree", "list").count("\n") == 0


async def test_dirty_tree_and_non_git_dir_are_clear_errors(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "data.csv").write_text("changed\n")
    emulator.brain = brain(write=False)
    session = make_session(workdir=repo, auto_respond=False, permission_mode="bypassPermissions")
    turn = await session.ask("ISOLATE please")
    [call] = turn.tool_calls
    assert call.is_error and "uncommitted changes (data.csv)" in call.result
    assert session.tasks == []

    plain = tmp_path / "plain"
    plain.mkdir()
    emulator.brain = brain(write=False)
    other = make_session(workdir=plain, auto_respond=False)
    turn = await other.ask("ISOLATE please")
    assert turn.tool_calls[0].is_error
    assert "is not inside a git repository" in turn.tool_calls[0].result
