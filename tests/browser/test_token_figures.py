"""Token and cache figures in JupyterLab agree with the kernel's own accounting.

A named fork reads most of its prompt from the parent's cache. Its row in the Tasks panel and
its notification cell show the prompt's tokens (counted once) and the cache hit ratio; `%tasks`
in the same kernel, and the task's `Usage` read there, are the reference.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .conftest import Lab, load_and_greet, notebook_json, open_notebook, shot
from .conftest import cells as _cells
from .conftest import run_cell as _run

NAME = "tokens.ipynb"
SOURCES = [
    "%load_ext forkagent_jupyter\n%config ForkAgent.permission_mode = 'bypassPermissions'\n"
    "%config ForkAgent.max_cost_usd = 100.0",
    "%%agent\nHello! What can you do?",
    "%fork --name adder add the numbers `py: 2 + 3` and report the sum",
    "%tasks adder",
    "import json\n"
    "u = __forkagent__.session.registry.get('adder').usage\n"
    "print(json.dumps({'total': u.total_input_tokens, 'read': u.cache_read_input_tokens,"
    " 'write': u.cache_creation_input_tokens, 'uncached': u.input_tokens,"
    " 'output': u.output_tokens}))",
]


def _notebook() -> dict[str, Any]:
    return notebook_json(SOURCES)


def _count(text: str) -> int:
    return int(text.replace(",", ""))


def _matches_short(short: str, exact: int) -> bool:
    """Whether a short figure (`14k`, `1.5k`, `2.5M`, `999`) is `exact` rounded."""
    found = re.fullmatch(r"([0-9.]+)([kM]?)", short.strip())
    assert found, short
    value, unit = found.groups()
    scale = {"": 1, "k": 1000, "M": 1_000_000}[unit]
    decimals = len(value.split(".")[1]) if "." in value else 0
    half = scale / 10**decimals / 2
    return abs(float(value) * scale - exact) <= half


def _exact_title(usage: dict[str, int]) -> str:
    return (
        f"{usage['total']:,} input tokens ({usage['read']:,} cache read, "
        f"{usage['write']:,} cache write, {usage['uncached']:,} uncached), "
        f"{usage['output']:,} output tokens"
    )


@pytest.fixture(scope="module")
def nb_page(lab: Lab, page: Any) -> Any:
    return open_notebook(lab, page, NAME, _notebook())


def test_panel_and_notification_agree_with_tasks(nb_page: Any) -> None:
    page = nb_page
    load_and_greet(page)
    _run(page, 2)
    note = page.locator(".jp-forkagent-notification[data-status='completed']")
    note.wait_for()
    page.locator(".jp-SideBar li[data-id='forkagent-tasks']").click()
    panel = page.locator("#forkagent-tasks")
    panel.wait_for(state="visible")
    row = panel.locator(".jp-forkagent-task-row[data-status='completed']").filter(has_text="adder")
    row.wait_for()

    # the reference: %tasks, and the task's Usage read in the kernel (the notification cell
    # now sits below the fork cell, so the later cells moved down by one)
    _run(page, 4)
    table = _cells(page).nth(4).locator("table.forkagent-tasks tr").nth(1)
    table.wait_for()
    tds = [table.locator("td").nth(i).inner_text() for i in range(7)]
    assert tds[0] == "adder" and tds[2] == "completed"
    tasks_in, tasks_out = (_count(part) for part in tds[3].split("/"))
    tasks_cache = tds[4]
    _run(page, 5)
    printed = _cells(page).nth(5).locator(".jp-OutputArea-output").filter(has_text="total")
    printed.first.wait_for()
    usage = json.loads(printed.first.inner_text())
    assert (usage["total"], usage["output"]) == (tasks_in, tasks_out)
    assert usage["total"] == usage["uncached"] + usage["read"] + usage["write"]
    assert usage["read"] > usage["uncached"]  # the fork read its parent's prefix
    assert f"{usage['read'] / usage['total']:.0%}" == tasks_cache

    # the Tasks panel: `14k / 150 tok`, `cache 98%`, and the exact counts as the tooltip
    tokens = row.locator(".jp-forkagent-task-tokens")
    shown_in, shown_out = tokens.inner_text().removesuffix(" tok").split(" / ")
    assert _matches_short(shown_in, tasks_in), (shown_in, tasks_in)
    assert _matches_short(shown_out, tasks_out), (shown_out, tasks_out)
    assert row.locator(".jp-forkagent-task-cache").inner_text() == f"cache {tasks_cache}"
    assert tokens.get_attribute("title") == _exact_title(usage)

    # the notification cell: `14k in / 150 out · cache 98% · $… · …`
    line = note.locator(".jp-forkagent-notification-usage")
    found = re.match(r"(\S+) in / (\S+) out · cache (\d+%) · ", line.inner_text())
    assert found, line.inner_text()
    assert _matches_short(found.group(1), tasks_in), (found.group(1), tasks_in)
    assert _matches_short(found.group(2), tasks_out), (found.group(2), tasks_out)
    assert found.group(3) == tasks_cache
    assert line.get_attribute("title") == _exact_title(usage)
    # the summary calls the worker by its --name
    summary = note.locator(".jp-forkagent-notification-summary").inner_text()
    assert summary == 'Worker "adder" completed'
    # the session's spend against its budget heads the panel
    budget = panel.locator(".jp-forkagent-budget").inner_text()
    assert re.fullmatch(r"\$0\.\d{4} of \$100\.00 budget", budget), budget
    shot(page, "tokens-01-figures")
