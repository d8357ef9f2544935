"""What a frontend that shows only text (a saved notebook on GitHub, VS Code's text view, a
terminal) reads of cards, %tasks, approvals and the cost report."""

from __future__ import annotations

import pytest

from forkagent_jupyter.kernel.cards.hub import PLAIN_CARDS
from forkagent_jupyter.kernel.render.task_line import context_text
from tests.reported import tool_outputs

from .conftest import Kernel

pytestmark = pytest.mark.kernel


def test_cards_tasks_and_costs_read_as_text(kernel: Kernel) -> None:
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    launched = kernel.execute("%fork --name adder add them `py: 20 + 22`")
    [box] = [
        m["content"]
        for m in launched.messages
        if m["msg_type"] == "display_data" and m["content"]["data"].get("text/plain") == PLAIN_CARDS
    ]
    display_id = box["transient"]["display_id"]
    waited = kernel.execute("%tasks --wait adder", timeout=60)
    kernel.drain()
    bundles = [
        m["content"]["data"]
        for m in kernel.iopub
        if m["msg_type"] == "update_display_data"
        and m["content"]["transient"]["display_id"] == display_id
    ]
    updates = [data["text/plain"] for data in bundles]
    # the same facts as HTML, beside the widget view (a frontend without widgets draws it)
    assert "application/vnd.jupyter.widget-view+json" in bundles[-1]
    assert "<b>adder</b>" in bundles[-1]["text/html"]
    assert ">completed<" in bundles[-1]["text/html"] and "$" in bundles[-1]["text/html"]
    assert updates and "adder (fork) completed" in updates[-1] and "$" in updates[-1]
    assert "42" in tool_outputs(updates[-1]), updates[-1]  # the result's first lines, not clipped
    table = [
        m["content"]["data"]["text/plain"]
        for m in waited.messages
        if m["msg_type"] == "display_data"
    ][-1]
    assert "adder (fork) completed" in table and "<" not in table
    costs = kernel.execute("from forkagent_jupyter.kernel import api\napi.costs()")
    [result] = [m["content"]["data"] for m in costs.messages if m["msg_type"] == "execute_result"]
    assert result["text/plain"].startswith("agent") and "adder" in result["text/plain"]
    assert "CostReport(" not in result["text/plain"]


def test_a_pending_approval_reads_as_text(kernel: Kernel) -> None:
    kernel.execute("from forkagent_jupyter.kernel import api")
    kernel.execute("%fork --name asker ask `py: 6 * 7`")
    shown = kernel.execute("[prompt] = await api.wait_pending('asker')\nprompt")
    [result] = [m["content"]["data"] for m in shown.messages if m["msg_type"] == "execute_result"]
    text = result["text/plain"]
    assert text.startswith("[approval: Python for worker ") and "waiting for an answer" in text
    assert "6 * 7" in text
    kernel.execute("api.answer('deny')")


def test_context_reads_against_the_window() -> None:
    assert context_text(45_210, 200_000, 2) == "context 45,210 / 200,000 (23%), compacted 2x"
    assert context_text(3_690, 1_000_000) == "context 3,690 / 1,000,000 (0.4%)"  # not 0%
    assert context_text(0, 1_000_000) == "context 0 / 1,000,000 (0.0%)"
    assert context_text(900, 0) == "context 900"


def test_a_message_to_a_finished_worker_reads_as_text(kernel: Kernel) -> None:
    """`%send` to a finished worker shows a note and its card again: a text frontend had read
    `<IPython.core.display.HTML object>` for the note."""
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    kernel.execute("%fork --name w add them `py: 20 + 22`")
    assert kernel.execute("%tasks --wait w", timeout=60).status == "ok"
    sent = kernel.execute("%send w again `py: 1 + 1`")
    assert sent.status == "ok", sent.texts()
    plain = [
        m["content"]["data"].get("text/plain", "")
        for m in sent.messages
        if m["msg_type"] == "display_data"
    ]
    assert plain and not [p for p in plain if "IPython.core.display" in p], plain
    assert kernel.execute("%tasks --wait w", timeout=60).status == "ok"
