"""What a worker's code starts ends with the worker: `subprocess` and `os.fork` children are
killed when it is stopped, and when it finishes (its own process stays for pulls)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.runtime.executors.process.tree import group_members

pytestmark = pytest.mark.anyio

START = (
    "Go `py: import os, subprocess, time; "
    "kids = [subprocess.Popen(['sleep', '300']).pid] + "
    "[p if (p := os.fork()) else (time.sleep(300), os._exit(0)) for _ in range(5)]; {tail}`"
)


def _running(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


async def _gone(pids: list[int]) -> list[int]:
    """The pids still running after a moment (each is killed at once or not at all; up to
    30 s to be reaped on a loaded machine)."""
    for _ in range(600):
        if not any(_running(pid) for pid in pids):
            break
        await asyncio.sleep(0.05)
    return [pid for pid in pids if _running(pid)]


async def test_stop_kills_what_the_worker_started(make_session: Any) -> None:
    session = make_session(auto_respond=False)
    task = await session.fork(START.format(tail="time.sleep(300)"))
    runner = None
    for _ in range(1200):  # a loaded machine can take long to start 7 processes
        runner = session.compute.runners.get(task.id)
        pid = getattr(runner, "pid", None)
        if pid is not None and len(await asyncio.to_thread(group_members, pid)) >= 7:
            break  # the worker, sleep and 5 forks
        await asyncio.sleep(0.05)
    assert runner is not None and runner.pid is not None
    members = await asyncio.to_thread(group_members, runner.pid)
    started = [pid for pid in members if pid != runner.pid]
    assert len(started) == 6
    stopped = await session.stop(task.id)
    assert stopped.status == "killed"
    assert await _gone([runner.pid, *started]) == []


async def test_a_finished_worker_keeps_its_process_not_its_children(make_session: Any) -> None:
    session = make_session(auto_respond=False)
    task = await session.fork(START.format(tail="n = len(kids)"))
    [finished] = await session.wait(task.id, timeout=60)
    assert finished.status == "completed", finished.error
    pid = session.compute.runners[task.id].pid
    kids = (await session.pull(task.id, "kids"))["kids"]
    assert len(kids) == 6  # (pids as the worker sees them: it has a PID namespace of its own)
    left = await asyncio.to_thread(group_members, pid)
    assert await _gone([p for p in left if p != pid]) == []
    assert _running(pid)  # kept for pulls
    assert await session.pull(task.id, "n") == {"n": 6}


def _commit(path: Path) -> None:
    import sqlite3

    con = sqlite3.connect(path, timeout=1)
    with con:
        con.execute("insert into t values (2)")
    con.close()


async def test_a_finished_worker_holds_no_sqlite_lock(make_session: Any, tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "data.db"
    con = sqlite3.connect(path, check_same_thread=False)
    with con:
        con.execute("create table t (x)")
    session = make_session(auto_respond=False, namespace={"con": con})
    task = await session.fork("Go `py: con.execute('insert into t values (1)'); left = 1`")
    [finished] = await session.wait(task.id, timeout=60)
    assert finished.status == "completed", finished.error
    for _ in range(50):  # its clean-up follows its end
        try:
            await asyncio.to_thread(_commit, path)
            break
        except sqlite3.OperationalError:
            await asyncio.sleep(0.1)
    else:
        pytest.fail("the finished worker still holds the database lock")
    assert await session.pull(task.id, "left") == {"left": 1}  # it is kept for pulls
    con.close()


async def test_a_worker_leads_a_session_of_its_own(make_session: Any) -> None:
    """A computing worker shares no scheduling group (Linux autogroup: one per session) with
    the kernel, so the kernel keeps its share of the CPU while workers compute."""
    session = make_session(auto_respond=False)
    task = await session.fork("Go `py: import time; time.sleep(0.5)`")
    [finished] = await session.wait(task.id, timeout=60)
    assert finished.status == "completed", finished.error
    pid = session.compute.runners[task.id].pid
    assert _running(pid)  # kept for pulls
    # its session is led by the process the snapshot forked (in a sandbox, the one that
    # waits for the worker), not by the kernel's session's leader
    assert os.getsid(pid) != os.getsid(0)
    assert os.getpgid(pid) == pid  # and still leads its group (what `kill_tree` ends)
    autogroup = Path(f"/proc/{pid}/autogroup")
    if autogroup.exists():  # a kernel built with autogroups
        assert autogroup.read_text() != Path("/proc/self/autogroup").read_text()
