"""The README's main job: `forkagent demo` executes the fan-out notebook headless, offline,
with no key and no network, writes the executed copy and prints a short report."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from .conftest import ROOT, Executed

pytestmark = pytest.mark.kernel


def test_forkagent_demo_executes_the_fan_out_notebook(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")
        and not k.startswith("FORKAGENT_")
    }
    env["HTTPS_PROXY"] = env["HTTP_PROXY"] = "http://127.0.0.1:9"  # any network use fails
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-m", "forkagent_jupyter.cli", "demo", "--out", "run/demo.ipynb"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    text = out.stdout
    assert "on the offline backend" in text
    assert "tasks: 4 forks, 4 completed" in text
    assert len(re.findall(r"^  \w+ +completed ", text, re.MULTILINE)) == 4
    parent = re.search(r"^  parent +- +([\d,]+) prompt tokens.*\$([\d.]+)$", text, re.MULTILINE)
    assert parent, text  # where the rest of the cost went: the parent's turns
    rows = [float(c) for c in re.findall(r"^  \w+ .*\$([\d.]+)$", text, re.MULTILINE)]
    total = re.search(r"^cost: \$([\d.]+)", text, re.MULTILINE)
    assert total and sum(rows) == pytest.approx(float(total.group(1)), abs=5e-5)
    assert "simulated" in text and "nothing was charged" in text
    hit = re.search(r"cache hit ratio: (\d+)%", text)
    assert hit and int(hit.group(1)) > 50
    costs = re.search(r"cost: \$([\d.]+); without the shared prompt cache: \$([\d.]+)", text)
    assert costs and 0 < float(costs.group(1)) < float(costs.group(2))
    # the executed copy: outputs kept, the report cell not left in it, nothing else written
    executed = json.loads((tmp_path / "run" / "demo.ipynb").read_text())
    source = json.loads((ROOT / "example_notebooks" / "01_fan_out.ipynb").read_text())
    assert len(executed["cells"]) == len(source["cells"])
    assert "image/png" in json.dumps(executed)
    # the four cards were saved in their final state (widget state of the fork cell)
    saved = Executed(nbformat.read(tmp_path / "run" / "demo.ipynb", as_version=4), tmp_path, 0)
    cards = saved.cards("%fork")
    assert len(cards) == 4 and all(">completed<" in c for c in cards), cards
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_demo_with_the_anthropic_backend_and_no_key_is_one_line(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE")
        and not k.startswith("FORKAGENT_")
    }
    env["PYTHONPATH"] = str(ROOT)
    env["HOME"] = str(tmp_path)  # no SDK profile either
    out = subprocess.run(
        [sys.executable, "-m", "forkagent_jupyter.cli", "demo", "--backend", "anthropic"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("forkagent demo: --backend anthropic needs a key")
    assert list(tmp_path.iterdir()) == []  # no notebook written, no kernel started
