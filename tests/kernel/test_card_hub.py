"""CardHub's message budget: bounded per flush, final states first, none left behind."""

from __future__ import annotations

import re

from forkagent_jupyter.kernel.cards.hub import (
    FINAL_COST,
    RUNNING_COST,
    VISIBLE_CARDS,
    CardBox,
    CardHub,
    TaskCard,
)
from forkagent_jupyter.runtime.tasks.registry import Task


def _hub(n: int, rate: float) -> tuple[CardHub, list[TaskCard]]:
    hub = CardHub(interval=0.25, rate=rate)
    cards = [
        TaskCard(Task(id=f"t{i}", kind="fork", description=f"part {i}"), print) for i in range(n)
    ]
    for card in cards:
        hub.add(card)
    return hub, cards


def test_flush_stays_within_budget_and_sends_final_states_first() -> None:
    hub, cards = _hub(40, rate=40.0)  # 10 messages per flush
    for card in cards[:20]:
        card.task.preview = "working"
        hub.mark(card.task)  # running, marked first (oldest)
    for card in cards[20:]:
        card.task.status = "completed"
        card.task.result = f"result of {card.task.id}"
        hub.mark(card.task)
    hub.flush()
    assert hub.renders == 10 // FINAL_COST  # only final states in the first flush
    assert all("completed" not in c.header.value for c in cards[:20])
    flushes = 1
    while hub._dirty:
        before = hub.renders
        hub.flush()
        flushes += 1
        assert hub.renders - before <= 10 // min(FINAL_COST, RUNNING_COST)
    # every card got its final or latest state, none was dropped
    assert all(f"result of {c.task.id}" in c.header.value for c in cards[20:])
    assert all(c.stop_button not in c.children for c in cards[20:])
    assert all("working" in c.header.value for c in cards[:20])
    assert flushes == 20 * FINAL_COST // 10 + 20 * RUNNING_COST // 10


def test_transcript_is_filled_when_opened() -> None:
    hub, [card] = _hub(1, rate=40.0)
    hub.history_of = lambda task_id: [{"role": "assistant", "content": f"hello from {task_id}"}]
    assert card.transcript.value == ""
    card.details.selected_index = 0
    assert "hello from t0" in card.transcript.value


def test_a_finished_card_shows_its_result_as_markdown_and_drops_stop() -> None:
    hub, [card] = _hub(1, rate=40.0)
    assert card.stop_button in card.children
    card.task.status = "completed"
    card.task.result = (
        "**Findings**\n\n| column | missing |\n|---|---|\n| sex | 11 |\n\n"
        "<img src=x onerror=alert(1)> [x](javascript:alert(1))"
    )
    hub.mark(card.task)
    hub.flush()
    html = card.header.value
    assert "<strong>Findings</strong>" in html and "<td>sex</td>" in html
    assert "<img" not in html and "&lt;img" in html  # raw HTML is text, not markup
    assert 'href="javascript' not in html  # unsafe links stay text
    assert card.stop_button not in card.children


def test_a_failed_card_shows_its_error_as_text() -> None:
    hub, [card] = _hub(1, rate=40.0)
    card.task.status = "failed"
    card.task.error = "APIError: overloaded <b>"
    hub.mark(card.task)
    hub.flush()
    assert "APIError: overloaded &lt;b&gt;" in card.header.value


def test_states_sent_again_by_settle_count_against_the_budget() -> None:
    hub, cards = _hub(20, rate=40.0)  # 10 messages per flush
    for card in cards[:5]:
        card.task.status = "completed"
        hub.mark(card.task)
    hub.flush()  # between cells: 5 final states (10 messages) that a headless client misses
    assert hub.renders == 5
    hub.settle()  # ... sent again in the next cell: 10 more messages
    for card in cards[5:]:
        card.task.preview = "working"
        hub.mark(card.task)
    hub.flush()
    assert hub.renders == 5  # this flush's budget went to the states sent again
    hub.flush()
    assert hub.renders == 15  # then the rate resumes


