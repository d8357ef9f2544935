"""Finished workers do not pin memory: each one's own memory on its card and in %tasks,
`worker_memory_mb` bounds what finished workers hold (least recently used retired first, a
pull from it says so), and %stop frees a finished worker's process."""

from __future__ import annotations

import time

import pytest

from .conftest import Kernel
from .test_compute import SESSION, setup, status, worker_pid

pytestmark = pytest.mark.kernel

BIG = "`py: import numpy as np; big = np.ones(100 * 2**20 // 8); n = big.size`"  # 100 MB


def _running(kernel: Kernel, pid: int) -> bool:
    """The process exists and is not a zombie (an ended child may wait to be reaped)."""
    result = kernel.execute(_STATE.format(pid=pid))
    assert result.status == "ok", result.texts()
    state = result.texts().strip().splitlines()[-1]
    return state not in ("gone", "Z", "X")


# The process may end between any two reads of /proc: one open, no exists-then-read.
_STATE = """
try:
    with open("/proc/{pid}/stat") as _stat:
        print(_stat.read().rsplit(")", 1)[1].split()[0])
except (FileNotFoundError, ProcessLookupError):
    print("gone")
"""


def _ended(kernel: Kernel, pid: int) -> bool:
    """The process has ended within a moment (a SIGKILL is delivered asynchronously; 30 s:
    a loaded machine)."""
    for _ in range(300):
        if not _running(kernel, pid):
            return True
        time.sleep(0.1)
    return False


def _memory(kernel: Kernel, name: str) -> float:
    value = kernel.value(f"{SESSION}.registry.get({name!r}).memory_mb")
    return float(value) if value is not None else 0.0


def test_finished_workers_memory_is_shown_bounded_and_freed(kernel: Kernel) -> None:
    setup(kernel)
    assert kernel.value("__forkagent__.settings.worker_memory_mb") > 0  # a quarter of RAM
    kernel.execute("%config ForkAgent.worker_memory_mb = 250")
    pids = {}
    for name in ("a", "b", "c"):
        kernel.execute(f"%fork --name {name} hold {BIG}")
        pids[name] = worker_pid(kernel, name)
        kernel.run_approving(f"%tasks --wait {name}", timeout=60)
        assert status(kernel, name) == "completed"
        for _ in range(100):
            if _memory(kernel, name) or not _running(kernel, pids[name]):
                break
            kernel.execute("import time; time.sleep(0.1)")
    # a was least recently used: retired when c's 100 MB came on top of a's and b's
    assert _ended(kernel, pids["a"])
    pulled = kernel.execute("%tasks --pull a n")
    assert (
        "retired to keep finished workers within worker_memory_mb=250"
        in (pulled.reply["content"]["evalue"])
    )
    assert 95 <= _memory(kernel, "b") <= 200 and 95 <= _memory(kernel, "c") <= 200
    listed = kernel.execute("%tasks").texts()
    assert "memory 1" in listed  # "memory 100 MB" (its own, not the kernel's shared pages)
    # %stop on a finished worker frees it; %stop --all frees the rest
    stopped = kernel.execute("%stop b")
    assert "b had finished; its process (1" in stopped.texts() and "was freed" in stopped.texts()
    assert _ended(kernel, pids["b"])
    assert kernel.execute("%tasks --pull c n").status == "ok"
    freed = kernel.execute("%stop --all").texts()
    assert "freed the processes of 1 finished worker(s)" in freed
    assert _ended(kernel, pids["c"])


PEAK = """
def _status(key):
    with open('/proc/self/status') as status:
        return next(int(line.split()[1]) for line in status if line.startswith(key + ':'))
"""


def test_pulling_a_large_array_costs_the_kernel_one_copy_and_a_frame(kernel: Kernel) -> None:
    """A 256 MB array pulled back: the kernel's peak memory grows by the frame it reads and
    the array it keeps, not by the three copies it made before (the frame read as one bytes
    object, its value copied out of the message, then copied twice more to an array)."""
    setup(kernel)
    size = 256 * 2**20
    kernel.execute(
        f"%fork --name large make `py: import numpy as np; big = np.arange({size // 8}.0)`"
    )
    kernel.run_approving("%tasks --wait large", timeout=60)
    assert status(kernel, "large") == "completed"
    assert kernel.execute(PEAK).status == "ok"
    # the kernel's peak resident memory starts again from what it holds now (Linux >= 4.0)
    kernel.execute("open('/proc/self/clear_refs', 'w').write('5')\nbefore = _status('VmRSS')")
    pulled = kernel.execute("%tasks --pull large big", timeout=120)
    assert pulled.status == "ok", pulled.texts()
    grew_kb = kernel.value("_status('VmHWM') - before")
    assert grew_kb * 1024 < 2.5 * size, grew_kb  # the frame and the array; 3.1x before
    same = "bool((big == __import__('numpy').arange(big.size, dtype=float)).all())"
    assert kernel.value(f"({same}, big.flags.writeable, big.flags.aligned, big.dtype.str)") == (
        True,
        True,
        True,
        "<f8",
    )
