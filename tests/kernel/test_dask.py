"""The fan-out on a Dask cluster, in a real kernel: `ForkAgent.executor = "dask"` with a real
LocalCluster of worker processes. Cards, a figure, a pull, Stop, and a Dask worker process
killed under a running task (a clear failure, one notification), the kernel answering
throughout."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import secrets
import shutil
import signal
import socket
from pathlib import Path
from typing import Any

import pytest

from .conftest import Kernel
from .test_compute import FIGURE, SESSION, _card_outputs, setup, status, wait_until

pytestmark = pytest.mark.kernel
if not os.environ.get("CI"):  # CI installs the [dask] extra: there a missing one fails
    pytest.importorskip("distributed")


def runner(name: str) -> str:
    return f"{SESSION}.compute.runners[{SESSION}.registry.get({name!r}).id]"


def on_dask(kernel: Kernel, address: str) -> None:
    setup(kernel)
    for line in (
        f"%config ForkAgent.dask_address = {address!r}",
        "%config ForkAgent.executor = 'dask'",
    ):
        done = kernel.execute(line)
        assert done.status == "ok" and not done.texts(), done.texts()


def test_the_fan_out_runs_on_a_dask_cluster(kernel: Kernel, dask_address: str) -> None:
    on_dask(kernel, dask_address)
    kernel.execute("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3], 'b': [4, 5, 6]})")
    kernel.execute("%matplotlib inline")
    kernel.execute(
        f"%fork --name plotter {FIGURE}\n"
        "%fork --name summer sum `py: import os; total = int(df.a.sum()); pid = os.getpid(); "
        "print('sum is', total)`"
    )
    kernel.run_approving("%tasks --wait", timeout=90)
    kernel.drain()
    assert status(kernel, "plotter") == "completed" and status(kernel, "summer") == "completed"
    assert kernel.value(f"{runner('summer')}.kind") == "dask"
    assert kernel.value(f"{runner('summer')}.where").startswith("tcp://")
    # outputs and the figure on the cards, as with local workers
    outputs = _card_outputs(kernel)
    assert any(o.get("output_type") == "stream" and "sum is 6" in o["text"] for o in outputs)
    assert any(o.get("output_type") == "stream" and "drawing" in o["text"] for o in outputs)
    pngs = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1 and base64.b64decode(pngs[0]).startswith(b"\x89PNG")
    # a pull brings values back from the cluster; nothing of yours was rebound
    pulled = kernel.execute("%tasks --pull summer total pid")
    assert "pulled from summer: total (int 6)" in pulled.texts(), pulled.texts()
    assert kernel.value("pid") != kernel.value("__import__('os').getpid()")
    assert kernel.value("list(df.a)") == [1, 2, 3]


def test_stop_and_a_lost_dask_worker(kernel: Kernel, dask_address: str) -> None:
    on_dask(kernel, dask_address)
    kernel.execute(
        "%fork --name slow spin `py: import time; time.sleep(60)`\n"
        "%fork --name doomed spin `py: import time; time.sleep(60)`"
    )
    for name in ("slow", "doomed"):
        wait_until(kernel, f"{runner(name)}.pid", 60)
        wait_until(kernel, f"{SESSION}.registry.get({name!r}).current_tool == 'Python'")
    pid = kernel.value(f"{runner('slow')}.pid")
    assert Path(f"/proc/{pid}").exists()
    reply = kernel.execute("print('still answering')")
    assert "still answering" in reply.texts()
    # Stop kills the worker's process on the cluster; the task ends killed
    assert kernel.execute("%stop slow").status == "ok"
    try:
        wait_until(kernel, f"{SESSION}.registry.get('slow').status == 'killed'", 20)
    except TimeoutError:
        task = f"{SESSION}.registry.get('slow')"
        state = kernel.value(f"({task}.status, {task}.error, {task}.current_tool)")
        raise AssertionError(state) from None
    wait_until(kernel, f"not __import__('os').path.exists('/proc/{pid}')", 60)
    # the Dask worker process that holds `doomed` is killed from outside
    where = kernel.value(f"{runner('doomed')}.where")
    dask_pid = kernel.value(
        f"{SESSION}.compute.dask._client.run(__import__('os').getpid, workers=[{where!r}])"
        f"[{where!r}]"
    )
    os.kill(int(dask_pid), signal.SIGKILL)
    wait_until(kernel, f"{SESSION}.registry.get('doomed').status == 'failed'", 30)
    error = kernel.value(f"{SESSION}.registry.get('doomed').error")
    assert f"the Dask worker {where} that ran this worker's code was lost" in error
    assert "still answering" in kernel.execute("print('still answering')").texts()
    kernel.run_approving("%tasks --wait", timeout=60)
    notes: list[Any] = kernel.value(
        f"[x for a in {SESSION}.responder.auto_turns for x in a.notifications "
        f"if {SESSION}.registry.get('doomed').id in x]"
    )
    assert len(notes) == 1 and "<status>failed</status>" in notes[0]
    # the cluster carries on (its nanny restarts the worker): a new worker computes there
    kernel.execute("%fork --name after fine `py: 6 * 7`")
    kernel.run_approving("%tasks --wait after", timeout=90)
    assert status(kernel, "after") == "completed"


def test_a_setting_that_cannot_be_used_is_refused_in_one_line(kernel: Kernel) -> None:
    setup(kernel)
    refused = kernel.execute("%config ForkAgent.executor = 'dask'")
    assert "ForkAgent.executor: the Dask executor needs a scheduler" in refused.texts()
    assert kernel.value("__forkagent__.settings.executor") == "local"
    assert kernel.value(f"{SESSION}.compute.executor") == "local"


def test_a_lost_scheduler_fails_the_task_once_without_a_hang(kernel: Kernel) -> None:
    import subprocess
    import sys

    from tests.dask_cluster import ROOT

    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.dask_cluster", "1"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its nannies and workers too are killed at the end
    )
    worker_pids: list[int] = []
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().strip()
        on_dask(kernel, address)
        kernel.execute("%fork --name orphan spin `py: import time; time.sleep(120)`")
        wait_until(kernel, f"{runner('orphan')}.pid", 60)
        wait_until(kernel, f"{SESSION}.registry.get('orphan').current_tool == 'Python'")
        worker_pids = list(
            kernel.value(f"{SESSION}.compute.dask._client.run(__import__('os').getpid)").values()
        )
        worker_pids.append(kernel.value(f"{runner('orphan')}.pid"))
        proc.kill()  # the scheduler (and the cluster's own process) goes away
        proc.wait(60)
        assert "still answering" in kernel.execute("print('still answering')").texts()
        wait_until(kernel, f"{SESSION}.registry.get('orphan').status == 'failed'", 60)
        error = kernel.value(f"{SESSION}.registry.get('orphan').error")
        assert "was lost" in error, error
        kernel.execute(f"await {SESSION}.idle()", timeout=60)
        notes: list[Any] = kernel.value(
            f"[x for a in {SESSION}.responder.auto_turns for x in a.notifications "
            f"if {SESSION}.registry.get('orphan').id in x]"
        )
        assert len(notes) == 1 and "<status>failed</status>" in notes[0]
    finally:
        # the orphaned nannies would restart their workers and retry the scheduler for a
        # while, loading the machine: end the whole cluster now
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(60)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        for pid in worker_pids:  # the Dask worker and the agent's process, if still there
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


REACH_CLUSTER = Path(__file__).with_name("probes") / "reach_cluster.py"


def make_local_cluster(kernel: Kernel) -> None:
    """The person's cell: a LocalCluster of one worker process (its scheduler in the kernel),
    and `x = 1`, which the model's code must not change."""
    setup(kernel)
    made = kernel.execute(
        "from distributed import LocalCluster\n"
        "cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, "
        "dashboard_address=None)\n"
        "x = 1",
        timeout=120,
    )
    assert made.status == "ok", made.texts()


