"""Workers' code on a real Dask LocalCluster (worker processes), from a Session: what is
shipped of the namespace and how, values that stay behind, pulls, and the missing extra."""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

import pytest

from forkagent_jupyter.runtime.errors import ConfigError
from forkagent_jupyter.runtime.executors import PullError
from forkagent_jupyter.runtime.executors.cluster.backend import DaskRunner, require_dask
from forkagent_jupyter.runtime.executors.cluster.shipping import referenced_names

pytestmark = pytest.mark.anyio
if not os.environ.get("CI"):  # CI installs the [dask] extra: there a missing one fails
    pytest.importorskip("distributed")


async def done(session: Any, *tasks: Any) -> list[Any]:
    return list(await session.wait(*(t.id for t in tasks), timeout=90))


def test_the_names_a_call_refers_to() -> None:
    code = "def f(v):\n    return v + offset\nprint([f(r) for r in rows], df.a.sum())"
    assert {"offset", "rows", "df", "f", "print", "v", "r"} <= referenced_names(code)
    assert referenced_names("def (") == set()


async def test_siblings_share_one_shipment_of_a_large_value(
    make_session: Any, dask_address: str
) -> None:
    import numpy as np

    big = np.arange(1_000_000, dtype="float64")  # 8 MB: scattered, not sent with the call
    listener = socket.socket()
    namespace: dict[str, Any] = {"big": big, "small": [1, 2], "conn": listener}
    session = make_session(auto_respond=False, namespace=namespace)
    session.compute.use_dask(dask_address)
    tasks = [
        await session.fork(f"Sum `py: s = float(big.sum()) + {i}; small.append({i})`")
        for i in range(3)
    ]
    for finished in await done(session, *tasks):
        assert finished.status == "completed", finished.error
    runners = [session.compute.runners[t.id] for t in tasks]
    assert all(isinstance(r, DaskRunner) for r in runners)
    assert len({r.where for r in runners}) == 2  # spread over both Dask workers
    shipped = session.compute.dask.shipped_bytes
    assert big.nbytes <= shipped < big.nbytes + 100_000  # once, not once per sibling
    pulled = await session.pull(tasks[2].id, "s", "small")
    assert pulled == {"s": float(big.sum()) + 2, "small": [1, 2, 2]}
    assert namespace["small"] == [1, 2]  # the kernel's values are untouched
    # a value that cannot travel stays in the kernel: the call says so, the code fails
    worker = await session.fork("Use `py: conn.getsockname()`")
    [finished] = await done(session, worker)
    transcript = str(session.workers.runs[worker.id].history)
    assert "conn was not shipped to the cluster: a socket cannot be pickled" in transcript
    assert "NameError" in transcript
    listener.close()


async def test_a_workers_own_values_win_and_pulls_say_what_cannot_come(
    make_session: Any, dask_address: str
) -> None:
    namespace: dict[str, Any] = {"x": 1}
    session = make_session(auto_respond=False, namespace=namespace)
    session.compute.use_dask(dask_address)
    task = await session.fork("Go `py: x = 999`")
    [finished] = await done(session, task)
    assert finished.status == "completed", finished.error
    runner = session.compute.runners[task.id]
    result = await runner.run("y = x + 1\ngen = (i for i in range(3))\ny")
    assert result.value_repr == "1000"  # its own x, not the kernel's shipped after it
    assert await session.pull(task.id, "x", "y") == {"x": 999, "y": 1000}
    with pytest.raises(PullError, match="gen: a generator cannot come back: it is not plain"):
        await session.pull(task.id, "gen")
    with pytest.raises(PullError, match="gen: generator cannot be pickled"):
        await session.pull(task.id, "gen", trust=True)
    with pytest.raises(PullError, match="nosuch: not defined in this worker"):
        await session.pull(task.id, "nosuch")


def test_without_the_extra_the_message_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if it were not installed
    with pytest.raises(ConfigError, match=r'pip install "forkagent-jupyter\[dask\]"'):
        require_dask()
