"""The Tasks panel's rows name each task's team (the team `%tasks` and the team's box of cards
group it under), and a task in no team has none; every message on the comm is exactly its
protocol type."""

from __future__ import annotations

from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, ScriptedBrain

from .conftest import Kernel
from .test_teams import SESSION, _spawn, _wait_until

pytestmark = pytest.mark.kernel


def _teams(rows: list[dict[str, Any]]) -> dict[str, str | None]:
    return {row["name"]: row["team"] for row in rows}


def test_each_row_carries_its_team(kernel: Kernel, emulator: Any) -> None:
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("FORM", _spawn("ana", "ANA-JOB `py: 6 * 7`", "analysts"), times=1)
    brain.when_last_user_contains("MORE", _spawn("bob", "BOB-JOB `py: 2 + 3`"), times=1)
    emulator.brain = brain
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    comm_id = "frontend-team-rows"
    kernel.open_comm(comm_id)
    assert kernel.execute("%fork --name solo alone `py: 1 + 1`").status == "ok"
    assert kernel.execute("%%agent\nFORM a team").status == "ok"
    assert kernel.execute("%%agent\nMORE help").status == "ok"  # joins the current team
    idle = f"all(t.idle for t in {SESSION}.teams['analysts'])"
    _wait_until(kernel, f"len({SESSION}.teams['analysts']) == 2 and {idle}")
    expected = {"solo": None, "ana": "analysts", "bob": "analysts"}
    tables = kernel.wait_comm(
        comm_id, "tasks", until=lambda ts: bool(ts) and _teams(ts[-1]["tasks"]) == expected
    )
    # the same team the session's roster (what %tasks and the team's box read) names
    rows = tables[-1]["tasks"]
    assert kernel.value(f"[t.name for t in {SESSION}.teams['analysts']]") == ["ana", "bob"]
    assert [r["team"] for r in rows if r["name"] in ("ana", "bob")] == ["analysts", "analysts"]
    # a frontend that connects now is told the teams at once
    welcome = kernel.open_comm("frontend-later")
    assert _teams(welcome["tasks"]) == expected
    # every message sent is exactly its protocol type (a row without `team` fails here)
    assert {"welcome", "tasks"} <= set(kernel.comm_typed(comm_id))
    assert kernel.comm_typed("frontend-later")[0] == "welcome"
