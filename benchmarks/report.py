"""The Markdown tables of a combined benchmark report (see `benchmarks/__main__.py`)."""

from __future__ import annotations

from typing import Any


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def _fork_cache(r: dict[str, Any]) -> list[str]:
    out = ["### Fork cache efficiency and cost (`fork_cache`)", ""]
    out += [
        "Cache read of the forks' first requests against the theoretical maximum, and cost "
        "against naive (no cache) and unstaggered (all forks sent at once) fan-out.",
        "",
    ]
    out += _table(
        [
            "forks",
            "context tokens",
            "parent cache",
            "read / max",
            "cost vs naive",
            "vs unstaggered",
        ],
        [
            [
                row["forks"],
                f"{row['context_tokens']:,}",
                row["parent_cache"],
                f"{row['read_ratio']:.3f}",
                f"{row['cost_vs_naive']:.3f}",
                f"{row['cost_vs_unstaggered']:.3f}",
            ]
            for row in r.get("rows", [])
        ],
    )
    wall = r.get("wall_time")
    if wall:
        out += [
            f"Fan-out wall time with emulator latency on: {wall['forks']} forks "
            f"{wall['many_forks_s']:.2f} s vs one fork {wall['one_fork_s']:.2f} s "
            f"(ratio **{wall['ratio']:.2f}**).",
            "",
        ]
    c = r.get("construction")
    if c:
        out += [
            f"Fork construction: {c['forks']} forks of a {c['history_bytes'] / 1e6:.1f} MB "
            f"history in **{c['build_ms']:.1f} ms**, **{c['added_mb']:.2f} MB** added "
            "(histories shared, not copied).",
            "",
        ]
    return out


def _kernel_load(r: dict[str, Any]) -> list[str]:
    out = ["### Kernel responsiveness and widget message rate (`kernel_load`)", ""]
    out += [
        "A real kernel with N workers streaming from the emulator: median `execute_request` "
        "round trip against the same kernel idle, IOPub messages per second as the server's "
        "rate limiter counts them, and cards whose final state reached the client.",
        "",
    ]
    out += _table(
        [
            "workers",
            "idle RTT ms",
            "busy RTT ms",
            "RTT ratio",
            "IOPub msg/s (mean)",
            "busiest second",
            "cards final",
            "wall s",
        ],
        [
            [
                row["workers"],
                f"{row['idle_rtt_ms_median']:.1f}",
                f"{row['busy_rtt_ms_median']:.1f}",
                f"**{row['rtt_ratio']:.2f}**",
                f"**{row['iopub_rate_mean']:.0f}**",
                row["iopub_rate_peak_1s"],
                f"{row['cards_in_final_state']}/{row['workers']}",
                f"{row['wall_s']:.1f}",
            ]
            for row in r.get("rows", [])
        ],
    )
    return out


