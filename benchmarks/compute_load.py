"""Workers that compute, through a real kernel: responsiveness, parallelism, stop, snapshots.

A data scientist's fan-out computes: each worker's Python burns CPU on the data. In a real
IPython kernel with the extension loaded (offline model: the directives carry the code), it
measures, each as a ratio or a time within one run:
* the kernel's `execute_request` round trip while 2 workers each burn CPU, against the same
  kernel idle (isolated workers; `--shared` workers reported for comparison); and the same
  sampled from the `%fork` cell on (the launch: snapshot, sandbox, cards, the workers' first
  calls), in rounds that each sample the idle kernel just before, against both the idle
  kernel and the workers computing after their launch;
* the wall time of 2 and 4 computing workers against one (the same work each; the best of
  three runs of each);
* how long `%stop` of a computing worker takes until its task is `killed`;
* forking from a kernel that holds a large DataFrame: the time from `%fork` to the worker's
  first statement, and the memory of the kernel's whole process tree (the kernel, its
  snapshots and workers: summed PSS, so shared pages count once) against the same just before
  the fork, right after it and after the worker read the whole frame;
* a fan-out of 4 workers that each fit a model on the penguins data (bootstrapped least
  squares, the same work each), against the same fan-out with `--shared` workers (their
  calls run one at a time in the notebook's namespace: the serial time); the best of two.
Prints JSON and writes it to `--out` (benchmarks/results/compute_load.json); `--quick` is the
CI size; `--check` fails when a bound below does not hold.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.output import finish, options

from .kernel import Client, kernel, rtts

ROOT = Path(__file__).resolve().parents[1]
# Each bound sits between what the feature gives on 2 cores and what its absence would give,
# with room for a shared CI machine whose host takes CPU away at times (clean-clone runs there
# measured the RTT ratio from 0.97x to 2.04x and 4 workers from 1.6x to 2.9x one; the sizes are
# interleaved so that a slow spell does not fall on one): with workers on the kernel's thread
# the RTT was 423x (threads in the kernel: 11-180x); serial compute gives 2.0x for 2 workers
# and 4.0x for 4; a pickled 1 GB frame takes seconds. The penguins fan-out is reported.
# The first statement: 85 ms before workers were sandboxed; the sandbox (a second fork into
# user, PID and mount namespaces, and the scrub of credentials from the snapshot's memory)
# brings it to ~240 ms on an idle 2-core machine; a pickled frame would take seconds.
# The launch bound: the round trip sampled from the `%fork` on (the launch, then the workers'
# first compute) is at most 1.3x idle; on a machine busy enough that computing workers raise
# it once they compute (the first row, same run) above 1.0x, at most 1.3x that. Workers in
# the kernel's own session (its scheduling autogroup) measured 1.41x and 1.91x idle from the
# launch on, against 0.97x and 1.32x once computing; in sessions of their own 0.93x and 1.06x
# (1.27x and 1.11x).
BOUNDS = {
    "rtt_ratio_max": 3.0,
    "launch_rtt_ratio_max": 1.3,
    "wall_2_over_floor_max": 1.3,
    "wall_4_over_floor_max": 1.3,
    "stop_s_max": 0.5,
    "first_statement_s_max": 0.5,
    "memory_growth_max": 0.1,
}
SIZES = {
    "full": {"burn": 3.0, "work": 3.0, "frame_mb": 1000, "fits": 15000},
    "quick": {"burn": 1.5, "work": 2.0, "frame_mb": 400, "fits": 8000},
}
S = "__forkagent__.session"
LAUNCH_ROUNDS = 4
"""Rounds of (idle, then from the launch on) round trips, pooled: one round's median moves
with the machine's other work."""

HELPERS = '''
import time, os
def burn(seconds):
    """CPU for `seconds` of this process's own CPU time."""
    end = time.process_time() + seconds
    n = 0
    while time.process_time() < end:
        n += 1
    return n

def work(n):
    """A fixed amount of CPU work (the same for every worker)."""
    total = 0
    for i in range(n):
        total += i * i % 7
    return total

def pss_kb(pid):
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0

def tree_pss_kb(root):
    """PSS of a process and all its descendants: their memory, shared pages counted once."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, grew = {root}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(pss_kb(p) for p in tree)
'''

