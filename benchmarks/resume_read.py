"""The kernel's event loop while an agent is resumed from a long transcript.

Resuming an agent of an earlier session (`%send NAME ...` after a restart, `%notifications`)
reads its transcript back: the records parsed, the history replayed and repaired. One agent's
transcript of M messages (full: 20,000 of ~2 KB, 42 MB; --quick: 10,000) is written to a transcript
store, then read back twice while a ticker on the same loop wakes every 5 ms, as the kernel's
loop must (workers' streams, widget clicks, the next cell):

* `load` called on the loop: the blocking read, as the runtime did it before it read on threads;
* `await aload`: what the runtime does now (the read on a thread).

Reported per mode: the read's wall time and the longest gap between two ticks beyond the 5 ms
asked for (the loop's longest stall). Bound (--check), a ratio within the run: the longest
stall with `aload` is at most 0.75 of the stall with `load` (a read on the loop gives 1.0).
Measured, the stall with `aload` is either a GIL switch interval (~5 ms: the reading thread
shares the GIL) or, when the thousands of records it builds set off a full garbage
collection, that collection (40-90 ms: it stops every thread), whichever thread allocates
at the time. Both reads must return the same history.

Prints JSON (`--out FILE` writes it too). `--quick` is the CI size.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.output import finish, options
from forkagent_jupyter.runtime.transcripts.store import AgentMeta, LoadedTranscript, TranscriptStore

SIZES = {"full": 20_000, "quick": 10_000}
TICK = 0.005
BOUNDS = {"stall_ratio_max": 0.75}
AGENT = "a0123456789abcdef"
TEXT = "The column's outliers sit above the 99th percentile; the gaps follow the holidays. "


def write_transcript(root: Path, messages: int) -> int:
    """An agent's transcript of `messages` messages (alternating user and assistant); its size."""
    store = TranscriptStore(root, "earlier")
    transcript = store.open(AgentMeta(agent_id=AGENT, kind="fork", name="keeper"))
    body = TEXT * 24  # ~2 KB
    for i in range(messages):
        role = "user" if i % 2 == 0 else "assistant"
        transcript.append_message({"role": role, "content": [{"type": "text", "text": body}]})
    store.flush()
    store.close()
    store.flush()
    return transcript.path.stat().st_size


async def measure(read: Callable[[], Awaitable[LoadedTranscript]]) -> tuple[Any, float, float]:
    """(what `read` returned, its wall time, the longest stall of the loop meanwhile)."""
    stall = 0.0
    done = False

    async def ticker() -> None:
        nonlocal stall
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(TICK)
            now = time.perf_counter()
            stall = max(stall, now - last - TICK)
            last = now

    ticking = asyncio.ensure_future(ticker())
    await asyncio.sleep(TICK * 4)  # the ticker runs before the read starts
    start = time.perf_counter()
    loaded = await read()
    seconds = time.perf_counter() - start
    await asyncio.sleep(TICK * 2)  # the tick after the read counts
    done = True
    await ticking
    return loaded, seconds, stall


async def run(messages: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        size = await asyncio.to_thread(write_transcript, root, messages)
        store = TranscriptStore(root, "now")

        async def blocking() -> LoadedTranscript:
            return store.load(AGENT)

        on_loop, loop_s, loop_stall = await measure(blocking)
        threaded, thread_s, thread_stall = await measure(lambda: store.aload(AGENT))
        await store.aclose()
    ratio = round(thread_stall / loop_stall, 4) if loop_stall else None
    return {
        "messages": messages,
        "transcript_bytes": size,
        "same_history": on_loop.messages == threaded.messages,
        "load_on_loop": {"seconds": round(loop_s, 4), "longest_stall_s": round(loop_stall, 4)},
        "aload": {"seconds": round(thread_s, 4), "longest_stall_s": round(thread_stall, 4)},
        "stall_ratio": ratio,
    }


def check(result: dict[str, Any]) -> list[str]:
    failures = []
    if not result["same_history"]:
        failures.append("load and aload returned different histories")
    ratio = result["stall_ratio"]
    if ratio is None or ratio > BOUNDS["stall_ratio_max"]:
        most = BOUNDS["stall_ratio_max"]
        failures.append(f"stall with aload / stall with load = {ratio} > {most}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = options(__doc__)
    ns = parser.parse_args(argv)
    messages = SIZES["quick" if ns.quick else "full"]
    result: dict[str, Any] = {
        "benchmark": "resume_read",
        "quick": ns.quick,
        "tick_s": TICK,
        "bounds": BOUNDS,
        **asyncio.run(run(messages)),
    }
    result["failures"] = check(result)
    return finish("resume_read", result, ns.out, ns.check)


if __name__ == "__main__":
    sys.exit(main())
