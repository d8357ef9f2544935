"""Slash commands in a real kernel: `%%agent /review the totals` and `%agent /review` run the
command (a `context: fork` one as a card while it runs, its report the cell's output and the
command's output in the conversation), `%commands` lists what there is and where it came
from, and an unknown `/name` is one line naming the closest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.reported import tool_outputs

from .conftest import Kernel

pytestmark = pytest.mark.kernel

REVIEW = (
    "---\n"
    "description: Review the totals in a fork\n"
    "context: fork\n"
    "allowed-tools: Python\n"
    "argument-hint: [what]\n"
    "---\n"
    "Review $ARGUMENTS: the total is `py: sum(data)`.\n"
)
EXPLAIN = "---\ndescription: Explain a number\n---\nExplain `py: $0 * 2` for $1.\n"


@pytest.fixture
def commands_kernel(kernel: Kernel, tmp_path: Path) -> Kernel:
    """The kernel of the test, its work directory holding a fork command and an inline one."""
    folder = tmp_path / ".claude" / "commands"
    folder.mkdir(parents=True)
    (folder / "review.md").write_text(REVIEW)
    (folder / "team").mkdir()
    (folder / "team" / "explain.md").write_text(EXPLAIN)
    kernel.execute("data = [1, 2, 3, 4]")
    return kernel


def test_a_fork_command_in_an_agent_cell_shows_a_card_and_its_report(
    commands_kernel: Kernel, emulator: Any
) -> None:
    k = commands_kernel
    result = k.run_approving("%%agent /review the totals")
    assert result.status == "ok", result.texts()
    final = [  # the cell's own output: its last Markdown display
        m["content"]["data"]["text/markdown"]
        for m in result.messages
        if m["msg_type"] in ("display_data", "update_display_data")
        and "text/markdown" in m["content"]["data"]
    ][-1]
    assert final.startswith("Scope: Review the totals") and tool_outputs(final) == ["10"]
    assert k.cards(), "no card was shown while the command ran"
    assert k.value("[t.description for t in __forkagent__.session.tasks]") == ["/review the totals"]
    last = k.value("[b['text'][:40] for b in __forkagent__.session.messages[-1]['content']]")
    assert last == ["/review the totals", "<local-command-stdout>\nScope: Review the"]
    # the body of the cell continues the command's arguments
    again = k.run_approving("%%agent /review\nby month")
    assert again.status == "ok", again.texts()
    assert k.value("__forkagent__.session.tasks[-1].description") == "/review by month"


def test_an_agent_line_runs_a_command_or_any_prompt(commands_kernel: Kernel) -> None:
    k = commands_kernel
    result = k.run_approving('%agent /team:explain 21 "the budget"')
    assert result.status == "ok", result.texts()
    assert tool_outputs(result.texts()) == ["42"]
    sent = k.value("__forkagent__.session.messages[0]['content'][-1]['text']")
    assert sent == "Explain `py: 21 * 2` for the budget.\n"
    plain = k.run_approving("n = 5\n%agent Double `py: {n} * 2`")
    assert tool_outputs(plain.texts()) == ["10"], plain.texts()


def test_commands_magic_lists_them_with_where_they_came_from(commands_kernel: Kernel) -> None:
    shown = commands_kernel.execute("%commands")
    assert shown.status == "ok", shown.texts()
    text = shown.texts()
    assert "/review [what]" in text
    assert (
        "Review the totals in a fork  [fork; project command, .claude/commands/review.md]" in text
    )
    assert "/team:explain" in text and ".claude/commands/team/explain.md" in text


def test_an_unknown_command_is_one_line_with_the_closest_names(
    commands_kernel: Kernel, emulator: Any
) -> None:
    k = commands_kernel
    for cell in ("%%agent /revew the totals", "%agent /revew"):
        result = k.execute(cell)
        assert result.status == "error"
        assert "Traceback" not in result.texts()
        assert (
            result.texts()
            .strip()
            .endswith(f"UsageError: {cell.split()[0]}: Unknown command /revew. Closest: /review.")
        )
    assert emulator.api_requests() == []  # nothing reached the model
    stray = k.execute("%%agent stray words\nhi")
    assert "%%agent: unrecognized arguments: stray words" in stray.texts()
