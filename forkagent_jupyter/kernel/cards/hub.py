"""Task cards (ipywidgets) and the hub that coalesces their updates.

A card shows one worker live: status, elapsed time, the current tool, a preview of its text,
tokens in/out, cache read/write, cost, a Stop button, its transcript on demand, and at the end
its result and notification. Cards never print: everything they show is widget state, so a
worker's output never lands in whatever cell runs now.

Updates are coalesced by `CardHub`: runtime events only mark a card dirty; a flusher on the
event loop sends at most `rate` widget messages a second (final states first, then progress,
oldest first), so the IOPub rate stays bounded however many workers stream. The cards a cell
starts live in one container, so a burst of forks costs one message, not one display each.
Widgets send only values that changed.

Here: `CardHub`. The card: `task_card`; a cell's box of cards: `card_box`; permission prompts
and the pending strip: `approval_prompt`; what the widgets share: `widget_parts`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import ipywidgets as w

from ...runtime import Message, Output, Task
from ..parents import in_latest_request
from .approval_prompt import ApprovalPrompt, PendingStrip
from .card_box import PLAIN_CARDS, VISIBLE_CARDS, CardBox
from .task_card import TaskCard, card_text

__all__ = [
    "FINAL_COST",
    "PLAIN_CARDS",
    "RUNNING_COST",
    "VISIBLE_CARDS",
    "ApprovalPrompt",
    "CardBox",
    "CardHub",
    "PendingStrip",
    "TaskCard",
    "card_text",
]


# IOPub messages a render costs: a running card's line; a final card's line and its rows
# (the Stop button goes).
RUNNING_COST = 1
FINAL_COST = 2


class CardHub:
    """Owns the cards and coalesces their updates (see the module doc)."""

    def __init__(self, *, interval: float = 0.25, rate: float = 200.0) -> None:
        self.interval = interval
        self.rate = rate
        self.cards: dict[str, TaskCard] = {}
        self._dirty: dict[str, float] = {}
        self._pending: dict[int, tuple[w.VBox, list[TaskCard]]] = {}
        self._flusher: asyncio.Task[None] | None = None
        self.flushes = 0
        self.renders = 0
        self.history_of: Callable[[str], list[Message]] | None = None
        self.boxes: list[CardBox] = []
        # between cells nothing is running to own a message: headless clients (nbclient)
        # drop what is sent then, so lasting changes sent then are sent again in the next cell
        self.in_cell = False
        self._unseen: dict[int, tuple[w.Widget, tuple[str, ...]]] = {}
        self._debt = 0.0  # messages sent outside a flush, taken from the next flushes' budget
        # True when no frontend can draw or click the widgets (nbclient, papermill, nbconvert)
        self.headless: Callable[[], bool] = lambda: False
        self._unseen_boxes: dict[int, CardBox] = {}
        self.hidden: dict[str, CardBox] = {}  # collapsed tasks (no card yet) -> their box
        self._summaries: dict[int, CardBox] = {}  # boxes whose summary row is due
        self.make_card: Callable[[Task], TaskCard] | None = None  # a card for a shown task

    def collapse(self, task: Task, box: CardBox) -> bool:
        """Collapse `task` into `box`'s summary row if the box shows all the cards it may
        (True); False: the caller makes it a card."""
        if not box.full:
            return False
        box.hidden.append(task)
        box.final_text = False
        box.on_more = self.show_more
        self.hidden[task.id] = box
        self._summary_due(box)
        return True

    def _summary_due(self, box: CardBox) -> None:
        self._summaries[id(box)] = box
        self._ensure_flusher()

    def reveal(self, task_id: str) -> TaskCard | None:
        """Show a collapsed task as a card in its box (an approval for it, a "Show more")."""
        box = self.hidden.pop(task_id, None)
        if box is None or self.make_card is None:
            return None
        task = next(t for t in box.hidden if t.id == task_id)
        box.hidden.remove(task)
        card = self.make_card(task)
        self.add(card, box)
        self._summary_due(box)
        return card

    def show_more(self, box: CardBox) -> None:
        """The summary row's button: the next `box.visible` collapsed tasks become cards."""
        for task in list(box.hidden[: box.visible]):
            self.reveal(task.id)

    def add(self, card: TaskCard, container: w.VBox | None = None) -> None:
        """Register a card; with a container, append it there at the next flush (all cards
        started together then cost one message, not one display each)."""
        self.cards[card.task.id] = card
        task_id = card.task.id
        card.history = lambda: self.history_of(task_id) if self.history_of is not None else []
        if container is None:
            return
        if isinstance(container, CardBox):
            container.shown.append(card)
            container.final_text = False
        self._pending.setdefault(id(container), (container, []))[1].append(card)
        if not self._ensure_flusher():
            self._append_pending()

    def output(self, task_id: str, output: Output) -> None:
        """Queue what a worker's code printed or displayed for its card's next render."""
        card = self.cards.get(task_id)
        if card is None:
            return
        card.queued.append(output)
        self.mark(card.task)

    def mark(self, task: Task) -> None:
        if task.id in self.cards:
            self._dirty.setdefault(task.id, time.monotonic())
            self._ensure_flusher()
        elif task.id in self.hidden:
            self._summary_due(self.hidden[task.id])

    def _ensure_flusher(self) -> bool:
        if self._flusher is None or self._flusher.done():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return False
            self._flusher = in_latest_request(loop.create_task, self._run())
        return True

    async def _run(self) -> None:
        while self._dirty or self._pending or self._summaries:
            await asyncio.sleep(self.interval)
            self.flush()

    def _append_pending(self) -> int:
        sent = 0
        for container, cards in self._pending.values():
            if isinstance(container, CardBox):
                if not container.layout_children():
                    continue
            else:
                container.children = (*container.children, *cards)
            sent += 1
            self._sent(container, "children")
        self._pending.clear()
        return sent

    def _sent(self, widget: w.Widget, *names: str) -> None:
        if not self.in_cell:
            self._unseen[id(widget)] = (widget, names)

    def settle(self) -> None:
        """At the end of a cell: put the cards it started into their containers now, and send
        again the final states sent while no cell ran, so a client that keeps only the
        messages of the running cell (nbclient, papermill) saves them. Costs one message per
        container and per card that ended between cells, taken from the next flushes' budget
        so the rate stays bounded; progress waits for the flusher."""
        sent = self._append_pending()
        unseen, self._unseen = self._unseen, {}
        for widget, names in unseen.values():
            widget.send_state(list(names))
        boxes, self._unseen_boxes = self._unseen_boxes, {}
        for box in boxes.values():
            self._show_text(box)
        self._debt += sent + len(unseen) + len(boxes)
        self.in_cell = False

    async def drained(self) -> None:
        """Return once every ended task's card has sent its final state."""
        while self._pending or self._summaries or any(self.cards[t].task.done for t in self._dirty):
            if not self._ensure_flusher():
                self.flush()
            await asyncio.sleep(self.interval / 2)

    def flush(self) -> None:
        """Send what is due within the budget of `rate * interval` messages: new cards into
        their containers, then final states, then progress of running cards, oldest first.
        Nothing is dropped: what does not fit stays dirty for the next flush, and final
        states go first, so every card reaches its final state. The budget keeps the whole
        kernel far below the server's IOPub rate limit, so no state needs re-sending."""
        self.flushes += 1
        budget = self.rate * self.interval - self._append_pending() - self._debt
        self._debt = max(0.0, -budget)  # what settle() sent counts against the rate too
        dirty = sorted(self._dirty.items(), key=lambda kv: kv[1])
        done = [t for t, _ in dirty if self.cards[t].task.done]
        running = [t for t, _ in dirty if not self.cards[t].task.done]
        ended: set[int] = set()
        for task_id in done:
            budget = self._render(task_id, budget, ended)
        budget = self._flush_summaries(budget, ended)
        for task_id in running:
            budget = self._render(task_id, budget, ended)
        self._retext(ended)

    def _flush_summaries(self, budget: float, ended: set[int]) -> float:
        """Refresh the summary rows that are due (their counts; the row itself when the box
        first collapses a task); one or two messages each. Returns the budget left."""
        for key, box in list(self._summaries.items()):
            if budget < 2:
                return -1
            del self._summaries[key]
            budget -= 1 + box.layout_children()
            box.refresh_summary()
            if box.summary is not None:
                self._sent(box.summary, "value")
            if box.row is not None and any(t.done for t in box.hidden):
                ended.add(id(box.row))
        return budget

    def _render(self, task_id: str, budget: float, ended: set[int]) -> float:
        """Render one dirty card if the budget allows; returns the budget left (-1 once a
        card did not fit: the cards after it wait for the next flush, in order)."""
        if budget < 0:
            return budget
        card = self.cards[task_id]
        cost = (FINAL_COST if card.task.done else RUNNING_COST) + (1 if card.queued else 0)
        if budget < cost:
            return -1
        budget -= cost
        del self._dirty[task_id]
        card.render()
        self.renders += 1
        if card.task.done:
            self._sent(card.header, "value")
            self._sent(card, "children")
            if card.output is not None:
                self._sent(card.output, "outputs")
            ended.add(id(card))
        return budget

    def _retext(self, ended: set[int]) -> None:
        """Give the displays of the containers whose cards just ended their new text (what a
        saved notebook shows where widgets are not drawn). With a live frontend, once, when
        all of a box's tasks have ended: the frontend draws a display update as a new view of
        the whole box (the old one is not released), so one per ended card would grow with
        the square of the cards."""
        headless = self.headless()
        for box in self.boxes:
            if box.handle is None or not any(id(c) in ended for c in box.children):
                continue
            if not headless:
                if box.final_text or not all(t.done for t in box.tasks()):
                    continue
                box.final_text = True
            self._show_text(box)
            self._debt += 1  # within the same message budget
            if not self.in_cell:
                self._unseen_boxes[id(box)] = box

    def _show_text(self, box: CardBox) -> None:
        """Update a container's display with its cards' text. In a headless run, once all its
        cards have ended, the display keeps only the text and HTML: an HTML export draws a
        saved widget view and nothing else, and there no script may run to draw it."""
        assert box.handle is not None  # only a displayed box is retexted (`_retext`)
        if self.headless() and all(task.done for task in box.tasks()):
            box.handle.update(box.text_bundle(), raw=True)
        else:
            box.handle.update(box)