FIT = '''
import numpy as np
from palmerpenguins import load_penguins
penguins = load_penguins().dropna()
def fit(fits, seed):
    """Bootstrap a least-squares model of body mass on the other measures and species."""
    X = np.column_stack([np.ones(len(penguins)), penguins.bill_length_mm,
                         penguins.bill_depth_mm, penguins.flipper_length_mm,
                         penguins.species == "Gentoo", penguins.species == "Chinstrap"])
    X = np.column_stack([X, X[:, 1:4] ** 2, X[:, 1] * X[:, 3]]).astype(float)
    y = penguins.body_mass_g.to_numpy()
    rng = np.random.default_rng(seed)
    coefs = []
    for _ in range(fits):
        idx = rng.integers(0, len(y), len(y))
        coefs.append(np.linalg.lstsq(X[idx], y[idx], rcond=None)[0])
        for _ in range(20):  # a little pure-Python work per fit, as model code has
            sum(float(v) for v in coefs[-1])
    return np.mean(coefs, axis=0).round(2).tolist()
'''


SETTINGS = {"permission_mode": "bypassPermissions", "auto_respond": False}
"""The kernel's settings (offline, `kernel.kernel`), with HELPERS as its setup."""


def wait_idle(client: Client, timeout: float = 600) -> None:
    """Until no task runs: one awaiting cell, so no polling competes with the workers."""
    _, reply = client.run(f"await {S}.wait(timeout={timeout})", timeout=timeout + 10)
    assert reply["content"]["status"] == "ok", reply["content"]


def wait_computing(client: Client, count: int) -> None:
    """Until `count` running workers are inside their Python call."""
    deadline = time.monotonic() + 60
    expr = f"sum(t.current_tool == 'Python' for t in {S}.registry.running())"
    while client.value(expr) < count:
        if time.monotonic() > deadline:
            raise TimeoutError("workers did not start computing")
        time.sleep(0.02)


def fan_out(client: Client, directives: list[str], shared: bool = False) -> float:
    """Wall time from forking these workers to the last of them finished (the kernel's own
    clock: the fork cell's start to the tasks' end times)."""
    flag = "--shared " if shared else ""
    cell = "\n".join(f"%fork {flag}{d}" for d in directives)
    before = client.value(f"len({S}.tasks)")
    _, reply = client.run(f"__started__ = time.time()\n{cell}")
    assert reply["content"]["status"] == "ok", reply["content"]
    wait_idle(client)
    failed = client.value(f"[t.error for t in {S}.tasks[{before}:] if t.status != 'completed']")
    assert not failed, failed
    return float(client.value(f"max(t.ended_at for t in {S}.tasks[{before}:]) - __started__"))


def responsiveness(client: Client, burn: float) -> dict[str, Any]:
    idle = rtts(client, 3.0)
    out: dict[str, Any] = {"idle_rtt_ms_median": statistics.median(idle) * 1000}
    for mode in ("isolated", "shared"):
        flag = "--shared " if mode == "shared" else ""
        client.run("\n".join(f"%fork {flag}burn `py: burn({burn})`" for _ in range(2)))
        wait_computing(client, 2 if mode == "isolated" else 1)
        busy = rtts(client, burn * 0.6)
        wait_idle(client)
        out[f"{mode}_rtt_ms_median"] = statistics.median(busy) * 1000
        out[f"{mode}_rtt_ratio"] = statistics.median(busy) / statistics.median(idle)
        out[f"{mode}_samples"] = len(busy)
    out.update(from_launch(client, burn))
    out["launch_over_computing"] = out["launch_rtt_ratio"] / out["isolated_rtt_ratio"]
    return out


def from_launch(client: Client, burn: float) -> dict[str, Any]:
    """Round trips sampled from the `%fork` of 2 computing workers on (the launch, then their
    first compute), against the idle kernel sampled just before, in LAUNCH_ROUNDS rounds
    (pooled)."""
    idle: list[float] = []
    launch: list[float] = []
    for _ in range(LAUNCH_ROUNDS):
        idle += rtts(client, 1.0)
        client.run("\n".join(f"%fork burn `py: burn({burn})`" for _ in range(2)))
        launch += rtts(client, burn * 0.6)
        wait_idle(client)
    return {
        "launch_idle_rtt_ms_median": statistics.median(idle) * 1000,
        "launch_rtt_ms_median": statistics.median(launch) * 1000,
        "launch_rtt_ratio": statistics.median(launch) / statistics.median(idle),
        "launch_samples": len(launch),
    }


