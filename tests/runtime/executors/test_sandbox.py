"""The sandbox's parts on their own: the memory scrub, the Dask child (a fresh interpreter:
no credential variables, no view of the Dask worker's /proc, no network but its own loopback;
where that cannot be made it runs nothing and says why), and a worker where namespaces cannot
be made (it runs, and says why)."""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.runtime.executors.base import ExecResult
from forkagent_jupyter.runtime.executors.cluster.actor import _spawn_child
from forkagent_jupyter.runtime.executors.cluster.child import refusal
from forkagent_jupyter.runtime.executors.confinement import sandbox
from forkagent_jupyter.runtime.executors.wire import encode, read_message

pytestmark = pytest.mark.anyio

NO_NAMESPACES = Path(__file__).resolve().parents[2] / "no_namespaces.py"


def test_the_scrub_overwrites_every_copy_in_memory() -> None:
    secret = ("sk-ant-api03-" + secrets.token_hex(20)).encode()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # scrub a copy of this process, not the test runner
        os.close(read)
        copies = [bytearray(secret), (secret.decode() + "").encode(), secret[:20] + secret[20:]]
        spelled = secret.hex()  # not a verbatim copy: survives the scrub
        found = sandbox.scrub_memory([secret])
        again = bytes.fromhex(spelled)
        left = sum(again in bytes(c) for c in copies)
        os.write(write, f"{found} {left}".encode())
        os._exit(0)
    os.close(write)
    found, left = (int(n) for n in os.read(read, 100).split())
    os.close(read)
    os.waitpid(pid, 0)
    assert found >= 3 and left == 0


async def _run_in_child(writer: Any, reader: Any, code: str) -> ExecResult:
    writer.write(encode(("run", 1, code)))
    await writer.drain()
    while True:
        message = await asyncio.wait_for(read_message(reader), 60)
        if message[0] == "done":
            assert isinstance(message[2], ExecResult)
            return message[2]


async def test_the_dask_child_has_no_credentials_and_no_view_of_its_parent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "secret-" + secrets.token_hex(8))
    monkeypatch.setenv("JUPYTER_TOKEN", secrets.token_hex(24))
    monkeypatch.setenv("AWS_REGION", "eu-west-1")  # not a credential: kept
    proc, ours = await asyncio.to_thread(_spawn_child, 0)
    reader, writer = await asyncio.open_unix_connection(sock=ours)
    code = (
        "import os\n"
        "print(sorted(k for k in os.environ if k.startswith(('AWS_', 'ANTHROPIC_', 'JUPYTER'))))\n"
        f"print(os.path.exists('/proc/{os.getpid()}'), os.getpid())"
    )
    result = await _run_in_child(writer, reader, code)
    assert result.error is None, result
    names, visible = result.stdout.splitlines()
    assert "'AWS_REGION'" in names  # not a credential: kept
    assert "SECRET" not in names and "SESSION" not in names and "ANTHROPIC" not in names
    assert "JUPYTER_TOKEN" not in names
    assert visible == "False 1"  # a PID namespace of its own: the parent is not in its /proc
    writer.close()
    proc.kill()
    await asyncio.to_thread(proc.wait, 60)


async def test_the_dask_child_reaches_no_port_of_this_machine_but_its_own() -> None:
    """A Dask scheduler or worker listens on a port like this one (on 127.0.0.1 and on the
    machine's address): the child's code connects to neither; its own loopback works."""
    listener = socket.create_server(("0.0.0.0", 0))
    port = listener.getsockname()[1]
    addresses = ["127.0.0.1", socket.gethostbyname(socket.gethostname())]
    proc, ours = await asyncio.to_thread(_spawn_child, 0)
    reader, writer = await asyncio.open_unix_connection(sock=ours)
    code = (
        "import socket\n"
        "reached = []\n"
        f"for host in {addresses!r}:\n"
        "    try:\n"
        f"        socket.create_connection((host, {port}), timeout=5).close()\n"
        "        reached.append(host)\n"
        "    except OSError as exc:\n"
        "        pass\n"
        "own = socket.create_server(('127.0.0.1', 0))\n"
        "socket.create_connection(own.getsockname(), timeout=5).close()\n"
        "print(reached, 'own loopback ok')"
    )
    try:
        result = await _run_in_child(writer, reader, code)
    finally:
        writer.close()
        proc.kill()
        await asyncio.to_thread(proc.wait, 10)
        listener.close()
    assert result.error is None, result
    assert result.stdout.strip() == "[] own loopback ok", result.stdout


async def test_where_the_dask_child_cannot_be_cut_off_it_refuses_in_one_line(
    tmp_path: Path,
) -> None:
    ours, theirs = socket.socketpair()
    marker = tmp_path / "ran"
    module = "forkagent_jupyter.runtime.executors.cluster.child"
    proc = await asyncio.to_thread(
        subprocess.Popen,
        [sys.executable, str(NO_NAMESPACES), sys.executable, "-m", module, str(theirs.fileno())],
        pass_fds=[theirs.fileno()],
        stdin=subprocess.DEVNULL,
    )
    theirs.close()
    reader, writer = await asyncio.open_unix_connection(sock=ours)
    try:
        result = await _run_in_child(writer, reader, f"open({str(marker)!r}, 'w').write('x')")
        writer.write(encode(("pull", 2, ["x"], False)))
        await writer.drain()
        pulled = await asyncio.wait_for(read_message(reader), 60)
    finally:
        writer.close()
        proc.kill()
        await asyncio.to_thread(proc.wait, 10)
    assert result.error is not None and not marker.exists()
    assert result.error.startswith("Refused: the model's code does not run on this Dask")
    assert "namespaces are not available here" in result.error and "\n" not in result.error
    assert result.error == refusal("namespaces are not available here (No space left on device)")
    assert pulled[0] == "pulled" and pulled[3]["x"] == result.error


class _NoNamespaces:
    """libc where unshare(2) is refused (as a seccomp profile or AppArmor would)."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def unshare(self, _flags: int) -> int:
        return -1

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def sandbox_report(_namespace: dict[str, Any]) -> tuple[str | None, bool]:
    return sandbox.STATE.error, os.getpid() != 1


async def test_without_namespaces_a_worker_runs_and_says_why(
    make_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sandbox._libc()
    monkeypatch.setattr(sandbox, "_libc", lambda: _NoNamespaces(real))  # inherited by the fork
    session = make_session(auto_respond=False)
    task = await session.fork("Go `py: 6 * 7`")
    [finished] = await session.wait(task.id, timeout=60)
    assert finished.status == "completed", finished.error
    error, outside = await session.compute.runners[task.id].call(sandbox_report)
    assert outside and error is not None and error.startswith("namespaces are not available")


async def test_here_a_worker_runs_in_its_namespaces(make_session: Any) -> None:
    session = make_session(auto_respond=False)
    task = await session.fork("Go `py: 6 * 7`")
    [finished] = await session.wait(task.id, timeout=60)
    assert finished.status == "completed", finished.error
    error, outside = await session.compute.runners[task.id].call(sandbox_report)
    assert (error, outside) == (None, False)  # the first process of its own PID namespace
