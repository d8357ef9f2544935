"""In JupyterLab: the Tasks panel shows a team as a group. A notebook's parent forms a team of
two analysts through the offline model; their rows sit under the team's header (its name,
member count and states) below the row of a fork in no team; the header collapses and expands
the group, by mouse and by keyboard; a member's Stop button still stops it, and the header
says so."""

from __future__ import annotations

import re
from typing import Any

import pytest

from forkagent_jupyter.emulator import Emulator
from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain

from .conftest import Lab, notebook_json, open_notebook, shot
from .conftest import cells as _cells

NAME = "team.ipynb"
WAIT = 60_000  # ms: how long an `expect` waits for what the kernel does (its default is 5 s)
SOURCES = [
    "%load_ext forkagent_jupyter\n%config ForkAgent.permission_mode = 'bypassPermissions'",
    "%fork --name solo alone `py: 1 + 1`",
    "%%agent\nFORM a team of two analysts",
]
# the parent's answer to FORM, as notebook 05 scripts it: two Agent calls, the second joins
# the team the first one formed
SPAWNS = [
    {"description": "north totals", "name": "ana", "team_name": "analysts", "prompt": "`py: 6*7`"},
    {"description": "south totals", "name": "bob", "prompt": "`py: 2 + 3`"},
]


@pytest.fixture(scope="module")
def nb_page(lab: Lab, page: Any, browser_emulator: Emulator) -> Any:
    brain = ScriptedBrain(when_empty=OfflineBrain())
    forming = Reply(
        (
            {"type": "text", "text": "Forming the team."},
            *({"type": "tool_use", "name": "Agent", "input": call} for call in SPAWNS),
        )
    )
    brain.when_last_user_contains("FORM a team", forming, times=1)
    browser_emulator.brain = brain
    return open_notebook(lab, page, NAME, notebook_json(SOURCES))


def _run(page: Any, source: str) -> None:
    """Run the cell whose source is `source`, found by its first line (notification cells
    may land between the cells)."""
    first = source.splitlines()[0]
    cell = _cells(page).filter(has=page.locator(".jp-InputArea-editor", has_text=first))
    cell.first.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")


def _open_tasks(page: Any) -> Any:
    panel = page.locator("#forkagent-tasks")
    if not panel.is_visible():
        page.locator(".jp-SideBar li[data-id='forkagent-tasks']").click()
    panel.wait_for(state="visible")
    return panel


def _items(tasks: Any) -> list[str]:
    """The panel's list from top to bottom: a task's row as its name, a team as team:NAME."""
    return list(
        tasks.locator(".jp-forkagent-tasks-list > li").evaluate_all(
            "items => items.map(i => i.dataset.team ? 'team:' + i.dataset.team"
            " : i.querySelector('.jp-forkagent-link').textContent)"
        )
    )


def test_a_team_is_a_group_in_the_tasks_panel(nb_page: Any) -> None:
    from playwright.sync_api import expect

    page = nb_page
    _run(page, SOURCES[0])
    page.wait_for_selector(".jp-NotebookPanel[data-forkagent-connected='2']", state="attached")
    tasks = _open_tasks(page)
    _run(page, SOURCES[1])
    tasks.locator(".jp-forkagent-task-row").filter(has_text="solo").wait_for()
    _run(page, SOURCES[2])

    team = tasks.locator(".jp-forkagent-team[data-team='analysts']")
    toggle = team.get_by_role("button", name=re.compile("^team analysts"))
    members = team.locator(".jp-forkagent-task-row")
    expect(toggle).to_have_text("team analysts · 2 members · 2 running", timeout=WAIT)
    expect(members).to_have_count(2)
    assert sorted(members.locator(".jp-forkagent-link").all_inner_texts()) == ["ana", "bob"]
    assert members.evaluate_all("rows => rows.map(r => r.dataset.status)") == ["running"] * 2
    # the fork of no team keeps its plain row, above the team
    assert _items(tasks) == ["solo", "team:analysts"]
    expect(toggle).to_have_attribute("aria-expanded", "true")
    shot(page, "team-01-grouped")

    # the header collapses the group (its rows hidden) and, from the keyboard, expands it
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(members.first).to_be_hidden()
    expect(members.last).to_be_hidden()
    expect(tasks.locator(".jp-forkagent-task-row").filter(has_text="solo")).to_be_visible()
    shot(page, "team-02-collapsed")
    toggle.focus()
    page.keyboard.press("Enter")
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(members.first).to_be_visible()
    expect(members.last).to_be_visible()

    # a member's row works as any row: its Stop button stops it, and the header counts it
    ana = members.filter(has_text="ana")
    ana.get_by_role("button", name=re.compile("^Stop task ana")).click()
    team.locator(".jp-forkagent-task-row[data-status='killed']").filter(has_text="ana").wait_for()
    expect(toggle).to_have_text("team analysts · 2 members · 1 running, 1 killed", timeout=WAIT)
    # Space works as Enter does
    toggle.focus()
    page.keyboard.press("Space")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(members.first).to_be_hidden()
    shot(page, "team-03-stopped-and-collapsed")
