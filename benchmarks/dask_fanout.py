"""Workers' code on a Dask cluster, through a real kernel (`ForkAgent.executor = "dask"`).

On a real `distributed.LocalCluster` (2 worker processes, 1 thread each; or the cluster at
`--dask-address`), with the extension loaded in a real kernel (offline model: the directives
carry the code), it measures within one run:
* the wall time of 8 workers that each burn the same CPU time, against one worker (on 2 cores
  perfect is 4x; serial would be 8x);
* the kernel's `execute_request` round trip while the 8 compute, against the same kernel idle
  (and, for reference, the same with 8 local worker processes: what the machine allows);
* the overhead of a one-line tool call (`1+1`) on the cluster against a local worker's (the
  median of 20 calls on an existing worker, timed in the kernel);
* a DataFrame used by 8 sibling workers (forked in one cell): the bytes the kernel shipped to
  the cluster (its own count) against the frame's size, and how many copies of the scattered
  frame the Dask workers' memory held (Dask's own record: at most one per Dask worker, each
  worker copying it from another, not from the kernel);
* how long `%stop` of a computing worker takes until its task is `killed`.
Prints JSON and writes it to `--out`; `--quick` is the CI size; `--check` fails when a bound
(for the local cluster) does not hold.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.output import finish, options

from .compute_load import HELPERS, SETTINGS, S, fan_out, wait_computing, wait_idle
from .kernel import Client, kernel, rtts

ROOT = Path(__file__).resolve().parents[1]
BOUNDS = {"wall_8_max": 4.6, "rtt_ratio_max": 1.5, "call_overhead_ms_max": 50.0, "ship_max": 1.1}
SIZES = {"full": {"burn": 3.0, "frame_mb": 200}, "quick": {"burn": 1.0, "frame_mb": 50}}


@contextlib.contextmanager
def local_cluster() -> Iterator[str]:
    sys.path.insert(0, str(ROOT))
    from tests.dask_cluster import cluster

    with cluster(2) as address:
        yield address


def ok(client: Client, code: str) -> None:
    _, reply = client.run(code, timeout=600)
    assert reply["content"]["status"] == "ok", (code, reply["content"])


def fan(client: Client, burn: float) -> dict[str, Any]:
    fan_out(client, ["warm up `py: 1`"])
    job = f"burn `py: burn({burn})`"
    one = min(fan_out(client, [job]) for _ in range(2))
    eight = fan_out(client, [job] * 8)
    idle = rtts(client, 3.0)
    busy = busy_rtts(client, job, burn)
    ok(client, "%config ForkAgent.executor = 'local'")  # the same with local worker processes
    local = busy_rtts(client, job, burn)
    ok(client, "%config ForkAgent.executor = 'dask'")
    return {
        "one_s": one,
        "eight_s": eight,
        "wall_8_ratio": eight / one,
        "idle_rtt_ms_median": statistics.median(idle) * 1000,
        "busy_rtt_ms_median": statistics.median(busy) * 1000,
        "rtt_ratio": statistics.median(busy) / statistics.median(idle),
        "rtt_samples": len(busy),
        "local_workers_rtt_ratio": statistics.median(local) / statistics.median(idle),
    }


def busy_rtts(client: Client, job: str, burn: float) -> list[float]:
    """Round trips while 8 workers compute."""
    client.run("\n".join(f"%fork {job}" for _ in range(8)))
    wait_computing(client, 8)
    busy = rtts(client, burn * 2)
    wait_idle(client)
    return busy


CALLS = """
__r = {S}.compute.runners[{S}.tasks[-1].id]
__times = []
for _ in range(20):
    __t = time.perf_counter(); await __r.run('1+1'); __times.append(time.perf_counter() - __t)
