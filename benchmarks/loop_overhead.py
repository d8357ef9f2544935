"""The tool-use loop's own overhead per turn: wall time of a turn minus the time spent inside
the model client (request building + model reply), over histories of growing length.

Runs the offline model in process, so "model time" is the emulator-grade accounting and reply
generation; the rest (event plumbing, tool dispatch, permission checks, history upkeep) is
what the loop costs. Prints JSON; `--quick` for a CI-sized run.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from benchmarks.output import finish, options
from forkagent_jupyter.runtime.events import ModelEvent
from forkagent_jupyter.runtime.model.client import ModelClient, ModelRequest
from forkagent_jupyter.runtime.model.offline import OfflineModel
from forkagent_jupyter.runtime.permissions.gate import AllowAll
from forkagent_jupyter.runtime.session.session import Session


class TimedModel:
    """Wraps a ModelClient and adds up the time spent inside it."""

    def __init__(self, inner: ModelClient) -> None:
        self.inner = inner
        self.name = inner.name
        self.seconds = 0.0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        start = time.perf_counter()
        async for event in self.inner.stream(request):
            self.seconds += time.perf_counter() - start
            yield event
            start = time.perf_counter()
        self.seconds += time.perf_counter() - start

    async def aclose(self) -> None:
        await self.inner.aclose()


async def measure(history_turns: int, samples: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        model = TimedModel(OfflineModel())
        session = Session(client=model, workdir=Path(tmp), permission_policy=AllowAll())
        for i in range(history_turns):
            await session.ask(f"filler turn {i}: nothing to run here")
        overheads, totals = [], []
        for i in range(samples):
            model.seconds = 0.0
            start = time.perf_counter()
            turn = await session.ask(f"step {i}\n\n```python\n{i} + 1\n```")
            total = time.perf_counter() - start
            assert turn.stop_reason == "end_turn", turn.error
            totals.append(total)
            overheads.append(total - model.seconds)
        return {
            "history_messages": len(session.messages),
            "turn_ms_median": statistics.median(totals) * 1000,
            "overhead_ms_median": statistics.median(overheads) * 1000,
            "overhead_share": statistics.median(
                o / t for o, t in zip(overheads, totals, strict=True)
            ),
        }


async def run(quick: bool) -> dict[str, object]:
    sizes = [0, 50] if quick else [0, 50, 250, 1000]
    samples = 5 if quick else 20
    rows = [await measure(n, samples) for n in sizes]
    return {"benchmark": "loop_overhead", "quick": quick, "samples": samples, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ns = options(__doc__).parse_args(argv)
    result = asyncio.run(run(ns.quick))
    result["failures"] = []  # reported, no bounds
    return finish("loop_overhead", result, ns.out, ns.check)


if __name__ == "__main__":
    sys.exit(main())
