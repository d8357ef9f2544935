"""`forkagent bench` runs the benchmarks and writes the combined JSON and Markdown report."""

from __future__ import annotations

import json
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
