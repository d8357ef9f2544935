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
