"""The extension in Jupyter Notebook 7 (`jupyter notebook`), end to end in Chromium.

The same prebuilt extension loads in Notebook 7's notebook page (/notebooks/<name>.ipynb): a
`%fork` cell shows its live card and reaches "completed"; a worker's tool call waits for an
approval on its card (and in the toolbar's Approvals list) until Allow is clicked; each
finished worker comes back as a notification cell inserted below its launching cell. The
Tasks panel is in the left side panel, which Notebook 7 keeps closed until View > Left
Sidebar > Show Forkagent tasks opens it. Saving and reloading keeps the notification cells
and draws the live cards again; after a kernel restart the comm reconnects and a click on
Allow still reaches the kernel. Each step leaves a PNG (nb7-*) in tests/browser/artifacts/.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .conftest import Lab, notebook_json, shot, wait_kernel
from .conftest import cells as _cells
from .conftest import run_cell as _run

SERVER_APP = "notebook"
NAME = "nb7.ipynb"
SOURCES = [
    "%load_ext forkagent_jupyter",
    "%fork --name n1 say hello",
    "%fork --name n2 write the file `py: open('n2.txt', 'w').write('two')`",
    "1 + 1",
    "%fork --name n3 compute `py: 5 * 5`",
]


def _notebook() -> dict[str, Any]:
    return notebook_json(SOURCES)


@pytest.fixture(scope="module")
def nb_page(lab: Lab, page: Any) -> Any:
    assert lab.app == "notebook"
    (lab.root / NAME).write_text(json.dumps(_notebook()))
    page.goto(lab.notebook_url(NAME))
    # Notebook 7's own shell, not JupyterLab's: the notebook page of the `notebook` package
    page.wait_for_selector("#main-panel", state="attached")
    assert page.locator("#jp-main-dock-panel").count() == 0
    wait_kernel(page)
    return page


def _sources(page: Any) -> list[str]:
    cells = _cells(page)
    return [cells.nth(i).locator(".jp-InputArea-editor").inner_text() for i in range(cells.count())]


def _count_cells(page: Any, n: int) -> None:
    page.wait_for_function(
        "n => document.querySelectorAll('.jp-NotebookPanel .jp-Notebook .jp-Cell').length === n",
        arg=n,
    )


def test_fork_card_completes_and_its_notification_cell_lands_below(nb_page: Any) -> None:
    page = nb_page
    _run(page, 0)
    page.wait_for_selector(".jp-NotebookPanel[data-forkagent-connected='2']", state="attached")
    _run(page, 1)
    card = page.locator(".forkagent-card").filter(has_text="say hello")
    card.wait_for()
    assert _cells(page).nth(1).locator(".forkagent-card").count() == 1  # in its own cell
    card.filter(has_text="completed").wait_for()
    # the extension inserts the notification cell right below the %fork cell
    _count_cells(page, len(SOURCES) + 1)
    sources = _sources(page)
    assert sources[0:2] == SOURCES[0:2] and sources[3:] == SOURCES[2:]
    assert sources[2].startswith("%notifications ")
    inserted = _cells(page).nth(2)
    note = inserted.locator(".jp-forkagent-notification")
    note.wait_for()
    assert note.get_attribute("data-status") == "completed"
    assert "n1" in note.locator(".jp-forkagent-notification-name").inner_text()
    assert "reported back" in inserted.inner_text()  # the parent's answer, as an output
    shot(page, "nb7-01-card-and-notification-cell")


def test_approval_on_the_card_lets_the_worker_run(nb_page: Any, lab: Lab) -> None:
    page = nb_page
    _run(page, 3)  # SOURCES[2], below n1's notification cell
    card = page.locator(".forkagent-card").filter(has_text="write the file")
    card.wait_for()
    approval = card.locator(".forkagent-approval")
    approval.wait_for()
    allow = approval.get_by_role("button", name="Allow once")
    deny = approval.get_by_role("button", name="Deny")
    assert allow.is_visible() and deny.is_visible()
    page.wait_for_selector(".jp-forkagent-approvals[data-count='1']", state="attached")
    assert "running" in card.inner_text()
    assert not (lab.root / "n2.txt").exists()  # the tool call waits for the click
    shot(page, "nb7-02-approval-on-card")

    allow.click()
    page.wait_for_selector(".jp-forkagent-approvals[data-count='0']", state="attached")
    card.filter(has_text="completed").wait_for()
    assert (lab.root / "n2.txt").read_text() == "two"
    _count_cells(page, len(SOURCES) + 2)
    sources = _sources(page)
    assert sources[3] == SOURCES[2] and sources[4].startswith("%notifications ")
    assert sources[5:] == SOURCES[3:]
    note = _cells(page).nth(4).locator(".jp-forkagent-notification")
    note.wait_for()
    assert note.get_attribute("data-status") == "completed"
    assert "n2" in note.locator(".jp-forkagent-notification-name").inner_text()
    shot(page, "nb7-03-approved-and-notified")


def test_tasks_panel_opens_from_the_view_menu(nb_page: Any) -> None:
    page = nb_page
    panel = page.locator("#forkagent-tasks")
    assert not panel.is_visible()  # Notebook 7 keeps the side panels closed
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^View$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Left Sidebar$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Show Forkagent tasks$")).click()
    panel.wait_for(state="visible")
    rows = panel.locator(".jp-forkagent-task-row[data-status='completed']")
    rows.nth(1).wait_for()
    assert rows.count() == 2
    shot(page, "nb7-04-tasks-panel")


def test_save_and_reload_keep_cells_and_cards(nb_page: Any, lab: Lab) -> None:
    page = nb_page
    _cells(page).nth(0).locator(".jp-InputArea-editor").click()
    with page.expect_response(
        lambda r: r.request.method == "PUT" and f"/api/contents/{NAME}" in r.url
    ) as saving:
        page.keyboard.press("Control+s")
    assert saving.value.ok
    saved = json.loads((lab.root / NAME).read_text())
    marks = [c["metadata"].get("forkagent", {}).get("kind") for c in saved["cells"]]
    assert marks == [None, None, "notification", None, "notification", None, None]

    page.reload()
    page.wait_for_selector(".jp-NotebookPanel[data-forkagent-kernel]", state="attached")
    page.wait_for_selector(".jp-NotebookPanel[data-forkagent-connected='2']", state="attached")
    _count_cells(page, len(SOURCES) + 2)
    assert page.locator(".jp-NotebookPanel .jp-forkagent-notification").count() == 2
    # the kernel kept running: its live cards are drawn again from the saved widget state
    card = page.locator(".forkagent-card").filter(has_text="write the file")
    card.filter(has_text="completed").wait_for()
    page.wait_for_selector(".jp-forkagent-approvals[data-count='0']", state="attached")
    shot(page, "nb7-05-after-reload")


def test_restart_reconnects_and_approvals_still_reach_the_kernel(nb_page: Any) -> None:
    page = nb_page
    panel = page.locator(".jp-NotebookPanel").first
    before = int(panel.get_attribute("data-forkagent-welcomes") or "0")
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Kernel$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Restart Kernel…$")).click()
    page.locator(".jp-Dialog .jp-mod-accept").click()
    page.wait_for_selector(".jp-NotebookPanel[data-forkagent-connected]", state="detached")
    wait_kernel(page)
    _run(page, 0)  # the new kernel loads the extension; the comm opens again
    page.wait_for_function(
        "n => Number(document.querySelector('.jp-NotebookPanel').dataset.forkagentWelcomes) > n",
        arg=before,
    )
    last = len(SOURCES) + 1  # SOURCES[4], below two notification cells
    _run(page, last)
    card = _cells(page).nth(last).locator(".forkagent-card")
    card.wait_for()
    page.wait_for_selector(".jp-forkagent-approvals[data-count='1']", state="attached")
    card.locator(".forkagent-approval").get_by_role("button", name="Allow once").click()
    page.wait_for_selector(".jp-forkagent-approvals[data-count='0']", state="attached")
    card.filter(has_text="completed").wait_for()
    _count_cells(page, len(SOURCES) + 3)
    note = _cells(page).nth(last + 1).locator(".jp-forkagent-notification")
    note.wait_for()
    assert "n3" in note.locator(".jp-forkagent-notification-name").inner_text()
    assert "25" in note.locator(".jp-forkagent-notification-result").inner_text()
    shot(page, "nb7-06-restarted")
