"""Every Python and magic block of README.md and of docs/*.md, run as cells in a real kernel
with no key (the offline model): the examples a new user copies work as written."""

from __future__ import annotations

import re
from collections.abc import Callable

import nbformat
import pytest

from .conftest import ROOT, Executed

pytestmark = pytest.mark.kernel

_BLOCK = re.compile(r"(<!-- not run[^>]*-->\n)?^```(\w*)\n(.*?)^```$", re.DOTALL | re.MULTILINE)


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def readme_blocks() -> list[str]:
    """The blocks to run, the README's first, then each page's of docs/: ```python and bare
    ``` blocks (magics), not shell commands, not those marked `<!-- not run ... -->` (each
    says why)."""
    text = "\n".join(page.read_text() for page in PAGES)
    return [
        body
        for skip, lang, body in _BLOCK.findall(text)
        if not skip and lang in ("python", "") and body.strip()
    ]


def test_every_offline_block_of_the_readme_runs(run_notebook: Callable[..., Executed]) -> None:
    blocks = readme_blocks()
    assert len(blocks) >= 5, blocks  # the notebook examples and the Python API
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(b.rstrip("\n")) for b in blocks]
    ran = run_notebook(nb, timeout=180)  # any error in a cell fails here
    loaded = ran.text("%load_ext forkagent_jupyter")
    assert "forkagent: loaded; the offline model" in loaded
    agent = ran.text("%%agent")
    assert "**Python**" in agent and "'price': 1" in agent  # it ran the py: code on df
    waited = ran.text("%fork --name outliers")
    assert waited.count("<td>completed</td>") == 2, waited
    pulled = ran.text("%tasks --pull outliers outliers")
    assert "pulled from outliers" in pulled and "97.0" in pulled
    api = ran.text("from forkagent_jupyter import Session")
    assert "{'outliers': [9.7]}" in api and "['completed']" in api
    for cell in ran.nb.cells:
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source


def test_every_example_notebook_has_a_runner() -> None:
    """Each notebook of example_notebooks/ is executed by a test of test_notebooks.py."""
    runners = (ROOT / "tests" / "examples" / "test_notebooks.py").read_text()
    for path in (ROOT / "example_notebooks").glob("*.ipynb"):
        assert f'"{path.name}"' in runners, f"{path.name} is not executed by any test"
