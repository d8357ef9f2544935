"""Workers of a kernel that has already done ordinary data-science work: the same calls in a
worker finish, with the kernel's results; what cannot be made safe is said on the card."""

from __future__ import annotations

import pytest

from .conftest import Kernel
from .test_compute import SESSION, _card_outputs, setup, status

pytestmark = pytest.mark.kernel

USE = """
import numpy as np, joblib
from sklearn.cluster import KMeans
from sklearn.ensemble import HistGradientBoostingRegressor
rng = np.random.RandomState(0)
X = rng.rand(2000, 5); y = X @ rng.rand(5)
def work():
    return (
        KMeans(3, random_state=0, n_init=2).fit(X).labels_.tolist(),
        HistGradientBoostingRegressor(max_iter=20, random_state=0)
        .fit(X, y).predict(X[:4]).tolist(),
        joblib.Parallel(n_jobs=2)(joblib.delayed(pow)(i, 2) for i in range(5)),
        joblib.Parallel(n_jobs=2, backend="threading")(joblib.delayed(abs)(-i) for i in range(5)),
    )
here = work()
"""


def test_scikit_learn_and_joblib_used_by_the_kernel_work_in_a_worker(kernel: Kernel) -> None:
    pytest.importorskip("sklearn")
    setup(kernel)
    assert kernel.execute(USE).status == "ok"
    kernel.execute("%fork --name fit refit `py: there = work()`")
    kernel.run_approving("%tasks --wait fit", timeout=120)
    error = kernel.value(f"{SESSION}.registry.get('fit').error")
    assert status(kernel, "fit") == "completed", error
    kernel.execute("%tasks --pull fit there")
    assert kernel.value("there == here") is True


def test_polars_used_by_the_kernel_is_said_on_the_card_and_does_not_hang(kernel: Kernel) -> None:
    pytest.importorskip("polars")
    setup(kernel)
    kernel.execute(
        "import polars as pl\nframe = pl.DataFrame({'k': [i % 3 for i in range(10000)]})\n"
        "n = frame.group_by('k').len().height"
    )
    kernel.execute("%fork --name pol group `py: m = frame.group_by('k').len().height`")
    kernel.run_approving("%tasks --wait pol", timeout=120)
    assert status(kernel, "pol") == "failed"
    kernel.drain()
    card = "".join(o.get("text", "") for o in _card_outputs(kernel))
    [line] = [x for x in card.splitlines() if "polars" in x]
    assert "polars's thread pool was running in the kernel" in line and "--shared" in line
    # --shared is the way out
    kernel.execute("%fork --shared --name pol2 group `py: m = frame.group_by('k').len().height`")
    kernel.run_approving("%tasks --wait pol2", timeout=120)
    assert status(kernel, "pol2") == "completed" and kernel.value("m") == 3


POOLS = """
import multiprocessing as mp
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.pool import ThreadPool
def sq(v):
    return v * v
threads = ThreadPoolExecutor(2)
processes = mp.Pool(2)
thread_pool = ThreadPool(2)
used = (list(threads.map(sq, range(3))), processes.map(sq, range(3)), thread_pool.map(sq, range(3)))
"""


def test_pools_the_kernel_made_are_restarted_or_refused_in_one_line(kernel: Kernel) -> None:
    """A thread pool of the kernel works in a worker (it starts its own threads there); a
    multiprocessing pool of the kernel, whose handler threads are the kernel's, refuses in
    one line instead of waiting for ever; a pool made in the worker works; the kernel's pools
    carry on in the kernel."""
    setup(kernel)
    assert kernel.execute(POOLS).status == "ok"
    kernel.execute("%fork --name reuse threads `py: there = list(threads.map(sq, range(5)))`")
    kernel.execute("%fork --name procs kernel's pool `py: processes.map(sq, range(5))`")
    kernel.execute("%fork --name tpool kernel's thread pool `py: thread_pool.map(abs, [-1])`")
    own = "`py: p = mp.Pool(2); mine = p.map(sq, range(4)); p.close(); p.join()`"
    kernel.execute(f"%fork --name own its own pool {own}")
    for name in ("reuse", "procs", "tpool", "own"):
        kernel.run_approving(f"%tasks --wait {name}", timeout=60)
    assert status(kernel, "reuse") == "completed"
    kernel.execute("%tasks --pull reuse there\n%tasks --pull own mine")
    assert kernel.value("(there, mine)") == ([0, 1, 4, 9, 16], [0, 1, 4, 9])
    for name, kind, what in (
        ("procs", "Pool", "threads and processes"),
        ("tpool", "ThreadPool", "threads"),
    ):
        result = kernel.value(f"{SESSION}.registry.get({name!r}).result")
        expected = (
            f"InheritedPoolError: this {kind} was made in the kernel before the fork: its "
            f"{what} are the kernel's, not this worker's, so it cannot run work here. Make "
            "the pool in the worker's code, or use --shared."
        )
        assert expected in result, result
    assert kernel.value("used") == kernel.value(
        "(list(threads.map(sq, range(3))), processes.map(sq, range(3)), "
        "thread_pool.map(sq, range(3)))"
    )
    kernel.execute("processes.terminate(); thread_pool.terminate(); threads.shutdown()")


