"""A large fan-out in one cell: its notifications arrive as one digest cell, its cards past
the first ones collapse into a summary row, and the parent still reads every notification."""

from __future__ import annotations

from forkagent_jupyter.kernel.cards.hub import VISIBLE_CARDS
from forkagent_jupyter.kernel.frontend.answers import DIGEST_AT

from .conftest import Kernel

N = VISIBLE_CARDS + 2  # more than DIGEST_AT, and two tasks past the visible cards


def test_a_large_fan_out_gets_one_digest_cell_and_collapsed_cards(kernel: Kernel) -> None:
    assert DIGEST_AT < N
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    comm_id = "frontend-digest"
    kernel.open_comm(comm_id)
    forks = "\n".join(f"%fork --name part{i} report `py: print({i} * 1000 + 7)`" for i in range(N))
    assert kernel.execute(forks).status == "ok"
    kernel.execute("%tasks --wait", timeout=180)
    ids = kernel.value("sorted(t.id for t in __forkagent__.session.tasks)")
    assert len(ids) == N

    # one key, replaced as it grows, until it holds every task, each completed
    inserts = kernel.wait_comm(
        comm_id,
        "insert_cell",
        until=lambda xs: bool(xs) and sorted(xs[-1]["task_ids"]) == ids,
        timeout=60,
    )
    assert {x["key"] for x in inserts} == {inserts[0]["key"]}
    assert all(x["replace"] is True for x in inserts)
    assert "insert_cell" in kernel.comm_typed(comm_id)  # each message exactly its type
    cell = inserts[-1]["cell"]
    # re-running it shows every task's notification again; its source changes only then
    assert cell["source"].startswith("%notifications ")
    assert sorted(cell["source"].split()[1:]) == ids
    assert len({x["cell"]["source"] for x in inserts[:-1]}) <= 1
    assert cell["metadata"]["forkagent"]["digest"] is True
    assert cell["metadata"]["forkagent"]["kind"] == "notification"
    digest = cell["outputs"][0]["data"]
    rows = digest["application/vnd.forkagent.digest+json"]["tasks"]
    assert sorted(r["task_id"] for r in rows) == ids
    assert {r["status"] for r in rows} == {"completed"}
    by_name = {r["name"]: r for r in rows}
    assert "3007" in by_name["part3"]["result"]  # each row carries its result
    assert by_name["part3"]["notification"] == ""  # not the XML again: the digest stays small
    assert digest["text/plain"].startswith(f"{N} notifications: {N} completed")
    # the parent read every worker's notification, whatever the notebook shows
    answered = "__forkagent__.session.responder.auto_turns"
    read = kernel.value(f"sorted(i for a in {answered} for i in a.task_ids)")
    assert read == ids

    # the first VISIBLE_CARDS are cards; the other two are counted in the summary row
    box = f"__forkagent__.ui._run_cards[__forkagent__.ui.launches[{ids[0]!r}].run]"
    assert kernel.value(f"[len({box}.shown), len({box}.hidden)]") == [VISIBLE_CARDS, 2]
    summary = kernel.value(f"{box}.summary.value")
    assert "2 more tasks" in summary and "forkagent-completed-count" in summary
    assert ">2</span> completed" in summary
