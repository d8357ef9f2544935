"""Executing the example notebooks with nbclient in a real kernel, outputs kept for asserts."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "example_notebooks"


@dataclass
class Executed:
    nb: Any
    workdir: Path
    seconds: float

    def cell(self, starts: str) -> Any:
        """The first code cell whose source starts with `starts`."""
        for cell in self.nb.cells:
            if cell.cell_type == "code" and cell.source.startswith(starts):
                return cell
        raise AssertionError(f"no code cell starts with {starts!r}")

    def text(self, starts: str) -> str:
        """What that cell showed: streams, markdown, html, plain text, errors."""
        out: list[str] = []
        last_stream = None
        for o in self.cell(starts).outputs:
            if o.output_type == "stream" and o.name == last_stream:
                # one print may reach the notebook in two stream messages (the kernel flushes
                # on a timer between its writes): the notebook shows them as one text
                out[-1] += o.text
            elif o.output_type == "stream":
                out.append(o.text)
            elif o.output_type == "error":
                out.append(f"{o.ename}: {o.evalue}")
            else:
                data = o.get("data", {})
                out.append(
                    data.get("text/markdown") or data.get("text/html") or data.get("text/plain", "")
                )
            last_stream = o.name if o.output_type == "stream" else None
        return "\n".join(out)

    def cards(self, starts: str) -> list[str]:
        """The header lines of the task cards shown in that cell, in their saved (final) state:
        the cards live in one container widget per cell, kept in the notebook's widget state,
        or, once they all ended, in the container's HTML."""
        state = self.nb.metadata.get("widgets", {})
        models = state.get("application/vnd.jupyter.widget-state+json", {}).get("state", {})

        def headers(model_id: str) -> list[str]:
            model = models.get(model_id, {}).get("state", {})
            if "forkagent-card" in model.get("_dom_classes", []):
                header = models[model["children"][0].removeprefix("IPY_MODEL_")]["state"]
                return [str(header["value"])]
            children = model.get("children", [])
            return [h for c in children for h in headers(c.removeprefix("IPY_MODEL_"))]

        found = []
        for o in self.cell(starts).outputs:
            view = o.get("data", {}).get("application/vnd.jupyter.widget-view+json")
            if view:
                found += headers(view["model_id"])
            elif "<div class='forkagent-card'>" in o.get("data", {}).get("text/html", ""):
                # a headless run leaves ended cards as HTML (what an HTML export can show)
                cards = o["data"]["text/html"].split("<div class='forkagent-card'>")[1:]
                found += [card.removesuffix("</div>") for card in cards]
        return found

    def all_text(self) -> str:
        return "\n".join(self.text(c.source) for c in self.nb.cells if c.cell_type == "code")


@pytest.fixture
def run_notebook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Executed]]:
    """Execute `example_notebooks/<name>` in `tmp_path` (a real kernel, this checkout on its
    path). The kernel inherits the environment: the offline model unless `env` says else."""
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FORKAGENT_BACKEND", "offline")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))

    def run(name: str | Any, env: dict[str, str] | None = None, timeout: int = 90) -> Executed:
        """`name`: a notebook of example_notebooks/, or a notebook object to run as it is."""
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        nb = nbformat.read(NOTEBOOKS / name, as_version=4) if isinstance(name, str) else name
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(tmp_path)}},
        )
        start = time.monotonic()
        client.execute()
        return Executed(nb, tmp_path, time.monotonic() - start)

    yield run
