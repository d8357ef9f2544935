"""Mistakes that had been taken silently: a name given twice, a model that is no Claude model,
a prompt too large to notice (issue 42, section 4), through the real SDK and the emulator."""

from __future__ import annotations

from typing import Any

import pytest

from forkagent_jupyter.runtime.errors import UsageError
from forkagent_jupyter.runtime.tasks.notifications import CommandQueue
from forkagent_jupyter.runtime.tasks.registry import Task, TaskRegistry

pytestmark = pytest.mark.anyio


# -- a name given twice ----------------------------------------------------------------------


async def test_running_a_named_fork_again_moves_the_name_to_the_new_worker(
    make_session: Any,
) -> None:
    """Re-running a `%fork --name x` cell (Run All twice) had made two tasks named `x`: the
    table showed both, and which one `send`, `stop`, `wait` and `pull` reached was decided by
    the order the registry happened to hold them in. Now `x` names the newest; the earlier one
    keeps its id, and each card says so in one line."""
    session = make_session(auto_respond=False)
    first = session.fork_now("first run `py: 1 + 1`", name="x")
    await session.wait(first.id, timeout=60)
    second = session.fork_now("second run `py: 2 + 2`", name="x")
    assert second.id != first.id
    assert [t.id for t in session.tasks if t.name == "x"] == [second.id]  # one holder
    assert first.name is None and session.task(first.id) is first  # reachable by its id
    assert session.task("x") is second and session.find_task("x") is second
    assert second.notes == [f"x now names this worker; the earlier x is {first.id}"]
    assert first.notes == [f"its name x now names {second.id}, a later worker"]
    await session.wait("x", timeout=60)
    reply = await session.send("x", "once more `py: 3 + 3`")
    assert reply.startswith("Agent x had completed; it was resumed"), reply
    assert second.run == 2 and first.run == 1  # the message reached the newest
    await session.wait(timeout=60)


async def test_a_running_name_or_another_tasks_id_is_no_name_for_a_new_worker(
    make_session: Any,
) -> None:
    session = make_session(auto_respond=False)
    running = session.fork_now("wait `py: __import__('time').sleep(30)`", name="busy")
    with pytest.raises(UsageError, match=r"in use by the running task .*or stop busy first\.$"):
        session.fork_now("another", name="busy")
    with pytest.raises(UsageError, match=r"is the id of another task: give this worker another"):
        session.fork_now("another", name=running.id)
    assert list(session.tasks) == [running]
    await session.stop("busy")


def test_a_task_registered_with_a_name_it_cannot_take_is_registered_without_it() -> None:
    """A resumed agent (or a batch's fork) is not asked first: it goes without the name, and
    its card says why; the running holder keeps it."""
    registry = TaskRegistry(CommandQueue())
    holder = registry.register(Task(id="a1", kind="fork", description="d", name="x"))
    late = registry.register(Task(id="a2", kind="fork", description="d", name="x"))
    assert late.name is None and holder.name == "x"
    assert late.notes == [
        "not named 'x': the name 'x' is in use by the running task a1; use its id a2"
    ]
    assert registry.find("x") is holder and registry.find("a2") is late
