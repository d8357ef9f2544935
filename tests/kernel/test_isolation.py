"""A worker's code is the model's, so it is attacked here as an attacker would: from inside a
real worker process of a real kernel. It must not run code in the kernel (no pickle on the
way back, no pull that unpickles unasked, no connection file or signing key) and must not
obtain the API key (not from the kernel's /proc entries, inherited objects, its own
environment or memory) nor the Jupyter server's token. Every kernel here is started as a
Jupyter server starts it: under a stand-in for the server (probes/jupyter_server.py) whose
command line and environment hold its token, which the kernel's environment holds too."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain
from tests.pid_namespaces import namespace_of, own_namespace
from tests.reported import tool_outputs
from tests.runtime.helpers import git, make_repo, trust_folder

from .conftest import Kernel
from .test_compute import SESSION, _card_outputs, setup, status
from .test_process_memory import _mb, _memory

PROBE = Path(__file__).with_name("probes") / "steal.py"
READ_KERNEL = Path(__file__).with_name("probes") / "read_kernel.py"
SERVER = Path(__file__).with_name("probes") / "jupyter_server.py"
TOKEN_PROBE = Path(__file__).with_name("probes") / "server_token.py"
TOKEN = secrets.token_hex(24)  # as the Jupyter server makes one
TOKEN_SHA = hashlib.sha256(TOKEN.encode()).hexdigest()

pytestmark = pytest.mark.kernel

# a value that, unpickled, rebinds the user's `x` in the kernel
EVIL = (
    "evil = type('E', (), {'__reduce__': lambda s: "
    "(exec, ('import __main__; __main__.x = 666',))})()"
)


def test_a_pickle_frame_on_the_workers_socket_runs_nothing_in_the_kernel(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("x = 1")
    probe = (
        f"import gc, pickle, struct; {EVIL}; "
        "sock = [o for o in gc.get_objects() if type(o).__name__ == '_Worker'][0].conn.sock; "
        "blob = pickle.dumps(('output', evil)); "
        "sock.sendall(struct.pack('!I', len(blob)) + blob)"
    )
    kernel.execute(f"%fork --name frame inject `py: {probe}`")
    kernel.run_approving("%tasks --wait frame", timeout=60)
    assert kernel.value("x") == 1
    # the worker that spoke out of protocol is ended, and its task says why
    assert status(kernel, "frame") == "failed"
    error = kernel.value(f"{SESSION}.registry.get('frame').error")
    assert "sent what is not a message of the protocol" in error


def test_a_4_gb_length_on_the_workers_socket_ends_it_and_says_why(kernel: Kernel) -> None:
    """A length the kernel would wait for ever to read (its task running for ever) ends the
    worker at once: the card and the notification say why."""
    setup(kernel)
    probe = (
        "import gc, struct; "
        "sock = [o for o in gc.get_objects() if type(o).__name__ == '_Worker'][0].conn.sock; "
        "sock.sendall(struct.pack('!I', 2**32 - 1))"
    )
    kernel.execute(f"%fork --name liar lie `py: {probe}`")
    kernel.run_approving("%tasks --wait liar", timeout=90)  # for ever before
    assert status(kernel, "liar") == "failed"
    why = "sent a message of 4,096 MB, more than the 256 MB one may have, and was ended"
    assert kernel.value(f"{SESSION}.registry.get('liar').error") == f"the worker's process {why}"
    kernel.drain()
    said = {  # message type -> how many said why: widgets' states, notification displays
        kind: sum(why in json.dumps(m["content"]) for m in kernel.iopub if m["msg_type"] == kind)
        for kind in ("comm_msg", "update_display_data")
    }
    assert said["comm_msg"] and said["update_display_data"], said
    notes = kernel.execute("from forkagent_jupyter.kernel import api\napi.notifications()")
    assert why in notes.texts()


def test_a_pull_decodes_data_and_refuses_objects_unless_trusted(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("x = 1")
    kernel.execute(
        f"%fork --name w make `py: import pandas as pd, numpy as np; {EVIL}; "
        "frame = pd.DataFrame({'a': [1, 2], 'b': ['u', 'v']}); arr = np.arange(6.0); "
        "plain = {'k': (1, 2.5, None, b'raw')}`"
    )
    kernel.run_approving("%tasks --wait w", timeout=60)
    assert status(kernel, "w") == "completed"
    # data comes back without pickle
    pulled = kernel.execute("%tasks --pull w frame arr plain")
    assert pulled.status == "ok", pulled.texts()
    assert kernel.value("frame.to_dict('list')") == {"a": [1, 2], "b": ["u", "v"]}
    assert kernel.value("arr.tolist()") == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert kernel.value("plain") == {"k": (1, 2.5, None, b"raw")}
    # an object whose unpickling runs code is refused, with one line saying why
    refused = kernel.execute("%tasks --pull w evil")
    assert refused.reply["content"]["ename"] == "UsageError"
    message = refused.reply["content"]["evalue"]
    assert "unpickling it would run code the worker chose in your kernel" in message
    assert "--trust" in message
    assert kernel.value("x") == 1
    assert kernel.execute("await api.pull('w', 'evil')").status == "error"
    assert kernel.value("x") == 1
    # the person may still say so
    trusted = kernel.execute("%tasks --pull --trust w evil")
    assert trusted.status == "ok", trusted.texts()
    assert kernel.value("x") == 666


KEY = "sk-ant-api03-" + secrets.token_hex(24) + "Ab"


@pytest.fixture
def api_key() -> str:
    return KEY


@pytest.fixture
def kernel_env() -> dict[str, str]:
    return {"JUPYTER_TOKEN": TOKEN}


@pytest.fixture
def kernel_parent() -> list[str]:
    return [sys.executable, str(SERVER), f"--ServerApp.token={TOKEN}", "--"]


def kernel_pid(kernel: Kernel) -> int:
    return int(kernel.value("__import__('os').getpid()"))


def steal(kernel: Kernel, tmp_path: Path, name: str) -> dict[str, str]:
    """Run the probe (tests/kernel/probes/steal.py) in a new worker; what it found."""
    shutil.copy(PROBE, tmp_path / "steal.py")
    pid = kernel.value("__import__('os').getpid()")
    sha = hashlib.sha256(KEY.encode()).hexdigest()
    code = f"KERNEL_PID = {pid}; KEY_SHA = '{sha}'; exec(open('steal.py').read())"
    kernel.execute(f"%fork --name {name} probe `py: {code}`")
    kernel.run_approving(f"%tasks --wait {name}", timeout=120)
    pulled = kernel.execute(f"%tasks --pull {name} found")
    assert pulled.status == "ok", pulled.texts()
    return dict(kernel.value("found"))


def test_a_worker_cannot_obtain_the_key_or_drive_the_kernel(kernel: Kernel, tmp_path: Path) -> None:
    setup(kernel)
    assert kernel.value("__import__('os').environ['ANTHROPIC_API_KEY']") == KEY
    # the user's own copies of the key stay theirs (the kernel is trusted)
    kernel.execute("import os\nmine = os.environ['ANTHROPIC_API_KEY']\nx = 1")
    start = len(kernel.iopub)
    found = steal(kernel, tmp_path, "thief")
    assert set(found) == {
        "kernel environ",
        "kernel mem",
        "any process's environ or cmdline",
        "own environment",
        "own environ block",
        "inherited objects",
        "own memory",
        "connection file",
        "signing key",
        "drive the kernel",
    }
    assert not [route for route, what in found.items() if what in ("KEY", "READ")], found
    assert found["drive the kernel"] != "sent"  # unsigned or not sent at all
    assert found["kernel environ"].startswith("blocked")  # not even there to read
    assert kernel.value("x") == 1
    assert kernel.value("mine == os.environ['ANTHROPIC_API_KEY']") is True
    # a second fork of the same kernel state is as sealed
    again = steal(kernel, tmp_path, "thief2")
    assert not [r for r, what in again.items() if what in ("KEY", "READ")], again
    # what the model saw, and every card output, holds no key
    shown = json.dumps([m["content"] for m in kernel.iopub[start:]])
    assert KEY not in shown
    run = f"{SESSION}.workers.runs[{SESSION}.registry.get('thief').id]"
    assert KEY not in kernel.value(f"repr({run}.history)")


def test_a_key_a_worker_prints_is_masked_on_its_card(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute(
        "%fork --name echo print `py: k = 'sk-ant-' + 'api03-' + 'Z' * 40; print('key:', k); "
        "display({'text/plain': 'shown ' + k}, raw=True)`"
    )
    kernel.run_approving("%tasks --wait echo", timeout=60)
    kernel.drain()
    shown = json.dumps(_card_outputs(kernel))
    assert "key: [redacted]" in shown and "shown [redacted]" in shown
    assert "Z" * 40 not in shown


def _bash_probe(emulator: Any, tmp_path: Path, pid: int) -> None:
    """The model answers "SNOOP" with a Bash call that runs tests/kernel/probes/read_kernel.py
    against the kernel (process `pid`)."""
    shutil.copy(READ_KERNEL, tmp_path / "read_kernel.py")
    sha = hashlib.sha256(KEY.encode()).hexdigest()
    call = {"command": f"{sys.executable} read_kernel.py {pid} {sha}"}
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains(
        "SNOOP", Reply(({"type": "tool_use", "name": "Bash", "input": call},)), times=2
    )
    emulator.brain = brain


def _routes(tmp_path: Path) -> dict[str, str]:
    found = tmp_path / "kernel_routes.json"
    routes: dict[str, str] = json.loads(found.read_text())
    found.unlink()
    return routes


CLOSED = ("environ", "maps", "mem", "process_vm_readv", "ptrace attach")


def test_an_allowed_bash_cannot_read_the_kernels_memory(
    kernel: Kernel, emulator: Any, tmp_path: Path
) -> None:
    """The kernel is non-dumpable (its /proc entries are root's; as root, the programs it
    starts lack CAP_SYS_PTRACE and its kin): a Bash call the person allowed, the parent's or a
    fork's, reads nothing of the kernel's memory; workers' memory is still counted."""
    setup(kernel)
    _bash_probe(emulator, tmp_path, kernel_pid(kernel))
    assert kernel.execute("api.allow('Bash')").status == "ok"
    ran = kernel.execute("%%agent\nSNOOP on the kernel", timeout=180)
    assert ran.status == "ok", ran.texts()
    routes = _routes(tmp_path)
    assert set(routes) == {*CLOSED, "cmdline"}, routes
    assert [r for r in CLOSED if not routes[r].startswith("blocked")] == [], routes
    assert routes["cmdline"] != "KEY"  # not there to read (a PID namespace of its own)
    assert kernel.value("__import__('ctypes').CDLL(None).prctl(3, 0, 0, 0, 0)") == 0
    # a fork's Bash is started by the kernel as well
    kernel.execute("%fork --name snoop SNOOP from a fork")
    kernel.run_approving("%tasks --wait snoop", timeout=180)
    assert status(kernel, "snoop") == "completed"
    again = _routes(tmp_path)
    assert [r for r in CLOSED if not again[r].startswith("blocked")] == [], again
    # a worker, sealed, is dumpable again: the kernel reads its memory without privileges
    kernel.execute(
        "%fork --name reader hold `py: import ctypes; block = bytearray(64 * 2**20); "
        "ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)`"
    )
    kernel.run_approving("%tasks --wait reader", timeout=120)
    result = kernel.value(f"{SESSION}.registry.get('reader').result")
    assert tool_outputs(result) == ["1"], result  # PR_GET_DUMPABLE in the worker
    _text, rows = _memory(kernel)
    assert _mb(rows["reader"], "own") > 60, rows


