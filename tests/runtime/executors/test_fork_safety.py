"""A worker forked from a process that has already computed: the libraries data scientists
use work there, with the results they give here; what cannot be made safe is said on the
worker's card and ends in an error, never in a wait for ever.

Each test first uses the library in this process (the "kernel"), then forks a worker that
calls it again: the situation in which a copied thread pool hangs a worker."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from forkagent_jupyter.runtime.executors import Output

pytestmark = pytest.mark.anyio

WAIT = 90  # seconds: a hang fails the test instead of hanging it


def _compute(data: Any) -> dict[str, Any]:
    import joblib
    import pandas as pd
    import pyarrow as pa
    from sklearn.cluster import KMeans
    from sklearn.ensemble import HistGradientBoostingRegressor

    x, y = data
    kmeans = KMeans(3, random_state=0, n_init=2).fit(x)
    boosted = HistGradientBoostingRegressor(max_iter=20, random_state=0).fit(x, y)
    frame = pd.DataFrame({"k": (np.arange(len(y)) % 5), "y": y})
    table = pa.Table.from_pandas(frame)
    return {
        "labels": kmeans.labels_.tolist(),
        "inertia": float(kmeans.inertia_),
        "predicted": boosted.predict(x[:5]).tolist(),
        "loky": joblib.Parallel(n_jobs=2)(joblib.delayed(pow)(i, 2) for i in range(6)),
        "threads": joblib.Parallel(n_jobs=2, backend="threading")(
            joblib.delayed(sum)(x[i]) for i in range(4)
        ),
        "blas": float((x.T @ x).sum()),
        "pandas": frame.astype({"k": "int64[pyarrow]"}).groupby("k")["y"].sum().tolist(),
        "arrow": table.group_by("k").aggregate([("y", "sum")]).sort_by("k").column(1).to_pylist(),
    }


def _collect(session: Any) -> list[Output]:
    outputs: list[Output] = []
    session.compute.on_output = lambda _agent, output: outputs.append(output)
    return outputs


def _card_text(outputs: list[Output]) -> str:
    return "".join(getattr(o, "text", "") for o in outputs)


async def test_libraries_the_kernel_used_work_in_a_worker(make_session: Any) -> None:
    pytest.importorskip("sklearn")
    pytest.importorskip("pyarrow")
    rng = np.random.RandomState(0)
    x = rng.rand(3000, 6)
    data = (x, x @ rng.rand(6))
    here = _compute(data)  # the kernel's pools are started now
    session = make_session(auto_respond=False, namespace={"compute": _compute, "data": data})
    task = await session.fork("Go `py: there = compute(data)`")
    [finished] = await session.wait(task.id, timeout=WAIT)
    assert finished.status == "completed", finished.error
    there = (await session.pull(task.id, "there"))["there"]
    assert there["labels"] == here["labels"]
    assert there["inertia"] == pytest.approx(here["inertia"], rel=1e-9)  # summing order
    assert there["predicted"] == pytest.approx(here["predicted"], rel=1e-12)
    for exact in ("loky", "threads", "blas", "pandas", "arrow"):
        assert there[exact] == pytest.approx(here[exact], rel=1e-12), exact


async def test_a_lock_a_thread_held_at_the_fork_is_an_error_not_a_hang(
    make_session: Any,
) -> None:
    lock = threading.Lock()
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            holding.set()
            done.wait(WAIT)

    holder = threading.Thread(target=hold, name="holder", daemon=True)
    holder.start()
    holding.wait()
    try:
        session = make_session(auto_respond=False, namespace={"lock": lock})
        outputs = _collect(session)
        task = await session.fork("Go `py: lock.acquire(); got = 1`")
        [finished] = await session.wait(task.id, timeout=WAIT)
    finally:
        done.set()
        holder.join()
    assert finished.status == "completed", finished.error
    card = _card_text(outputs)
    [line] = [x for x in card.splitlines() if "thread 'holder'" in x]
    assert line.startswith("At the fork, thread 'holder' held 'lock'") and "--shared" in line
    [*_, result] = session.workers.runs[task.id].history
    assert "InheritedLockError: 'lock' was held by another thread" in json.dumps(result)
    with pytest.raises(Exception, match="got: not defined"):
        await session.pull(task.id, "got")


async def test_a_module_another_thread_was_importing_imports_afresh(
    make_session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    (tmp_path / "slow_to_import.py").write_text(
        "import os, pathlib, time\n"
        f"while os.getpid() == {os.getpid()} and pathlib.Path({str(gate)!r}).exists():\n"
        "    time.sleep(0.02)\n"
        "VALUE = 42\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importer = threading.Thread(target=__import__, args=("slow_to_import",), name="importer")
    importer.start()
    try:
        for _ in range(500):
            if "slow_to_import" in __import__("sys").modules:
                break
            await asyncio.sleep(0.01)
        session = make_session(auto_respond=False, namespace={})
        outputs = _collect(session)
        task = await session.fork("Go `py: import slow_to_import; value = slow_to_import.VALUE`")
        [finished] = await session.wait(task.id, timeout=WAIT)
    finally:
        gate.unlink()
        importer.join()
    assert finished.status == "completed", finished.error
    assert (await session.pull(task.id, "value")) == {"value": 42}
    assert "thread 'importer' was importing 'slow_to_import'" in _card_text(outputs)


async def test_a_pool_that_cannot_survive_a_fork_ends_the_worker_with_a_reason(
    make_session: Any,
) -> None:
    pl = pytest.importorskip("polars")
    frame = pl.DataFrame({"k": [i % 7 for i in range(100_000)], "v": list(range(100_000))})
    expected = frame.group_by("k").agg(pl.col("v").sum()).height  # the pool is running now
    session = make_session(auto_respond=False, namespace={"frame": frame, "pl": pl})
    outputs = _collect(session)
    task = await session.fork("Go `py: n = frame.group_by('k').agg(pl.col('v').sum()).height`")
    [finished] = await session.wait(task.id, timeout=WAIT)
    assert expected == 7
    assert finished.status == "failed"
    assert "exited with code 71 (it waited on a thread pool of the kernel" in finished.error
    assert "polars's thread pool was running in the kernel" in _card_text(outputs)


_STALL_UNDER_OWN_WORK = """
import os, sys, threading
from forkagent_jupyter.runtime.executors.process import forksafety

