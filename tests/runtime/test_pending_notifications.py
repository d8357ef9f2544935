"""Notifications that wait for the parent go with its next turn, also with auto_respond off,
and are handed to the host like the parent's own answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.anyio


async def test_with_auto_respond_off_the_next_turn_reads_them(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(auto_respond=False)
    delivered: list[Any] = []
    session.responder.on_auto_turn = delivered.append
    task = await session.fork("count `py: 6 * 7`")
    await session.wait(timeout=30)
    await session.idle()
    assert session.responder.auto_turns == []  # nobody answered by itself
    turn = await session.ask("What came back?")
    assert turn.ok
    sent = json.dumps(emulator.api_requests()[-1].body["messages"][-1])
    assert "<task-notification>" in sent and task.id in sent and "What came back?" in sent
    assert session.queue.pending("main") == []
    [auto] = delivered  # shown like an answered notification, with this turn's answer
    assert auto.task_ids == [task.id] and auto.turn.text == turn.text
    await session.ask("And now?")  # read once: not again
    again = json.dumps(emulator.api_requests()[-1].body["messages"][-1])
    assert "<task-notification>" not in again
