"""A notebook exported to HTML with nbconvert, read where no widget script runs (offline, no
CDN): the `%fork` cell's cards are there as text, in their final state."""

from __future__ import annotations

import re
from collections.abc import Callable

import nbformat
import pytest
from nbconvert import HTMLExporter

from .conftest import Executed

pytestmark = pytest.mark.kernel


def _visible(page: str) -> str:
    """What a browser shows without running scripts: the page minus its script elements."""
    return re.sub(r"<script\b.*?</script>", "", page, flags=re.S | re.I)


def test_cards_read_in_an_html_export_without_widget_scripts(
    run_notebook: Callable[..., Executed],
) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "%load_ext forkagent_jupyter\n%config ForkAgent.permission_mode = 'bypassPermissions'"
        ),
        nbformat.v4.new_code_cell("%fork --name adder add them `py: 20 + 22`"),
        nbformat.v4.new_code_cell("%tasks --wait adder"),
    ]
    ran = run_notebook(nb, timeout=60)
    page, _ = HTMLExporter().from_notebook_node(ran.nb)
    fork_cell = _visible(page).split('class="jp-Cell jp-CodeCell')[2]  # the second code cell
    card = fork_cell.split("forkagent-card")[1]  # drawn as HTML, not left to a script
    assert "<b>adder</b>" in card and ">completed<" in card
    assert re.search(r"in [1-9][0-9,]* / out [1-9][0-9,]* tok", card)  # tokens
    assert "$0.0" in card  # and cost
    # its result: the tool's output as the fenced block it reported, not a 42 in a cost or id
    assert "<pre><code>42\n</code></pre>" in card.split("forkagent-result")[1], card
    [saved] = [o for o in ran.cell("%fork").outputs if "text/html" in o.get("data", {})][:1]
    assert "adder (fork) completed" in saved["data"]["text/plain"]  # the same facts as text
