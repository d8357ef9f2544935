"""Fan-outs under mid-stream faults: how many model turns still fail, against the prediction.

A parent conversation forks N workers (100 by default, `--quick` too) whose replies stream
from the emulator while it breaks a share `p` (30%) of all streams mid-way, at random with a
seed: a dropped connection, a stream cut short before message_stop, an `overloaded_error` or
`api_error` event. Each worker makes two model requests (a Python call, then its report).
The same fan-out runs with `stream_retries=0` and with the default retry count.

A model turn (one logical request, however many attempts it took) fails when every attempt
broke: the prediction is p^(retries+1). Measured on the emulator's side: requests grouped by
their exact bytes (a retry is byte-identical), a turn succeeded when one attempt completed.
It also counts the parent's notifications: each worker must report exactly once (0 lost,
0 duplicated), whether it completed or failed.

Prints JSON (`--out FILE` writes it too); `--check` fails when a bound is broken. The full
size repeats the fan-out with more seeds.
"""

from __future__ import annotations

import asyncio
import math
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.output import finish, options
from forkagent_jupyter.emulator import Emulator, Fault
from forkagent_jupyter.runtime.model.retry import DEFAULT_STREAM_RETRIES
from forkagent_jupyter.runtime.permissions.gate import AllowAll
from forkagent_jupyter.runtime.session.session import Session

MODEL = "claude-sonnet-5-5"
RATE = 0.3
FORKS = 100
RETRY_DELAY = 0.02  # seconds before the first retry (the default is 0.5; the soak needs speed)
CONTEXT = "Context for the workers:\n" + "notes about the data set. " * 200
FAULTS = (
    Fault.dropped(after=1),
    Fault.truncated(after=1),
    Fault.stream_error(after=1, error_type="overloaded_error", message="Overloaded"),
    Fault.stream_error(after=1, error_type="api_error", message="Internal server error"),
)


def _kind(fault: Fault) -> str:
    return {"mid": "dropped", "end": "truncated"}.get(fault.drop or "", fault.stream_error_type)


async def fan_out(retries: int, forks: int, seed: int, workdir: Path) -> dict[str, Any]:
    with Emulator(seed=seed) as emulator:
        session = Session(
            MODEL,
            backend="anthropic",
            api_key="bench-key",
            base_url=emulator.base_url,
            workdir=workdir,
            home=workdir,
            permission_policy=AllowAll(),
            auto_respond=False,
            worker_namespace="shared",
            transcripts=False,
            stream_retries=retries,
            stream_retry_delay=RETRY_DELAY,
        )
        try:
            await session.ask(CONTEXT)  # the parent's turn, without faults
            before = len(emulator.api_requests())
            emulator.faults.at_rate(RATE, *FAULTS, seed=seed)
            start = time.perf_counter()
            tasks = [await session.fork(f"Part {i}: `py: {i} * {i}`") for i in range(forks)]
            await session.wait(*(t.id for t in tasks), timeout=600)
            wall = time.perf_counter() - start
            notified = Counter(c.task_id for c in session.queue.pending("main"))
        finally:
            await session.aclose()
        complete = {e.request_id for e in emulator.ledger.entries() if e.complete}
        turns: dict[bytes, bool] = {}
        attempts = 0
        for rec in emulator.api_requests()[before:]:
            attempts += 1
            turns[rec.raw] = turns.get(rec.raw, False) or rec.request_id in complete
        failed_turns = sum(1 for ok in turns.values() if not ok)
        ids = [t.id for t in tasks]
        statuses = Counter(t.status for t in tasks)
        return {
            "retries": retries,
            "seed": seed,
            "forks": forks,
            "turns": len(turns),
            "failed_turns": failed_turns,
            "attempts": attempts,
            "faults_injected": emulator.faults.injected,
            "retries_taken": sum(t.retries for t in tasks),
            "tasks": dict(statuses),
            "notifications_lost": sum(1 for i in ids if notified[i] == 0),
            "notifications_duplicated": sum(max(notified[i] - 1, 0) for i in ids),
            "notifications_foreign": sum(n for i, n in notified.items() if i not in set(ids)),
            "wall_s": wall,
        }


