"""Sibling forks wait for the first one's response to start (so they read its cache write);
a first fork that ends without a response hands the lead on at once instead of holding its
siblings until the wait runs out (60 s)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from forkagent_jupyter.emulator.faults import Fault

from .test_lifecycle import wait_for

pytestmark = pytest.mark.anyio


async def test_a_failed_leader_releases_its_siblings_at_once(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(auto_respond=False)
    await session.ask("Hello.")
    emulator.faults.next(Fault.error(400, "bad request"), times=1)  # the leader's request
    tasks = [await session.fork(f"count `py: {i}`") for i in range(3)]
    done = await session.wait(timeout=45)  # not the 60 s leader wait (45: a loaded machine)
    assert [t.status for t in done] == ["failed", "completed", "completed"]
    # the new leader wrote the shared prefix; the last sibling read it
    reads = [e.usage["cache_read_input_tokens"] for e in emulator.ledger.entries()[-4:]]
    assert max(reads) > 0
    assert tasks[0].error and "bad request" in tasks[0].error


async def test_a_stopped_leader_releases_its_siblings_at_once(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(auto_respond=False)
    await session.ask("Hello.")
    emulator.faults.next(Fault.delay(ttft=60), times=1)  # the leader's answer would be slow
    leader = await session.fork("count `py: 1`")
    sibling = await session.fork("count `py: 2`")
    await wait_for(lambda: len(emulator.api_requests()) >= 2)  # the leader's request is out
    await asyncio.sleep(0.2)
    await session.stop(leader.id)
    [done] = await session.wait(sibling.id, timeout=45)  # under the 60 s leader wait
    assert done.status == "completed" and leader.status == "killed"
