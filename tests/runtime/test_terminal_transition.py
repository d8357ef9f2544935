"""One terminal transition per run: status first, then transcript, shell children, worktree
clean-up and exactly one notification - on completion, failure, refusal and stop alike."""

from __future__ import annotations

import asyncio
import os
import re
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, last_user_text
from forkagent_jupyter.emulator.faults import Fault
from forkagent_jupyter.runtime.workers.agent_tools import TaskOutputInput, TaskOutputTool
from forkagent_jupyter.runtime.workers.worktree import create_worktree
from tests.reported import tool_outputs

from .helpers import git, make_repo

pytestmark = pytest.mark.anyio

_WRITE = re.compile(r"WRITE (\S+)")
_SPAWN = re.compile(r"SPAWN (\S+)")


class ActingBrain:
    """`WRITE name` in the last user text: a Write of that file; `SPAWN name`: a Bash call
    that leaves a background `sleep` behind and writes its pid to that file; else the
    offline model."""

    def __init__(self) -> None:
        self.offline = OfflineBrain()

    def reply(self, request: Mapping[str, Any]) -> Reply:
        text = last_user_text(request)
        write = _WRITE.search(text)
        if write:
            return Reply.tool_use("Write", {"file_path": write.group(1), "content": "x\n"})
        spawn = _SPAWN.search(text)
        if spawn:
            command = f"sleep 300 > /dev/null 2>&1 & echo $! > {spawn.group(1)}"
            return Reply.tool_use("Bash", {"command": command})
        return self.offline.reply(request)


def worktrees(repo: Path) -> list[str]:
    return [ln for ln in git(repo, "worktree", "list").splitlines() if "agent-" in ln]


async def start_isolated(session: Any, repo: Path, prompt: str, **kw: Any) -> Any:
    """A general-purpose agent in its own worktree, started as the Agent tool does."""
    from forkagent_jupyter.runtime.workers.workers import new_agent_id

    agent_id = new_agent_id()
    worktree = await create_worktree(repo, agent_id)
    run = session.workers.named(
        session.main,
        await session.workers.definition("general-purpose"),
        prompt,
        description="isolated work",
        agent_id=agent_id,
        worktree=worktree,
        **kw,
    )
    return session.workers.start(run)


