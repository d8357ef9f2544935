"""Settings of how agents run, changed live: forking (and with it the Agent tool) and how
long a synchronous agent is waited for."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Kernel

pytestmark = pytest.mark.kernel

SESSION = "__forkagent__.session"


def _agent_schema(body: dict[str, Any]) -> dict[str, Any]:
    [agent] = [t for t in body["tools"] if t["name"] == "Agent"]
    return dict(agent["input_schema"]["properties"])


def test_forking_and_auto_background_after_apply_live(kernel: Kernel, emulator: Any) -> None:
    kernel.execute("%%agent\nHello.")
    assert "run_in_background" not in _agent_schema(emulator.api_requests()[-1].body)
    assert kernel.execute("%config ForkAgent.forking = False").status == "ok"
    assert kernel.execute("%config ForkAgent.auto_background_after = 5.0").status == "ok"
    assert kernel.value(f"{SESSION}.forking") is False
    assert kernel.value(f"{SESSION}.auto_background_after") == 5.0
    kernel.execute("%%agent\nAgain.")
    assert "run_in_background" in _agent_schema(emulator.api_requests()[-1].body)
    refused = kernel.execute("%config ForkAgent.auto_background_after = -1.0")
    assert "auto_background_after" in refused.texts(), refused.texts()
    assert kernel.value(f"{SESSION}.auto_background_after") == 5.0


def test_thinking_setting_cell_option_and_the_cards_collapsed_thinking(
    kernel: Kernel, emulator: Any
) -> None:
    assert kernel.execute("%config ForkAgent.thinking = 2048").status == "ok"
    kernel.execute("%%agent\nHello.")
    assert emulator.api_requests()[-1].body["thinking"] == {
        "type": "enabled",
        "budget_tokens": 2048,
    }
    kernel.execute("%%agent --think 4096\nThink harder.")  # this cell only
    assert emulator.api_requests()[-1].body["thinking"]["budget_tokens"] == 4096
    kernel.execute("%%agent --think 0\nNo thinking here.")
    assert "thinking" not in emulator.api_requests()[-1].body
    kernel.execute("%%agent\nBack to the setting.")
    assert emulator.api_requests()[-1].body["thinking"]["budget_tokens"] == 2048
    refused = kernel.execute("%config ForkAgent.thinking = 100")
    assert "ForkAgent.thinking = 100 refused" in refused.texts()
    bad = kernel.execute("%%agent --think 100\nToo small.")
    assert bad.status == "error" and "a budget of 1024 tokens or more" in bad.texts()
    # a worker's card shows its thinking, collapsed
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    kernel.execute("%fork --name thinker count `py: 1 + 1`")
    kernel.execute("%tasks --wait thinker", timeout=60)
    html = kernel.value(
        "[c for c in __forkagent__.ui.hub.cards.values() if c.task.name == 'thinker']"
        "[0].header.value"
    )
    assert "<details class='forkagent-thinking'>" in html and "I read" in html
    assert "<details class='forkagent-thinking' open" not in html
