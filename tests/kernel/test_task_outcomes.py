"""What a task's card and `%tasks` say of how it went: the tool calls that failed, at a
glance, and every result it produced, newest first."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Kernel
from .test_compute import SESSION, setup

pytestmark = pytest.mark.kernel


def _card_headers(kernel: Kernel) -> list[str]:
    """Every header value the cards were given (their opening state and every update)."""
    kernel.drain()
    values: list[str] = []
    for m in kernel.iopub:
        data: Any = m["content"].get("data", {})
        if m["msg_type"] in ("comm_open", "comm_msg"):
            value = data.get("state", {}).get("value")
            if isinstance(value, str):
                values.append(value)
    return values


def _tasks_html(kernel: Kernel, names: str = "") -> str:
    """What `%tasks` (or `%tasks NAMES`: those tasks whole) shows, as HTML and as text."""
    shown = kernel.execute(f"%tasks {names}")
    assert shown.status == "ok", shown.texts()
    [bundle] = [m["content"]["data"] for m in shown.messages if m["msg_type"] == "display_data"]
    assert isinstance(bundle["text/html"], str)
    return bundle["text/html"] + "\n" + bundle["text/plain"]


def test_failed_tool_calls_show_on_the_card_and_in_tasks(kernel: Kernel) -> None:
    """Code that raised showed as plain `completed`: a syntax error, input() in a worker."""
    setup(kernel)
    kernel.execute("%fork --name bad try `py: 1 / 0` and `py: 2 + 2` and `py: input()`")
    kernel.run_approving("%tasks --wait bad", timeout=60)
    assert kernel.value(f"{SESSION}.registry.get('bad').status") == "completed"
    said = "completed, 2 of 3 tool calls failed"
    assert any(said in header for header in _card_headers(kernel)), _card_headers(kernel)[-1]
    table = _tasks_html(kernel)
    assert table.count(said) == 2, table  # the table and its text
    assert said in kernel.value(f"{SESSION}.registry.get('bad').notification")


def test_a_follow_up_keeps_every_result_readable_newest_first(kernel: Kernel) -> None:
    """A `%send` follow-up replaced the worker's result (a summary became one number)."""
    setup(kernel)
    kernel.execute("%fork --name cv first `py: 'summary of folds ' + str(6 * 7)`")
    kernel.run_approving("%tasks --wait cv", timeout=60)
    sent = kernel.execute("%send cv then `py: 0.0207`")
    assert sent.status == "ok", sent.texts()
    kernel.run_approving("%tasks --wait cv", timeout=60)
    results = kernel.value(f"{SESSION}.registry.get('cv').results")
    assert len(results) == 2 and "0.0207" in results[0] and "summary of folds 42" in results[1]
    assert kernel.value(f"{SESSION}.registry.get('cv').result") == results[0]
    last = _card_headers(kernel)[-1]
    assert "earlier results (1, newest first)" in last and "summary of folds 42" in last, last
    assert last.index("0.0207") < last.index("summary of folds 42")
    table = _tasks_html(kernel, "cv")  # the task whole: every result
    assert "2 results, newest first" in table
    assert table.index("0.0207") < table.index("summary of folds 42") < table.index("earlier")
