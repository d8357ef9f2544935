"""The programs a kernel starts for the model (confine.py), on real processes: Bash sees only
its own processes; what a plain call starts with `&` ends with the call, a background shell's
processes live until TaskStop stops it; where no namespace can be made the command runs and
says so, and every Bash call is put to the person."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.runtime.executors.confinement import listeners, sandbox
from forkagent_jupyter.runtime.permissions.gate import PermissionGate
from forkagent_jupyter.runtime.permissions.policies import Allow, ScriptedPolicy
from forkagent_jupyter.runtime.tools.base import ToolContext
from forkagent_jupyter.runtime.tools.services import ToolServices
from forkagent_jupyter.runtime.tools.shell import BashTool
from forkagent_jupyter.runtime.tools.shells import ShellRegistry
from tests.pid_namespaces import namespace_of, own_namespace

from ..tools.helpers import call

pytestmark = pytest.mark.anyio

NO_NAMESPACES = Path(__file__).resolve().parents[2] / "no_namespaces.py"
NO_LANDLOCK = Path(__file__).resolve().parents[2] / "no_landlock.py"
CONFINE = Path(sandbox.__file__).with_name("confine.py")


@pytest.fixture
def in_a_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process as a kernel: a connection file to cover, so `confined` confines."""
    connection = tmp_path / "kernel-1.json"
    connection.write_text('{"key": "signing"}')
    monkeypatch.setattr(sandbox, "_kernel_paths", lambda: [str(connection)])
    return connection


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workdir=tmp_path, services=ToolServices(shells=ShellRegistry()))


def running(marker: str, program: str = "") -> list[int]:
    """Host pids of live processes whose command line holds `marker` as one word (and whose
    program's name ends with `program`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(") ", 1)[1][0]
        except OSError:
            continue
        if marker.encode() in words and words[0].endswith(program.encode()) and state != "Z":
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False


async def until(condition: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.02)


async def test_bash_sees_only_its_own_processes(in_a_kernel: Path, tmp_path: Path) -> None:
    """Counted from the host: every process Bash's `ps` lists is one of the call's own."""
    os.mkfifo(tmp_path / "go")
    command = "ps -eo pid=,args= > seen.txt; cat go > /dev/null; cat " + str(in_a_kernel)
    running_call = asyncio.ensure_future(call(BashTool(), ctx(tmp_path), command=command))
    await until(lambda: (tmp_path / "seen.txt").exists() and running("go"))
    seen = (tmp_path / "seen.txt").read_text().splitlines()
    namespace, members = namespace_of("go")  # the call's processes, seen from here
    (tmp_path / "go").write_text("go")
    out = await running_call
    assert not out.is_error, out.content
    assert "signing" not in out.content  # the connection file is covered
    # what ps listed: the first process of the namespace, the shell and ps itself, no more -
    # the host counts the same processes (the first, the shell, and cat in place of ps)
    assert namespace != own_namespace()
    assert len(seen) == len(members) == 3, (seen, members)
    programs = [line.split()[1] for line in seen]
    assert programs[0] == sys.executable and programs[1].endswith("bash") and programs[2] == "ps"


async def test_a_plain_calls_background_children_end_with_it(
    in_a_kernel: Path, tmp_path: Path
) -> None:
    seconds = str(3000 + secrets.randbelow(1000))  # a sleep no other test starts
    out = await call(
        BashTool(), ctx(tmp_path), command=f"sleep {seconds} & echo started; kill -0 $! && echo ok"
    )
    assert out.content.splitlines()[:2] == ["started", "ok"], out.content
    assert "background processes still hold" not in out.content
    await until(lambda: not running(seconds))  # ended with the call: nothing left to kill


async def test_a_background_shells_processes_live_until_it_is_stopped(
    in_a_kernel: Path, tmp_path: Path
) -> None:
    context, seconds = ctx(tmp_path), str(4000 + secrets.randbelow(1000))
    command = f"sleep {seconds} & echo started"
    started = await call(BashTool(), context, command=command, run_in_background=True)
    assert not started.is_error, started.content
    registry = context.services.shells
    assert registry is not None
    [shell] = registry.shells.values()
    await until(lambda: "started" in shell.output() and running(seconds))
    try:
        await until(lambda: not running(command, "bash"))  # its shell has exited
        # the task (the process it waits for) lives as long as what the shell started
        assert shell.proc.returncode is None and alive(shell.proc.pid) and running(seconds)
        assert shell.status == "running"
        shell.stop()  # what TaskStop does
        await asyncio.wait_for(shell.ended.wait(), 30)
        assert shell.status == "killed"
        await until(lambda: not running(seconds))
    finally:
        registry.stop_all()


async def test_a_background_shell_ends_when_all_it_started_has_ended(
    in_a_kernel: Path, tmp_path: Path
) -> None:
    context = ctx(tmp_path)
    await call(
        BashTool(), context, command="(sleep 1; echo later) & echo first", run_in_background=True
    )
    registry = context.services.shells
    assert registry is not None
    [shell] = registry.shells.values()
    await asyncio.wait_for(shell.ended.wait(), 30)
    assert shell.status == "completed" and shell.output().splitlines() == ["first", "later"]


def test_where_no_namespace_can_be_made_the_command_runs_and_says_so(tmp_path: Path) -> None:
    checked = subprocess.run(
        [sys.executable, str(NO_NAMESPACES), sys.executable, "-I", "-S", str(CONFINE), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 1
    assert checked.stderr.startswith("forkagent: this command is not confined: namespaces")
    confined = [sys.executable, "-I", "-S", str(CONFINE), str(tmp_path), "--"]
    ran = subprocess.run(
        [sys.executable, str(NO_NAMESPACES), *confined, "sh", "-c", "echo ran; exit 4"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (ran.returncode, ran.stdout) == (4, "ran\n")
    assert ran.stderr.startswith("forkagent: this command is not confined: namespaces")
    here = subprocess.run(
        [sys.executable, "-I", "-S", str(CONFINE), "--check"], capture_output=True, timeout=60
    )
    assert here.returncode == 0 and not here.stderr  # this machine makes them


async def test_where_bash_cannot_be_confined_every_call_is_asked(
    in_a_kernel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer this system gave (as on one where no namespace can be made): an allowed
    Bash call is put to the person, with why; in bypassPermissions too; refused where nobody
    can answer."""
    gap = "namespaces are not available here (No space left on device)"
    monkeypatch.setattr(sandbox, "_gap", [gap])
    tool, context = BashTool(), ctx(tmp_path)
    args = tool.parse({"command": "echo hi"})
    for mode in ("default", "bypassPermissions"):
        policy = ScriptedPolicy([Allow()])
        gate = PermissionGate(mode=mode, allow=["Bash"], policy=policy)  # type: ignore[arg-type]
        decision = await gate.check(tool, args, context, {"command": "echo hi"})
        assert isinstance(decision, Allow)
        [request] = policy.requests
        assert request.preview.startswith("# asked: this system cannot run the command in")
        assert gap in request.preview and request.preview.endswith("\necho hi")
    refused = await PermissionGate(allow=["Bash"]).check(tool, args, context, {"command": "x"})
    assert not isinstance(refused, Allow) and gap in refused.message
    # where it can be confined, the rule allows it unasked
    monkeypatch.setattr(sandbox, "_gap", [None])
    policy = ScriptedPolicy()
    decision = await PermissionGate(allow=["Bash"], policy=policy).check(
        tool, args, context, {"command": "echo hi"}
    )
    assert isinstance(decision, Allow) and not policy.requests


