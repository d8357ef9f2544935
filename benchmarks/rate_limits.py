"""A large fan-out at a rate limit: the session's pacer against the SDK's retries alone.

N forks of one parent conversation (a context of S tokens, each fork writing a report of
~300 tokens) against the emulator at the documentation's example tier (50 RPM, 30,000 ITPM,
8,000 OTPM) on a clock running `scale` times faster than real time. Twice: with the pacer
(the session as it is), and with the SDK's retries alone (the same session with the pacer
taken out of its model client). For each it reports wall time against the minimum the
binding bucket allows, the 429 responses, failed tasks and cost.

The minimum: every bucket starts full and refills limit / 60 per second, so a run that
charges C to a bucket of limit L needs at least (C - L) / (L / 60) seconds before its last
request is admitted. For OTPM that request must find its whole reservation (`max_tokens`)
in the bucket, of which it is charged only its output in the end: the last admission cannot
come before (C - c + max_tokens - L) / (L / 60), c the largest output of one request. The
largest of the three (over what the run was actually charged, parent included) is the
binding one.
Times are reported in emulated seconds (real seconds x scale) and the ratio is within one run.

Prints JSON (`--out FILE` writes it too); `--quick` is the CI size, `--check` fails when a
bound (`BOUNDS`) does not hold for the paced run.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.output import finish, options
from forkagent_jupyter.emulator import Emulator, OfflineBrain, Reply, WallClock
from forkagent_jupyter.messages_api.ratelimits import (
    BUCKETS,
    EXAMPLE_TIER,
    PERIOD_SECONDS,
    RateLimit,
)
from forkagent_jupyter.messages_api.usage import Usage
from forkagent_jupyter.runtime.model.budget import BudgetedModel
from forkagent_jupyter.runtime.permissions.gate import AllowAll
from forkagent_jupyter.runtime.session.session import Session

MODEL = "claude-sonnet-5-5"
REPORT = " ".join(f"finding {i}: the column behaves as expected." for i in range(26))
FILLER = "The quick brown fox jumps over the lazy dog while the data loads. "

QUICK_TIER = RateLimit(50, 30_000, 2_000)
"""The CI size's tier: a quarter of the example's OTPM, so that 40 forks are bound by it."""
SIZES: dict[str, tuple[int, int, RateLimit, float]] = {
    # forks, context tokens, tier, clock scale (the larger, the more the session's own work
    # per fork, in real time, weighs against the emulated minimum)
    "full": (200, 20_000, EXAMPLE_TIER, 5.0),
    "quick": (40, 5_000, QUICK_TIER, 20.0),
}
MAX_TOKENS = 1024
"""Each request's max_tokens: what OTPM reserves at its start (the reports use ~300)."""

BOUNDS = {"wall_vs_minimum": 1.1, "failed_tasks": 0, "share_429": 0.02}
QUICK_WALL = 1.2
"""The quick run's wall bound (measured 1.04-1.06x on a loaded 2-core machine): its clock
runs 20x, so a real second of the session's own work at the start (the parent's turn, the
lead fork, a garbage collection) while the bucket is full is 20 emulated seconds of its
~300 s minimum."""


class ReportBrain:
    """The offline brain, with fork reports of ~300 output tokens."""

    def __init__(self) -> None:
        self.inner = OfflineBrain()

    def reply(self, request: Any) -> Reply:
        reply = self.inner.reply(request)
        if "<fork-directive>" not in json.dumps(request.get("messages", [])[-1:]):
            return reply
        return Reply(({"type": "text", "text": REPORT},), "end_turn")


