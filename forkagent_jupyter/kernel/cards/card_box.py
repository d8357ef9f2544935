"""The cards one run of a cell started (`CardBox`): the first `VISIBLE_CARDS` as cards, the
rest collapsed into one summary row with a button that shows the next ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import ipywidgets as w

from ...runtime import Task
from .task_card import TaskCard, card_text
from .widget_parts import STATUS_COLOURS, WholeText, button_layout, esc, shared_style

if TYPE_CHECKING:
    from IPython.display import DisplayHandle

__all__ = ["PLAIN_CARDS", "VISIBLE_CARDS", "CardBox"]

# What a frontend shows where it cannot draw the widgets (a saved notebook on GitHub or
# nbviewer, a client without ipywidgets, a page whose widget state was not restored).
PLAIN_CARDS = (
    "[forkagent task cards: live widgets of the kernel that ran this cell; %tasks lists the tasks]"
)


VISIBLE_CARDS = 12
"""Cards a cell shows live; the cell's further tasks collapse into one summary row (with a
button that shows the next ones), so a fan-out of hundreds keeps the page small."""


class CardBox(WholeText, w.VBox):
    """The cards started by one run of a cell: the first `VISIBLE_CARDS` as cards, the rest
    as one summary row (counts by status) until shown."""

    def __init__(
        self,
        visible: int = VISIBLE_CARDS,
        *,
        classes: tuple[str, ...] = (),
        children: tuple[w.Widget, ...] = (),
    ) -> None:
        # every initial value in the widget's comm_open: no update message at creation
        super().__init__(children=children, _dom_classes=["forkagent-cards", *classes])
        self.handle: DisplayHandle | None = None  # its display, updated with the cards' text
        self.visible = visible
        self.shown: list[TaskCard] = []
        self.hidden: list[Task] = []  # collapsed into the summary row, in launch order
        self.summary: w.HTML | None = None
        self.more: w.Button | None = None
        self.row: w.VBox | None = None
        self.on_more: Callable[[CardBox], None] | None = None  # the "Show more" click
        self.final_text = False  # the display's text was updated with every task ended

    def __repr__(self) -> str:
        tasks = self.tasks()
        if not tasks:
            return PLAIN_CARDS
        return "\n".join(card_text(t) for t in tasks)

    def cards(self) -> list[TaskCard]:
        return [c for c in self.children if isinstance(c, TaskCard)]

    def tasks(self) -> list[Task]:
        """Every task of the box: the shown cards' and the collapsed ones, in launch order."""
        return [c.task for c in self.shown] + list(self.hidden)

    @property
    def full(self) -> bool:
        return len(self.shown) >= self.visible

    def html_text(self) -> str:
        tasks = self.tasks()
        if not tasks:
            return f"<pre>{esc(PLAIN_CARDS)}</pre>"
        shown = "".join(card.html_text() for card in self.shown)
        return shown + "".join(f"<pre>{esc(card_text(t))}</pre>" for t in self.hidden)

    def head(self) -> list[w.Widget]:
        """What goes above the cards (a team's roster, `team_box.py`); nothing here."""
        return []

    def layout_children(self) -> bool:
        """Set the children (the shown cards, then the summary row while tasks are
        collapsed); True if they changed (one message)."""
        rows: list[w.Widget] = [*self.head(), *self.shown]
        if self.hidden:
            if self.row is None:
                layout, html_style, button_style = shared_style()
                self.summary = w.HTML(value=self.summary_html(), layout=layout, style=html_style)
                self.more = w.Button(
                    description=self._more_label(),
                    tooltip="Show the next collapsed tasks as cards",
                    layout=button_layout(),
                    style=button_style,
                )
                self.more.on_click(lambda _b: self.on_more(self) if self.on_more else None)
                self.row = w.VBox([self.summary, self.more], _dom_classes=["forkagent-cards-more"])
            rows.append(self.row)
        current: tuple[w.Widget, ...] = tuple(self.children)
        if current == tuple(rows):
            return False
        self.children = tuple(rows)
        return True

    def _more_label(self) -> str:
        return f"Show {min(self.visible, len(self.hidden))} more"

    def summary_html(self) -> str:
        counts = dict.fromkeys(("running", "completed", "failed", "killed"), 0)
        for t in self.hidden:
            counts[t.status] = counts.get(t.status, 0) + 1
        parts = " · ".join(
            f"<span class='forkagent-{s}-count' style='color:{STATUS_COLOURS.get(s, 'inherit')}'"
            f">{n}</span> {s}"
            for s, n in counts.items()
            if n
        )
        return (
            f"<div class='forkagent-cards-summary'><b>{len(self.hidden)} more tasks</b> "
            f"<small>(collapsed; each has a row in the Tasks panel and in %tasks)</small>: "
            f"{parts}</div>"
        )

    def refresh_summary(self) -> None:
        if self.summary is not None:
            self.summary.value = self.summary_html()
        if self.more is not None:
            label = self._more_label()
            if self.more.description != label:
                self.more.description = label
