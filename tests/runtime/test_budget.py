"""A session's cost budget (`max_cost_usd`): workers stopped, new work refused, resumable."""

from __future__ import annotations

from typing import Any

import pytest

from forkagent_jupyter.runtime.errors import UsageError
from forkagent_jupyter.runtime.model.budget import BudgetError

from .test_lifecycle import SLEEP

pytestmark = pytest.mark.anyio


async def test_reaching_the_budget_stops_workers_and_refuses_new_work(
    emulator: Any, make_session: Any
) -> None:
    session = make_session()
    await session.ask("Hello.")
    spent = session.cost_usd
    assert spent > 0
    session.max_cost_usd = spent * 1.01  # the workers' first replies cross it
    tasks = [await session.fork(f"Work {i}: " + SLEEP.format(s=20)) for i in range(2)]
    await session.wait(timeout=30)
    assert [t.status for t in tasks] == ["killed", "killed"], [t.error for t in tasks]
    for task in tasks:
        assert "cost budget reached" in (task.error or "")
        assert "cost budget reached" in (task.notification or "")
        assert "<status>killed</status>" in (task.notification or "")
    sent = len(emulator.ledger.entries())
    with pytest.raises(BudgetError, match="The turn was refused, cost budget reached"):
        await session.ask("Go on.")
    with pytest.raises(BudgetError, match="max_cost_usd"):
        await session.fork("One more.")
    with pytest.raises(BudgetError):
        await session.send(tasks[0].id, "continue")
    await session.idle()  # returns: the notifications wait, unanswered
    assert session.responder.auto_turns == [] and len(session.queue.pending("main")) == 2
    assert len(emulator.ledger.entries()) == sent  # nothing more was sent

    session.max_cost_usd = spent * 100  # raising the limit lets the parent read them
    await session.idle()
    [auto] = session.responder.auto_turns
    assert sorted(auto.task_ids) == sorted(t.id for t in tasks)
    assert (await session.ask("Thanks.")).ok


async def test_a_turn_in_flight_ends_before_its_next_request(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(max_cost_usd=1e-9)  # the first reply crosses it
    turn = await session.ask("Compute: `py: 6 * 7`")
    assert not turn.ok and "cost budget reached" in (turn.error or "")
    assert len(emulator.ledger.entries()) == 1  # the tool ran; the next request was not sent
    session.max_cost_usd = None
    assert (await session.ask("And now?")).ok  # the history stayed valid


async def test_the_limit_must_be_positive(make_session: Any) -> None:
    with pytest.raises(UsageError, match="positive"):
        make_session(max_cost_usd=0)
    session = make_session()
    with pytest.raises(UsageError, match="positive"):
        session.max_cost_usd = -1.0
    assert session.max_cost_usd is None
