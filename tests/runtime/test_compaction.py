"""Long conversations inside their context window: compaction of the parent and of workers,
forks that inherit only the last turns, resume after compaction. Through the real SDK against
the strict emulator, on a model whose window is made small (20,000 tokens)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator import Emulator, Reply
from forkagent_jupyter.messages_api.catalog import DEFAULT_CATALOG
from forkagent_jupyter.messages_api.tokens import ByteTokenizer, count_input_tokens
from forkagent_jupyter.runtime.errors import UsageError
from forkagent_jupyter.runtime.events import Compacted
from forkagent_jupyter.runtime.loop.compaction import COMPACT_REQUEST_TAG, SUMMARY_TAG, turn_starts
from forkagent_jupyter.runtime.loop.fork import FORK_TAG
from forkagent_jupyter.runtime.model.offline import OfflineModel
from forkagent_jupyter.runtime.permissions.gate import AllowAll
from forkagent_jupyter.runtime.session.session import Session
from tests.reported import tool_outputs

pytestmark = pytest.mark.anyio

MODEL = "claude-sonnet-4-6"
WINDOW = 20_000
MAX_TOKENS = 1024
SMALL = {
    **DEFAULT_CATALOG,
    MODEL: dataclasses.replace(DEFAULT_CATALOG[MODEL], context_window=WINDOW),
}
WINDOW_ERROR = "input length and `max_tokens` exceed context limit"


def cell(i: int) -> str:
    """A notebook cell of about 780 tokens."""
    return f"Cell {i}: notes on the data. " + "lorem ipsum dolor sit amet " * 100


@pytest.fixture
def small() -> Iterator[Emulator]:
    with Emulator(strict=True, seed=0, catalog=SMALL) as emu:
        yield emu
    emu.check()


@pytest.fixture
async def sessions(small: Emulator, tmp_path: Path) -> AsyncIterator[Callable[..., Session]]:
    made: list[Session] = []

    def make(**kw: Any) -> Session:
        kw.setdefault("permission_policy", AllowAll())
        kw.setdefault("home", tmp_path / "home")
        kw.setdefault("workdir", tmp_path)
        kw.setdefault("context_window", WINDOW)
        kw.setdefault("max_tokens", MAX_TOKENS)
        kw.setdefault("auto_respond", False)
        session = Session(MODEL, backend="anthropic", api_key="k", base_url=small.base_url, **kw)
        made.append(session)
        return session

    yield make
    for session in made:
        await session.aclose()


def prompt_tokens(body: dict[str, Any]) -> int:
    return count_input_tokens(body, ByteTokenizer())


def is_summary_request(body: dict[str, Any]) -> bool:
    return f"<{COMPACT_REQUEST_TAG}>" in json.dumps(body["messages"][-1])


async def stream_cell(session: Session, text: str) -> list[Compacted]:
    found = []
    async for event in session.parent.stream(text):
        if isinstance(event, Compacted):
            found.append(event)
    return found


async def test_threshold_compacts_before_the_window_and_reads_the_history_from_cache(
    small: Emulator, sessions: Callable[..., Session]
) -> None:
    session = sessions(compact_at=0.6, compact_keep_turns=2)
    compactions: list[tuple[int, Compacted]] = []
    for i in range(14):
        compactions += [(i, c) for c in await stream_cell(session, cell(i))]
    assert compactions, "the session never reached its threshold"
    threshold = 0.6 * WINDOW
    usage = {e.request_id: e.usage for e in small.ledger.entries()}
    regular = [r for r in small.api_requests() if not is_summary_request(r.body)]
    summaries = [r for r in small.api_requests() if is_summary_request(r.body)]
    assert len(summaries) == len(compactions)
    # every request the conversation sent stayed under the threshold (prompt + max_tokens)
    assert all(prompt_tokens(r.body) + r.body["max_tokens"] < threshold for r in regular)
    # it compacted only when needed: the request it replaced would have reached the threshold
    first_at, first = compactions[0]
    assert first.trigger == "threshold" and first.error is None
    assert first.before_tokens + MAX_TOKENS >= threshold
    # the conversation itself at least halved (the tools and system prompt stay as they are)
    fixed = prompt_tokens({**regular[0].body, "messages": [{"role": "user", "content": "x"}]})
    assert first.after_tokens - fixed < (first.before_tokens - fixed) / 2
    # the summary request is a fork of the conversation: its prefix came from the cache
    summary_usage = usage[summaries[0].request_id]
    assert summary_usage["cache_read_input_tokens"] > 0.8 * first.before_tokens
    assert first.usage.cache_read_input_tokens == summary_usage["cache_read_input_tokens"]
    assert first.cost_usd > 0
    # the history: the summary + the last two turns, a valid conversation (strict emulator)
    history = session.messages
    assert SUMMARY_TAG in json.dumps(history[0])
    assert len(turn_starts(history)) <= 2 + (13 - first_at)
    assert f"Cell {13}" in json.dumps(history[-2])
    assert session.main.state.context_tokens < threshold
    assert session.context_window == WINDOW


async def test_with_fewer_turns_than_it_keeps_the_threshold_keeps_the_current_one(
    small: Emulator, sessions: Callable[..., Session]
) -> None:
    session = sessions(compact_at=0.6, compact_keep_turns=3)
    assert not await stream_cell(session, "Big: " + "lorem ipsum dolor sit amet " * 1200)
    [done] = await stream_cell(session, cell(1))  # two turns: the big one goes
    assert done.error is None and done.kept_turns == 1
    assert "Big: lorem" not in json.dumps(session.messages[1:])
    assert len(turn_starts(session.messages)) == 1 and cell(1) in json.dumps(session.messages[0])
    # a single turn over the threshold has nothing older to summarise: no summary request
    alone = sessions(compact_at=0.3)
    assert not await stream_cell(alone, "Big: " + "lorem ipsum dolor sit amet " * 900)
    assert sum(is_summary_request(r.body) for r in small.api_requests()) == 1


async def test_without_compaction_the_session_ends_in_the_window_error(
    small: Emulator, sessions: Callable[..., Session]
) -> None:
    session = sessions(compact_at=None)
    with small.expect_violations(1):
        for i in range(30):
            turn = await session.ask(cell(i))
            if turn.error:
                break
    assert turn.stop_reason == "error"
    assert WINDOW_ERROR in (turn.error or "")
    assert not any(is_summary_request(r.body) for r in small.api_requests())


async def test_compact_keeps_task_ids_and_pending_notifications(
    small: Emulator, sessions: Callable[..., Session]
) -> None:
    session = sessions(compact_at=None)
    for i in range(4):
        await session.ask(cell(i))
    task = await session.fork("Count: `py: 6 * 7`", name="counter")
    await session.wait(task.id, timeout=30)
    assert session.queue.pending("main")  # its notification waits (auto_respond off)
    before = len(session.messages)
    done = await session.compact(keep_turns=1)
    assert done.error is None and done.trigger == "manual"
    assert done.messages_before == before and done.messages_after == len(session.messages) == 2
    # the task id survives in the summary, whatever the model wrote
    assert f"- {task.id} (counter): completed" in session.messages[0]["content"][0]["text"]
    assert session.queue.pending("main")  # compaction does not touch notifications
    turn = await session.ask("What did the counter find?")
    assert turn.ok, turn.error
    sent = small.api_requests()[-1].body["messages"]
    assert "<task-notification>" in json.dumps(sent[-1]) and task.id in json.dumps(sent[-1])
    assert SUMMARY_TAG in json.dumps(sent[0])
    # the summary's cost is the parent's
    assert session.usage.output_tokens >= done.usage.output_tokens > 0


async def test_compact_refuses_what_cannot_be_compacted(sessions: Callable[..., Session]) -> None:
    session = sessions()
    await session.ask("Only one turn.")
    nothing = await session.compact()
    assert nothing.error and "nothing to compact" in nothing.error
    assert len(session.messages) == 2
    with pytest.raises(UsageError, match=r"compact_at = 1\.5 refused: it takes a fraction"):
        session.compact_at = 1.5
    with pytest.raises(UsageError, match="keep_turns must be 1 or more"):
        await session.compact(keep_turns=0)


async def test_resume_after_compaction_gets_the_compacted_history(
    small: Emulator, sessions: Callable[..., Session], tmp_path: Path
) -> None:
    first = sessions(compact_at=None)
    for i in range(4):
        await first.ask(cell(i))
    await first.compact(keep_turns=1)
    await first.ask("After the summary.")
    kept = [dict(m) for m in first.messages]
    # the transcript keeps everything: the early cells are still on disk
    on_disk = (first.store.dir / "agents" / "main.jsonl").read_text()  # type: ignore[union-attr]
    assert cell(0) in on_disk
    await first.aclose()

    second = sessions(compact_at=None)
    assert await second.resume(first.session_id) == len(kept)
    assert second.messages == kept
    assert cell(0) not in json.dumps(second.messages)  # only in the summary's words
    turn = await second.ask("And now?")
    assert turn.ok, turn.error
    sent = small.api_requests()[-1]
    assert sent.body["messages"][: len(kept)] == kept or SUMMARY_TAG in json.dumps(
        sent.body["messages"][0]
    )
    usage = {e.request_id: e.usage for e in small.ledger.entries()}[sent.request_id]
    assert usage["cache_read_input_tokens"] > 0  # the resumed prefix is the one sent before
    # and a third session resumes the second's (resumed, then extended) conversation
    third = sessions(compact_at=None)
    await third.resume(second.session_id)
    assert third.messages == second.messages


async def test_fork_with_turns_inherits_only_the_last_turns(
    small: Emulator, sessions: Callable[..., Session]
) -> None:
    session = sessions(compact_at=None)
    for i in range(5):
        await session.ask(cell(i))
    whole = await session.fork("Whole: `py: 1 + 1`")
    windowed = [await session.fork(f"Short {k}: `py: {k} + 1`", turns=2) for k in range(2)]
    await session.wait(timeout=30)
    firsts = {}
    for record in small.api_requests():
        text = json.dumps(record.body["messages"][-1])
        for name in ("Whole:", "Short 0:", "Short 1:"):
            if f"<{FORK_TAG}>" in text and f"Directive: {name}" in text and name not in firsts:
                firsts[name] = record.body
    assert set(firsts) == {"Whole:", "Short 0:", "Short 1:"}
    assert len(firsts["Whole:"]["messages"]) == len(session.messages) + 1  # + the directive
    short = firsts["Short 0:"]["messages"]
    assert len(turn_starts(short)) == 2 + 1 and "Cell 3:" in json.dumps(short[0])  # + directive
    assert cell(2) not in json.dumps(short)
    # the system prompt and tools are the parent's; siblings share a byte-identical prefix
    for key in ("system", "tools"):
        assert firsts["Short 0:"][key] == firsts["Whole:"][key]
    a, b = (json.dumps(firsts[k]) for k in ("Short 0:", "Short 1:"))
    cut = a.index("Directive: Short")
    assert a[:cut] == b[:cut]
    assert all(t.status == "completed" for t in [whole, *windowed])
    assert prompt_tokens(firsts["Short 0:"]) < prompt_tokens(firsts["Whole:"]) - 3 * 700
    # the windowed fork's transcript holds its own messages (resumable on its own)
    loaded = await session.store.aload(windowed[0].id)  # type: ignore[union-attr]
    assert cell(2) not in json.dumps(loaded.messages) and cell(3) in json.dumps(loaded.messages)
    with pytest.raises(UsageError, match="1 or more"):
        await session.fork("bad", turns=0)


async def test_the_agent_tool_forks_with_fork_turns(
    small: Emulator, sessions: Callable[..., Session]
) -> None:
    session = sessions(compact_at=None)
    for i in range(3):
        await session.ask(cell(i))
    call = {"description": "recent", "prompt": "Recent: `py: 2 * 21`", "fork_turns": 1}
    small.script(Reply.tool_use("Agent", call), when_empty="fallback")
    turn = await session.ask("Fork a worker on the latest cell only.")
    assert turn.ok and "Started background agent" in turn.tool_calls[0].result
    [task] = await session.wait(timeout=30)
    assert task.status == "completed"
    assert tool_outputs(task.result or "") == ["42"], task.result
    first = next(r.body for r in small.api_requests() if "Directive: Recent" in json.dumps(r.body))
    sent = json.dumps(first["messages"])
    assert "Fork a worker on the latest cell only." in sent
    assert all(cell(i) not in sent for i in range(3))
    # the Agent call and its placeholder result stay paired (the strict emulator checks it)
    assert first["messages"][-2]["content"][-1]["type"] == "tool_use"
    # a named agent takes no fork_turns: the model is told, nothing starts
    named = {**call, "subagent_type": "general-purpose"}
    small.script(Reply.tool_use("Agent", named), when_empty="fallback")
    refused = await session.ask("Now a named agent on the latest cell.")
    assert refused.tool_calls[0].is_error
    assert "fork_turns applies to forks only" in refused.tool_calls[0].result
    assert len(session.tasks) == 1


async def test_a_worker_compacts_inside_its_own_transcript(
    small: Emulator, sessions: Callable[..., Session]
) -> None:
    session = sessions(compact_at=0.6)
    for i in range(6):  # the parent stays under its threshold
        assert not await stream_cell(session, cell(i))
    parent_messages = [dict(m) for m in session.messages]
    big = "`py: print('w' * 9000)`"  # a result of about 2,300 tokens
    worker = await session.fork(f"Look: {big}", name="looker")
    await session.wait(worker.id, timeout=30)
    for k in range(3):
        await session.send("looker", f"Again {k}: {big}")
        await session.wait(worker.id, timeout=30)
    assert worker.status == "completed", worker.error
    assert worker.compactions >= 1
    assert 0 < worker.context_tokens < 0.6 * WINDOW and worker.context_window == WINDOW
    # the parent's conversation is untouched, the worker's transcript has everything
    assert session.messages == parent_messages
    path = session.store.dir / "agents" / f"{worker.id}.jsonl"  # type: ignore[union-attr]
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert any(r.get("kind") == "compacted" for r in records)
    loaded = await session.store.aload(worker.id)  # type: ignore[union-attr]
    assert SUMMARY_TAG in json.dumps(loaded.messages[0])
    assert "Again 2:" in json.dumps(loaded.messages)
    # its directive survives, whichever turns were dropped
    head = loaded.messages[0]["content"][0]["text"]
    assert f"<{FORK_TAG}>" in head and "Directive: Look:" in head
    summaries = [r for r in small.api_requests() if is_summary_request(r.body)]
    assert summaries and f"<{FORK_TAG}>" in json.dumps(summaries[0].body)  # the worker's
    for record in small.api_requests():
        if not is_summary_request(record.body):
            assert prompt_tokens(record.body) + record.body["max_tokens"] < 0.6 * WINDOW
    assert "compacted" in worker.output_file.read_text()  # type: ignore[union-attr]


async def test_the_offline_model_refuses_a_request_over_the_window(tmp_path: Path) -> None:
    session = Session(
        MODEL,
        client=OfflineModel(MODEL, catalog=SMALL),
        workdir=tmp_path,
        home=tmp_path,
        permission_policy=AllowAll(),
        compact_at=None,
        context_window=WINDOW,
        max_tokens=MAX_TOKENS,
        auto_respond=False,
    )
    try:
        for i in range(30):
            turn = await session.ask(cell(i))
            if turn.error:
                break
        assert WINDOW_ERROR in (turn.error or "")
        assert f"> {WINDOW}, decrease input length" in (turn.error or "")
        # compaction turned on late: the summary reads the latest turns that fit, and the
        # session goes on (the transcript keeps the rest)
        session.compact_at = 0.6
        turn = await session.ask(cell(100))
        assert turn.ok, turn.error
        assert SUMMARY_TAG in json.dumps(session.messages[0])
        assert session.main.state.context_tokens + MAX_TOKENS < 0.6 * WINDOW
    finally:
        await session.aclose()
    # with compaction on, the same cells go through
    session = Session(
        MODEL,
        client=OfflineModel(MODEL, catalog=SMALL),
        workdir=tmp_path,
        home=tmp_path,
        permission_policy=AllowAll(),
        compact_at=0.6,
        context_window=WINDOW,
        max_tokens=MAX_TOKENS,
        auto_respond=False,
    )
    try:
        for j in range(i + 1):
            turn = await session.ask(cell(j))
            assert turn.ok, turn.error
        assert session.main.state.context_tokens + MAX_TOKENS < 0.6 * WINDOW
    finally:
        await session.aclose()


def test_a_platforms_model_id_has_its_models_window() -> None:
    from forkagent_jupyter.messages_api.catalog import DEFAULT_CATALOG
    from forkagent_jupyter.runtime.loop.compaction import window_for

    # a Bedrock inference profile of Sonnet 4.6: its 200k window, not the default model's 1M
    assert window_for("us.anthropic.claude-sonnet-4-6-v1:0") == 200_000
    assert DEFAULT_CATALOG["claude-sonnet-4-6"].context_window == 200_000
    assert window_for("claude-sonnet-4-5@20250929") == 200_000  # a Vertex id
