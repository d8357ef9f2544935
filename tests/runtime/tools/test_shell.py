"""Bash on real subprocesses: output order, exit codes, environment, timeouts, cancellation."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from forkagent_jupyter.runtime.tools.shell import BashTool

from .helpers import call, make_ctx

pytestmark = pytest.mark.anyio

FAKE_KEY = "sk-" + "ant-api03-FAKEFAKEFAKEFAKE-for-tests-only"  # fake, built so scanners skip it


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purpose.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


async def _wait_for_file(path: Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


async def test_output_in_order_in_the_workdir(tmp_path: Path) -> None:
    out = await call(BashTool(), make_ctx(tmp_path), command="echo one; echo two >&2; echo 3; pwd")
    assert not out.is_error
    assert out.content.splitlines() == ["one", "two", "3", str(tmp_path.resolve())]


async def test_nonzero_exit_is_an_error_with_output(tmp_path: Path) -> None:
    out = await call(BashTool(), make_ctx(tmp_path), command="echo partial; exit 3")
    assert out.is_error
    assert out.content == "partial\nExit code 3"
    silent = await call(BashTool(), make_ctx(tmp_path), command="true")
    assert not silent.is_error and silent.content == "(no output)"


async def test_environment_never_has_the_api_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", FAKE_KEY + "-token")
    monkeypatch.setenv("SOME_SETTING", "visible")
    out = await call(BashTool(), make_ctx(tmp_path), command="env")
    assert not out.is_error
    assert FAKE_KEY not in out.content and "ANTHROPIC_API_KEY" not in out.content
    assert "ANTHROPIC_AUTH_TOKEN" not in out.content
    assert "SOME_SETTING=visible" in out.content
    # A host-provided environment is scrubbed as well.
    given = make_ctx(tmp_path, env={"PATH": os.environ["PATH"], "ANTHROPIC_API_KEY": FAKE_KEY})
    out = await call(BashTool(), given, command="echo key=[$ANTHROPIC_API_KEY]")
    assert out.content == "key=[]"


async def _wait_dead(pid: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        await asyncio.sleep(0.02)
    return False


async def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    # the first two commands take milliseconds (seconds on a loaded machine, hence 10); the
    # timeout is there for the `sleep 30`
    out = await call(
        BashTool(),
        make_ctx(tmp_path),
        command="echo before; sleep 30 & echo $! > child.pid; sleep 30",
        timeout=10,
    )
    assert out.is_error and "timed out after 10 s" in out.content
    assert out.content.startswith("before")
    assert await _wait_dead(int((tmp_path / "child.pid").read_text()))


async def test_cancellation_kills_the_process_group(tmp_path: Path) -> None:
    task = asyncio.ensure_future(
        call(BashTool(), make_ctx(tmp_path), command="sleep 30 & echo $! > child.pid; wait")
    )
    child = int(await _wait_for_file(tmp_path / "child.pid"))
    assert _alive(child)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _wait_dead(child)


def _live_children() -> list[int]:
    """Pids of this process's children that have not exited (zombies are dead)."""
    found = []
    for task in Path("/proc/self/task").iterdir():
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except FileNotFoundError:  # a thread that has just ended
            continue
    return [pid for pid in found if _alive(pid)]


async def test_cancelled_at_any_step_leaves_no_process(tmp_path: Path) -> None:
    before = set(_live_children())
    for steps in range(12):  # cancel after 0, 1, 2, ... turns of the event loop
        task = asyncio.ensure_future(call(BashTool(), make_ctx(tmp_path), command="sleep 30"))
        for _ in range(steps):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert set(_live_children()) <= before, f"a process is left after {steps} steps"


async def test_background_child_holding_the_pipe_does_not_block(tmp_path: Path) -> None:
    out = await call(
        BashTool(), make_ctx(tmp_path), command="sleep 20 & echo $! > child.pid; echo done"
    )
    child = int((tmp_path / "child.pid").read_text())
    try:
        assert not out.is_error
        # the note says the call returned while the child still held the output open
        assert out.content.startswith("done") and "background processes" in out.content
        assert _alive(child)
    finally:
        os.kill(child, 9)


async def test_output_is_capped_keeping_head_and_tail(tmp_path: Path) -> None:
    out = await call(BashTool(), make_ctx(tmp_path), command="seq 1 200000")
    assert not out.is_error
    assert len(out.content) < 31_000
    assert out.content.startswith("1\n2\n3\n")
    assert out.content.endswith("199999\n200000")
    assert "cut from the middle" in out.content


def test_input_validation_and_subject() -> None:
    tool = BashTool()
    with pytest.raises(ValidationError):
        tool.parse({"command": "ls", "timeout": 601})
    with pytest.raises(ValidationError):
        tool.parse({"command": ""})
    args = tool.parse({"command": "  git status -s \n", "description": "show status"})
    assert args.timeout == 120
    assert tool.permission_subject(args) == "git status -s"


async def test_a_progress_line_rewritten_with_carriage_returns_is_its_last_state(
    tmp_path: Path,
) -> None:
    command = "for i in $(seq 1 500); do printf '\\r%3d%%' $((i / 5)); done; echo; echo next"
    out = await call(BashTool(), make_ctx(tmp_path), command=command)
    assert not out.is_error
    assert out.content == "100%\nnext"
