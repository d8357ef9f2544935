"""The loop guard itself: a blocking call of the package on the event loop is caught."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.loop_guard import LoopGuard


@pytest.mark.anyio
async def test_a_blocking_call_of_the_package_on_the_loop_is_caught(
    tmp_path: Path, loop_guard: LoopGuard
) -> None:
    from forkagent_jupyter.runtime.transcripts.writer import AppendFiles

    files = AppendFiles()
    target = tmp_path / "x.txt"
    files.append(target, b"on the loop\n")  # os.write on the event loop
    await asyncio.to_thread(files.append, target, b"on a thread\n")  # allowed
    time.sleep(0)  # noqa: ASYNC251 - the test's own call, not the package's: not counted
    found = [str(f) for f in loop_guard.findings]
    loop_guard.findings.clear()  # caught on purpose: this test does not fail for it
    files.close()
    assert [f.split(" at ")[0] for f in found] == ["os.write"]
    assert found[0].startswith("os.write at forkagent_jupyter/runtime/transcripts/writer.py:")
    assert target.read_text() == "on the loop\non a thread\n"  # recorded, then it ran