def _compute_load(r: dict[str, Any]) -> list[str]:
    out = ["### Workers that compute (`compute_load`)", ""]
    rtt, par, stop = r["rtt"], r["parallel"], r["stop"]
    snap, fit, b = r["snapshot"], r["penguins"], r["bounds"]
    out += [
        "A real kernel whose workers burn CPU in their Python (each bound from the issue; "
        "ratios within this run).",
        "",
    ]
    out += _table(
        ["measure", "value", "bound"],
        [
            [
                "`execute_request` RTT while 2 workers compute, vs idle",
                f"**{rtt['isolated_rtt_ratio']:.2f}x** ({rtt['idle_rtt_ms_median']:.1f} -> "
                f"{rtt['isolated_rtt_ms_median']:.1f} ms)",
                f"<= {b['rtt_ratio_max']}x",
            ],
            *(
                [
                    [
                        "  the same sampled from the `%fork` on (the launch), vs idle",
                        f"**{rtt['launch_rtt_ratio']:.2f}x**, "
                        f"{rtt['launch_over_computing']:.2f}x the computing workers'",
                        f"<= {b['launch_rtt_ratio_max']}x idle (or the computing workers', "
                        "if above)",
                    ]
                ]
                if "launch_rtt_ratio" in rtt  # results of before it was measured
                else []
            ),
            [
                "  the same with `--shared` workers (threads in the kernel)",
                f"{rtt['shared_rtt_ratio']:.2f}x",
                "reported",
            ],
            [
                "wall time of 2 computing workers vs 1, over 2 plain processes vs 1",
                f"**{par['wall_2_ratio']:.2f}x**, {par['wall_2_over_floor']:.2f}x the floor "
                f"({par['floor_2_ratio']:.2f}x)",
                f"<= {b['wall_2_over_floor_max']}x the floor",
            ],
            [
                "wall time of 4 computing workers vs 1, over 4 plain processes vs 1",
                f"**{par['wall_4_ratio']:.2f}x**, {par['wall_4_over_floor']:.2f}x the floor "
                f"({par['floor_4_ratio']:.2f}x)",
                f"<= {b['wall_4_over_floor_max']}x the floor",
            ],
            [
                "`%stop` of a computing worker to `killed`",
                f"**{stop['stop_s']:.3f} s**",
                f"<= {b['stop_s_max']} s",
            ],
            [
                f"`%fork` to the worker's first statement ({snap['frame_mb']} MB DataFrame)",
                f"**{snap['first_statement_s'] * 1000:.0f} ms**",
                f"<= {b['first_statement_s_max'] * 1000:.0f} ms",
            ],
            [
                "memory of the kernel's process tree (summed PSS) after the fork, vs before",
                f"**{snap['memory_growth_after_fork']:+.1%}**",
                f"< {b['memory_growth_max']:.0%}",
            ],
            [
                "  after the worker read the whole frame",
                f"{snap['memory_growth_after_read']:+.1%}",
                "reported",
            ],
            [
                "4 penguins model fits in workers vs the same as `--shared` (serial)",
                f"**{fit['ratio']:.2f}x** ({fit['isolated_s']:.1f} s vs {fit['shared_s']:.1f} s)",
                "reported (BLAS threads: 0.52-0.76x across runs)",
            ],
        ],
    )
    return out


def _stream_faults(r: dict[str, Any]) -> list[str]:
    out = ["### Fan-outs under mid-stream faults (`stream_faults`)", ""]
    kinds = ", ".join(r.get("fault_kinds", []))
    out += [
        f"{len({row['seed'] for row in r['rows']})} fan-out(s) of {r['rows'][0]['forks']} forks "
        f"(two model turns each) per setting while {r['fault_rate']:.0%} of "
        f"all response streams break mid-way ({kinds}); a turn fails when every attempt "
        "broke, predicted p^(retries+1).",
        "",
    ]
    out += _table(
        [
            "stream retries",
            "turns",
            "failed turns",
            "failed share",
            "predicted",
            "failed workers",
            "faults injected",
            "notifications lost / duplicated",
        ],
        [
            [
                s["retries"],
                s["turns"],
                s["failed_turns"],
                f"**{s['failed_share']:.4f}**",
                f"{s['predicted_share']:.4f}",
                f"{s['failed_forks']}/{s['forks']}",
                f"{s['faults_injected']}/{s['attempts']} attempts",
                f"**{s['notifications_lost']} / {s['notifications_duplicated']}**",
            ]
            for s in r.get("summary", [])
        ],
    )
    return out


def _loop_overhead(r: dict[str, Any]) -> list[str]:
    out = ["### Agent loop overhead (`loop_overhead`)", ""]
    out += _table(
        ["history messages", "turn ms (median)", "overhead ms", "overhead share"],
        [
            [
                row["history_messages"],
                f"{row['turn_ms_median']:.1f}",
                f"{row['overhead_ms_median']:.2f}",
                f"{row['overhead_share']:.1%}",
            ]
            for row in r.get("rows", [])
        ],
    )
    return out


def _emulator(r: dict[str, Any]) -> list[str]:
    out = ["### Emulator throughput (`emulator_throughput`)", ""]
    out += _table(
        ["response", "clients", "requests", "req/s", "p50 ms", "p95 ms"],
        [
            [
                "SSE stream" if row["stream"] else "JSON",
                row["clients"],
                row["requests"],
                row["requests_per_s"],
                row["latency_p50_ms"],
                row["latency_p95_ms"],
            ]
            for row in r.get("results", [])
        ],
    )
    return out


