"""A worker's code is the model's, so it is attacked here as an attacker would: from inside a
real worker process of a real kernel. It must not run code in the kernel (no pickle on the
way back, no pull that unpickles unasked, no connection file or signing key) and must not
obtain the API key (not from the kernel's /proc entries, inherited objects, its own
environment or memory)."""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
from pathlib import Path

import pytest

from .conftest import Kernel
from .test_compute import SESSION, _card_outputs, setup, status

PROBE = Path(__file__).with_name("probes") / "steal.py"

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
