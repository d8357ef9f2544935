"""Batched fan-out against real-time staggered fan-out: cost, and the kernel while it runs.

Cost (emulator in this process, real SDK over HTTP, the emulator's ledger): N forks over a
shared context of S tokens (full: 1,000 forks over 20k tokens; --quick: 50 over 20k), each
answering with a short report, sent

* real-time, staggered (`Session.fan_out(directives)`: the leader writes the shared prefix,
  the siblings wait for its response to start and read it), and
* as one Message Batch (`Session.fan_out(directives, batch=True)`), in the emulator's best
  case (requests processed one after another: the first writes, the others read) and worst
  case (one wave: no request reads another's write; they still read what the parent's own
  turn cached while that is live),

each with the default pre-warm (one real-time `max_tokens: 0` request writes the shared
prefix first) and, in the worst case, without it; each with the parent's cache warm (the
fan-out follows the parent's turn) and expired (an hour later). `cost_ratio` = batch cost
(pre-warm request included) / real-time cost of the same forks; the issue's target is
<= 0.55 (`BOUNDS`), for the runs with the pre-warm.

Kernel (real IPython kernel, the emulator in its own process, its clock following real
time, the batch taking `PROCESSING_S`): the median `execute_request` round trip while
`%fork --batch --over items ...` runs and is polled, as a ratio to the same kernel's idle
median.

The forks run no code, and both sides run them with `worker_namespace="shared"`: with the
default (a process per worker from a snapshot of the kernel) a thousand forks would start a
thousand processes, which measures the compute plane, not the batch.

Prints JSON (`--out FILE` writes it too); `--quick` is the CI size; `--check` fails when a
bound does not hold.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.kernel import emulator_process, kernel, rtts
from benchmarks.output import finish, options
from forkagent_jupyter.emulator import Emulator, OfflineBrain, Reply
from forkagent_jupyter.runtime.permissions.gate import AllowAll
from forkagent_jupyter.runtime.session.session import Session

ROOT = Path(__file__).resolve().parents[1]
MODEL = "claude-sonnet-5-5"
FILLER = "The quick brown fox jumps over the lazy dog while the data loads. "
REPORT = "Scope: one label\nResult: " + " ".join(f"point {i} holds." for i in range(20))
# Bounds checked by --check. The cost bound is the 0.55 for its 1,000 forks, every row
# of a full run. With the default pre-warm (one real-time max_tokens 0 request writes the
# shared prefix at the standard price), an expired parent cache costs one full-price write
# more than the batch price: 0.51 at 1,000 forks, 0.62 at the quick run's 50, so the quick run
# binds the rows with the parent's cache warm (the fan-out right after the parent's turn).
BOUNDS = {"cost_ratio": 0.55, "kernel_rtt_ratio": 1.5}
PROCESSING_S = {"full": 10.0, "quick": 3.0}


class ReportBrain:
    """Short worker reports (~60 tokens) for fork requests; the offline brain otherwise."""

    def __init__(self) -> None:
        self.inner = OfflineBrain()

    def reply(self, request: Any) -> Reply:
        if "<fork-directive>" in json.dumps(request.get("messages", [])[-1:]):
            return Reply.text(REPORT)
        return self.inner.reply(request)


def context(tokens: int) -> str:
    return (FILLER * (tokens * 4 // len(FILLER) + 1))[: tokens * 4]


async def one_fan_out(
    n: int,
    size: int,
    *,
    batch: bool,
    warm: bool,
    concurrency: int,
    workdir: Path,
    prewarm: bool = True,
) -> dict[str, Any]:
    with Emulator(brain=ReportBrain()) as emu:
        emu.batches.options.concurrency = concurrency
        session = Session(
            MODEL,
            backend="anthropic",
            api_key="bench-key",
            base_url=emu.base_url,
            workdir=workdir,
            permission_policy=AllowAll(),
            auto_respond=False,
            transcripts=False,
            worker_namespace="shared",  # see the module doc
        )
        try:
            await session.ask("Here is the shared context.\n\n" + context(size))
            if not warm:
                emu.clock.advance(3600)  # past every TTL
            before = len(emu.ledger)
            start = time.perf_counter()
            directives = [f"Label item {i} of the context." for i in range(n)]
            fan = await session.fan_out(
                directives, batch=batch, poll_interval=0.05, prewarm=prewarm
            )
            await session.wait(*(t.id for t in fan.tasks), timeout=1200)
            wall = time.perf_counter() - start
            entries = emu.ledger.entries()[before:]
            statuses = [t.status for t in fan.tasks]
        finally:
            await session.aclose()
    return {
        "cost_usd": sum(e.cost_usd for e in entries),
        "requests": len(entries),
        "batched": sum(e.service_tier == "batch" for e in entries),
        "cache_read_tokens": sum(int(e.usage["cache_read_input_tokens"]) for e in entries),
        "cache_write_tokens": sum(int(e.usage["cache_creation_input_tokens"]) for e in entries),
        "completed": statuses.count("completed"),
        "wall_s": round(wall, 3),
    }


async def cost_rows(n: int, size: int) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for warm in (True, False):
            realtime = await one_fan_out(
                n, size, batch=False, warm=warm, concurrency=1, workdir=Path(tmp)
            )
            cases = (("best", 1, True), ("worst", n, True), ("worst, no pre-warm", n, False))
            for case, concurrency, prewarm in cases:
                batched = await one_fan_out(
                    n,
                    size,
                    batch=True,
                    warm=warm,
                    concurrency=concurrency,
                    workdir=Path(tmp),
                    prewarm=prewarm,
                )
                rows.append(
                    {
                        "forks": n,
                        "context_tokens": size,
                        "parent_cache": "warm" if warm else "expired",
                        "batch_case": case,
                        "prewarm": prewarm,
                        "realtime": realtime,
                        "batch": batched,
                        "cost_ratio": batched["cost_usd"] / realtime["cost_usd"],
                    }
                )
    return rows


# -- the kernel while a batch runs -------------------------------------------------------


def serve_emulator(processing_s: float) -> None:
    """The emulator in its own process (its work never holds the timing process's GIL)."""
    with Emulator(brain=ReportBrain()) as emu:
        emu.batches.options.processing_seconds = processing_s
        print(emu.base_url, flush=True)
        sys.stdin.read()


def kernel_rtt(n: int, processing_s: float) -> dict[str, Any]:
    settings = {"auto_respond": False, "worker_namespace": "shared"}
    with (
        emulator_process("benchmarks.batch_fanout", str(processing_s)) as base_url,
        kernel(settings, base_url=base_url, setup=[f"items = list(range({n}))"]) as client,
    ):
        idle = rtts(client, 3.0)
        start = time.monotonic()
        _, reply = client.run('%fork --batch --over items --poll 0.2 "Label item {item}."')
        assert reply["content"]["status"] == "ok", reply["content"]
        busy: list[float] = []
        while True:
            busy += rtts(client, 0.5)
            statuses = client.value("[t.status for t in __forkagent__.session.tasks]")
            if len(statuses) == n and all(s != "running" for s in statuses):
                break
            if time.monotonic() - start > 600:
                raise TimeoutError("the batch did not finish")
        wall = time.monotonic() - start
    return {
        "forks": n,
        "batch_processing_s": processing_s,
        "completed": statuses.count("completed"),
        "idle_rtt_ms_median": statistics.median(idle) * 1000,
        "busy_rtt_ms_median": statistics.median(busy) * 1000,
        "rtt_ratio": statistics.median(busy) / statistics.median(idle),
        "rtt_samples": {"idle": len(idle), "busy": len(busy)},
        "wall_s": round(wall, 2),
    }


def check(result: dict[str, Any]) -> list[str]:
    failures = []
    for row in result["cost"]:
        for side in ("realtime", "batch"):
            if row[side]["completed"] != row["forks"]:
                failures.append(f"{side}: {row[side]['completed']} of {row['forks']} completed")
        bound = row["prewarm"] and (not result["quick"] or row["parent_cache"] == "warm")
        if bound and row["cost_ratio"] > BOUNDS["cost_ratio"]:
            failures.append(
                f"cost ratio {row['cost_ratio']:.3f} > {BOUNDS['cost_ratio']} "
                f"({row['parent_cache']} parent cache, {row['batch_case']} case)"
            )
    k = result["kernel"]
    if k["completed"] != k["forks"]:
        failures.append(f"kernel: {k['completed']} of {k['forks']} forks completed")
    if k["rtt_ratio"] > BOUNDS["kernel_rtt_ratio"]:
        failures.append(f"kernel RTT ratio {k['rtt_ratio']:.2f} > {BOUNDS['kernel_rtt_ratio']}")
    return failures


def main(argv: list[str] | None = None) -> int:
    import asyncio

    parser = options(__doc__)
    parser.add_argument("--forks", type=int, help="forks in the cost comparison")
    parser.add_argument("--serve-emulator", type=float, help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.serve_emulator is not None:
        serve_emulator(ns.serve_emulator)
        return 0
    size = "quick" if ns.quick else "full"
    n = ns.forks or (50 if ns.quick else 1000)
    result: dict[str, Any] = {
        "benchmark": "batch_fanout",
        "quick": ns.quick,
        "model": MODEL,
        "bounds": BOUNDS,
        "cost": asyncio.run(cost_rows(n, 20_000)),
        "kernel": kernel_rtt(20 if ns.quick else 200, PROCESSING_S[size]),
    }
    result["failures"] = check(result)
    return finish("batch_fanout", result, ns.out, ns.check)


if __name__ == "__main__":
    sys.exit(main())
