"""The cards of one team together (`TeamBox`): the team's name and roster on top (each
member working, idle or how it ended), then its members' cards, wherever in the notebook
each was spawned. Shown once, in the cell that spawned the team's first member.
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as w

from ...runtime import Task
from ..render.task_line import member_state, roster_text
from .card_box import CardBox
from .task_card import card_text
from .widget_parts import STATUS_COLOURS, esc, shared_style

__all__ = ["TeamBox"]

_STATE_COLOURS = {**STATUS_COLOURS, "working": STATUS_COLOURS["running"], "idle": "inherit"}


class TeamBox(CardBox):
    """A `CardBox` headed by its team's roster (`members` reads the team's tasks now)."""

    def __init__(self, team: str, members: Callable[[], list[Task]]) -> None:
        layout, html_style, _ = shared_style()
        roster = w.HTML(value=_roster_html(team, members()), layout=layout, style=html_style)
        super().__init__(classes=("forkagent-team",), children=(roster,))
        self.team = team
        self.members = members
        self.roster = roster

    def __repr__(self) -> str:
        lines = [roster_text(self.team, self.members())]
        lines += [card_text(t) for t in self.tasks()]
        return "\n".join(lines)

    def roster_html(self) -> str:
        return _roster_html(self.team, self.members())

    def html_text(self) -> str:
        return self.roster_html() + super().html_text()

    def refresh_roster(self) -> None:
        """The roster as the members stand now (a message only when it changed)."""
        value = self.roster_html()
        if self.roster.value != value:
            self.roster.value = value

    def head(self) -> list[w.Widget]:
        return [self.roster]


def _roster_html(team: str, members: list[Task]) -> str:
    """The team's name and each member's state, coloured."""
    shown = "".join(
        f" <code>{esc(t.name or t.id)}</code> <span style='color:"
        f"{_STATE_COLOURS.get(member_state(t), 'inherit')}'>{esc(member_state(t))}</span>"
        for t in members
    )
    return (
        f"<div class='forkagent-team-roster'><b>team {esc(team)}</b>"
        f"<small> · lead: the main conversation ·{shown}</small></div>"
    )
