"""A real `distributed.LocalCluster` (worker processes) in its own process, for tests.

`python -m tests.dask_cluster` starts one (2 workers, 1 thread each, no dashboard), prints its
scheduler address on one line and keeps it until its stdin closes. `cluster()` is the context
manager tests use: the address, and the cluster stopped at the end.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def cluster(workers: int = 2) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.dask_cluster", str(workers)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().strip()
        assert address.startswith("tcp://"), address
        yield address
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def main() -> None:
    import logging

    from distributed import LocalCluster

    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    with LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
    ) as local:
        print(local.scheduler_address, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
