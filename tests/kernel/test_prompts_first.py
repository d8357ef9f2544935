"""The person's queued `%%agent` cell goes before the parent's automatic answer to a
notification that arrived while the cell before it ran; the answer follows it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import last_user_text
from tests.runtime.helpers import trust_folder

from .conftest import Kernel

pytestmark = pytest.mark.kernel

SESSION = "__forkagent__.session"


def _until_exists(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} did not appear"
        time.sleep(0.02)


def test_a_queued_agent_cell_goes_before_the_automatic_answer(
    kernel: Kernel, emulator: Any, tmp_path: Path, user_home: Path
) -> None:
    # a Notification hook of the person's own settings (in a folder they trust) says when the
    # report is queued
    hooks = {"Notification": [{"hooks": [{"type": "command", "command": "touch notified"}]}]}
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.local.json").write_text(json.dumps({"hooks": hooks}))
    trust_folder(tmp_path, user_home)
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    kernel.execute('WAIT = "import os, time\\nwhile not os.path.exists(FLAG): time.sleep(0.02)"')
    assert kernel.execute("%fork --name counter count `py: FLAG = 'w'; exec(WAIT) or 6 * 7`")
    first = kernel.start(
        "%%agent\nFIRST `py: open('started', 'w').close(); FLAG = 'go'; exec(WAIT)`"
    )
    _until_exists(tmp_path / "started")  # the first cell's turn runs
    second = kernel.start("%%agent\nSECOND prompt")  # queued behind the running cell
    (tmp_path / "w").write_text("")  # the worker ends: its report waits for the parent
    _until_exists(tmp_path / "notified")
    (tmp_path / "go").write_text("")  # the first cell ends
    kernel.drain(until_idle_of=first)
    kernel.drain(until_idle_of=second)
    assert kernel.execute(f"await {SESSION}.idle()", timeout=60).status == "ok"
    said = [last_user_text(r.body) for r in emulator.api_requests()]
    prompt_at = next(i for i, text in enumerate(said) if "SECOND" in text)
    answer_at = next(i for i, text in enumerate(said) if "<task-notification>" in text)
    assert prompt_at < answer_at, [text[:60] for text in said]
    assert kernel.value(f"[a.task_ids for a in {SESSION}.responder.auto_turns]") == [
        kernel.value(f"[t.id for t in {SESSION}.tasks]")
    ]