DRIVE_KERNEL = Path(__file__).with_name("probes") / "drive_kernel.py"


def test_an_allowed_bash_cannot_drive_the_kernel_through_its_connection_file(
    kernel: Kernel, emulator: Any, tmp_path: Path
) -> None:
    """The kernel's connection file holds the key that signs its messages: a process that
    reads it can have the kernel run any code (and read the API key from there). A Bash call
    the person allowed runs where that file and Jupyter's runtime folder are covered."""
    setup(kernel)
    shutil.copy(DRIVE_KERNEL, tmp_path / "drive_kernel.py")
    call = {"command": f"{sys.executable} drive_kernel.py {kernel_pid(kernel)}"}
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains(
        "DRIVE", Reply(({"type": "tool_use", "name": "Bash", "input": call},)), times=1
    )
    emulator.brain = brain
    assert kernel.execute("api.allow('Bash')").status == "ok"
    ran = kernel.execute("%%agent\nDRIVE the kernel", timeout=180)
    assert ran.status == "ok", ran.texts()
    outcome = json.loads((tmp_path / "kernel_drive.json").read_text())["route"]
    kernel.execute("import time; time.sleep(2)")  # a request that got through runs by now
    assert kernel.value("'driven' in globals()") is False, outcome
    assert outcome.startswith("blocked"), outcome