lock = threading.Lock()
holding, done = threading.Event(), threading.Event()

def hold():
    with lock:
        holding.set()
        done.wait()

threading.Thread(target=hold, name="holder", daemon=True).start()
holding.wait()
found = forksafety.survey()
pid = os.fork()
if pid:
    done.set()
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
forksafety.settle(found)

def spin():  # the worker's own thread, never idle: as its output flusher is on a busy machine
    while True:
        sum(range(1000))

own = threading.Thread(target=spin, name="forkagent-output", daemon=True)
own.start()
forksafety.watch(lambda line: print(line, flush=True), own=[own])
try:
    lock.acquire()
except forksafety.InheritedLockError as exc:
    print("raised:", exc, flush=True)
    os._exit(0)
os._exit(3)
"""


def test_the_worker_s_own_busy_threads_do_not_hide_a_stall(tmp_path: Path) -> None:
    """The watchdog counts the CPU of the threads that could end the wait, not the worker's
    own: on a busy machine those use more than a clock tick per stall period, and a worker
    waiting on a lock held at the fork then waited for ever."""
    script = tmp_path / "stall.py"  # a file: the survey looks at the user's code, not <string>
    script.write_text(_STALL_UNDER_OWN_WORK)
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its fork too is ended below, whatever happens
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    try:
        out, err = proc.communicate(timeout=WAIT)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 0, err
    assert "At the fork, thread 'holder' held 'lock'" in out
    assert "raised: 'lock' was held by another thread of the kernel" in out