def _context(tokens: int) -> str:
    return (FILLER * (tokens * 4 // len(FILLER) + 1))[: tokens * 4]


def minimum(entries: list[Any], limit: RateLimit, max_tokens: int) -> dict[str, Any]:
    """The least time (emulated s) the buckets allow for what the run was charged, up to
    its last request's admission (see the module doc)."""
    charged = {
        "requests": float(len(entries)),
        "input-tokens": float(
            sum(e.usage["input_tokens"] + e.usage["cache_creation_input_tokens"] for e in entries)
        ),
        "output-tokens": float(sum(e.usage["output_tokens"] for e in entries)),
    }
    largest = max((e.usage["output_tokens"] for e in entries), default=0)
    last = {"output-tokens": max(max_tokens - largest, 0)}  # reserved, not charged
    seconds = {}
    for kind in BUCKETS:
        cap = limit.limit(kind)
        need = charged[kind] + last.get(kind, 0) - (cap or 0)
        seconds[kind] = max(0.0, need) / (cap / PERIOD_SECONDS) if cap is not None else 0.0
    binding = max(seconds, key=lambda k: seconds[k])
    return {"charged": charged, "seconds": seconds, "binding": binding}


async def run_case(
    n: int, size: int, tier: RateLimit, scale: float, *, paced: bool
) -> dict[str, Any]:
    clock = WallClock(scale=scale)
    with (
        tempfile.TemporaryDirectory() as tmp,
        Emulator(brain=ReportBrain(), clock=clock, rate_limits={MODEL: tier}) as emu,
    ):
        session = Session(
            MODEL,
            backend="anthropic",
            api_key="bench-key",
            base_url=emu.base_url,
            workdir=Path(tmp),
            permission_policy=AllowAll(),
            auto_respond=False,
            max_tokens=MAX_TOKENS,
            transcripts=False,
            worker_namespace="shared",  # no code runs: no snapshot process per fork
        )
        session.rate_limits.period = PERIOD_SECONDS / scale
        start_emulated = clock.now()
        started = time.perf_counter()
        await session.ask("Here is the context.\n\n" + _context(size))
        if not paced:  # the SDK's retries alone: the forks' client without the pacer
            session.main.config.client = BudgetedModel(session.client, session.budget)
        tasks = [await session.fork(f"Part {i}: summarise your share.") for i in range(n)]
        await session.wait(*(t.id for t in tasks), timeout=3600)
        real = time.perf_counter() - started
        wall = clock.now() - start_emulated
        entries = emu.ledger.entries()
        requests = emu.api_requests()
        usage = Usage()
        for e in entries:
            usage = usage + Usage.from_api(e.usage)
        pacer = session.rate_limits.pacer(MODEL)
        await session.aclose()
        low = minimum(entries, tier, MAX_TOKENS)
        floor = low["seconds"][low["binding"]]
        statuses = [r.status for r in requests]
        return {
            "paced": paced,
            "wall_s": round(wall, 1),
            "real_s": round(real, 2),
            "minimum_s": round(floor, 1),
            "binding_bucket": low["binding"],
            "wall_vs_minimum": round(wall / floor, 3) if floor else None,
            "requests": len(requests),
            "responses_429": statuses.count(429),
            "share_429": round(statuses.count(429) / max(len(requests), 1), 4),
            "completed_tasks": sum(t.status == "completed" for t in tasks),
            "failed_tasks": sum(t.status == "failed" for t in tasks),
            "cost_usd": round(sum(e.cost_usd for e in entries), 4),
            "cache_read_tokens": usage.cache_read_input_tokens,
            "output_tokens": usage.output_tokens,
            "charged": low["charged"],
            "minimum_by_bucket_s": {k: round(v, 1) for k, v in low["seconds"].items()},
            "pacer_waited_requests": pacer.waited,
        }


def check(result: dict[str, Any]) -> list[str]:
    paced = result["paced"]
    failures = []
    wall_bound = QUICK_WALL if result["quick"] else BOUNDS["wall_vs_minimum"]
    ratio = paced["wall_vs_minimum"]
    if ratio is None or ratio > wall_bound:
        failures.append(f"paced wall {ratio}x the minimum > {wall_bound}")
    if paced["failed_tasks"] > BOUNDS["failed_tasks"]:
        failures.append(f"{paced['failed_tasks']} failed tasks")
    if paced["share_429"] > BOUNDS["share_429"]:
        failures.append(f"429s are {paced['share_429']:.1%} of requests > 2%")
    return failures


async def run(quick: bool) -> dict[str, Any]:
    n, size, tier, scale = SIZES["quick" if quick else "full"]
    paced = await run_case(n, size, tier, scale, paced=True)
    sdk = await run_case(n, size, tier, scale, paced=False)
    return {
        "benchmark": "rate_limits",
        "quick": quick,
        "model": MODEL,
        "forks": n,
        "context_tokens": size,
        "max_tokens": MAX_TOKENS,
        "tier": {
            "rpm": tier.requests_per_minute,
            "itpm": tier.input_tokens_per_minute,
            "otpm": tier.output_tokens_per_minute,
        },
        "clock_scale": scale,
        "bounds": {**BOUNDS, "quick_wall_vs_minimum": QUICK_WALL},
        "paced": paced,
        "sdk_retries_only": sdk,
    }


def main(argv: list[str] | None = None) -> int:
    ns = options(__doc__, quick="40 forks over a 5k-token context").parse_args(argv)
    result = asyncio.run(run(ns.quick))
    result["failures"] = check(result)
    return finish("rate_limits", result, ns.out, ns.check)


if __name__ == "__main__":
    sys.exit(main())