def test_a_hook_cannot_drive_the_kernel_or_find_the_servers_token(
    kernel: Kernel, emulator: Any, tmp_path: Path, user_home: Path
) -> None:
    """A hook the person approved may run a script the model can edit (acceptEdits): it runs,
    like Bash, where the kernel's connection file and Jupyter's runtime folder are covered,
    without the server's token in its environment and with a /proc of its own processes."""
    setup(kernel)
    shutil.copy(DRIVE_KERNEL, tmp_path / "drive_kernel.py")
    shutil.copy(TOKEN_PROBE, tmp_path / "server_token.py")
    hooks = [
        {"type": "command", "command": f"{sys.executable} drive_kernel.py {kernel_pid(kernel)}"},
        {"type": "command", "command": f"{sys.executable} server_token.py {TOKEN_SHA} hook.json"},
    ]
    (tmp_path / ".claude").mkdir(exist_ok=True)
    (tmp_path / ".claude" / "settings.local.json").write_text(
        json.dumps({"hooks": {"UserPromptSubmit": [{"matcher": "", "hooks": hooks}]}})
    )
    trust_folder(tmp_path, user_home)  # the person's own hook, in a folder they trust
    emulator.brain = OfflineBrain()
    ran = kernel.execute("%%agent\nhello", timeout=180)
    assert ran.status == "ok", ran.texts()
    outcome = json.loads((tmp_path / "kernel_drive.json").read_text())["route"]
    kernel.execute("import time; time.sleep(2)")  # a request that got through runs by now
    assert kernel.value("'driven' in globals()") is False, outcome
    assert outcome.startswith("blocked"), outcome
    routes = json.loads((tmp_path / "hook.json").read_text())
    assert len(_tried(routes)) == 5 and "TOKEN" not in _tried(routes).values(), routes
    assert len(routes["processes"]) <= 4, routes  # its namespace's first, sh, probe, ps