def parallelism(client: Client, work_s: float) -> dict[str, Any]:
    # calibrate a fixed amount of work that takes about `work_s` in one process
    n = client.value("(lambda t: (work(2_000_000), time.process_time() - t))(time.process_time())")
    iterations = int(2_000_000 * work_s / max(n[1], 1e-3))
    fan_out(client, ["warm up `py: work(1000)`"])  # first fork of the kernel: not timed
    job = f"work `py: work({iterations})`"
    # the best of three runs each: noise from the machine only ever adds time (on this 2-core
    # virtual machine plain processes vary by 10-20% from run to run), and the runs are
    # interleaved (1, 2, 4, 1, 2, 4, ...) so that a slow spell of the host does not fall on
    # all the runs of one size
    # the floor: the same work in 1, 2 and 4 plain processes, measured in the same run and
    # interleaved with the workers, so that a busy machine raises both and the check compares
    # the workers' ratio with what this machine gives plain processes right now
    runs: dict[int, list[float]] = {1: [], 2: [], 4: []}
    plain: dict[int, list[float]] = {1: [], 2: [], 4: []}
    for _ in range(3):
        for n in runs:
            runs[n].append(fan_out(client, [job] * n))
            plain[n].append(plain_processes(n, iterations))
    one, two, four = (min(runs[n]) for n in (1, 2, 4))
    p1, p2, p4 = (min(plain[n]) for n in (1, 2, 4))
    return {
        "iterations": iterations,
        "one_s": one,
        "two_s": two,
        "four_s": four,
        "wall_2_ratio": two / one,
        "wall_4_ratio": four / one,
        "floor_2_ratio": p2 / p1,
        "floor_4_ratio": p4 / p1,
        "wall_2_over_floor": (two / one) / (p2 / p1),
        "wall_4_over_floor": (four / one) / (p4 / p1),
    }


def plain_processes(n: int, iterations: int) -> float:
    """Wall time of `n` plain Python processes each doing `work(iterations)` at once."""
    code = (  # work(), as the kernel defines it
        "def work(n):\n    total = 0\n    for i in range(n):\n        total += i * i % 7\n"
        f"    return total\nwork({iterations})"
    )
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]
    for proc in procs:
        proc.wait()
    return time.perf_counter() - start


def stopping(client: Client) -> dict[str, Any]:
    client.run("%fork --name spinner spin `py: burn(60)`")
    wait_computing(client, 1)
    start = time.monotonic()
    client.run("%stop spinner")
    while client.value(f"{S}.registry.get('spinner').status") != "killed":
        if time.monotonic() - start > 120:
            raise TimeoutError("the worker was not killed")
    return {"stop_s": time.monotonic() - start}


SKLEARN = """
import joblib
from sklearn.cluster import KMeans
from sklearn.ensemble import HistGradientBoostingRegressor
def fit_all():
    rng = np.random.RandomState(0)
    x = rng.rand(3000, 6); y = x @ rng.rand(6)
    return (
        KMeans(3, random_state=0, n_init=2).fit(x).labels_.tolist(),
        HistGradientBoostingRegressor(max_iter=20, random_state=0)
        .fit(x, y).predict(x[:5]).tolist(),
        joblib.Parallel(n_jobs=2)(joblib.delayed(pow)(i, 2) for i in range(6)),
    )
here = fit_all()
"""


def snapshot(client: Client, frame_mb: int) -> dict[str, Any]:
    rows = frame_mb * 1_000_000 // 64  # 8 float64 columns
    client.run(
        "import numpy as np, pandas as pd\n"
        f"big = pd.DataFrame(np.random.default_rng(0).random(({rows}, 8)), "
        "columns=list('abcdefgh'))"
    )
    # the user's situation: the kernel has already used scikit-learn's OpenMP and joblib
    client.run(SKLEARN)
    kernel_pid = client.value("os.getpid()")
    time.sleep(0.5)
    before_kb = client.value(f"tree_pss_kb({kernel_pid})")
    client.run(
        "t_fork = time.time()\n"
        "%fork --name reader read it `py: t_first = time.time(); "
        "import time as _t; _t.sleep(2); s = float(big.to_numpy().sum()); _t.sleep(2)`"
    )
    deadline = time.monotonic() + 60
    pid = None
    while pid is None and time.monotonic() < deadline:
        pid = client.value(
            f"getattr({S}.compute.runners.get({S}.registry.get('reader').id), 'pid', None)"
        )
    time.sleep(1.0)  # the worker is in its first sleep: it has read nothing yet
    idle_kb = client.value(f"tree_pss_kb({kernel_pid})")
    time.sleep(2.5)  # it has summed the whole frame and sleeps again
    read_kb = client.value(f"tree_pss_kb({kernel_pid})")
    wait_idle(client)
    client.run("%tasks --pull reader t_first")
    first = client.value("t_first - t_fork")
    for _ in range(100):  # measured once it has finished
        finished_mb = client.value(f"{S}.registry.get('reader').memory_mb")
        if finished_mb is not None:
            break
        time.sleep(0.1)
    client.run("t_fit = time.time()\n%fork --name fitter refit `py: there = fit_all()`")
    wait_idle(client)
    client.run("%tasks --pull fitter there")
    fit = {
        "fit_in_worker_status": client.value(f"{S}.registry.get('fitter').status"),
        "fit_in_worker_equal": client.value("there == here"),
        "fit_in_worker_s": client.value(f"{S}.registry.get('fitter').ended_at - t_fit"),
    }
    client.run("del big")
    return {
        **fit,
        "finished_worker_mb": finished_mb,
        "frame_mb": frame_mb,
        "kernel_mb_before": before_kb / 1024,
        "first_statement_s": first,
        "memory_growth_after_fork": idle_kb / before_kb - 1,
        "memory_growth_after_read": read_kb / before_kb - 1,
    }