def test_a_logging_handler_the_kernel_set_up_writes_to_the_workers_card(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute(
        "import logging\nlogging.basicConfig(level=logging.INFO, force=True)\n"
        "log = logging.getLogger('mine')\nlog.info('in the kernel')"
    )
    kernel.execute("%fork --name logs log `py: log.info('from the worker'); print('done')`")
    kernel.run_approving("%tasks --wait logs", timeout=60)
    assert status(kernel, "logs") == "completed"
    result = kernel.value(f"{SESSION}.registry.get('logs').result")
    assert "done\n[stderr]\nINFO:mine:from the worker\n```" in result, result
    kernel.drain()
    card = "".join(o.get("text", "") for o in _card_outputs(kernel))
    assert "INFO:mine:from the worker" in card
    # the kernel's own handler is as it was
    assert "INFO:mine:again" in kernel.execute("log.info('again')").texts()


def test_a_dask_client_of_the_kernel_is_said_on_the_card_and_does_not_hang(
    kernel: Kernel,
) -> None:
    """A worker that uses the kernel's dask Client (its event loop thread is not in the
    worker) ends, its card saying why, instead of waiting for ever; --shared is the way out."""
    pytest.importorskip("distributed")
    setup(kernel)
    started = kernel.execute(
        "from distributed import Client, LocalCluster\n"
        "cluster = LocalCluster(n_workers=1, processes=False, threads_per_worker=1, "
        "dashboard_address=None)\nclient = Client(cluster)\n"
        "assert client.submit(sum, [1, 2]).result() == 3",
        timeout=120,
    )
    assert started.status == "ok", started.texts()
    kernel.execute("%fork --name dsk sum `py: total = client.submit(sum, [3, 4]).result()`")
    kernel.run_approving("%tasks --wait dsk", timeout=120)
    assert status(kernel, "dsk") == "failed"
    error = kernel.value(f"{SESSION}.registry.get('dsk').error")
    assert "exited with code 71 (it waited on a thread pool of the kernel" in error
    kernel.drain()
    card = "".join(o.get("text", "") for o in _card_outputs(kernel))
    [line] = {x for x in card.splitlines() if "dask" in x}
    assert line == (
        "At the fork, a dask Client's event loop was running in the kernel: its threads are not "
        "in this worker, so distributed calls here cannot finish (the worker ends instead); "
        "--shared runs the worker in the kernel."
    )
    kernel.execute(
        "%fork --shared --name dsk2 sum `py: total = client.submit(sum, [3, 4]).result()`"
    )
    kernel.run_approving("%tasks --wait dsk2", timeout=120)
    assert status(kernel, "dsk2") == "completed" and kernel.value("total") == 7
    kernel.execute("client.close(); cluster.close()", timeout=120)


def test_a_workers_polars_frame_and_arrow_table_come_back_as_data(kernel: Kernel) -> None:
    pytest.importorskip("polars")
    setup(kernel)
    make = (
        "`py: import polars as pl, pyarrow as pa; "
        "frame = pl.DataFrame({'k': ['a', 'b', 'a'], 'v': [1, 2, 3]}).group_by('k').agg("
        "pl.col('v').sum()).sort('k'); table = frame.to_arrow(); v = frame['v']`"
    )
    kernel.execute(f"%fork --name arrows build {make}")
    kernel.run_approving("%tasks --wait arrows", timeout=60)
    assert status(kernel, "arrows") == "completed"
    pulled = kernel.execute("%tasks --pull arrows frame table v")
    assert pulled.status == "ok", pulled.texts()
    got = kernel.value(
        "(type(frame).__module__.split('.')[0], frame.to_dicts(), type(table).__name__, "
        "table.to_pydict(), v.name, v.to_list())"
    )
    assert got == (
        "polars",
        [{"k": "a", "v": 4}, {"k": "b", "v": 2}],
        "Table",
        {"k": ["a", "b"], "v": [4, 2]},
        "v",
        [4, 2],
    )


def test_a_file_the_kernel_opened_keeps_its_position_in_the_kernel(kernel: Kernel) -> None:
    """A worker reading (or seeking in) a file the kernel has open moves only its own
    position: the kernel's next read still starts where the kernel left it (the file is
    larger than a read buffer, so the kernel reads from the file again)."""
    setup(kernel)
    kernel.execute(
        "import os\nwith open('rows.csv', 'w') as out:\n"
        "    out.write('a,b\\n' + ''.join(f'{i},{i}\\n' for i in range(30000)))\n"
        "rows = open('rows.csv')\nheader = rows.readline()\n"
        "raw = os.open('rows.csv', os.O_RDONLY)\nfirst = os.read(raw, 2)\n"
        "log = open('log.txt', 'a')"
    )
    work = (
        "`py: n = len(rows.read().splitlines()); rows.seek(0); start = rows.readline(); "
        "more = os.read(raw, 8); log.write('worker\\n'); log.flush()`"
    )
    kernel.execute(f"%fork --name reader read {work}")
    kernel.run_approving("%tasks --wait reader", timeout=60)
    assert status(kernel, "reader") == "completed"
    kernel.execute("%tasks --pull reader n start more")
    assert kernel.value("(header, n, start, first, more)") == (
        "a,b\n",
        30000,
        "a,b\n",
        b"a,",
        b"b\n0,0\n1,",
    )
    # the kernel's own positions are where it left them
    assert kernel.value("(len(rows.read().splitlines()), os.read(raw, 8))") == (
        30000,
        b"b\n0,0\n1,",
    )
    kernel.execute("log.write('kernel\\n'); log.close()")
    assert kernel.value("open('log.txt').read()") == "worker\nkernel\n"  # appends stay appends
