"""Every finished thing comes back as a notification, after the person's own prompts: a
background Bash command that ends (or seems to wait for input) reports like an agent, and a
prompt that waits for its turn goes before the parent's automatic answer to notifications.
The model is the emulator's (scripted, else the offline model, which runs `py:` snippets)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import last_user_text

from .helpers import until

pytestmark = pytest.mark.anyio

WAIT_FOR = "import os, time\nwhile not os.path.exists(FLAG): time.sleep(0.02)"


async def test_a_prompt_that_waits_goes_before_the_automatic_answer(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    """A prompt sent while the parent is busy and a worker's report waits goes first; the
    automatic answer to the report follows it (the report is not read with the prompt)."""
    started, go = threading.Event(), threading.Event()
    flag = tmp_path / "worker-may-end"
    session = make_session(namespace={"started": started, "go": go, "WAIT_FOR": WAIT_FOR})
    worker = await session.fork(f"count `py: FLAG = {str(flag)!r}; exec(WAIT_FOR) or 6 * 7`")
    first = asyncio.ensure_future(session.ask("FIRST `py: started.set() or go.wait(60)`"))
    await until(started.is_set)  # the parent's turn runs
    flag.write_text("")
    await session.wait(worker.id, timeout=60)  # its report waits for the parent
    await until(lambda: session.responder.job is not None)
    second = asyncio.ensure_future(session.ask("SECOND prompt"))
    await until(lambda: session.parent.lock.waiting("next") == 1)  # it waits for its turn
    go.set()
    await first
    turn = await second
    await session.idle()
    requests = [r.body for r in emulator.api_requests()]
    said = [last_user_text(b) for b in requests]
    prompt_at = next(i for i, text in enumerate(said) if "SECOND" in text)
    answer_at = next(i for i, text in enumerate(said) if "<task-notification>" in text)
    assert prompt_at < answer_at, [text[:60] for text in said]
    assert "<task-notification>" not in last_user_text(requests[prompt_at])
    assert turn.ok
    [auto] = session.auto_turns  # answered by itself, after the prompt
    assert auto.task_ids == [worker.id]