def gated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `git` first on PATH that holds the worktree clean-up's status check until the
    returned gate file exists (a git that hangs, as in gh-20236)."""
    real = subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
    folder = tmp_path / "gitbin"
    folder.mkdir()
    gate = tmp_path / "gate"
    shim = folder / "git"
    shim.write_text(
        "#!/bin/sh\n"
        'case "$*" in *--ignored*) while [ ! -e "$FORKAGENT_TEST_GATE" ]; do sleep 0.02; '
        "done;; esac\n"
        f'exec {real} "$@"\n'
    )
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FORKAGENT_TEST_GATE", str(gate))
    return gate


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


async def test_failed_isolated_agent_leaves_no_worktree(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    session = make_session(workdir=repo, auto_respond=False)
    emulator.faults.next(Fault.error(500, "boom", retry_after_ms=0), times=3)
    task = await start_isolated(session, repo, "Anything.")
    assert len(worktrees(repo)) == 1  # it ran in its worktree
    [done] = await session.wait(task.id, timeout=30)
    assert done.status == "failed" and "boom" in (done.error or "")
    assert worktrees(repo) == []  # nothing changed in it: removed, with its branch
    assert "forkagent/" not in git(repo, "branch", "--list")
    [note] = session.queue.drain("main")  # exactly one notification
    assert "<status>failed</status>" in note.text and "<worktree>" not in note.text


async def test_a_failed_notification_carries_no_result(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    session = make_session(auto_respond=False)
    turn = await session.ask("Say something first.")
    assert turn.text  # the fork inherits this text: it is not the fork's result
    emulator.faults.next(Fault.error(500, "boom", retry_after_ms=0), times=3)
    task = await session.fork("Anything.")
    [done] = await session.wait(task.id, timeout=30)
    assert done.status == "failed"
    [note] = session.queue.drain("main")
    assert "<result>" not in note.text and "boom" in note.text  # the error, in the summary


async def test_task_output_does_not_wait_for_git(
    emulator: Any, make_session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    gate = gated_git(tmp_path, monkeypatch)
    emulator.brain = ActingBrain()
    session = make_session(workdir=repo, auto_respond=False)
    task = await start_isolated(session, repo, "Report `py: 6 * 7`")
    tool = TaskOutputTool()
    out = await tool.run(TaskOutputInput(task_id=task.id, timeout=60), session.main.config.ctx)
    assert "<retrieval_status>success</retrieval_status>" in out
    assert tool_outputs(out) == ["42"], out
    assert task.status == "completed" and not task.settled  # git still holds the clean-up
    gate.touch()
    await session.wait(task.id, timeout=30)
    assert worktrees(repo) == []
    assert session.queue.drain("main") == []  # read through TaskOutput: not notified again


async def test_background_shell_children_die_with_their_agent(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    emulator.brain = ActingBrain()
    session = make_session(auto_respond=False)
    pidfile = tmp_path / "pid.txt"
    run = session.workers.named(
        session.main,
        await session.workers.definition("general-purpose"),
        f"SPAWN {pidfile}",
        description="spawner",
    )
    task = session.workers.start(run)
    await session.wait(task.id, timeout=30)
    assert task.status == "completed"
    pid = int(pidfile.read_text())
    for _ in range(1500):  # SIGKILL is delivered at once; reaping may take a moment
        if not alive(pid):
            break
        await asyncio.sleep(0.02)
    assert not alive(pid)


async def test_resume_runs_in_the_kept_worktree_or_is_refused(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    from forkagent_jupyter.runtime.errors import UsageError

    repo = make_repo(tmp_path / "repo")
    emulator.brain = ActingBrain()
    session = make_session(workdir=repo, auto_respond=False, permission_mode="bypassPermissions")
    task = await start_isolated(session, repo, "WRITE one.txt")
    await session.wait(task.id, timeout=30)
    assert task.status == "completed" and task.worktree_path
    wt = Path(task.worktree_path)
    assert (wt / "one.txt").exists()
    reply = await session.send(task.id, "WRITE two.txt")
    assert "resumed" in reply
    await session.wait(task.id, timeout=30)
    assert task.run == 2 and (wt / "two.txt").exists()
    assert not (repo / "two.txt").exists() and git(repo, "status", "--porcelain") == ""
    session.queue.drain("main")
    # the worktree is gone: refused in one clear message, never run in the checkout
    git(repo, "worktree", "remove", "--force", str(wt))
    with pytest.raises(UsageError, match="no longer exists"):
        await session.send(task.id, "WRITE three.txt")
    assert task.run == 2 and not (repo / "three.txt").exists()


async def test_resume_after_its_unchanged_worktree_was_removed(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    emulator.brain = ActingBrain()
    session = make_session(workdir=repo, auto_respond=False, permission_mode="bypassPermissions")
    task = await start_isolated(session, repo, "Report `py: 1 + 1`")
    await session.wait(task.id, timeout=30)
    assert task.worktree_path is None and worktrees(repo) == []  # unchanged: removed
    await session.send(task.id, "WRITE later.txt")
    await session.wait(task.id, timeout=30)
    assert task.status == "completed" and task.worktree_path  # a worktree again, kept
    assert (Path(task.worktree_path) / "later.txt").exists()
    assert len(worktrees(repo)) == 1  # a real worktree, not a leftover folder
    assert not (repo / "later.txt").exists() and git(repo, "status", "--porcelain") == ""


async def test_resume_after_a_restart_runs_in_the_recorded_worktree(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    from forkagent_jupyter.runtime.errors import UsageError

    repo = make_repo(tmp_path / "repo")
    root = tmp_path / "transcripts"
    emulator.brain = ActingBrain()
    first = make_session(
        workdir=repo, auto_respond=False, permission_mode="bypassPermissions", transcripts=root
    )
    task = await start_isolated(first, repo, "WRITE one.txt", name="iso")
    await first.wait(task.id, timeout=30)
    wt = Path(task.worktree_path or "")
    await first.aclose()
    # a new kernel: a new session reading the same transcripts
    second = make_session(
        workdir=repo, auto_respond=False, permission_mode="bypassPermissions", transcripts=root
    )
    reply = await second.send("iso", "WRITE two.txt")
    assert "resumed from its transcript" in reply
    [again] = await second.wait(timeout=30)
    assert again.status == "completed" and (wt / "two.txt").exists()
    assert not (repo / "two.txt").exists() and git(repo, "status", "--porcelain") == ""
    await second.aclose()
    git(repo, "worktree", "remove", "--force", str(wt))
    third = make_session(
        workdir=repo, auto_respond=False, permission_mode="bypassPermissions", transcripts=root
    )
    with pytest.raises(UsageError, match="no longer exists"):
        await third.send("iso", "WRITE three.txt")
    assert third.tasks == [] and not (repo / "three.txt").exists()


async def test_a_message_during_the_clean_up_resumes_the_agent(
    emulator: Any, make_session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    gate = gated_git(tmp_path, monkeypatch)
    emulator.brain = ActingBrain()
    session = make_session(workdir=repo, auto_respond=False, permission_mode="bypassPermissions")
    task = await start_isolated(session, repo, "Report `py: 2 + 2`")
    for _ in range(1500):  # its status is final while git still holds the clean-up
        if task.status != "running":
            break
        await asyncio.sleep(0.02)
    assert task.status == "completed" and not task.settled
    reply = await session.send(task.id, "and then `py: 3 * 3`")
    assert "queued" not in reply and "resumes with your message" in reply
    gate.touch()
    for _ in range(1500):
        if task.run == 2 and task.settled:
            break
        await asyncio.sleep(0.02)
    assert task.run == 2 and task.status == "completed"
    assert tool_outputs(task.result or "") == ["9"], task.result
    run = session.workers.runs[task.id]
    assert "and then `py: 3 * 3`" in str(run.history)
    assert len(session.queue.drain("main")) == 2  # one per run
