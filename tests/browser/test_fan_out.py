"""The fan-out example notebook in JupyterLab, as a user first runs it: Run All Cells.

The parent inspects the data, `%fork` shows four live cards, all four finish, their
notifications come back as cells right below the `%fork` cell (with the parent's answer), and
the cost report at the end is there. The step with live cards is the README's screenshot
(`FORKAGENT_SCREENSHOT=1` rewrites docs/screenshot.png).
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Any

from .conftest import ROOT, Lab, shot, wait_kernel

NAME = "01_fan_out.ipynb"
CARDS = ".jp-NotebookPanel .forkagent-card"
# the lab's model streams at about the API's pace, so the cards are seen running
EMULATOR = {"ttft": 0.3, "token_latency": 1 / 80}


# relative luminance (0 dark .. 1 light) of a CSS rgb()/rgba() color, as a JS call prefix
LUMINANCE = (
    "(c => { const [r, g, b] = c.match(/[0-9.]+/g).map(Number);"
    " return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255; })("
)


def _sources(page: Any) -> list[str]:
    cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
    return [cells.nth(i).locator(".jp-InputArea-editor").inner_text() for i in range(cells.count())]


def test_run_all_fans_out_and_notifications_land_below_the_fork_cell(lab: Lab, page: Any) -> None:
    shutil.copy(ROOT / "example_notebooks" / NAME, lab.root / NAME)
    page.goto(lab.notebook_url(NAME))
    wait_kernel(page)
    before = len(_sources(page))
    page.locator(".jp-SideBar li[data-id='forkagent-tasks']").click()
    page.locator("#forkagent-tasks").wait_for(state="visible")

    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Run All Cells$")).click()

    # four live cards in the %fork cell, and a row each in the Tasks panel
    page.wait_for_function("s => document.querySelectorAll(s).length === 4", arg=CARDS)
    # ... at least one of them streaming or done (its tokens counted)
    page.wait_for_function(
        "s => [...document.querySelectorAll(s)].some(c => !/ in 0 \\//.test(c.innerText))",
        arg=CARDS,
    )
    fork_cell = page.locator(".jp-NotebookPanel .jp-Cell").filter(
        has=page.locator(".forkagent-card")
    )
    fork_cell.first.evaluate("e => e.scrollIntoView({block: 'start'})")
    shot(page, "fan-out-01-live-cards")
    if os.environ.get("FORKAGENT_SCREENSHOT") == "1":
        page.screenshot(path=str(ROOT / "docs" / "screenshot.png"))

    # all four finish; each notification is shown once, in cells inserted below the fork cell
    page.wait_for_function(
        "s => [...document.querySelectorAll(s)].filter(c => /completed/.test(c.innerText))"
        ".length === 4",
        arg=CARDS,
    )
    notes = page.locator(".jp-NotebookPanel .jp-forkagent-notification")
    page.wait_for_function(
        "() => document.querySelectorAll("
        "'.jp-NotebookPanel .jp-forkagent-notification').length === 4"
    )
    assert sorted(notes.nth(i).get_attribute("data-status") for i in range(4)) == ["completed"] * 4
    names = sorted(
        notes.nth(i).locator(".jp-forkagent-notification-name").inner_text() for i in range(4)
    )
    for name, expected in zip(
        names, sorted(["correlations", "outliers", "plot", "profile"]), strict=True
    ):
        assert expected in name

    # the run reaches the last cell: the cost report, with the workers' cache reads
    last = page.locator(".jp-NotebookPanel .jp-Cell").last
    last.locator(".jp-OutputArea-output").filter(has_text="total").first.wait_for()
    report = last.locator(".jp-OutputArea-output").first.inner_text()
    for agent in ("parent", "profile", "outliers", "correlations", "plot", "total"):
        assert agent in report

    sources = _sources(page)
    added = len(sources) - before
    assert added >= 1
    at = next(i for i, s in enumerate(sources) if s.startswith("%fork --name profile"))
    inserted = sources[at + 1 : at + 1 + added]
    assert all(s.startswith("%notifications ") for s in inserted), inserted
    assert "%notifications" not in "".join(sources[at + 1 + added :])
    tasks = page.locator("#forkagent-tasks .jp-forkagent-task-row[data-status='completed']")
    assert tasks.count() == 4
    shot(page, "fan-out-02-notification-cells")

    # the dark theme: the panel, the notification cells and the cards follow it
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Settings$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Theme$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile("^JupyterLab Dark$")).click()
    page.wait_for_selector("body[data-jp-theme-light='false']", state="attached")
    page.wait_for_selector("#jupyterlab-splash", state="detached")
    page.wait_for_function(
        "() => _lum(getComputedStyle(document.querySelector('#forkagent-tasks')).backgroundColor)"
        " < 0.3".replace("_lum(", LUMINANCE)
    )
    for selector in ("#forkagent-tasks", ".jp-forkagent-notification", ".forkagent-card"):
        color = page.evaluate(
            f"() => {LUMINANCE}getComputedStyle(document.querySelector({selector!r})).color)"
        )
        assert color > 0.5, (selector, color)  # light text on the dark theme
    shot(page, "fan-out-03-dark-theme")
