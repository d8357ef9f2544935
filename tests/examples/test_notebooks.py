"""The example notebooks, each executed end to end in a real kernel (nbclient)."""

from __future__ import annotations

import importlib.resources
import json
import re
from collections.abc import Callable

import pandas as pd
import pytest

from .conftest import NOTEBOOKS, Executed

pytestmark = pytest.mark.kernel

RunNotebook = Callable[..., Executed]


def test_committed_notebooks_have_no_outputs() -> None:
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert "01_fan_out.ipynb" in names
    for name in names:
        nb = json.loads((NOTEBOOKS / name).read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [], f"{name}: a cell has outputs"
                assert cell["execution_count"] is None, f"{name}: a cell has an execution count"


def test_notebooks_say_how_to_run_with_a_key() -> None:
    for path in NOTEBOOKS.glob("*.ipynb"):
        first = json.loads(path.read_text())["cells"][0]
        assert "ANTHROPIC_API_KEY" in "".join(first["source"]), path.name
        assert "offline" in "".join(first["source"]), path.name


def _cost_rows(text: str) -> dict[str, list[str]]:
    rows = {}
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] in ("parent", "profile", "outliers", "correlations", "plot", "total"):
            rows[parts[0]] = parts
    return rows


def test_fan_out(run_notebook: RunNotebook) -> None:
    ran = run_notebook("01_fan_out.ipynb")
    print(f"01_fan_out.ipynb executed in {ran.seconds:.1f} s")
    # the parent ran its inspection through the Python tool, in the kernel
    inspect = ran.text("%%agent\n`df`")
    assert "**Python**" in inspect and "(344, 8)" in inspect
    assert "cache write" in inspect
    # four live cards in the fork cell, all finished
    cards = [
        o
        for o in ran.cell("%fork").outputs
        if "TaskCard(" in o.get("data", {}).get("text/plain", "")
    ]
    assert len(cards) == 4
    table = ran.text("%tasks --wait")
    assert table.count("<td>completed</td>") == 4
    # every worker's notification reached the parent, which answered them
    notes = ran.text("api.notifications()")
    assert notes.count("<task-notification>") == 4
    assert notes.count("<status>completed</status>") == 4
    assert "reported back" in notes
    # the workers' findings are real: computed from the shipped CSV
    csv = importlib.resources.files("palmerpenguins") / "data" / "penguins.csv"
    df = pd.read_csv(str(csv))
    r = df["flipper_length_mm"].corr(df["body_mass_g"])
    findings = ran.workdir / "findings"
    assert (
        f"flipper_length_mm ~ body_mass_g: r = {r:+.2f}"
        in (findings / "correlations.md").read_text()
    )
    assert (findings / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (
        f"| sex | {df['sex'].dtype} | {df['sex'].isna().sum()} |"
        in (findings / "profile.md").read_text()
    )
    synthesis = (findings / "synthesis.md").read_text()
    assert all(f"## {n}" in synthesis for n in ("profile", "outliers", "correlations", "plot"))
    # costs: every worker read the shared prefix from the cache, which made the run cheaper
    rows = _cost_rows(ran.text("print(api.costs()"))
    assert set(rows) == {"parent", "profile", "outliers", "correlations", "plot", "total"}
    for name in ("profile", "outliers", "correlations", "plot"):
        prompt, read = (int(x.replace(",", "")) for x in rows[name][2:4])
        assert read > prompt / 2, rows[name]
    cost, uncached = float(rows["total"][-2]), float(rows["total"][-1])
    assert 0 < cost < uncached
    saved = re.search(r"\((\d+)% saved\)", ran.text("print(api.costs()"))
    assert saved and int(saved.group(1)) > 0
