"""Dollar amounts in our own outputs show as written in JupyterLab, not typeset as math.

JupyterLab typesets `$...$` in HTML outputs and in ipywidgets' HTML with MathJax: a line with
two amounts ("session cost $0.0165 of max_cost_usd $100.0000") showed as italic math. The
last cell is the control: a user's own HTML output with two amounts IS typeset (so MathJax runs
on this page); `%tasks` (its cost column and budget line) and the turn's footer are not. (The
live card is an ipywidgets `HTML`, which ipywidgets 8 does not typeset; its HTML as saved is
checked in tests/kernel/test_no_math.py.)
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from .conftest import Lab, load_and_greet, notebook_json, open_notebook, shot
from .conftest import cells as _cells
from .conftest import run_cell as _run

NAME = "dollars.ipynb"
SOURCES = [
    "%load_ext forkagent_jupyter\n%config ForkAgent.permission_mode = 'bypassPermissions'\n"
    "%config ForkAgent.max_cost_usd = 100.0",
    "%%agent\nHello! What can you do?",
    "%fork --name adder add the numbers `py: 2 + 3` and report the sum",
    "%tasks",
    "from IPython.display import HTML\nHTML(\"<p class='control-html'>between $1 and $2</p>\")",
]
MATH = "mjx-container"


@pytest.fixture(scope="module")
def nb_page(lab: Lab, page: Any) -> Any:
    return open_notebook(lab, page, NAME, notebook_json(SOURCES))


def test_tasks_card_and_footer_amounts_are_not_typeset(nb_page: Any) -> None:
    page = nb_page
    answer = load_and_greet(page)
    footer = answer.filter(has_text="tokens:").first
    footer.wait_for()
    _run(page, 2)
    page.locator(".jp-forkagent-notification[data-status='completed']").wait_for()
    card = page.locator(".jp-NotebookPanel .forkagent-card").first
    page.wait_for_function(
        "() => /completed/.test(document.querySelector('.forkagent-card')?.innerText ?? '')"
    )
    # the notification cell sits below the fork cell now: %tasks is cell 4, the control 5
    _run(page, 4)
    tasks = _cells(page).nth(4).locator(".jp-OutputArea-output")
    tasks.locator("table.forkagent-tasks").wait_for()
    _run(page, 5)
    control = _cells(page).nth(5)
    # MathJax typesets HTML outputs on this page (the control's own amounts)
    control.locator(f".control-html {MATH}").first.wait_for()
    shot(page, "dollars-01-tasks")

    text = tasks.inner_text()
    assert tasks.locator(MATH).count() == 0, text
    budget = re.search(r"session cost \$0\.\d{4} of max_cost_usd \$100\.0000", text)
    assert budget, text
    row = tasks.locator("table.forkagent-tasks tr").filter(has_text="adder")
    assert re.fullmatch(r"\$0\.\d{4}", row.locator("td").nth(6).inner_text()), row.inner_text()

    assert card.locator(MATH).count() == 0, card.inner_text()
    assert re.search(r"· \$0\.\d{4}", card.inner_text()), card.inner_text()
    assert footer.locator(MATH).count() == 0, footer.inner_text()
    assert re.search(r"session \$0\.\d{4}", footer.inner_text()), footer.inner_text()
