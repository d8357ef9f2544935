"""A `%reload_ext` or a kernel restart while workers run: a reload keeps the session (its
workers, cards, rules, settings) and says so once; an unload stops the workers in one line;
nothing is said twice; after a restart, `%tasks` lists the workers the restart cut off as
interrupted, and `%send` resumes one."""

from __future__ import annotations

import pytest

from .conftest import Kernel
from .test_compute import SESSION, setup, status, wait_until

pytestmark = pytest.mark.kernel

ALLOWED = f"[(str(r), r.source) for r in {SESSION}.gate.rules.of('allow')]"
SLEEPER = "%fork --name sleeper wait `py: import time; time.sleep(120)`"


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_a_reload_keeps_the_session_and_each_refusal_is_said_once(kernel: Kernel) -> None:
    """`%reload_ext` made a new session: `%tasks` said `No tasks yet.` while the workers ran
    on, the `api.allow` rules were gone, and every later `%config` refusal was said twice."""
    setup(kernel)  # api.allow("Python")
    assert kernel.execute(SLEEPER).status == "ok"
    session, rules = kernel.value(f"id({SESSION})"), kernel.value(ALLOWED)
    assert ("Python", "api.allow") in rules
    reloaded = kernel.execute("%reload_ext forkagent_jupyter")
    assert reloaded.status == "ok", reloaded.texts()
    [said] = _lines(reloaded.texts())
    assert said.startswith("forkagent: reloaded; the session goes on"), said
    assert kernel.value(f"id({SESSION})") == session
    assert kernel.value(ALLOWED) == rules
    assert status(kernel, "sleeper") == "running"
    table = kernel.execute("%tasks")
    assert "sleeper" in table.texts() and "No tasks yet" not in table.texts()
    for _ in range(2):  # a second reload says nothing twice either
        refused = kernel.execute("%config ForkAgent.max_workers = -1")
        assert len(_lines(refused.texts())) == 1, refused.texts()
        assert kernel.execute("%reload_ext forkagent_jupyter").status == "ok"
    assert kernel.execute("%stop sleeper").status == "ok"


def test_an_unload_stops_the_workers_in_one_line_and_a_new_load_says_nothing_twice(
    kernel: Kernel,
) -> None:
    setup(kernel)
    assert kernel.execute(SLEEPER).status == "ok"
    unloaded = kernel.execute("%unload_ext forkagent_jupyter")
    assert unloaded.status == "ok", unloaded.texts()
    [said] = _lines(unloaded.texts())
    assert said.startswith("forkagent: unloaded; 1 running worker(s) stopped"), said
    assert kernel.execute("%load_ext forkagent_jupyter").status == "ok"
    refused = kernel.execute("%config ForkAgent.max_workers = -1")
    assert refused.status == "error"
    assert len(_lines(refused.texts())) == 1, refused.texts()
    assert kernel.execute("%tasks").status == "ok"  # a new session, with no task


def test_after_a_restart_tasks_lists_the_workers_it_cut_off_and_send_resumes_one(
    kernel: Kernel,
) -> None:
    """After a restart `%tasks` said `No tasks yet.` about workers that had been running, and
    one resumed with `%send` showed plain `completed`."""
    setup(kernel)
    assert kernel.execute(SLEEPER).status == "ok"
    wait_until(kernel, f"{SESSION}.registry.get('sleeper').current_tool == 'Python'")
    flushed = kernel.execute(f"await {SESSION}.store.aflush()")  # its call is on disk
    assert flushed.status == "ok", flushed.texts()

    kernel.km.restart_kernel(now=True)
    kernel.client.wait_for_ready(timeout=60)
    assert kernel.execute("%load_ext forkagent_jupyter").status == "ok"
    listed = kernel.execute("%tasks")
    text = listed.texts()
    assert listed.status == "ok" and "No tasks yet" not in text, text
    assert "interrupted, 1 of 1 tool call failed" in text, text
    assert "<code>%send sleeper MESSAGE</code> resumes it" in text, text
    plain = next(m for m in listed.messages if m["msg_type"] == "display_data")
    line = next(ln for ln in plain["content"]["data"]["text/plain"].splitlines() if "sleeper" in ln)
    assert line.startswith("sleeper (fork) interrupted, 1 of 1 tool call failed · wait"), line
    assert line.endswith("%send sleeper MESSAGE resumes it from its transcript"), line

    setup(kernel)
    resumed = kernel.execute("%send sleeper Go on `py: 2 + 2`")
    assert resumed.status == "ok" and "resumed from its transcript" in resumed.texts()
    kernel.run_approving("%tasks --wait sleeper", timeout=60)
    assert status(kernel, "sleeper") == "completed"
    table = kernel.execute("%tasks").texts()
    assert "completed, 1 of 2 tool calls failed" in table, table
    assert "forkagent-interrupted" not in table  # listed once: as the task it is now
    card = kernel.execute(
        "print(repr(__forkagent__.ui.hub.cards[__forkagent__.session.task('sleeper').id]))"
    )
    assert "completed, 1 of 2 tool calls failed" in card.texts(), card.texts()
    assert "its earlier run was interrupted before it finished" in card.texts(), card.texts()
