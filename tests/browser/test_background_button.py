"""In JupyterLab: a synchronous named agent's card has a "Run in background" button; clicked
while the `%%agent` cell waits, the turn goes on and the result comes back once, as a
notification cell."""

from __future__ import annotations

from typing import Any

import pytest

from forkagent_jupyter.emulator import Emulator
from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain

from .conftest import Lab, notebook_json, open_notebook, shot
from .conftest import cells as _cells
from .conftest import run_cell as _run

NAME = "background.ipynb"
SOURCES = [
    "%load_ext forkagent_jupyter\n%config ForkAgent.permission_mode = 'bypassPermissions'\n"
    "%config ForkAgent.forking = False",
    "%%agent\nCHECK the numbers",
]
CALL = {
    "description": "slow check",
    "prompt": "check `py: __import__('time').sleep(8) or 6 * 7`",
    "subagent_type": "checker",
}


def _notebook() -> dict[str, Any]:
    return notebook_json(SOURCES)


@pytest.fixture(scope="module")
def nb_page(lab: Lab, page: Any, browser_emulator: Emulator) -> Any:
    agents = lab.root / ".forkagent" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "checker.md").write_text("---\ndescription: Checks numbers\n---\nYou check.\n")
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains(
        "CHECK", Reply(({"type": "tool_use", "name": "Agent", "input": CALL},)), times=1
    )
    browser_emulator.brain = brain
    return open_notebook(lab, page, NAME, _notebook())


def test_run_in_background_while_the_agent_cell_waits(nb_page: Any) -> None:
    page = nb_page
    _run(page, 0)
    page.wait_for_selector(".jp-NotebookPanel[data-forkagent-connected='2']", state="attached")
    _run(page, 1)
    turn = _cells(page).nth(1)
    button = turn.locator("button", has_text="Run in background")
    button.wait_for()
    shot(page, "background-01-button")
    button.click()
    # the turn goes on at once: the Agent call returned "moved to the background"
    turn.locator(".jp-OutputArea-output", has_text="to the background").first.wait_for(timeout=6000)
    # ... while the agent still works (its 8 s sleep): no notification yet
    assert page.locator(".jp-forkagent-notification").count() == 0
    # later the agent's result comes back once, as a notification cell below the turn
    note = page.locator(".jp-forkagent-notification[data-status='completed']")
    note.wait_for(timeout=60000)
    assert note.count() == 1
    shot(page, "background-02-notified")
