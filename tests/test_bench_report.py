"""`forkagent bench` runs the benchmarks and writes the combined JSON and Markdown report."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from forkagent_jupyter.cli import main


def test_bench_writes_json_and_markdown(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    out, md = tmp_path / "results.json", tmp_path / "results.md"
    code = main(
        ["bench", "--quick", "--only", "loop_overhead", "--out", str(out), "--markdown", str(md)]
    )
    assert code == 0, capfd.readouterr().err
    report = json.loads(out.read_text())
    assert report["quick"] is True and report["failed"] == []
    assert set(report["machine"]) == {"cpu", "cores", "python", "os"}
    rows = report["benchmarks"]["loop_overhead"]["rows"]
    sizes = [r["history_messages"] for r in rows]
    assert len(sizes) == 2 and sizes[0] < sizes[1]  # the quick size: two history lengths
    table = md.read_text()
    assert "Machine: " in table and f"{report['machine']['cores']} cores" in table
    assert "| history messages |" in table
    assert all(f"\n| {n} |" in table for n in sizes)


def test_a_busy_machine_is_seen_and_only_excuses_broken_cpu_share_bounds() -> None:
    """Beside two CPU burners per core, a spinning process gets well under a core: bounds of
    CPU shares broken then are reported as not judged; a crash, or a quiet machine, is not
    excused."""
    import subprocess
    import sys

    from benchmarks.__main__ import BUSY_BELOW, CPU_SHARE, busy_verdict, cpu_available

    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(2 * (os.cpu_count() or 1))
    ]
    try:
        busy = cpu_available()
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert busy < BUSY_BELOW
    broken = {"failures": ["RTT from the launch on 2.11x idle > 1.98"]}
    said = busy_verdict(broken, [0.93, busy])
    assert said is not None and "bounds not judged: the machine was busy" in said
    assert busy_verdict(broken, [0.93, 0.97]) is None  # quiet: judged
    assert busy_verdict({"exit_code": 1}, [busy]) is None  # it crashed: never excused
    assert {"compute_load", "kernel_load"} <= CPU_SHARE and "fork_cache" not in CPU_SHARE