async def test_this_system_can_confine_a_kernels_programs(
    in_a_kernel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox, "_gap", [])
    assert await sandbox.confinement_gap() is None


def _outside_server() -> tuple[int, int]:
    """A server that is no process of this one's (started twice removed, so it belongs to
    the host's init): (its pid, its port)."""
    code = (
        "import os, socket, time; s = socket.create_server(('127.0.0.1', 0)); "
        "print(s.getsockname()[1], flush=True); os.close(1); time.sleep(120)"
    )
    shell = f"{sys.executable} -c {code!r} 2>/dev/null & echo $!"
    done = subprocess.run(["sh", "-c", shell], capture_output=True, text=True, timeout=30)
    pid, port = done.stdout.split()
    return int(pid), int(port)


def _child_server() -> subprocess.Popen[str]:
    """A server in a process this one started (it prints its port)."""
    code = (
        "import socket, time; s = socket.create_server(('127.0.0.1', 0)); "
        "print(s.getsockname()[1], flush=True); time.sleep(120)"
    )
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


REACH = (
    "import socket, sys\n"
    "for port in sys.argv[1:]:\n"
    "    try:\n"
    "        socket.create_connection(('127.0.0.1', int(port)), 5).close()\n"
    "        print(port, 'reached')\n"
    "    except OSError as exc:\n"
    "        print(port, 'blocked', type(exc).__name__)\n"
)


async def test_bash_keeps_the_network_but_not_the_ports_the_kernel_listens_on(
    in_a_kernel: Path, tmp_path: Path
) -> None:
    """A server in the kernel (a Dask scheduler runs any function for whoever connects) and
    one in a process the kernel started are closed to Bash; a server elsewhere is not."""
    (tmp_path / "reach.py").write_text(REACH)
    own = socket.create_server(("127.0.0.1", 0))
    child = _child_server()
    outside_pid, outside = _outside_server()
    try:
        assert child.stdout is not None
        childs = int(child.stdout.readline())
        ports = [own.getsockname()[1], childs, outside]
        closed = await listeners.aclosed_ports()
        assert {ports[0], ports[1]} <= closed and outside not in closed
        out = await call(
            BashTool(),
            ctx(tmp_path),
            command=f"{sys.executable} reach.py {' '.join(map(str, ports))}",
        )
        assert not out.is_error, out.content
        said = dict(line.split(" ", 1) for line in out.content.splitlines() if line[:1].isdigit())
        assert said[str(ports[0])].startswith("blocked"), said
        assert said[str(ports[1])].startswith("blocked"), said
        assert said[str(outside)] == "reached", said
    finally:
        own.close()
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(outside_pid, signal.SIGKILL)


def test_where_a_port_cannot_be_closed_alone_the_program_gets_no_network(
    tmp_path: Path,
) -> None:
    """confine.py's fallback: without Landlock's network rules (here: a system call filter
    refuses Landlock), a program with ports to keep away from has no network at all, only a
    loopback of its own."""
    (tmp_path / "reach.py").write_text(REACH)
    own = socket.create_server(("127.0.0.1", 0))
    outside_pid, outside = _outside_server()
    try:
        port = own.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                str(NO_LANDLOCK),
                sys.executable,
                "-I",
                "-S",
                str(CONFINE),
                f"--closed-ports={port}",
                "--",
                sys.executable,
                "reach.py",
                str(port),
                str(outside),
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        said = dict(line.split(" ", 1) for line in done.stdout.splitlines())
        assert said[str(port)].startswith("blocked") and said[str(outside)].startswith("blocked")
    finally:
        own.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(outside_pid, signal.SIGKILL)
