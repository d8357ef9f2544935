"""What a finished task is called and counted as: its summary (name, or description clipped at
a word), and its token counts in the Messages API's words, checked against the emulator's
ledger of the task's own requests."""

from __future__ import annotations

import re
from typing import Any

import pytest

from forkagent_jupyter.kernel.frontend.delivery import MIME, notification_bundle
from forkagent_jupyter.messages_api.usage import Usage
from forkagent_jupyter.runtime.tasks.notifications import CommandQueue
from forkagent_jupyter.runtime.tasks.registry import (
    DESCRIPTION_LIMIT,
    Task,
    TaskRegistry,
    clip_words,
    task_description,
    task_snapshot,
)
from forkagent_jupyter.runtime.tasks.snapshot import TaskSnapshot

pytestmark = pytest.mark.anyio

LONG = "report `py: print(sum(range(10)))` and then explain every intermediate value in detail"


def _summary(xml: str) -> str:
    found = re.search(r"<summary>(.*)</summary>", xml)
    assert found, xml
    return found.group(1)


def test_clip_words_cuts_after_a_whole_word() -> None:
    assert clip_words("short  line\n", 60) == "short line"
    clipped = clip_words(LONG, 40)
    assert clipped == "report `py: print(sum(range(10)))` and…"
    assert len(clipped) <= 40
    # a cut that falls on a space keeps the word before it whole
    assert clip_words("alpha beta gamma", 11) == "alpha beta…"
    # one word longer than the limit has to be cut inside it
    assert clip_words("x" * 80, 10) == "x" * 9 + "…"
    assert clip_words(LONG, 200) == LONG


def test_description_is_the_first_line_clipped_at_a_word() -> None:
    description = task_description("\n  " + LONG + "\nsecond line")
    assert description.endswith("…") and len(description) <= DESCRIPTION_LIMIT
    assert LONG.startswith(description[:-1])
    assert LONG[len(description) - 1] == " "  # the next character starts a new word


def test_summary_uses_the_name_else_the_clipped_description() -> None:
    registry = TaskRegistry(CommandQueue())
    named = registry.register(Task(id="a1", kind="fork", description=LONG, name="adder"))
    unnamed = registry.register(Task(id="a2", kind="fork", description=LONG))
    registry.finish(named, "completed", result="5")
    registry.finish(unnamed, "failed", error="boom")
    assert named.summary() == 'Worker "adder" completed'
    assert _summary(named.notification or "") == 'Worker "adder" completed'
    label = clip_words(LONG, DESCRIPTION_LIMIT)
    assert unnamed.summary() == f'Worker "{label}" failed: boom'
    assert label == "report `py: print(sum(range(10)))` and then explain every…"


def test_snapshot_counts_match_the_api_words() -> None:
    task = Task(id="a1", kind="fork", description="d")
    task.usage = Usage(
        input_tokens=84, cache_creation_input_tokens=200, cache_read_input_tokens=14_200
    ) + Usage(output_tokens=150)
    usage = task_snapshot(task).usage
    assert usage == {
        "input_tokens": 84,
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 14_200,
        "output_tokens": 150,
        "total_input_tokens": 14_484,
    }
    payload = notification_bundle(task_snapshot(task))
    assert payload[MIME].usage == usage
    assert "tokens in 14,484 (cache read 14,200, write 200) / out 150" in payload["text/plain"]


def test_a_recorded_flat_snapshot_is_shown_with_the_same_words() -> None:
    """Transcripts written before the `usage` object held flat fields, `input_tokens` being
    the whole prompt; `%notifications` still shows them, counted once."""
    old = {
        "id": "a1",
        "status": "completed",
        "input_tokens": 14_484,
        "output_tokens": 150,
        "cache_read_tokens": 14_200,
        "cache_write_tokens": 200,
    }
    assert notification_bundle(TaskSnapshot.model_validate(old))[MIME].usage == {
        "input_tokens": 84,
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 14_200,
        "output_tokens": 150,
        "total_input_tokens": 14_484,
    }


async def test_a_fork_reports_its_ledger_and_its_name(emulator: Any, make_session: Any) -> None:
    session = make_session(auto_respond=False)
    await session.ask("Hello! What can you do?")  # the parent's prefix, cached
    before = len(emulator.ledger.entries())
    task = await session.fork(LONG, name="adder")
    [done] = await session.wait(task.id, timeout=60)
    assert done.status == "completed"
    spent = [e.usage for e in emulator.ledger.entries()[before:]]
    assert len(spent) >= 2  # the tool call, then the report

    def total(key: str) -> int:
        return sum(int(u.get(key) or 0) for u in spent)

    usage = task_snapshot(done).usage
    assert usage["input_tokens"] == total("input_tokens")  # the uncached part only
    assert usage["cache_read_input_tokens"] == total("cache_read_input_tokens") > 0
    assert usage["cache_creation_input_tokens"] == total("cache_creation_input_tokens")
    assert usage["output_tokens"] == total("output_tokens")
    assert usage["total_input_tokens"] == (
        usage["input_tokens"] + usage["cache_read_input_tokens"]
        + usage["cache_creation_input_tokens"]
    )  # fmt: skip
    assert usage["input_tokens"] < usage["cache_read_input_tokens"]  # the fork read its parent
    [note] = session.queue.drain("main")
    assert _summary(note.text) == 'Worker "adder" completed'
    assert done.description == task_description(LONG) and done.description.endswith("…")

    unnamed = await session.fork(LONG)
    [done] = await session.wait(unnamed.id, timeout=60)
    [note] = session.queue.drain("main")
    assert _summary(note.text) == f'Worker "{task_description(LONG)}" completed'
