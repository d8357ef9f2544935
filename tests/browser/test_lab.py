"""The JupyterLab extension end to end: one notebook, in the order a user works.

%%agent streams its answer; two %fork cells show live cards; one approval is answered from
the toolbar's pending-approvals list, one from the card; both workers finish and their
notification cells land below the launching cells, in order, with the parent's answer; the
notebook is saved and reloaded; the kernel restarts, the extension reconnects, and %send
resumes a finished worker. A notification cell shows its summary, the XML the parent read one
click away. Each step leaves a PNG in tests/browser/artifacts/.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest

from .conftest import ROOT, Lab, load_and_greet, notebook_json, open_notebook, shot, wait_kernel
from .conftest import cells as _cells
from .conftest import run_cell as _run

NAME = "forks.ipynb"
SOURCES = [
    "%load_ext forkagent_jupyter",
    "%%agent\nHello! What can you do?",
    "%fork --name w1 write the file `py: open('w1.txt', 'w').write('one')`",
    "%fork --name w2 compute `py: 6 * 7`",
    "%send w1 and now `py: 6 * 8`",
    "from IPython.display import display\n"
    "display({'application/vnd.forkagent.notification+json': {'task_id': 'x1', 'name': 'inj',"
    " 'status': 'failed', 'result': '<img src=x onerror=\"document.body.dataset.pwned=1\">'},"
    " 'text/plain': 'fallback'}, raw=True)",
    "%fork --name w3 wait `py: 1 + 1`",
]


def _notebook() -> dict[str, Any]:
    return notebook_json(SOURCES)


@pytest.fixture(scope="module")
def nb_page(lab: Lab, page: Any) -> Any:
    return open_notebook(lab, page, NAME, _notebook())


def _panel_attr(page: Any, name: str) -> str | None:
    value = page.locator(".jp-NotebookPanel").first.get_attribute(name)
    return None if value is None else str(value)


def _indicator(page: Any) -> Any:
    return page.locator(".jp-NotebookPanel .jp-forkagent-approvals").first


def _open_tasks(page: Any) -> Any:
    panel = page.locator("#forkagent-tasks")
    if not panel.is_visible():
        page.locator(".jp-SideBar li[data-id='forkagent-tasks']").click()
    panel.wait_for(state="visible")
    return panel


def test_agent_cell_streams_its_answer(nb_page: Any) -> None:
    page = nb_page
    load_and_greet(page)
    shot(page, "01-agent-answer")


def _reveal(page: Any, tasks: Any, name: str) -> str:
    row = tasks.locator(".jp-forkagent-task-row").filter(has_text=name)
    task_id = str(row.get_attribute("data-task-id"))
    row.get_by_role("button", name=re.compile(f"^Show the card of task {name}")).click()
    page.wait_for_selector(
        f".jp-NotebookPanel[data-forkagent-revealed='{task_id}']", state="attached"
    )
    return task_id


def test_forks_cards_approvals_and_notification_cells(nb_page: Any, lab: Lab) -> None:
    from playwright.sync_api import expect

    page = nb_page
    _run(page, 2)
    # located by content: notification cells get inserted above the second fork meanwhile
    card1 = page.locator(".forkagent-card").filter(has_text="write the file")
    card1.wait_for()
    page.wait_for_selector(".jp-forkagent-approvals[data-count='1']", state="attached")
    _run(page, 3)
    card2 = page.locator(".forkagent-card").filter(has_text="compute")
    card2.wait_for()
    page.wait_for_selector(".jp-forkagent-approvals[data-count='2']", state="attached")
    tasks = _open_tasks(page)
    tasks.locator(".jp-forkagent-task-row[data-status='running']").nth(1).wait_for()
    assert "running" in card1.inner_text()
    # a running row names its current call as the tool describes it (as the card does)
    call = tasks.locator(".jp-forkagent-task-row").filter(has_text="w1")
    expect(call.locator(".jp-forkagent-task-call")).to_contain_text("Python: open('w1.txt'")
    shot(page, "02-cards-pending-approvals")
    if os.environ.get("FORKAGENT_SCREENSHOT") == "1":
        page.screenshot(path=str(ROOT / "docs" / "approvals.png"))

    # w1: answered from the toolbar's pending-approvals list
    toggle = _indicator(page).get_by_role("button", name="2 pending approvals")
    toggle.click()
    rows = page.locator(".jp-forkagent-approvals-list .jp-forkagent-approval-row")
    assert rows.count() == 2
    shot(page, "03-approvals-list")
    rows.first.get_by_role("button", name=re.compile("^Allow once")).click()
    page.wait_for_selector(".jp-forkagent-approvals[data-count='1']", state="attached")
    toggle = _indicator(page).get_by_role("button", name="1 pending approvals")
    toggle.click()  # close the list
    # w2: answered on its card
    card2.locator(".forkagent-approval").get_by_role("button", name="Allow once").first.click()
    page.wait_for_selector(".jp-forkagent-approvals[data-count='0']", state="attached")

    # both finish: the cards update, and each launching cell gets its notification cell
    card1.filter(has_text="completed").wait_for()
    card2.filter(has_text="completed").wait_for()
    page.wait_for_function(
        "n => document.querySelectorAll('.jp-NotebookPanel .jp-Notebook .jp-Cell').length === n",
        arg=len(SOURCES) + 2,
    )
    cells = _cells(page)
    texts = [cells.nth(i).locator(".jp-InputArea-editor").inner_text() for i in range(7)]
    assert texts[0:3] == SOURCES[0:3] and texts[4] == SOURCES[3] and texts[6] == SOURCES[4]
    assert len(SOURCES) == 7
    assert texts[3].startswith("%notifications ") and texts[5].startswith("%notifications ")
    for index, name in ((3, "w1"), (5, "w2")):
        note = cells.nth(index).locator(".jp-forkagent-notification")
        note.wait_for()
        assert note.get_attribute("data-status") == "completed"
        assert name in note.locator(".jp-forkagent-notification-name").inner_text()
        assert "reported back" in cells.nth(index).inner_text()
    assert "42" in cells.nth(5).locator(".jp-forkagent-notification-result").inner_text()
    assert (lab.root / "w1.txt").read_text() == "one"
    tasks.locator(".jp-forkagent-task-row[data-status='completed']").nth(1).wait_for()
    # each row shows what its worker holds in context against its model's window
    row = tasks.locator(".jp-forkagent-task-row").filter(has_text="w2")
    context = row.locator(".jp-forkagent-task-context")
    assert re.fullmatch(r"ctx \S+ / \S+ \([\d.]+%\)", context.inner_text()), context.inner_text()
    assert "tokens (" in (context.get_attribute("title") or "")
    # a click on a task in the panel scrolls the notebook to its card
    _cells(page).nth(0).scroll_into_view_if_needed()
    task_id = _reveal(page, tasks, "w2")
    expect(page.locator(f".forkagent-task-{task_id}")).to_be_in_viewport()
    shot(page, "04-notification-cells")

    # a notification cell shows its summary; the XML the parent read is folded under it, one
    # click away
    note = cells.nth(5).locator(".jp-forkagent-notification")
    xml = note.locator(".jp-forkagent-notification-xml-text")
    note.scroll_into_view_if_needed()
    expect(xml).to_be_hidden()
    assert "task-notification" not in note.inner_text()
    assert "w2" in note.inner_text() and "$0." in note.inner_text()
    note.get_by_text("notification XML (what the parent read)").click()
    expect(xml).to_be_visible()
    folded = xml.inner_text()
    assert folded.startswith("<task-notification>") and folded.endswith("</task-notification>")
    assert "<status>completed</status>" in folded and "<result>" in folded
    shot(page, "04b-notification-xml-open")


def test_save_and_reload_keep_cells_and_tasks(nb_page: Any, lab: Lab) -> None:
    from playwright.sync_api import expect

    page = nb_page
    _cells(page).nth(0).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+s")
    page.wait_for_selector(".jp-NotebookPanel-toolbar", state="attached")
    page.wait_for_function(
        "() => !document.querySelector('.lm-TabBar-tab.jp-mod-current.jp-mod-dirty')"
    )
    saved = json.loads((lab.root / NAME).read_text())
    marks = [c["metadata"].get("forkagent", {}).get("kind") for c in saved["cells"]]
    assert marks == [None, None, None, "notification", None, "notification", None, None, None]
    for cell in (saved["cells"][3], saved["cells"][5]):
        kinds = [list(o.get("data", {})) for o in cell["outputs"]]
        assert any("application/vnd.forkagent.notification+json" in k for k in kinds)
        assert any("text/markdown" in k for k in kinds)

    page.reload()
    wait_kernel(page)
    page.wait_for_selector(".jp-NotebookPanel[data-forkagent-connected='2']", state="attached")
    assert _cells(page).count() == len(SOURCES) + 2
    assert page.locator(".jp-NotebookPanel .jp-forkagent-notification").count() == 2
    tasks = _open_tasks(page)
    tasks.locator(".jp-forkagent-task-row[data-status='completed']").nth(1).wait_for()
    assert tasks.locator(".jp-forkagent-task-row").count() == 2
    # the live cards are drawn again (the inserted cells are trusted, so the saved notebook is
    # signed and its widget outputs are rendered), and a click on a task scrolls to its card
    card = page.locator(".forkagent-card").filter(has_text="write the file")
    card.filter(has_text="completed").wait_for()
    _cells(page).nth(len(SOURCES) + 1).scroll_into_view_if_needed()
    task_id = _reveal(page, tasks, "w1")
    expect(page.locator(f".forkagent-task-{task_id}")).to_be_in_viewport()
    shot(page, "05-after-reload")


def test_restart_reconnects_and_send_resumes(nb_page: Any) -> None:
    page = nb_page
    before = int(_panel_attr(page, "data-forkagent-welcomes") or "0")
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
    tasks = _open_tasks(page)
    tasks.locator(".jp-forkagent-empty").wait_for()  # a new kernel has no tasks yet
    shot(page, "06-restarted")

    _run(page, 6)
    send_cell = _cells(page).nth(6)
    send_cell.filter(has_text="resumed from its transcript").wait_for()
    page.wait_for_selector(".jp-forkagent-approvals[data-count='1']", state="attached")
    send_cell.locator(".forkagent-approval").get_by_role("button", name="Allow once").first.click()
    page.wait_for_selector(".jp-forkagent-approvals[data-count='0']", state="attached")
    page.wait_for_function(
        "n => document.querySelectorAll('.jp-NotebookPanel .jp-Notebook .jp-Cell').length === n",
        arg=len(SOURCES) + 3,
    )
    note = _cells(page).nth(7).locator(".jp-forkagent-notification")
    note.wait_for()
    assert "w1" in note.locator(".jp-forkagent-notification-name").inner_text()
    assert "48" in note.locator(".jp-forkagent-notification-result").inner_text()
    tasks.locator(".jp-forkagent-task-row[data-status='completed']").wait_for()
    shot(page, "07-send-resumed")


def test_renderer_shows_text_not_html(nb_page: Any) -> None:
    page = nb_page
    last = 5 + 3  # SOURCES[5], below three notification cells
    _run(page, last)
    note = _cells(page).nth(last).locator(".jp-forkagent-notification[data-status='failed']")
    note.wait_for()
    assert note.locator(".jp-forkagent-notification-name").inner_text() == "inj"
    assert "<img src=x" in note.locator(".jp-forkagent-notification-result").inner_text()
    assert note.locator("img").count() == 0
    assert page.evaluate("() => document.body.dataset.pwned") is None
    shot(page, "08-renderer-text-only")


def test_stop_from_the_tasks_panel(nb_page: Any) -> None:
    page = nb_page
    _run(page, 6 + 3)  # SOURCES[6]; w3 waits for an approval: it keeps running
    page.wait_for_selector(".jp-forkagent-approvals[data-count='1']", state="attached")
    tasks = _open_tasks(page)
    row = tasks.locator(".jp-forkagent-task-row[data-status='running']").filter(has_text="w3")
    row.get_by_role("button", name=re.compile("^Stop task w3")).click()
    tasks.locator(".jp-forkagent-task-row[data-status='killed']").filter(has_text="w3").wait_for()
    page.wait_for_selector(".jp-forkagent-approvals[data-count='0']", state="attached")
    shot(page, "09-stopped")
