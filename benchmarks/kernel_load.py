"""Kernel responsiveness with many workers streaming, through a real kernel.

For N workers (default 50, 200, 1000) forked at once in a real IPython kernel with the
extension loaded, all streaming from the emulator (latency on; the emulator runs in its own
process), it measures:
* the median round trip of an `execute_request` ("pass") while they run, as a ratio to the
  same kernel's idle median measured just before (about 100 idle samples);
* the kernel's IOPub message rate (messages per second from the fork to the last message,
  counted as jupyter_server's rate limiter counts them, and the busiest second, by the send
  time in each message's header), with the count of every message type;
* that every card's final state reached the client (the last value the client received for
  each card's line holds the task's final status; for the tasks collapsed into a cell's
  summary row, the row's last value counts them in their final status).
Prints JSON and writes it to `--out` (benchmarks/results/kernel_load.json); `--quick` runs
N=50 and 200; `--check` fails when a bound below does not hold.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.kernel import emulator_process, kernel, rtts
from benchmarks.output import finish, options
from forkagent_jupyter.emulator import Emulator, OfflineBrain, Reply

ROOT = Path(__file__).resolve().parents[1]
IDLE_S = 5.0  # idle sampling window (about 100 round trips)
# Bounds checked by --check. The RTT bound is the 1.5x at 200 workers; the rate bound
# is the 300 msg/s for the whole kernel (counted as jupyter_server's limiter counts),
# for the mean and for the busiest second.
RTT_RATIO_MAX = 1.5
# The largest run bound by the RTT ratio. Full runs: the 200 workers (1000 report their
# ratio, unbound). CI (--quick) runs 50 and 200 but binds the ratio at 50 only: on the shared
# 2-core CI machine the 200-worker ratio varies between runs (1.2x to 2.5x measured) with the
# load of other jobs, so it is reported there, and bound in full runs.
RTT_BOUND_AT = {"full": 200, "quick": 50}
IOPUB_RATE_MAX = 300.0
LONG = " ".join(f"observation {i} holds." for i in range(40))


class StreamingBrain:
    """Offline answers; workers' answers are long enough to stream for a few seconds."""

    def __init__(self) -> None:
        self.inner = OfflineBrain()

    def reply(self, request: Any) -> Reply:
        reply = self.inner.reply(request)
        if "<fork-directive>" in json.dumps(request.get("messages", [])[-1:]):
            return Reply.text("Scope: load test\nResult: " + LONG)
        return reply


def serve_emulator() -> None:
    """Serve the streaming emulator until stdin closes (run in its own process, so the
    emulator's work never holds this process's GIL while it times round trips)."""
    with Emulator(brain=StreamingBrain(), ttft=0.5, token_latency=0.05) as emu:
        print(emu.base_url, flush=True)
        sys.stdin.read()


def measure(n: int) -> dict[str, Any]:
    with emulator_process("benchmarks.kernel_load") as base_url:
        return _measure(n, base_url)


