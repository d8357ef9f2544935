"""A long notebook session against its context window, with and without compaction.

One parent conversation of C `%%agent` cells (full and --quick: 200) on a model whose context
window the emulator's catalog makes small (full: 60,000 tokens, cells of ~600 tokens; --quick:
20,000 tokens, cells of ~250), through the real SDK over HTTP against the strict emulator:

* with compaction (`compact_at` 0.8): every cell must complete, and every request must stay
  under compact_at of the window (prompt + max_tokens, as the API counts);
* without (`compact_at=None`): the session ends in the API's context-window error at some cell
  N < C, which the run reports;
* cost: the whole compacted session, the uncompacted one up to its failure, and the compacted
  one over the same first N cells (summary requests included); the summary requests' share of
  prompt tokens read from the cache (they fork the conversation, so they read it).

Bounds (--check), ratios and counts within the run: all C cells complete with compaction;
the uncompacted session fails before cell C with the window error; the largest request is at
most compact_at of the window; summary requests read >= 0.8 of their prompt from the cache;
the compacted session's first N cells cost at most 1.1x the uncompacted ones. The strict
emulator validates every request; the refused ones are counted (one, the last, without
compaction; none with it).

Prints JSON (`--out FILE` writes it too). `--quick` is the CI size.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import tempfile
import time
from typing import Any

from benchmarks.output import finish, options
from forkagent_jupyter.emulator import Emulator
from forkagent_jupyter.messages_api.catalog import DEFAULT_CATALOG
from forkagent_jupyter.messages_api.tokens import ByteTokenizer, count_input_tokens
from forkagent_jupyter.runtime.loop.compaction import COMPACT_REQUEST_TAG
from forkagent_jupyter.runtime.permissions.gate import AllowAll
from forkagent_jupyter.runtime.session.session import Session

MODEL = "claude-sonnet-4-6"
MAX_TOKENS = 1024
COMPACT_AT = 0.8
WINDOW_ERROR = "input length and `max_tokens` exceed context limit"
SIZES = {"full": (200, 60_000, 600), "quick": (200, 20_000, 250)}
BOUNDS = {
    "max_request_fraction": COMPACT_AT,
    "summary_cache_read_min": 0.8,
    "cost_ratio_same_cells_max": 1.1,
}
FILLER = "The analysis of column {i} continues with a look at its outliers and gaps. "


def _cell(i: int, tokens: int) -> str:
    text = f"Cell {i}: " + FILLER.format(i=i) * (tokens * 4 // len(FILLER) + 1)
    return text[: tokens * 4]


def _is_summary(body: dict[str, Any]) -> bool:
    return f"<{COMPACT_REQUEST_TAG}>" in json.dumps(body["messages"][-1])


async def run_session(cells: int, window: int, cell_tokens: int, compact: bool) -> dict[str, Any]:
    catalog = {
        **DEFAULT_CATALOG,
        MODEL: dataclasses.replace(DEFAULT_CATALOG[MODEL], context_window=window),
    }
    with Emulator(strict=True, seed=0, catalog=catalog) as emu, tempfile.TemporaryDirectory() as d:
        session = Session(
            MODEL,
            backend="anthropic",
            api_key="bench-key",
            base_url=emu.base_url,
            workdir=d,
            home=d,
            permission_policy=AllowAll(),
            auto_respond=False,
            max_tokens=MAX_TOKENS,
            context_window=window,
            compact_at=COMPACT_AT if compact else None,
        )
        start = time.perf_counter()
        completed, error, cost_at = 0, None, []
        try:
            for i in range(cells):
                turn = await session.ask(_cell(i, cell_tokens))
                if not turn.ok:
                    error = turn.error
                    break
                completed += 1
                cost_at.append(session.cost_usd)
        finally:
            await session.aclose()
        seconds = time.perf_counter() - start
        tokenizer = ByteTokenizer()
        usage = {e.request_id: e for e in emu.ledger.entries()}
        records = [r for r in emu.api_requests() if r.request_id in usage]
        summaries = [usage[r.request_id] for r in records if _is_summary(r.body)]
        sizes = [
            count_input_tokens(r.body, tokenizer) + r.body["max_tokens"]
            for r in records
            if not _is_summary(r.body)
        ]
        read = sum(e.usage["cache_read_input_tokens"] for e in summaries)
        prompt = sum(e.usage_obj.total_input_tokens for e in summaries)
        violations = len(emu.violations)  # requests the emulator refused
    return {
        "compaction": compact,
        "cells": cells,
        "completed": completed,
        "error": error,
        "window_error": bool(error and WINDOW_ERROR in error),
        "requests": len(records),
        "summary_requests": len(summaries),
        "refused_requests": violations,
        "max_request_fraction": round(max(sizes) / window, 4) if sizes else 0.0,
        "summary_cache_read_share": round(read / prompt, 4) if prompt else None,
        "summary_cost_usd": round(sum(e.cost_usd for e in summaries), 6),
        "cost_usd": round(cost_at[-1] if cost_at else 0.0, 6),
        "cost_by_cell": [round(c, 6) for c in cost_at],
        "seconds": round(seconds, 2),
    }


def check(result: dict[str, Any]) -> list[str]:
    on, off = result["with_compaction"], result["without_compaction"]
    failures = []
    if on["completed"] != on["cells"]:
        done = f"{on['completed']} of {on['cells']}"
        failures.append(f"with compaction: {done} cells ({on['error']})")
    if on["refused_requests"]:
        failures.append(f"with compaction: {on['refused_requests']} refused request(s)")
    if on["max_request_fraction"] > BOUNDS["max_request_fraction"]:
        failures.append(
            f"largest request {on['max_request_fraction']:.3f} of the window > "
            f"{BOUNDS['max_request_fraction']}"
        )
    share = on["summary_cache_read_share"]
    if on["summary_requests"] == 0 or share is None or share < BOUNDS["summary_cache_read_min"]:
        failures.append(f"summary requests read {share} of their prompt from the cache")
    if off["completed"] >= off["cells"] or not off["window_error"]:
        failures.append("without compaction the session did not end in the window error")
    ratio = result["cost_ratio_same_cells"]
    if ratio is None or ratio > BOUNDS["cost_ratio_same_cells_max"]:
        failures.append(f"cost ratio over the same cells {ratio} > 1.1")
    return failures


async def run(cells: int, window: int, cell_tokens: int) -> dict[str, Any]:
    on = await run_session(cells, window, cell_tokens, compact=True)
    off = await run_session(cells, window, cell_tokens, compact=False)
    n = off["completed"]
    same = on["cost_by_cell"][n - 1] if 0 < n <= len(on["cost_by_cell"]) else None
    ratio = round(same / off["cost_usd"], 4) if same is not None and off["cost_usd"] else None
    for row in (on, off):
        row.pop("cost_by_cell")
    return {
        "with_compaction": on,
        "without_compaction": off,
        "cells_until_window_error": n + 1 if off["window_error"] else None,
        "cost_with_compaction_same_cells_usd": same,
        "cost_ratio_same_cells": ratio,
    }


def main(argv: list[str] | None = None) -> int:
    parser = options(__doc__)
    ns = parser.parse_args(argv)
    cells, window, cell_tokens = SIZES["quick" if ns.quick else "full"]
    result: dict[str, Any] = {
        "benchmark": "long_session",
        "quick": ns.quick,
        "model": MODEL,
        "window": window,
        "cell_tokens": cell_tokens,
        "max_tokens": MAX_TOKENS,
        "compact_at": COMPACT_AT,
        "bounds": BOUNDS,
        **asyncio.run(run(cells, window, cell_tokens)),
    }
    result["failures"] = check(result)
    return finish("long_session", result, ns.out, ns.check)


if __name__ == "__main__":
    sys.exit(main())