def _tried(routes: dict[str, Any]) -> dict[str, str]:
    return {route: what for route, what in routes.items() if route != "processes"}


def _open_fifo(path: Path, timeout: float = 60) -> None:
    """Write to the FIFO `path` once its reader has opened it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:  # ENXIO: nobody reads it yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    os.write(fd, b"go")
    os.close(fd)


def test_an_allowed_bash_finds_no_server_token_and_sees_only_its_own_processes(
    kernel: Kernel, emulator: Any, tmp_path: Path
) -> None:
    """The token is in the kernel's environment and on the server's command line: a Bash call
    the person allowed finds it in neither its environment nor any process's /proc entries
    nor `ps`, which lists only the call's own processes (counted from here, the host)."""
    setup(kernel)
    assert kernel.value("__import__('os').environ['JUPYTER_TOKEN']") == TOKEN
    shutil.copy(TOKEN_PROBE, tmp_path / "server_token.py")
    os.mkfifo(tmp_path / "go")
    call = {"command": f"{sys.executable} server_token.py {TOKEN_SHA} token.json go"}
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains(
        "HUNT", Reply(({"type": "tool_use", "name": "Bash", "input": call},)), times=1
    )
    emulator.brain = brain
    assert kernel.execute("api.allow('Bash')").status == "ok"
    start = len(kernel.iopub)
    msg_id = kernel.start("%%agent\nHUNT for the server's token")
    deadline = time.monotonic() + 180
    while not (tmp_path / "token.json").exists():
        assert time.monotonic() < deadline, "the probe did not run"
        time.sleep(0.05)
    namespace, members = namespace_of("server_token.py")  # the call's processes, from here
    _open_fifo(tmp_path / "go")
    kernel.drain(until_idle_of=msg_id, timeout=180)
    routes = json.loads((tmp_path / "token.json").read_text())
    assert set(_tried(routes)) == {
        "own environment",
        "own environ block",
        "every process's cmdline",
        "every process's environ",
        "ps",
    }
    assert "TOKEN" not in _tried(routes).values(), routes
    # ps listed the namespace's first process, the probe (the shell became it) and ps itself;
    # the host counts the same namespace, the probe waiting on the FIFO and ps gone
    assert namespace != own_namespace()
    listed = [line for line in routes["processes"] if line.split()[1:2] != ["ps"]]
    assert len(listed) == len(members) and any("confine.py" in m for m in members), members
    assert any("server_token.py" in line for line in listed), listed
    assert TOKEN not in json.dumps([m["content"] for m in kernel.iopub[start:]])


