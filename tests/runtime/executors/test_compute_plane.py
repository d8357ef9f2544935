"""Where workers' code runs: a snapshot process per worker (isolated, parallel, killable),
or the session's namespace (`shared`), and values pulled back on request."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.runtime.executors import PullError, ThreadRunner

pytestmark = pytest.mark.anyio


async def done(session: Any, task: Any) -> Any:
    [finished] = await session.wait(task.id, timeout=60)
    return finished


async def test_a_fork_computes_on_a_snapshot_taken_at_the_fork(make_session: Any) -> None:
    namespace: dict[str, Any] = {"x": 1, "rows": [3, 4]}
    session = make_session(auto_respond=False, namespace=namespace)
    task = await session.fork(
        "Go `py: seen = x; x = 999; rows.append(5); pid = __import__('os').getpid()`"
    )
    namespace["x"] = 2  # after the fork, before the worker's first call: not seen by it
    finished = await done(session, task)
    assert finished.status == "completed", finished.error
    assert namespace == {"x": 2, "rows": [3, 4]}  # nothing rebound or mutated here
    pulled = await session.pull(task.id, "seen", "x", "rows", "pid")
    assert pulled["seen"] == 1 and pulled["x"] == 999 and pulled["rows"] == [3, 4, 5]
    assert pulled["pid"] != os.getpid()
    with pytest.raises(PullError, match="missing: not defined in this worker"):
        await session.pull(task.id, "missing")


async def test_shared_workers_run_in_the_namespace(make_session: Any, tmp_path: Path) -> None:
    namespace: dict[str, Any] = {}
    session = make_session(auto_respond=False, namespace=namespace, worker_namespace="shared")
    task = await session.fork("Set `py: y = 5`")
    assert (await done(session, task)).status == "completed"
    assert namespace["y"] == 5
    assert isinstance(session.compute.runners[task.id], ThreadRunner)
    with pytest.raises(PullError, match="already yours"):
        await session.pull(task.id, "y")
    # per fork, whatever the session's default
    isolated = await session.fork("Set `py: z = 6`", namespace="isolated")
    assert (await done(session, isolated)).status == "completed"
    assert "z" not in namespace


async def test_a_named_agent_chooses_its_namespace_in_its_file(
    make_session: Any, tmp_path: Path
) -> None:
    agents = tmp_path / ".forkagent" / "agents"
    agents.mkdir(parents=True)
    (agents / "setter.md").write_text(
        "---\ndescription: sets\ntools: Python\nnamespace: shared\n---\nYou set values.\n"
    )
    namespace: dict[str, Any] = {}
    session = make_session(auto_respond=False, namespace=namespace)
    setter = await session.workers.definition("setter")
    run = session.workers.named(session.main, setter, "Set `py: w = 7`", description="set")
    task = session.workers.start(run)
    assert (await done(session, task)).status == "completed"
    assert namespace["w"] == 7


async def test_stop_kills_a_computing_worker_process_at_once(make_session: Any) -> None:
    session = make_session(auto_respond=False)
    task = await session.fork("Spin `py: __import__('time').sleep(60)`")
    deadline = asyncio.get_running_loop().time() + 30
    while getattr(session.compute.runners.get(task.id), "pid", None) is None:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.02)
    pid = session.compute.runners[task.id].pid
    stopped = await session.stop(task.id)
    assert stopped.status == "killed"
    for _ in range(600):  # its snapshot reaps it within a moment (30 s: a loaded machine)
        if not Path(f"/proc/{pid}").exists():
            break
        await asyncio.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists()
    notes = session.queue.drain("main")
    assert len(notes) == 1 and "<status>killed</status>" in notes[0].text
    with pytest.raises(PullError, match="was stopped"):
        await session.pull(task.id, "anything")


async def test_a_dead_worker_process_fails_its_task_once(make_session: Any) -> None:
    session = make_session(auto_respond=False)
    task = await session.fork("Quit `py: __import__('os')._exit(7)`")
    finished = await done(session, task)
    assert finished.status == "failed"
    assert finished.error == ("the worker's process exited with code 7 while it ran Python code")
    notes = session.queue.drain("main")
    assert len(notes) == 1 and "<status>failed</status>" in notes[0].text
    # its history stays a valid conversation: the call was answered
    history = session.workers.runs[task.id].history
    assert history[-1]["content"][0]["type"] == "tool_result"


async def test_a_worker_lost_while_its_snapshot_is_starved_says_how_it_ended(
    make_session: Any, tmp_path: Path
) -> None:
    """The kernel waits for the snapshot's report of how a worker ended as for an event: on
    a busy machine the snapshot gets no CPU for seconds, and the card said only "ended"."""
    gate = tmp_path / "gate"
    session = make_session(auto_respond=False, namespace={"gate": str(gate)})
    task = await session.fork(
        "Quit `py: import os, time; "
        "[time.sleep(0.02) for _ in iter(lambda: os.path.exists(gate), True)]; os._exit(7)`"
    )
    deadline = asyncio.get_running_loop().time() + 60
    while getattr(session.compute.runners.get(task.id), "pid", None) is None:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.02)
    runner = session.compute.runners[task.id]
    snapshot = runner.snapshot
    os.kill(snapshot.pid, signal.SIGSTOP)  # starved: it runs nothing until SIGCONT
    try:
        gate.touch()  # the worker exits with code 7
        while runner.pid not in snapshot._exit_waiters:  # the kernel saw it go
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.02)
        await asyncio.sleep(3)  # a starved spell longer than the kernel used to wait (1 s)
        assert task.status == "running"  # still waiting for the report, not "ended"
    finally:
        os.kill(snapshot.pid, signal.SIGCONT)
    finished = await done(session, task)
    assert finished.error == ("the worker's process exited with code 7 while it ran Python code")


def _until_exited(pid: int) -> None:
    """Wait until child `pid` has exited (a zombie: not yet reaped)."""
    stat = Path(f"/proc/{pid}/stat")
    while stat.read_text().split(") ", 1)[1][0] != "Z":
        time.sleep(0.01)


async def test_a_snapshot_dropped_while_its_reader_starts_leaves_the_loop_clean(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A snapshot dropped (garbage-collected) between its report reader's first step and the
    loop's registration of that reader's socket must not close the socket under the loop: the
    reader owns it from its first step (before, the loop's callback failed with EBADF)."""
    import gc

    from forkagent_jupyter.runtime.executors import WorkerLostError
    from forkagent_jupyter.runtime.executors.process import child
    from forkagent_jupyter.runtime.executors.process.process import Snapshot

    def fail() -> None:
        raise RuntimeError("set-up fails")

    monkeypatch.setattr(child, "forget_secrets", fail)
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    try:
        snapshot = Snapshot({})
        assert await loop.sock_recv(snapshot.control, 1) == b""  # it has gone
        await asyncio.to_thread(_until_exited, snapshot.pid)
        with pytest.raises(WorkerLostError):
            await snapshot.spawn()  # starts the reader task, which has not run yet
        await asyncio.sleep(0)  # its first step: the transport is made, its reader scheduled
        del snapshot
        gc.collect()
        for _ in range(20):
            await asyncio.sleep(0.01)
        gc.collect()
        await asyncio.sleep(0.05)
    finally:
        loop.set_exception_handler(previous)
    assert [context.get("exception") or context.get("message") for context in seen] == []