KEY = "sk-ant-api03-" + secrets.token_hex(24) + "Ab"


@pytest.fixture
def api_key() -> str:
    return KEY


def test_the_models_code_cannot_reach_a_cluster_the_kernel_made(
    kernel: Kernel, tmp_path: Path
) -> None:
    """The kernel made a LocalCluster: its scheduler runs in the kernel, its workers hold the
    kernel's environment (the API key). The model's code on it connects to neither: not by
    the scheduler's address, not through its Dask worker, not to any port of the machine;
    the person's `x` stays as it was and no key comes back."""
    make_local_cluster(kernel)
    try:
        address = kernel.value("cluster.scheduler_address")
        on_dask(kernel, address)
        shutil.copy(REACH_CLUSTER, tmp_path / "reach_cluster.py")
        sha = hashlib.sha256(KEY.encode()).hexdigest()
        code = f"SCHEDULER = {address!r}; KEY_SHA = {sha!r}; exec(open('reach_cluster.py').read())"
        kernel.execute(f"%fork --name climber probe `py: {code}`")
        kernel.run_approving("%tasks --wait climber", timeout=180)
        assert status(kernel, "climber") == "completed"
        assert kernel.value(f"{runner('climber')}.kind") == "dask"
        pulled = kernel.execute("%tasks --pull climber found")
        assert pulled.status == "ok", pulled.texts()
        found = dict(kernel.value("found"))
        assert set(found) == {
            "the scheduler's address",
            "environment or Dask config",
            "its Dask worker's client",
            "listening ports",
        }
        driven = [route for route, what in found.items() if "ran" in what or "KEY" in what]
        assert driven == [], found
        assert found["listening ports"] == "0 of 0 reached", found  # none of the machine's
        assert kernel.value("x") == 1
    finally:
        kernel.execute("cluster.close()", timeout=60)