def penguins(client: Client, fits: int) -> dict[str, Any]:
    _, reply = client.run(FIT)
    assert reply["content"]["status"] == "ok", reply["content"]
    jobs = [f"fit `py: fit({fits}, seed={seed})`" for seed in range(4)]
    isolated = min(fan_out(client, jobs) for _ in range(2))
    shared = min(fan_out(client, jobs, shared=True) for _ in range(2))
    return {"isolated_s": isolated, "shared_s": shared, "ratio": isolated / shared}


def check(result: dict[str, Any]) -> list[str]:
    b = BOUNDS
    failures = []
    r, p, s, m = (result[k] for k in ("rtt", "parallel", "stop", "snapshot"))
    if r["isolated_rtt_ratio"] > b["rtt_ratio_max"]:
        failures.append(f"RTT ratio {r['isolated_rtt_ratio']:.2f} > {b['rtt_ratio_max']}")
    launch_bound = b["launch_rtt_ratio_max"] * max(1.0, r["isolated_rtt_ratio"])
    if r["launch_rtt_ratio"] > launch_bound:
        failures.append(
            f"RTT from the launch on {r['launch_rtt_ratio']:.2f}x idle > {launch_bound:.2f} "
            f"({b['launch_rtt_ratio_max']}x idle, or the computing workers' "
            f"{r['isolated_rtt_ratio']:.2f}x if above 1)"
        )
    for n in (2, 4):
        over, bound = p[f"wall_{n}_over_floor"], b[f"wall_{n}_over_floor_max"]
        if over > bound:
            failures.append(
                f"{n} workers {p[f'wall_{n}_ratio']:.2f}x one, {over:.2f}x what {n} plain "
                f"processes give now ({p[f'floor_{n}_ratio']:.2f}x) > {bound}"
            )
    if s["stop_s"] > b["stop_s_max"]:
        failures.append(f"stop took {s['stop_s']:.2f} s > {b['stop_s_max']}")
    if m["first_statement_s"] > b["first_statement_s_max"]:
        failures.append(
            f"first statement after {m['first_statement_s']:.3f} s > {b['first_statement_s_max']}"
        )
    if m["fit_in_worker_status"] != "completed" or not m["fit_in_worker_equal"]:
        failures.append(
            "scikit-learn/joblib in a worker after the kernel used them: "
            f"{m['fit_in_worker_status']}, results equal: {m['fit_in_worker_equal']}"
        )
    if m["memory_growth_after_fork"] > b["memory_growth_max"]:
        failures.append(
            f"memory grew {m['memory_growth_after_fork']:.1%} > {b['memory_growth_max']:.0%}"
        )
    # the penguins fan-out is reported, not checked: numpy's least squares runs on BLAS
    # threads, and 4 worker processes of them on 2 cores measured anywhere from 0.52x to
    # 0.76x serial across runs on this machine; the pure-Python wall-time ratios above are
    # the checked measure of parallel compute
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = options(__doc__, out=ROOT / "benchmarks/results/compute_load.json")
    ns = parser.parse_args(argv)
    size = SIZES["quick" if ns.quick else "full"]
    with kernel(SETTINGS, setup=[HELPERS]) as client:
        result: dict[str, Any] = {
            "benchmark": "compute_load",
            "quick": ns.quick,
            "cores": os.cpu_count(),
            "sizes": size,
            "bounds": BOUNDS,
            "rtt": responsiveness(client, size["burn"]),
            "parallel": parallelism(client, size["work"]),
            "stop": stopping(client),
            "snapshot": snapshot(client, int(size["frame_mb"])),
            "penguins": penguins(client, int(size["fits"])),
        }
    result["failures"] = check(result)
    return finish("compute_load", result, ns.out, ns.check)


if __name__ == "__main__":
    sys.exit(main())
