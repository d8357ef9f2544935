"""CardHub's message budget: bounded per flush, final states first, none left behind."""

from __future__ import annotations

from forkagent_jupyter.kernel.cards import FINAL_COST, RUNNING_COST, CardHub, TaskCard
from forkagent_jupyter.runtime.tasks import Task


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