def test_a_local_worker_keeps_the_network_but_not_the_cluster_the_kernel_made(
    kernel: Kernel, tmp_path: Path
) -> None:
    """With the default executor (a process forked from the kernel, which keeps the network),
    the model's code reaches neither the scheduler of a LocalCluster the kernel made (it runs
    any function in the kernel) nor its workers (the kernel's environment), by any route; a
    server that is not the kernel's still answers it."""
    make_local_cluster(kernel)
    outside = socket.create_server(("127.0.0.1", 0))
    try:
        address = kernel.value("cluster.scheduler_address")
        workers = kernel.value("list(cluster.scheduler_info['workers'])")
        shutil.copy(REACH_CLUSTER, tmp_path / "reach_cluster.py")
        sha = hashlib.sha256(KEY.encode()).hexdigest()
        probe = (
            f"SCHEDULER = {address!r}; KEY_SHA = {sha!r}; exec(open('reach_cluster.py').read())\n"
            f"attempt('a Dask worker', lambda: drive({workers[0]!r}))\n"
            "import socket\n"
            f"attempt('outside', lambda: socket.create_connection(('127.0.0.1', "
            f"{outside.getsockname()[1]}), 10).close() or 'reached')\n"
            "import json; print(json.dumps(found))\n"
        )
        (tmp_path / "climb.py").write_text(probe)
        # in a fresh Python the worker starts (a copy of the kernel's Dask client state
        # would wait on the kernel's Dask threads, which a fork does not copy)
        code = (
            "import json, subprocess, sys; "
            "ran = subprocess.run([sys.executable, 'climb.py'], capture_output=True, "
            "text=True, timeout=120); "
            "found = json.loads(ran.stdout.splitlines()[-1])"
        )
        kernel.execute(f"%fork --name climber probe `py: {code}`")
        kernel.run_approving("%tasks --wait climber", timeout=180)
        task = f"{SESSION}.registry.get('climber')"
        assert status(kernel, "climber") == "completed", kernel.value(f"{task}.error")
        assert kernel.value(f"{runner('climber')}.kind") == "process"
        pulled = kernel.execute("%tasks --pull climber found")
        assert pulled.status == "ok", pulled.texts()
        found = dict(kernel.value("found"))
        driven = [route for route, what in found.items() if "ran" in what or "KEY" in what]
        assert driven == [], found
        assert found["the scheduler's address"].startswith("blocked"), found
        assert found["a Dask worker"].startswith("blocked"), found
        assert found["outside"] == "reached", found  # the network itself is kept
        assert kernel.value("x") == 1
    finally:
        outside.close()
        kernel.execute("cluster.close()", timeout=60)
