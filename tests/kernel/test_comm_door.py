"""A flood on the `forkagent` comm stops at its door: 10,000 junk messages (which left the
kernel deaf for seconds, a log line each) are dropped on the thread that receives them, said
in a few lines and a count; a cell and a real answer sent after them are still handled.
(How soon the kernel answers after a flood is measured by benchmarks/comm_flood.py.)"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.kernel.comm import door, tally

from .conftest import Kernel
from .test_approval_answers import KEEP_LOG, _writer

pytestmark = pytest.mark.kernel

JUNK = 10_000
STOPS = 1_000  # well-formed, far past the rate a person clicks at


def _count_line(kernel: Kernel, timeout: float = 60) -> tuple[list[str], str]:
    """The kernel's log lines so far, once the line counting a spell's drops has come."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines: list[str] = kernel.value("_kept.lines")
        counted = [line for line in lines if "more messages from the frontend" in line]
        if counted:
            return lines, counted[0]
        time.sleep(0.2)
    raise TimeoutError("no line counted the dropped messages")


def test_a_junk_flood_stops_at_the_door_and_the_kernel_still_answers(
    kernel: Kernel, emulator: Any, tmp_path: Path
) -> None:
    _writer(emulator)
    kernel.execute("%config ForkAgent.approval_timeout = 120")
    kernel.execute(KEEP_LOG)
    kernel.open_comm("ext")
    assert kernel.value("__forkagent__.bridge.door is not None")  # ipykernel has a door
    kernel.execute("%fork --name w0 write 0")
    [ask] = kernel.wait_comm("ext", "approval", until=lambda a: len(a) == 1)
    for i in range(JUNK):
        kernel.comm_msg("ext", {"type": "junk", "n": i})
    for _ in range(STOPS):
        kernel.comm_msg("ext", {"type": "stop", "task_id": "no such task"})
    assert kernel.execute("1 + 1").status == "ok"
    lines, counted = _count_line(kernel)
    # a line each for the first few, then one count: not 10,000 lines
    said = [line for line in lines if "dropped a malformed message" in line]
    assert len(said) == tally.LINES and len(lines) == tally.LINES + 1, lines[-3:]
    assert all("Input tag 'junk'" in line for line in said)
    found = re.search(r"dropped ([\d,]+) more .* \(([\d,]+) malformed, ([\d,]+) over the", counted)
    assert found, counted
    more, malformed, over = (int(n.replace(",", "")) for n in found.groups())
    assert malformed == JUNK - tally.LINES and more == malformed + over
    # a burst's worth of stops went in (each does nothing: no such task), the rest stopped
    assert STOPS - door.BURST - 50 <= over <= STOPS - door.BURST
    assert kernel.value("__forkagent__.bridge.tally.total") == JUNK + over
    # nothing of it reached a cell
    assert not [
        m
        for m in kernel.iopub
        if m["msg_type"] in ("stream", "error") and m["parent_header"]["msg_type"] == "comm_msg"
    ]
    # a real answer after the flood is handled
    kernel.comm_msg(
        "ext", {"type": "approve", "request_id": ask["request_id"], "decision": "allow"}
    )
    kernel.execute("%tasks --wait w0", timeout=60)
    assert kernel.value("__forkagent__.session.registry.get('w0').status") == "completed"
    assert (tmp_path / "w0.txt").read_text() == "written"