def _dask_fanout(r: dict[str, Any]) -> list[str]:
    out = ["### Workers on a Dask LocalCluster (`dask_fanout`)", ""]
    b = r["bounds"]
    for label, c in (("local cluster", r.get("local_cluster")), ("other", r.get("other_cluster"))):
        if not c:
            continue
        f, calls, ship = c["fan_out"], c["calls"], c["shipping"]
        out += [f"{label}:", ""]
        out += _table(
            ["measure", "value", "bound"],
            [
                [
                    "8 workers vs 1 (same CPU each)",
                    f"**{f['wall_8_ratio']:.2f}x**",
                    f"<= {b['wall_8_max']}x",
                ],
                [
                    "kernel RTT while 8 compute, vs idle",
                    f"**{f['rtt_ratio']:.2f}x**",
                    f"<= {b['rtt_ratio_max']}x",
                ],
                [
                    "1-line call, cluster minus local worker",
                    f"**{calls['overhead_ms']:.1f} ms** ({calls['dask_call_ms']:.1f} vs "
                    f"{calls['local_call_ms']:.1f})",
                    f"< {b['call_overhead_ms_max']:.0f} ms",
                ],
                [
                    f"{ship['frame_mb']:.0f} MB frame used by 8 siblings: bytes shipped / size",
                    f"**{ship['shipped_ratio']:.2f}x** ({ship['cluster_copies']} held)",
                    f"<= {b['ship_max']}x",
                ],
                ["`%stop` to `killed`", f"{c['stop']['stop_s']:.3f} s", "reported"],
            ],
        )
    return out


def _batch_fanout(r: dict[str, Any]) -> list[str]:
    out = ["### Batched against real-time staggered fan-out (`batch_fanout`)", ""]
    out += _table(
        ["forks", "context tokens", "parent cache", "batch order", "batch / real-time cost"],
        [
            [
                row["forks"],
                f"{row['context_tokens']:,}",
                row["parent_cache"],
                row["batch_case"],
                f"{row['cost_ratio']:.3f}",
            ]
            for row in r.get("cost", [])
        ],
    )
    k = r.get("kernel")
    if k:
        out += [
            f"Kernel round trip while a batch of {k['forks']} forks runs: "
            f"{k['rtt_ratio']:.2f}x idle (median {k['busy_rtt_ms_median']:.1f} ms).",
            "",
        ]
    return out


def _long_session(r: dict[str, Any]) -> list[str]:
    out = ["### A long session against its context window (`long_session`)", ""]
    rows = []
    for key in ("with_compaction", "without_compaction"):
        row = r.get(key)
        if not row:
            continue
        share = row["summary_cache_read_share"]
        rows.append(
            [
                "on" if row["compaction"] else "off",
                f"{row['completed']} / {row['cells']}",
                row["summary_requests"],
                f"{row['max_request_fraction']:.2f}",
                f"{share:.2f}" if share is not None else "-",
                f"${row['cost_usd']:.4f}",
            ]
        )
    out += _table(
        [
            "compaction",
            "cells completed",
            "summaries",
            "largest request / window",
            "summary cache read",
            "cost",
        ],
        rows,
    )
    ratio = r.get("cost_ratio_same_cells")
    if ratio is not None:
        out += [
            f"Window {r['window']:,} tokens, cells of ~{r['cell_tokens']} tokens, compact_at "
            f"{r['compact_at']}: without compaction the window error came at cell "
            f"{r['cells_until_window_error']}; over those cells the compacted session cost "
            f"{ratio:.2f}x.",
            "",
        ]
    return out


def _resume_read(r: dict[str, Any]) -> list[str]:
    out = ["### The loop while an agent is resumed from its transcript (`resume_read`)", ""]
    rows = [
        [label, f"{r[key]['seconds'] * 1000:.0f} ms", f"{r[key]['longest_stall_s'] * 1000:.0f} ms"]
        for label, key in (("`load` on the loop", "load_on_loop"), ("`await aload`", "aload"))
        if key in r
    ]
    out += _table(["read", "wall time", "longest loop stall"], rows)
    if r.get("stall_ratio") is not None:
        out += [
            f"{r['messages']:,} messages ({r['transcript_bytes'] / 1e6:.1f} MB): the stall "
            f"with the read on a thread is {r['stall_ratio']:.2f} of the stall on the loop.",
            "",
        ]
    return out


def _comm_flood(r: dict[str, Any]) -> list[str]:
    out = ["### The kernel after a flood of junk on the comm (`comm_flood`)", ""]
    rows = [
        [
            label,
            f"{r[key]['messages']:,}",
            f"{r[key]['send_s']:.2f} s",
            f"{r[key]['answer_after_flood_s']:.2f} s",
            f"{r[key]['answer_vs_send']:.2f}",
            f"{r[key]['dropped']:,}",
        ]
        for label, key in (("at the door", "door"), ("in the handler", "handler"))
        if key in r
    ]
    out += _table(
        ["junk dropped", "messages", "sent in", "cell answered after", "ratio", "counted"], rows
    )
    if r.get("handler_vs_door") is not None:
        out += [
            f"Idle round trip {r['idle_rtt_ms_median']:.1f} ms; dropped in the handler, the "
            f"answer waited {r['handler_vs_door']:.1f}x as long as with the door.",
            "",
        ]
    return out