__median_ms = sorted(__times)[10] * 1000
"""


def call_overhead(client: Client) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for executor in ("local", "dask"):
        ok(client, f"%config ForkAgent.executor = {executor!r}")
        fan_out(client, ["first `py: 1`"])
        ok(client, CALLS.format(S=S))
        out[f"{executor}_call_ms"] = client.value("__median_ms")
    out["overhead_ms"] = out["dask_call_ms"] - out["local_call_ms"]
    return out


def shipping(client: Client, frame_mb: int) -> dict[str, Any]:
    rows = frame_mb * 1_000_000 // 64
    ok(
        client,
        "import numpy as np, pandas as pd\n"
        f"big = pd.DataFrame(np.random.default_rng(0).random(({rows}, 8)), "
        "columns=list('abcdefgh'))\n__frame = int(big.memory_usage().sum())",
    )
    before = client.value(f"{S}.compute.dask.shipped_bytes")
    seconds = fan_out(client, ["mean `py: m = float(big.a.mean())`"] * 8)
    shipped = client.value(f"{S}.compute.dask.shipped_bytes") - before
    frame = client.value("__frame")
    copies = client.value(
        f"sum(len(v) for k, v in {S}.compute.dask._client.who_has().items() "
        "if str(k).startswith('DataFrame-'))"
    )
    ok(client, "del big")
    return {
        "frame_mb": frame / 1e6,
        "shipped_mb": shipped / 1e6,
        "shipped_ratio": shipped / frame,
        "cluster_copies": copies,
        "eight_workers_s": seconds,
    }


def stopping(client: Client) -> dict[str, Any]:
    ok(client, "%fork --name spinner spin `py: burn(60)`")
    wait_computing(client, 1)
    start = time.monotonic()
    ok(client, "%stop spinner")
    while client.value(f"{S}.registry.get('spinner').status") != "killed":
        if time.monotonic() - start > 60:
            raise TimeoutError("the worker was not killed")
    return {"stop_s": time.monotonic() - start}


def measure(address: str, size: dict[str, Any]) -> dict[str, Any]:
    with kernel(SETTINGS, setup=[HELPERS]) as client:
        ok(client, f"%config ForkAgent.dask_address = {address!r}")
        ok(client, "%config ForkAgent.executor = 'dask'")
        return {
            "fan_out": fan(client, size["burn"]),
            "calls": call_overhead(client),
            "shipping": shipping(client, int(size["frame_mb"])),
            "stop": (ok(client, "%config ForkAgent.executor = 'dask'"), stopping(client))[1],
        }


def check(result: dict[str, Any]) -> list[str]:
    b, r = BOUNDS, result["local_cluster"]
    failures = []
    if r["fan_out"]["wall_8_ratio"] > b["wall_8_max"]:
        failures.append(f"8 workers {r['fan_out']['wall_8_ratio']:.2f}x one > {b['wall_8_max']}")
    if r["fan_out"]["rtt_ratio"] > b["rtt_ratio_max"]:
        failures.append(f"RTT {r['fan_out']['rtt_ratio']:.2f}x idle > {b['rtt_ratio_max']}")
    if r["calls"]["overhead_ms"] > b["call_overhead_ms_max"]:
        failures.append(f"call overhead {r['calls']['overhead_ms']:.1f} ms")
    if r["shipping"]["shipped_ratio"] > b["ship_max"]:
        failures.append(f"frame shipped {r['shipping']['shipped_ratio']:.2f}x its size")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = options(__doc__, out=ROOT / "benchmarks/results/dask_fanout.json")
    parser.add_argument("--dask-address", help="also measure the cluster at this address")
    ns = parser.parse_args(argv)
    try:
        import distributed  # noqa: F401
    except ImportError:
        print('dask_fanout: needs pip install "forkagent-jupyter[dask]"', file=sys.stderr)
        return 1
    size = SIZES["quick" if ns.quick else "full"]
    result: dict[str, Any] = {
        "benchmark": "dask_fanout",
        "quick": ns.quick,
        "cores": os.cpu_count(),
        "sizes": size,
        "bounds": BOUNDS,
    }
    with local_cluster() as address:
        result["local_cluster"] = measure(address, size)
    if ns.dask_address:
        result["other_cluster"] = {"address": ns.dask_address, **measure(ns.dask_address, size)}
    result["failures"] = check(result)
    return finish("dask_fanout", result, ns.out, ns.check)


if __name__ == "__main__":
    sys.exit(main())
