"""Forks and the task lifecycle, through the real SDK against the strict emulator.

The emulator's default brain is the offline model: ```python blocks and `py: ...` spans
become Python calls, `fork: ...` lines become Agent calls (forks)."""

from __future__ import annotations

from typing import Any

import pytest

from forkagent_jupyter.runtime.loop.fork import FORK_RECURSION_ERROR, FORK_TAG
from tests.reported import tool_outputs

from .helpers import breakpoint_tokens, dumps, first_fork_requests

pytestmark = pytest.mark.anyio

CONTEXT = "Context:\n" + "notes about the data set. " * 300
SPLIT = "Split it.\nfork: sum `py: sum(data)`\nfork: max `py: max(data)`\nfork: len `py: len(data)`"


async def test_three_forks_share_one_cached_prefix(emulator: Any, make_session: Any) -> None:
    session = make_session(auto_respond=False)
    session.namespace["data"] = list(range(10))
    await session.ask(CONTEXT)
    turn = await session.ask(SPLIT)
    assert turn.stop_reason == "end_turn", turn.error
    assert [c.name for c in turn.tool_calls] == ["Agent"] * 3
    assert all("Started background agent" in c.result for c in turn.tool_calls)
    tasks = await session.wait(timeout=30)
    assert [t.status for t in tasks] == ["completed"] * 3
    results = {t.description: t.result or "" for t in tasks}
    assert tool_outputs(results["sum `py: sum(data)`"]) == ["45"]
    assert tool_outputs(results["max `py: max(data)`"]) == ["9"]
    assert tool_outputs(results["len `py: len(data)`"]) == ["10"]

    firsts = first_fork_requests(emulator)
    assert len(firsts) == 3
    texts = [dumps(body) for body, _ in firsts]
    cut = texts[0].index(f"<{FORK_TAG}>")
    assert len({t[:cut] for t in texts}) == 1  # byte-identical up to the directive
    assert len({t[cut:] for t in texts}) == 3
    for body, _ in firsts:  # every tool_use of the parent's message is answered
        uses = [b["id"] for b in body["messages"][-2]["content"] if b["type"] == "tool_use"]
        results_ = [b["tool_use_id"] for b in body["messages"][-1]["content"][:3]]
        assert uses == results_ and len(uses) == 3
    # one write and two reads of the shared prefix (through the last placeholder)
    shared = breakpoint_tokens(firsts[0][0])[2]
    usages = sorted((u for _, u in firsts), key=lambda u: u["cache_read_input_tokens"])
    leader, followers = usages[0], usages[1:]
    assert leader["cache_read_input_tokens"] < shared
    assert leader["cache_read_input_tokens"] + leader["cache_creation_input_tokens"] > shared
    assert [f["cache_read_input_tokens"] for f in followers] == [shared, shared]


async def test_recursion_is_refused_and_the_parent_can_fork_again(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(auto_respond=False)
    first = await session.fork("Go deeper.\nfork: a nested fork")
    [done] = await session.wait(first.id, timeout=30)
    assert done.status == "completed"
    assert len(session.tasks) == 1  # the nested fork was not created
    child_results = [
        b
        for r in emulator.api_requests()
        for m in r.body["messages"]
        if m["role"] == "user"
        for b in m["content"]
        if b.get("type") == "tool_result" and b.get("is_error")
    ]
    assert any(FORK_RECURSION_ERROR in str(b["content"]) for b in child_results)
    # the parent itself is not poisoned: it forks again, several times
    for i in range(3):
        task = await session.fork(f"Round {i}: `py: {i} * 10`")
        [t] = await session.wait(task.id, timeout=30)
        assert t.status == "completed" and str(i * 10) in (t.result or "")
    assert len(session.tasks) == 4


async def test_notifications_reach_the_parent_once_and_it_answers_them(
    make_session: Any,
) -> None:
    session = make_session()
    tasks = [await session.fork(f"Part {i}: `py: {i} + 100`") for i in range(5)]
    await session.idle()
    assert all(t.status == "completed" for t in tasks)
    notes = [n for auto in session.responder.auto_turns for n in auto.notifications]
    assert len(notes) == 5  # one each, none twice
    answered = session.responder.auto_turns
    assert sorted(t for a in answered for t in a.task_ids) == sorted(t.id for t in tasks)
    texts = [b["text"] for m in session.messages for b in m["content"] if b.get("type") == "text"]
    delivered = [t for t in texts if t.startswith("<task-notification>")]
    assert len(delivered) == 5
    assert all(a.turn.stop_reason == "end_turn" for a in session.responder.auto_turns)
    assert "reported back" in session.responder.auto_turns[-1].turn.text


@pytest.mark.parametrize("name", ["'a", 'b"', "two words", "", "n" * 65, "tab\there"])
async def test_a_worker_name_that_is_not_one_word_is_refused(make_session: Any, name: str) -> None:
    """`%fork --name 'a b' x` had started a worker named `'a` with the directive `b' x`."""
    from forkagent_jupyter.runtime.errors import UsageError

    session = make_session(auto_respond=False)
    with pytest.raises(UsageError, match="a worker's name is one word of at most 64 characters"):
        session.fork_now("look", name=name)
    assert list(session.tasks) == []
