"""A named agent's todo list (TodoWrite) reaches the Tasks panel's row and `%tasks`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain

from .conftest import Kernel

pytestmark = pytest.mark.kernel

SESSION = "__forkagent__.session"
TODOS = [
    {"content": "Read the data", "status": "completed", "activeForm": "Reading the data"},
    {"content": "Fit the model", "status": "in_progress", "activeForm": "Fitting the model"},
    {"content": "Write the report", "status": "pending", "activeForm": "Writing the report"},
]


def test_a_todo_list_shows_in_the_task_row_and_the_table(
    kernel: Kernel, emulator: Any, tmp_path: Path
) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "planner.md").write_text(
        "---\nname: planner\ndescription: plans\ntools: TodoWrite\n---\nPlan.\n"
    )
    call = {"description": "plan", "prompt": "PLAN it", "subagent_type": "planner"}
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains(
        "START", Reply(({"type": "tool_use", "name": "Agent", "input": call},)), times=1
    )
    brain.when_last_user_contains(
        "PLAN it",
        Reply(({"type": "tool_use", "name": "TodoWrite", "input": {"todos": TODOS}},)),
        times=1,
    )
    emulator.brain = brain
    comm_id = "frontend-todos"
    kernel.open_comm(comm_id)
    assert kernel.execute("%%agent\nSTART planning").status == "ok"
    kernel.execute("%tasks --wait", timeout=60)
    [task_id] = kernel.value(f"[t.id for t in {SESSION}.tasks]")
    assert kernel.value(f"{SESSION}.registry.get('{task_id}').status") == "completed"
    tables = kernel.wait_comm(
        comm_id,
        "tasks",
        # the table sent when the comm opened has no task yet: wait for the row with the todos
        until=lambda ts: (
            bool(ts and ts[-1]["tasks"]) and ts[-1]["tasks"][0].get("todos_total") == 3
        ),
    )
    [row] = tables[-1]["tasks"]
    assert (row["todos_done"], row["todos_total"]) == (1, 3)
    table = kernel.execute("%tasks")
    html = next(
        m["content"]["data"]["text/html"] for m in table.messages if m["msg_type"] == "display_data"
    )
    assert "todos 1/3" in html
