"""Every dollar amount in our own HTML sits in an element that math typesetting skips.

JupyterLab typesets `$...$` in HTML outputs (MathJax 3.2+ skips class `mathjax_ignore`, MathJax
2 `tex2jax_ignore`), so two amounts on a line would show as italic math. The browser test
(tests/browser/test_math_figures.py) shows it in JupyterLab; these check the HTML itself.
"""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest

from forkagent_jupyter.kernel.render.task_line import NO_MATH, no_math

from .conftest import Kernel

pytestmark = pytest.mark.kernel

IGNORED = {"mathjax_ignore", "tex2jax_ignore"}


class _Dollars(HTMLParser):
    """The text runs holding a `$` outside any element of both ignore classes."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[bool] = []
        self.exposed: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("br", "img", "hr", "input", "wbr"):
            return
        classes = set((dict(attrs).get("class") or "").split())
        self.stack.append(bool(self.stack and self.stack[-1]) or classes >= IGNORED)

    def handle_endtag(self, tag: str) -> None:
        if tag not in ("br", "img", "hr", "input", "wbr") and self.stack:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        if "$" in data and not (self.stack and self.stack[-1]):
            self.exposed.append(data)


def exposed_dollars(html: str) -> list[str]:
    parser = _Dollars()
    parser.feed(html)
    parser.close()
    return parser.exposed


def test_no_math_wraps_in_both_ignore_classes() -> None:
    assert set(NO_MATH.split()) == IGNORED
    assert exposed_dollars(no_math("$1 of $2")) == []
    assert exposed_dollars(no_math("<b>$1</b> of $2", "div")) == []
    assert exposed_dollars("<div>$1 of $2</div>") == ["$1 of $2"]  # the checker can fail


def _html(execution: Any) -> list[str]:
    return [
        m["content"]["data"]["text/html"]
        for m in execution.messages
        if m["msg_type"] in ("display_data", "update_display_data", "execute_result")
        and "text/html" in m["content"].get("data", {})
    ]


def test_tasks_card_and_footer_keep_amounts_out_of_math(kernel: Kernel) -> None:
    assert kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'").status == "ok"
    assert kernel.execute("%config ForkAgent.max_cost_usd = 100.0").status == "ok"
    turn = kernel.execute("%%agent\nHello! What can you do?")
    assert turn.status == "ok", turn.texts()
    forked = kernel.execute("%fork --name adder add the numbers `py: 2 + 3` and report the sum")
    assert forked.status == "ok", forked.texts()
    kernel.execute("%tasks --wait", timeout=60)

    footers = [h for h in _html(turn) if "tokens:" in h]
    assert footers and "session $0." in footers[-1], _html(turn)
    assert exposed_dollars(footers[-1]) == [], footers[-1]

    tasks = kernel.execute("%tasks")
    [table] = _html(tasks)
    assert "session cost $0." in table and "of max_cost_usd $100.0000" in table, table
    assert "<td>$0." in table, table  # the cost column
    assert exposed_dollars(table) == [], table

    cards = kernel.value("[c.html_text() for c in __forkagent__.ui.hub.cards.values()]")
    assert len(cards) == 1 and " · $0." in cards[0], cards
    assert exposed_dollars(cards[0]) == [], cards[0]


def test_a_turn_stopped_by_the_budget_keeps_its_amounts_out_of_math(kernel: Kernel) -> None:
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    assert kernel.execute("%%agent\nHello.").status == "ok"
    spent = kernel.value("__forkagent__.session.cost_usd")
    # room for one more request: the turn's second one (after its tool call) is refused
    assert kernel.execute(f"%config ForkAgent.max_cost_usd = {spent * 1.0001!r}").status == "ok"
    turn = kernel.execute("%%agent\nadd the numbers `py: 2 + 3` and report the sum")
    final = _html(turn)[-1]
    assert "cost budget reached: $0." in final and "spent of max_cost_usd=$0." in final, final
    assert exposed_dollars(final) == [], final
    plain = [
        m["content"]["data"]["text/plain"]
        for m in turn.messages
        if m["msg_type"] == "update_display_data"
    ][-1]
    assert "cost budget reached: $0." in plain, plain  # the text keeps why it stopped