async def test_a_snapshot_that_died_says_how(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that cannot start because its snapshot process is gone says how that process
    ended (here: its set-up in the fork raised)."""
    from forkagent_jupyter.runtime.executors import WorkerLostError
    from forkagent_jupyter.runtime.executors.process import child
    from forkagent_jupyter.runtime.executors.process.process import Snapshot

    def fail() -> None:
        raise RuntimeError("set-up fails")

    monkeypatch.setattr(child, "forget_secrets", fail)  # inherited by the forked process
    snapshot = Snapshot({})
    try:
        loop = asyncio.get_running_loop()
        assert await loop.sock_recv(snapshot.control, 1) == b""  # it has gone
        await asyncio.to_thread(_until_exited, snapshot.pid)
        with pytest.raises(WorkerLostError) as caught:
            await snapshot.spawn()
        assert "cannot start a worker" in str(caught.value)
        assert "exited with code 70 (its set-up in the forked process failed)" in str(caught.value)
    finally:
        snapshot.close()


async def test_a_snapshot_whose_loop_raised_says_what_it_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When serving a spawn request raises in the snapshot process, the worker waiting for it
    fails with the exception the snapshot sent back, and its exit code says so; the next
    spawn is refused at once with the same account."""
    from forkagent_jupyter.runtime.executors import WorkerLostError
    from forkagent_jupyter.runtime.executors.confinement import sandbox
    from forkagent_jupyter.runtime.executors.process.process import Snapshot

    def lost(_told: int, _forked: int) -> int:
        raise RuntimeError("the pid went missing")

    monkeypatch.setattr(sandbox, "worker_pid", lost)  # inherited by the forked process
    snapshot = Snapshot({})
    try:
        with pytest.raises(WorkerLostError) as caught:
            await asyncio.wait_for(snapshot.spawn(), 30)
        assert "RuntimeError: the pid went missing" in str(caught.value)
        assert "RuntimeError: the pid went missing" in snapshot.broke
        with pytest.raises(WorkerLostError) as again:
            await snapshot.spawn()
        assert "the snapshot process has ended" in str(again.value)
    finally:
        snapshot.close()


async def test_spawn_requests_keep_their_bounds_whatever_their_size() -> None:
    """Spawn requests at once while the process listens on 2,000 ports (each request names
    them all: a frame longer than one read) each start their own worker: the snapshot reads
    every request whole, with the socket sent beside it."""
    import resource
    import socket

    from forkagent_jupyter.runtime.executors.process.process import Snapshot

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2_000 + 512
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    servers = []
    snapshot = Snapshot({"x": 1})
    try:
        for _ in range(2_000):
            server = socket.socket()
            server.bind(("127.0.0.1", 0))
            server.listen()
            servers.append(server)

        async def one() -> int:
            pid, sock = await snapshot.spawn()
            sock.close()
            return pid

        pids = await asyncio.wait_for(asyncio.gather(*(one() for _ in range(6))), 120)
        assert len(set(pids)) == 6
        assert not snapshot.closed and not snapshot.broke
    finally:
        snapshot.close()
        for server in servers:
            server.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_a_snapshot_serves_a_kernel_with_more_than_a_thousand_files_open() -> None:
    """A kernel that holds many files (sockets of hundreds of workers) gives the snapshot's
    socket a number past 1,024: the snapshot still starts workers (select() raised there, and
    every worker of the snapshot failed with a broken pipe)."""
    import resource

    from forkagent_jupyter.runtime.executors.process.process import Snapshot

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1_600:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1_600, hard), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1_100)]
    try:
        snapshot = Snapshot({"x": 1})
        assert snapshot.control.fileno() > 1_024
        try:
            pid, sock = await asyncio.wait_for(snapshot.spawn(), 30)
            sock.close()
            assert pid > 0 and not snapshot.closed
        finally:
            snapshot.close()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_a_snapshot_that_hangs_ends_instead_of_keeping_a_worker_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A snapshot that never says it started the worker is ended after SPAWN_WAIT, with a
    reason; it is no longer the one new workers start from."""
    from forkagent_jupyter.runtime.executors import WorkerLostError
    from forkagent_jupyter.runtime.executors.confinement import sandbox
    from forkagent_jupyter.runtime.executors.process import process
    from forkagent_jupyter.runtime.executors.process.process import Snapshot

    def stuck(_told: int, _forked: int) -> int:
        time.sleep(3600)
        return 0

    monkeypatch.setattr(sandbox, "worker_pid", stuck)  # inherited by the forked process
    monkeypatch.setattr(process, "SPAWN_WAIT", 1.0)
    snapshot = Snapshot({})
    try:
        with pytest.raises(WorkerLostError) as caught:
            await asyncio.wait_for(snapshot.spawn(), 30)
        assert "did not start the worker within 1 s" in str(caught.value)
        assert snapshot.closed and not snapshot.current
        await asyncio.to_thread(_until_gone, snapshot.pid)
    finally:
        snapshot.close()


def _until_gone(pid: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} is still there")
