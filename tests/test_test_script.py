"""scripts/test runs every stage whatever the ones before it did, and ends with a summary
that says which passed, which failed and which did not run (and why).

The stages' commands are stand-ins here (small shell scripts on PATH, each noting that it
ran and ending as told): what is tested is the script's own control flow, not the tools."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\necho "$0 $*" >> "$RAN"\n{body}\n')
    path.chmod(0o755)


def _run(
    tmp_path: Path, *, pytest_exit: int, node: bool, options: tuple[str, ...] = ()
) -> tuple[subprocess.CompletedProcess[str], str]:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "labextension").mkdir()
    shutil.copy(ROOT / "scripts" / "test", repo / "scripts" / "test")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "dirname").symlink_to(shutil.which("dirname") or "/usr/bin/dirname")
    for name in ("ruff", "mypy"):
        _tool(bin_dir, name, "exit 0")
    _tool(bin_dir, "python", f'case "$*" in *pytest*) exit {pytest_exit};; esac\nexit 0')
    if node:
        for name in ("node", "jlpm"):
            _tool(bin_dir, name, "exit 0")
    _tool(bin_dir, "nproc", "echo 3")
    ran = tmp_path / "ran"
    ran.touch()
    done = subprocess.run(
        ["/bin/bash", str(repo / "scripts" / "test"), *options, "-q"],
        capture_output=True,
        text=True,
        env={"PATH": str(bin_dir), "RAN": str(ran)},
        timeout=60,
    )
    return done, ran.read_text()


def test_a_failing_pytest_does_not_skip_the_benchmarks_and_the_summary_says_so(
    tmp_path: Path,
) -> None:
    done, ran = _run(tmp_path, pytest_exit=1, node=True)
    assert done.returncode == 1
    [pytest] = [line for line in ran.splitlines() if " -m pytest " in line]
    assert pytest.endswith(" -q") and "-m benchmarks --quick --check" in ran  # the args passed
    summary = done.stdout.split("== summary\n", 1)[1].splitlines()
    assert summary[0].startswith("ok        ruff check")
    assert summary[3].startswith("ok        labextension")
    assert any(x.startswith("FAILED    pytest (exit code 1") for x in summary)
    assert any(x.startswith("ok        benchmarks") for x in summary)
    assert summary[-1] == "scripts/test: FAILED (see the stages above)"


def test_a_stage_that_cannot_run_is_said_and_fails_the_run(tmp_path: Path) -> None:
    done, ran = _run(tmp_path, pytest_exit=0, node=False)
    assert done.returncode == 1
    assert "-m benchmarks" in ran  # the others still ran
    assert (
        "NOT RUN   labextension: tsc + eslint, unit tests: Node.js (node, jlpm) is not installed"
        in done.stdout.split("== summary\n", 1)[1]
    )


def test_every_stage_passing_passes(tmp_path: Path) -> None:
    done, _ran = _run(tmp_path, pytest_exit=0, node=True)
    assert done.returncode == 0, done.stdout
    assert done.stdout.rstrip().endswith("scripts/test: every stage passed")


def test_the_quick_loop_runs_the_unit_layer_two_processes_a_core(tmp_path: Path) -> None:
    """Unit tests mostly wait (servers, subprocesses, timeouts): the quick loop runs two
    pytest processes per core; the whole suite one per core."""
    done, ran = _run(tmp_path, pytest_exit=0, node=True, options=("--quick",))
    assert done.returncode == 0, done.stdout
    [pytest] = [line for line in ran.splitlines() if " -m pytest " in line]
    assert " -n 6 " in pytest
    assert "not kernel and not browser and not packaging and not soak" in pytest
    assert "-m benchmarks" not in ran
    _done, ran = _run(tmp_path / "whole", pytest_exit=0, node=True)
    [pytest] = [line for line in ran.splitlines() if " -m pytest " in line]
    assert " -n auto " in pytest