def _rate_limits(r: dict[str, Any]) -> list[str]:
    t = r["tier"]
    out = ["### A fan-out at a rate limit: paced vs the SDK's retries alone (`rate_limits`)", ""]
    out += [
        f"{r['forks']} forks over a {r['context_tokens']:,}-token context, max_tokens "
        f"{r['max_tokens']}, at {t['rpm']} RPM / {t['itpm']:,} ITPM / {t['otpm']:,} OTPM "
        f"(emulator clock x{r['clock_scale']:g}; times in emulated seconds).",
        "",
    ]
    rows = []
    for label, key in (("paced", "paced"), ("SDK retries alone", "sdk_retries_only")):
        c = r[key]
        ratio = c["wall_vs_minimum"]
        rows.append(
            [
                label,
                f"{c['wall_s']:.0f} s",
                f"{c['minimum_s']:.0f} s ({c['binding_bucket']})",
                f"{ratio:.3f}" if ratio is not None else "-",
                f"{c['responses_429']} of {c['requests']}",
                f"{c['failed_tasks']} of {r['forks']}",
                f"${c['cost_usd']:.3f}",
            ]
        )
    out += _table(["", "wall", "minimum", "wall / minimum", "429s", "failed tasks", "cost"], rows)
    return out


def _browser_fanout(r: dict[str, Any]) -> list[str]:
    out = ["### A large fan-out in JupyterLab in Chromium (`browser_fanout`)", ""]
    if r.get("skipped"):
        return [*out, f"Skipped: {r['skipped']}.", ""]
    out += [
        "One cell forks N workers (offline model, each sleeps 2 s and prints; 16 at a time); "
        "the page's main thread is measured with the long-task observer (tasks over 50 ms) "
        "from the run until all N show completed on the page.",
        "",
    ]
    out += _table(
        [
            "N",
            "all completed on the page",
            "after the kernel's last",
            "long tasks",
            "blocked",
            "worst task",
            "slowest click",
            "DOM elements",
            "JS heap",
            "notification cells",
        ],
        [
            [
                row["workers"],
                f"{row['completed_s']:.1f} s",
                f"{row['lag_s']:.1f} s" if row.get("lag_s") is not None else "?",
                row["long_tasks"],
                f"{row['blocked_s']:.1f} s ({row['blocked_share']:.0%})",
                f"{row['worst_ms']:,} ms",
                f"{row['click_ms']:,} ms",
                f"{row['dom_nodes']:,}",
                f"{row['js_heap_mb']:.0f} MB",
                row["notification_cells"],
            ]
            for row in r.get("rows", [])
        ],
    )
    return out


SECTIONS = {
    "browser_fanout": _browser_fanout,
    "dask_fanout": _dask_fanout,
    "fork_cache": _fork_cache,
    "kernel_load": _kernel_load,
    "compute_load": _compute_load,
    "stream_faults": _stream_faults,
    "loop_overhead": _loop_overhead,
    "emulator_throughput": _emulator,
    "batch_fanout": _batch_fanout,
    "long_session": _long_session,
    "resume_read": _resume_read,
    "rate_limits": _rate_limits,
    "comm_flood": _comm_flood,
}


def _failures(r: dict[str, Any]) -> list[str]:
    return list(r.get("failures", []))


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    size = "CI size (`--quick`)" if report["quick"] else "full size"
    out = [
        f"## Benchmark results ({size}, {report['date']})",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, {m['os']}.",
        "",
    ]
    for name, r in report["benchmarks"].items():
        if r.get("exit_code") and not r.get("benchmark"):
            out += [f"### `{name}`: did not finish (exit {r['exit_code']})", ""]
            continue
        out += SECTIONS[name](r)
        broken = _failures(r)
        if broken:
            out += ["Bounds broken: " + "; ".join(broken), ""]
        if r.get("unjudged"):
            out += [f"Not judged: {r['unjudged']}.", ""]
    return "\n".join(out)