def _summary(rows: list[dict[str, Any]], retries: int) -> dict[str, Any]:
    mine = [r for r in rows if r["retries"] == retries]
    turns = sum(r["turns"] for r in mine)
    failed = sum(r["failed_turns"] for r in mine)
    predicted = RATE ** (retries + 1)
    sigma = math.sqrt(predicted * (1 - predicted) / turns) if turns else 0.0
    forks = sum(r["forks"] for r in mine)
    failed_forks = sum(r["tasks"].get("failed", 0) for r in mine)
    # a worker fails when one of its two turns does
    fork_predicted = 1 - (1 - predicted) ** 2
    return {
        "retries": retries,
        "turns": turns,
        "failed_turns": failed,
        "failed_share": failed / turns if turns else 0.0,
        "predicted_share": predicted,
        "sigma": sigma,
        "forks": forks,
        "failed_forks": failed_forks,
        "failed_fork_share": failed_forks / forks if forks else 0.0,
        "predicted_fork_share": fork_predicted,
        "attempts": sum(r["attempts"] for r in mine),
        "faults_injected": sum(r["faults_injected"] for r in mine),
        "fault_share": sum(r["faults_injected"] for r in mine)
        / max(sum(r["attempts"] for r in mine), 1),
        "notifications_lost": sum(r["notifications_lost"] for r in mine),
        "notifications_duplicated": sum(r["notifications_duplicated"] for r in mine),
        "notifications_foreign": sum(r["notifications_foreign"] for r in mine),
        "wall_s": sum(r["wall_s"] for r in mine),
    }


async def run(quick: bool) -> dict[str, Any]:
    seeds = [1] if quick else [1, 2, 3, 4, 5]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for retries in (0, DEFAULT_STREAM_RETRIES):
            for seed in seeds:
                rows.append(await fan_out(retries, FORKS, seed, Path(tmp)))
    return {
        "benchmark": "stream_faults",
        "quick": quick,
        "model": MODEL,
        "fault_rate": RATE,
        "fault_kinds": [_kind(f) for f in FAULTS],
        "retry_delay_s": RETRY_DELAY,
        "rows": rows,
        "summary": [_summary(rows, r) for r in (0, DEFAULT_STREAM_RETRIES)],
    }


# Bounds checked by `--check`: the failed share of turns may exceed its prediction
# p^(retries+1) by at most SIGMAS standard errors of a binomial share plus SLACK_TURNS turns
# (counting noise); with no retries it must also not fall far below it (the faults were
# really injected); no notification is lost, duplicated or foreign.
SIGMAS = 4.0
SLACK_TURNS = 2


def check(result: dict[str, Any]) -> list[str]:
    failures = []
    for s in result["summary"]:
        turns = max(s["turns"], 1)
        margin = SIGMAS * s["sigma"] + SLACK_TURNS / turns
        label = f"retries={s['retries']}"
        if s["failed_share"] > s["predicted_share"] + margin:
            failures.append(
                f"{label}: failed share {s['failed_share']:.4f} > predicted "
                f"{s['predicted_share']:.4f} + {margin:.4f}"
            )
        if s["retries"] == 0 and s["failed_share"] < s["predicted_share"] - margin:
            failures.append(
                f"{label}: failed share {s['failed_share']:.4f} far below the fault rate "
                f"{s['predicted_share']:.4f}: faults not injected?"
            )
        for key in ("notifications_lost", "notifications_duplicated", "notifications_foreign"):
            if s[key]:
                failures.append(f"{label}: {s[key]} {key.replace('_', ' ')}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = options(__doc__)
    ns = parser.parse_args(argv)
    result = asyncio.run(run(ns.quick))
    result["failures"] = check(result)
    result["checked"] = ns.check
    return finish("stream_faults", result, ns.out, ns.check)


if __name__ == "__main__":
    sys.exit(main())
