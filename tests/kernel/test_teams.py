"""A team in a real kernel: its cards sit together under the team's name and roster, `%send`
reaches a teammate by name and the whole team with `team:NAME` (or `NAME:*`), `%tasks` groups
by team, `%stop team:NAME` shuts it down without asking the agent."""

from __future__ import annotations

import time
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain

from .conftest import Kernel

pytestmark = pytest.mark.kernel

SESSION = "__forkagent__.session"


def _spawn(name: str, prompt: str, team: str | None = None) -> Reply:
    call = {"description": f"{name} works", "prompt": prompt, "name": name}
    if team is not None:
        call["team_name"] = team
    return Reply.tool_use("Agent", call)


def _wait_until(kernel: Kernel, expr: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not kernel.value(expr):
        assert time.monotonic() < deadline, f"not reached: {expr}"
        time.sleep(0.1)


def _history(kernel: Kernel, name: str) -> str:
    return str(kernel.value(f"str({SESSION}.history({SESSION}.task({name!r}).id))"))


def test_a_team_in_the_notebook(kernel: Kernel, emulator: Any) -> None:
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("FORM", _spawn("ana", "ANA-JOB `py: 6 * 7`", "analysts"), times=1)
    brain.when_last_user_contains("MORE", _spawn("bob", "BOB-JOB `py: 2 + 3`"), times=1)
    emulator.brain = brain
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    assert kernel.execute("%%agent\nFORM a team").status == "ok"
    assert kernel.execute("%%agent\nMORE help").status == "ok"  # joins the current team
    idle = f"all(t.idle for t in {SESSION}.teams['analysts'])"
    _wait_until(kernel, f"len({SESSION}.teams['analysts']) == 2 and {idle}")
    # one box for the team, its roster on top, both cards in it (spawned in two cells)
    boxes = kernel.value("list(__forkagent__.ui.team_boxes)")
    assert boxes == ["analysts"]
    box = "__forkagent__.ui.team_boxes['analysts']"
    assert kernel.value(f"[c.task.name for c in {box}.cards()]") == ["ana", "bob"]
    assert kernel.value(f"{box}.children[0] is {box}.roster")
    roster = kernel.value(f"{box}.roster.value")
    assert "team analysts" in roster and "ana" in roster and "bob" in roster and "idle" in roster
    kernel.drain()
    opened = kernel.widget_comms(_dom_classes=["forkagent-cards", "forkagent-team"])
    assert len(opened) == 1, opened
    # %send: one teammate by name, then the whole team
    one = kernel.execute("%send ana ONLY-ANA look at nulls")
    assert one.status == "ok" and "mailbox" in one.texts()
    _wait_until(kernel, f"'ONLY-ANA' in str({SESSION}.history({SESSION}.task('ana').id))")
    assert '<teammate-message teammate_id="user">' in _history(kernel, "ana")
    assert "ONLY-ANA" not in _history(kernel, "bob")
    both = kernel.execute("%send team:analysts ALL-OF-YOU stop and report")
    assert both.status == "ok" and "broadcast to 2 teammate(s): ana, bob" in both.texts()
    _wait_until(
        kernel,
        f"all('ALL-OF-YOU' in str({SESSION}.history(t.id)) for t in {SESSION}.teams['analysts'])",
    )
    star = kernel.execute("%send analysts:* AGAIN-ALL")
    assert star.status == "ok" and "broadcast to 2 teammate(s)" in star.texts()
    _wait_until(kernel, idle)
    # %tasks: the team's roster, then its members
    shown = kernel.execute("%tasks").texts()
    row = "<b>team analysts · ana idle, bob idle</b>"
    assert shown.index(row) < shown.index("<code>ana</code>") < shown.index("<code>bob</code>")
    table = kernel.value("__forkagent__.ui.tasks_bundle([])['text/plain']")
    head = table.index("\nteam analysts · ana idle, bob idle\n")
    assert head < table.index("\n  ana (general-purpose) running") < table.index("\n  bob (")
    # ana's card's Stop button stops ana; %stop team:NAME then shuts the rest down, shown
    # here and not handed to the agent
    ana_id = kernel.value(f"{SESSION}.task('ana').id")
    [button] = kernel.widget_comms(description="Stop", tooltip=f"Stop worker {ana_id}")
    kernel.click(button)
    _wait_until(kernel, f"{SESSION}.task('ana').settled")
    assert kernel.value(f"{SESSION}.task('ana').status") == "killed"
    assert kernel.value(f"{SESSION}.task('bob').status") == "running"  # still idle, waiting
    kernel.execute(f"await {SESSION}.idle()")
    before = len(emulator.api_requests())
    stopped = kernel.execute("%stop team:analysts")
    assert stopped.status == "ok" and "stopping team analysts (1 teammate(s))" in stopped.texts()
    _wait_until(kernel, f"all(t.settled for t in {SESSION}.tasks)")
    assert kernel.value(f"[t.status for t in {SESSION}.tasks]") == ["killed", "killed"]
    assert kernel.value(f"{box}.roster.value").count("killed") == 2
    kernel.execute(f"await {SESSION}.idle()")
    later = emulator.api_requests()[before:]
    assert not any("<task-notification>" in str(r.body["messages"]) for r in later)
    wrong = kernel.execute("%send team:nobody hi")
    assert wrong.status == "error" and "No team 'nobody'. Teams: analysts." in wrong.texts()


def test_after_a_restart_tasks_lists_the_team_and_send_resumes_its_teammates(
    kernel: Kernel, emulator: Any
) -> None:
    """After a restart a teammate came back as a plain agent: listed apart from its team,
    out of `%send team:...`'s reach, and ended after one turn instead of waiting for mail."""
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("FORM", _spawn("ana", "ANA-JOB look", "analysts"), times=1)
    brain.when_last_user_contains("MORE", _spawn("bob", "BOB-JOB look"), times=1)
    emulator.brain = brain
    assert kernel.execute("%%agent\nFORM a team").status == "ok"
    assert kernel.execute("%%agent\nMORE help").status == "ok"
    idle = f"all(t.idle for t in {SESSION}.teams['analysts'])"
    _wait_until(kernel, f"len({SESSION}.teams['analysts']) == 2 and {idle}")
    flushed = kernel.execute(f"await {SESSION}.store.aflush()")
    assert flushed.status == "ok", flushed.texts()

    kernel.km.restart_kernel(now=True)
    kernel.client.wait_for_ready(timeout=60)
    assert kernel.execute("%load_ext forkagent_jupyter").status == "ok"
    listed = kernel.execute("%tasks")
    assert listed.status == "ok", listed.texts()
    assert "<b>team analysts · ana interrupted, bob interrupted</b>" in listed.texts()
    plain = next(m for m in listed.messages if m["msg_type"] == "display_data")
    lines = plain["content"]["data"]["text/plain"].splitlines()
    head = lines.index("team analysts · ana interrupted, bob interrupted")
    assert lines[head + 1].startswith("  ana (general-purpose) interrupted · ana works"), lines
    assert lines[head + 2].startswith("  bob (general-purpose) interrupted · bob works"), lines
    assert lines[head + 1].endswith("resumes it from its transcript, back in team analysts")

    # %send resumes one as a teammate: in its team's box, waiting for mail after its turn
    resumed = kernel.execute("%send ana ANA-AGAIN look again")
    assert resumed.status == "ok", resumed.texts()
    assert "back in team analysts" in resumed.texts(), resumed.texts()
    assert kernel.value(f"{SESSION}.task('ana').team") == "analysts"
    _wait_until(kernel, f"{SESSION}.task('ana').idle")
    assert kernel.value(f"{SESSION}.task('ana').status") == "running"
    history = _history(kernel, "ana")
    assert '<teammate-message teammate_id="user">' in history and "ANA-AGAIN" in history
    table = kernel.value("__forkagent__.ui.tasks_bundle([])['text/plain']")
    assert "\nteam analysts · ana idle, bob interrupted\n" in table, table
    assert kernel.value("list(__forkagent__.ui.team_boxes)") == ["analysts"]

    # %send team:* reaches the live member and resumes the one still on disk
    both = kernel.execute("%send team:* ALL-OF-YOU report")
    assert both.status == "ok", both.texts()
    assert "broadcast to 1 teammate(s): ana" in both.texts(), both.texts()
    assert "back in team analysts: bob" in both.texts(), both.texts()
    _wait_until(
        kernel,
        f"all('ALL-OF-YOU' in str({SESSION}.history(t.id)) for t in {SESSION}.teams['analysts'])"
        f" and {idle}",
    )
    table = kernel.value("__forkagent__.ui.tasks_bundle([])['text/plain']")
    assert "\nteam analysts · ana idle, bob idle\n" in table, table
    assert "interrupted" not in table.replace("its earlier run was interrupted", "")
    assert kernel.execute("%stop team:analysts").status == "ok"