def test_a_worker_finds_no_server_token(kernel: Kernel, tmp_path: Path) -> None:
    """The token is a credential like the key: gone from the worker's environment, its
    environment block and every copy in its memory; no other process's /proc is there."""
    setup(kernel)
    assert kernel.value("__import__('os').environ['JUPYTER_TOKEN']") == TOKEN
    shutil.copy(TOKEN_PROBE, tmp_path / "server_token.py")
    code = f"TOKEN_SHA = '{TOKEN_SHA}'; exec(open('server_token.py').read())"
    start = len(kernel.iopub)
    kernel.execute(f"%fork --name hunter probe `py: {code}`")
    kernel.run_approving("%tasks --wait hunter", timeout=120)
    assert status(kernel, "hunter") == "completed"
    pulled = kernel.execute("%tasks --pull hunter found")
    assert pulled.status == "ok", pulled.texts()
    routes = _tried(dict(kernel.value("found")))
    assert set(routes) == {
        "own environment",
        "own environ block",
        "every process's cmdline",
        "every process's environ",
        "ps",
        "own memory",
    }
    assert "TOKEN" not in routes.values(), routes
    assert TOKEN not in json.dumps([m["content"] for m in kernel.iopub[start:]])
    assert kernel.value("__import__('os').environ['JUPYTER_TOKEN']") == TOKEN  # the kernel's


def test_the_runtimes_own_git_runs_confined(
    kernel: Kernel, tmp_path: Path, user_home: Path
) -> None:
    """What git runs for the runtime (here a filter driver from the person's own git
    configuration, which still runs: it is theirs) runs like Bash, where the kernel's
    connection file and Jupyter's runtime folder are covered: making an agent's worktree
    cannot be a way to drive the kernel."""
    repo = make_repo(tmp_path / "repo")
    (repo / ".gitattributes").write_text("*.csv filter=probe\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "attributes")
    shutil.copy(DRIVE_KERNEL, tmp_path / "drive_kernel.py")
    pid = kernel.value("__import__('os').getpid()")
    smudge = tmp_path / "smudge.sh"
    smudge.write_text(
        f"cd {tmp_path} && {sys.executable} drive_kernel.py {pid} >/dev/null 2>&1\ncat\n"
    )
    (user_home / ".gitconfig").write_text(f'[filter "probe"]\n\tsmudge = sh {smudge}\n')
    ran = kernel.execute(
        "from pathlib import Path\n"
        "from forkagent_jupyter.runtime.workers.worktree import create_worktree\n"
        f"wt = await create_worktree(Path({str(repo)!r}), 'a0123456789')\n"
        "print(wt.path)",
        timeout=120,
    )
    assert ran.status == "ok", ran.texts()
    outcome = json.loads((tmp_path / "kernel_drive.json").read_text())["route"]
    kernel.execute("import time; time.sleep(2)")  # a request that got through runs by now
    assert kernel.value("'driven' in globals()") is False, outcome
    assert outcome.startswith("blocked"), outcome
