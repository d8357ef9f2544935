"""A synchronous named agent moved to the background from its card while `%%agent` waits."""

from __future__ import annotations

import queue
import time
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain

from .conftest import Kernel

pytestmark = pytest.mark.kernel

SESSION = "__forkagent__.session"


def test_the_card_button_moves_a_waiting_agent_to_the_background(
    kernel: Kernel, emulator: Any, tmp_path: Path
) -> None:
    agents = tmp_path / ".forkagent" / "agents"
    agents.mkdir(parents=True)
    (agents / "checker.md").write_text("---\ndescription: Checks numbers\n---\nYou check.\n")
    call = {
        "description": "slow check",
        # runs until the test lets it finish (a file appears): no race with the clock
        "prompt": "check `py: exec(WAIT_FOR_GO) or 6 * 7`",
        "subagent_type": "checker",
    }
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains(
        "CHECK", Reply(({"type": "tool_use", "name": "Agent", "input": call},)), times=1
    )
    emulator.brain = brain
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    kernel.execute("%config ForkAgent.forking = False")  # named agents answer in the call
    kernel.execute(
        "WAIT_FOR_GO = \"import os, time\\nwhile not os.path.exists('go'): time.sleep(0.05)\""
    )
    msg_id = kernel.start("%%agent\nCHECK the numbers")
    deadline = time.monotonic() + 30
    buttons: list[str] = []
    while not buttons and time.monotonic() < deadline:  # the card shows the button
        try:
            kernel.iopub.append(kernel.client.get_iopub_msg(timeout=0.2))
        except queue.Empty:
            pass
        buttons = kernel.widget_comms(description="Run in background")
    assert buttons, "no 'Run in background' button on the agent's card"
    kernel.click(buttons[0])  # while the %%agent cell still waits for the agent
    kernel.drain(until_idle_of=msg_id, timeout=20)  # the turn went on, the agent waits
    [task_id] = kernel.value(f"[t.id for t in {SESSION}.tasks]")
    shown = "".join(
        str(m["content"].get("data", {}).get("text/markdown", ""))
        for m in kernel.iopub
        if m["parent_header"].get("msg_id") == msg_id
    )
    assert "moved agent" in shown and "to the background" in shown
    assert kernel.value(f"{SESSION}.registry.get('{task_id}').status") == "running"
    (tmp_path / "go").write_text("")
    kernel.execute(f"%tasks --wait {task_id}", timeout=60)
    kernel.execute(f"await {SESSION}.idle()", timeout=60)
    assert kernel.value(f"{SESSION}.registry.get('{task_id}').status") == "completed"
    # reported exactly once: as a notification, which the parent answered
    notified = kernel.value(f"[a.task_ids for a in {SESSION}.responder.auto_turns]")
    assert sum(ids.count(task_id) for ids in notified) == 1
    again = kernel.execute(f"%bg {task_id}")
    assert again.status == "error" and "is not running in the foreground" in again.texts()