def _measure(n: int, base_url: str) -> dict[str, Any]:
    settings = {"permission_mode": "bypassPermissions", "auto_respond": False}
    with kernel(settings, base_url=base_url) as client:  # the session exists before timing
        idle = rtts(client, IDLE_S)
        client.iopub_times.clear()
        start = time.monotonic()
        start_wall = time.time()
        client.run(f"for i in range({n}):\n    __forkagent__.fork(f'part {{i}}: report')\n")
        busy = []
        while True:
            busy += rtts(client, 1)
            if client.value("len(__forkagent__.session.registry.running())") == 0:
                break
            if time.monotonic() - start > 600:
                raise TimeoutError("workers did not finish")
        wall = time.monotonic() - start
        settle = time.monotonic()
        hub = "__forkagent__.ui.hub"
        while (
            client.value(f"len({hub}._dirty) + len({hub}._pending) + len({hub}._summaries)")
            and time.monotonic() - settle < 120
        ):
            time.sleep(0.2)  # coalesced card updates still being flushed
        settled_s = time.monotonic() - settle
        time.sleep(0.5)
        client.pump()
        # what the frontend last received for each card's line holds the final status
        seen = client.value(f"{{c.header.model_id: c.task.status for c in {hub}.cards.values()}}")
        final = sum(status in client.values.get(mid, "") for mid, status in seen.items())
        # ... and for the tasks collapsed into a cell's summary row, the counts by status in
        # the last value the frontend received for that row
        rows = client.value(
            f"[(b.summary.model_id, [t.status for t in b.hidden]) for b in {hub}.boxes"
            " if b.summary is not None]"
        )
        for mid, statuses_hidden in rows:
            shown = dict(
                re.findall(r"forkagent-(\w+)-count'[^>]*>(\d+)<", client.values.get(mid, ""))
            )
            final += sum(
                min(int(shown.get(status, 0)), statuses_hidden.count(status))
                for status in set(statuses_hidden) - {"running"}
            )
        statuses = client.value("[t.status for t in __forkagent__.session.tasks]")
    # what jupyter_server's IOPub rate limiter counts (it exempts these three types)
    exempt = ("status", "execute_input", "comm_open")
    times = [t for t, kind in client.iopub_times if kind not in exempt and t >= start_wall]
    per_second = Counter(int(t - start_wall) for t in times)
    span = max(wall, (max(times) - start_wall) if times else 0.0)
    by_type = Counter(kind for t, kind in client.iopub_times if t >= start_wall)
    return {
        "workers": n,
        "completed": statuses.count("completed"),
        "cards_in_final_state": final,
        "idle_rtt_ms_median": statistics.median(idle) * 1000,
        "busy_rtt_ms_median": statistics.median(busy) * 1000,
        "rtt_ratio": statistics.median(busy) / statistics.median(idle),
        "rtt_samples": {"idle": len(idle), "busy": len(busy)},
        "iopub_msgs": len(times),
        "iopub_by_type": dict(by_type),
        "iopub_rate_mean": len(times) / span,
        "iopub_rate_peak_1s": max(per_second.values()) if per_second else 0,
        "wall_s": wall,
        "cards_settled_after_s": settled_s,
    }


def check(rows: list[dict[str, Any]], quick: bool) -> list[str]:
    """The bounds that do not hold, one line each."""
    bound_at = RTT_BOUND_AT["quick" if quick else "full"]
    failures = []
    for row in rows:
        n = row["workers"]
        if row["completed"] != n or row["cards_in_final_state"] != n:
            failures.append(
                f"{n} workers: {row['completed']} completed, "
                f"{row['cards_in_final_state']} cards in their final state"
            )
        if row["iopub_rate_mean"] >= IOPUB_RATE_MAX:
            failures.append(
                f"{n} workers: IOPub {row['iopub_rate_mean']:.0f} msg/s >= {IOPUB_RATE_MAX:.0f}"
            )
        if row["iopub_rate_peak_1s"] >= IOPUB_RATE_MAX:
            failures.append(
                f"{n} workers: IOPub {row['iopub_rate_peak_1s']} msg in its busiest second"
                f" >= {IOPUB_RATE_MAX:.0f}"
            )
        if n <= bound_at and row["rtt_ratio"] > RTT_RATIO_MAX:
            failures.append(f"{n} workers: RTT ratio {row['rtt_ratio']:.2f} > {RTT_RATIO_MAX}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = options(
        __doc__,
        out=ROOT / "benchmarks/results/kernel_load.json",
        quick="50 and 200 workers (CI size)",
    )
    parser.add_argument("--workers", type=int, nargs="*")
    parser.add_argument("--serve-emulator", action="store_true", help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.serve_emulator:
        serve_emulator()
        return 0
    sizes = ns.workers or ([50, 200] if ns.quick else [50, 200, 1000])
    rows = [measure(n) for n in sizes]
    failures = check(rows, ns.quick)
    result = {
        "benchmark": "kernel_load",
        "quick": ns.quick,
        "bounds": {
            "rtt_ratio_max": RTT_RATIO_MAX,
            "rtt_bound_up_to_workers": RTT_BOUND_AT["quick" if ns.quick else "full"],
            "iopub_rate_max": IOPUB_RATE_MAX,
        },
        "rows": rows,
        "failures": failures,
    }
    return finish("kernel_load", result, ns.out, ns.check)


if __name__ == "__main__":
    sys.exit(main())
