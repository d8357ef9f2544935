"""The loop guard inside a real kernel: a blocking call on the kernel's loop is caught."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .conftest import Kernel

pytestmark = pytest.mark.kernel


def test_a_blocking_call_on_the_kernel_loop_is_caught(kernel: Kernel, tmp_path: Path) -> None:
    # a callback of the kernel's event loop (not the cell) writes a file synchronously
    started = kernel.execute(
        "import asyncio, pathlib\n"
        "from forkagent_jupyter.runtime.transcripts.writer import AppendFiles\n"
        "_files = AppendFiles()\n"
        "asyncio.get_running_loop().call_soon(_files.append, pathlib.Path('blocked.txt'), b'x')\n"
    )
    assert started.status == "ok", started.texts()
    deadline = time.monotonic() + 30
    while not (tmp_path / "blocked.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    found = kernel.guard_findings(clear=True)  # caught on purpose: the test does not fail
    assert [f["call"] for f in found] == ["os.write"]
    assert found[0]["where"].startswith("forkagent_jupyter/runtime/transcripts/writer.py:")
    assert "call_soon" not in found[0]["stack"]  # it ran from the loop, after the cell
    assert (tmp_path / "blocked.txt").read_text() == "x"
