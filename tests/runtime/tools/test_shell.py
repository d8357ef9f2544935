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


async def _wait_for_file(path: Path, timeout: float = 5) -> str:
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


async def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    started = time.monotonic()
    out = await call(
        BashTool(),
        make_ctx(tmp_path),
        command="echo before; sleep 30 & echo $! > child.pid; sleep 30",
        timeout=1,
    )
    elapsed = time.monotonic() - started
    assert out.is_error and "timed out after 1 s" in out.content
    assert out.content.startswith("before")
    assert elapsed < 5, elapsed
    child = int((tmp_path / "child.pid").read_text())
    for _ in range(50):
        if not _alive(child):
            break
        await asyncio.sleep(0.02)
    assert not _alive(child)


async def test_cancellation_kills_the_process_group(tmp_path: Path) -> None:
    task = asyncio.ensure_future(
        call(BashTool(), make_ctx(tmp_path), command="sleep 30 & echo $! > child.pid; wait")
    )
    child = int(await _wait_for_file(tmp_path / "child.pid"))
    assert _alive(child)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(50):
        if not _alive(child):
            break
        await asyncio.sleep(0.02)
    assert not _alive(child)


async def test_background_child_holding_the_pipe_does_not_block(tmp_path: Path) -> None:
    started = time.monotonic()
    out = await call(
        BashTool(), make_ctx(tmp_path), command="sleep 20 & echo $! > child.pid; echo done"
    )
    elapsed = time.monotonic() - started
    child = int((tmp_path / "child.pid").read_text())
    try:
        assert not out.is_error
        assert out.content.startswith("done") and "background processes" in out.content
        assert elapsed < 5, elapsed
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