def test_a_card_shows_a_stream_retry_on_its_activity_line() -> None:
    hub, [card] = _hub(1, rate=40.0)
    card.task.activity = "stream dropped, retrying (1/3)"
    hub.mark(card.task)
    hub.flush()
    assert "stream dropped, retrying (1/3)" in card.header.value
    assert "stream dropped, retrying (1/3)" in repr(card)  # text/plain too
    card.task.activity = ""
    card.task.preview = "going again"
    hub.mark(card.task)
    hub.flush()
    assert "retrying" not in card.header.value and "going again" in card.header.value


class _Handle:
    """A display handle that records what it was updated with."""

    def __init__(self) -> None:
        self.updates: list[object] = []

    def update(self, obj: object, **_kwargs: object) -> None:
        self.updates.append(obj)


def _fan_out(n: int) -> tuple[CardHub, CardBox, list[Task]]:
    """A hub and one cell's box with `n` tasks shown as the kernel UI shows them."""
    hub = CardHub(interval=0.25, rate=10_000.0)
    hub.make_card = lambda task: TaskCard(task, print)
    box = CardBox()
    box.handle = _Handle()
    hub.boxes.append(box)
    tasks = [Task(id=f"t{i}", kind="fork", description=f"part {i}") for i in range(n)]
    for task in tasks:
        if not hub.collapse(task, box):
            hub.add(hub.make_card(task), box)
    hub.flush()
    return hub, box, tasks


def test_cards_past_the_visible_ones_collapse_into_one_summary_row() -> None:
    hub, box, tasks = _fan_out(300)
    cards = [c for c in box.children if isinstance(c, TaskCard)]
    assert [c.task.id for c in cards] == [f"t{i}" for i in range(VISIBLE_CARDS)]
    assert len(box.children) == VISIBLE_CARDS + 1  # the cards and the summary row
    assert len(hub.cards) == VISIBLE_CARDS  # no widgets for the collapsed tasks
    assert box.summary is not None and box.more is not None
    assert f"{300 - VISIBLE_CARDS} more tasks" in box.summary.value
    assert "<span class='forkagent-running-count'" in box.summary.value
    for task in tasks[100:250]:
        task.status = "completed"
        hub.mark(task)
    hub.flush()
    counts = re.findall(r"forkagent-(\w+)-count'[^>]*>(\d+)<", box.summary.value)
    assert dict(counts) == {"running": str(300 - VISIBLE_CARDS - 150), "completed": "150"}
    # the text a saved notebook keeps names every task, collapsed or not
    assert all(f"part {i} " in repr(box) for i in range(300))


def test_show_more_makes_the_next_collapsed_tasks_cards() -> None:
    hub, box, tasks = _fan_out(30)
    assert box.more is not None
    box.more.click()
    hub.flush()
    cards = [c for c in box.children if isinstance(c, TaskCard)]
    assert [c.task.id for c in cards] == [f"t{i}" for i in range(2 * VISIBLE_CARDS)]
    assert box.more.description == f"Show {30 - 2 * VISIBLE_CARDS} more"
    box.more.click()
    hub.flush()
    assert len(box.children) == 30  # all shown: no summary row left
    assert tasks[29].id in hub.cards and not hub.hidden


def test_a_live_box_gets_its_text_once_when_all_its_tasks_ended() -> None:
    """A display update of the box is drawn by the frontend as a new view of every card in
    it: with a live frontend, one at the end, not one per ended card."""
    hub, box, tasks = _fan_out(40)
    handle = box.handle
    for task in tasks[:-1]:
        task.status = "completed"
        hub.mark(task)
        hub.flush()
    assert handle.updates == []
    tasks[-1].status = "failed"
    hub.mark(tasks[-1])
    hub.flush()
    assert handle.updates == [box]
