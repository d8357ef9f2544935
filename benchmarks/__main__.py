"""Run every benchmark against the emulator and write one report.

``python -m benchmarks [--quick] [--check] [--out FILE] [--markdown FILE]`` (or
``forkagent bench``) runs each benchmark in its own process, then writes the combined JSON
(default benchmarks/results.json) and a Markdown table (default benchmarks/results.md) with
the machine it ran on; a full run also refreshes benchmarks/results/<name>.json. ``--quick``
is the CI size; ``--check`` fails when a bound is broken.

The bounds are stated where they are measured (``fork_cache.BOUNDS``, ``compute_load.BOUNDS``,
``kernel_load.RTT_RATIO_MAX``, ``stream_faults.SIGMAS``, ``batch_fanout.BOUNDS``,
``long_session.BOUNDS``, ``resume_read.BOUNDS``, ``rate_limits.BOUNDS``,
``comm_flood.BOUNDS``,
``browser_fanout.BOUNDS`` and friends) and
collected here; every bound is a ratio or a count within one run, never an absolute time of
this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .report import markdown

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks/results"

# name -> (has its own --check, extra arguments)
BENCHMARKS: dict[str, tuple[bool, list[str]]] = {
    "fork_cache": (True, []),
    "kernel_load": (True, []),
    "compute_load": (True, []),
    "dask_fanout": (False, []),  # reported; its bounds are checked by its own --check
    "stream_faults": (True, []),
    "loop_overhead": (False, []),
    "emulator_throughput": (False, []),
    "batch_fanout": (True, []),
    "long_session": (True, []),
    "resume_read": (True, []),
    "rate_limits": (True, []),
    "browser_fanout": (True, []),
    "comm_flood": (True, []),
}


CPU_SHARE = {"compute_load", "kernel_load", "browser_fanout", "comm_flood"}
"""Benchmarks whose bounds are shares of the CPU (a kernel's round trip beside computing
workers, parallel wall times, the first statement of a fork): they hold on a machine that
gives them its cores, and measure the other work where something else takes them."""
BUSY_BELOW = 0.75
"""The share of a core a spinning process gets, one per core, below which the machine is busy
with other work: a CPU-share bound broken then is reported, not judged."""

_SPIN = (
    "import time\n"
    "wall, cpu = time.monotonic(), time.process_time()\n"
    "while time.monotonic() - wall < 0.5:\n"
    "    pass\n"
    "print((time.process_time() - cpu) / (time.monotonic() - wall))\n"
)


def cpu_available() -> float:
    """The share of a core each of `cores` spinning processes gets for half a second: about
    1.0 on a machine that runs nothing else, 0.5 beside two CPU burners on two cores."""
    cores = os.cpu_count() or 1
    spinners = [
        subprocess.Popen([sys.executable, "-c", _SPIN], stdout=subprocess.PIPE, text=True)
        for _ in range(cores)
    ]
    shares = [float(p.communicate()[0] or 0) for p in spinners]
    return min(shares)


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "os": platform.platform(),
    }


def run_one(name: str, quick: bool, check: bool) -> dict[str, Any]:
    """Run one benchmark in a fresh process; its JSON plus how it ended."""
    own_check, extra = BENCHMARKS[name]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{name}.json"
        args = [sys.executable, "-m", f"benchmarks.{name}", "--out", str(out), *extra]
        if quick:
            args.append("--quick")
        if check and own_check:
            args.append("--check")
        shares = [cpu_available()] if name in CPU_SHARE else []
        start = time.monotonic()
        proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
        seconds = time.monotonic() - start
        result: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    result["exit_code"] = proc.returncode
    result["run_s"] = round(seconds, 1)
    if proc.returncode != 0:
        result["stderr_tail"] = proc.stderr.strip().splitlines()[-5:]
    if shares and proc.returncode != 0 and result.get("failures"):
        shares.append(cpu_available())  # after it too: the other work may have begun since
        result["cpu_available"] = [round(s, 2) for s in shares]
        unjudged = busy_verdict(result, shares)
        if unjudged is not None:
            result["unjudged"] = unjudged
    return result


def busy_verdict(result: dict[str, Any], shares: list[float]) -> str | None:
    """Why a CPU-share benchmark's broken bounds are not judged (None: they are): it ran to
    its report (only bounds broke, nothing crashed) on a machine whose cores other work took,
    before or after it (`shares`: `cpu_available()` then)."""
    if not result.get("failures") or not shares or min(shares) >= BUSY_BELOW:
        return None
    return (
        f"bounds not judged: the machine was busy with other work (a spinning process got "
        f"{min(shares):.0%} of a core, below {BUSY_BELOW:.0%})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="the CI size")
    parser.add_argument("--check", action="store_true", help="fail when a bound is broken")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results.json")
    parser.add_argument("--markdown", type=Path, default=ROOT / "benchmarks/results.md")
    parser.add_argument(
        "--only", nargs="*", choices=sorted(BENCHMARKS), help="run only these benchmarks"
    )
    ns = parser.parse_args(argv)
    names = ns.only or list(BENCHMARKS)
    results = {}
    for name in names:
        print(f"benchmarks: {name} ...", file=sys.stderr, flush=True)
        results[name] = run_one(name, ns.quick, ns.check)
    failed = {n: r for n, r in results.items() if r["exit_code"] != 0 and "unjudged" not in r}
    report = {
        "quick": ns.quick,
        "checked": ns.check,
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "benchmarks": results,
        "failed": sorted(failed),
    }
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(report, indent=2) + "\n")
    if not ns.quick:  # a full run also refreshes each benchmark's own results file
        for name, r in results.items():
            if r["exit_code"] == 0:
                (RESULTS / f"{name}.json").write_text(json.dumps(r, indent=2) + "\n")
    ns.markdown.parent.mkdir(parents=True, exist_ok=True)
    ns.markdown.write_text(markdown(report))
    print(f"benchmarks: wrote {ns.out} and {ns.markdown}", file=sys.stderr)
    for name, r in results.items():
        if "unjudged" in r:
            broken = "; ".join(r.get("failures", []))
            print(f"benchmarks: {name}: {r['unjudged']}; it measured: {broken}", file=sys.stderr)
    for name, r in failed.items():
        tail = "; ".join(r.get("stderr_tail", []))
        print(f"benchmarks: {name} failed (exit {r['exit_code']}): {tail}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
