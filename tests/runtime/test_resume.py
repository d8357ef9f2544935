"""Transcripts on disk: output files, and resuming a worker after the process restarts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.runtime.transcripts.store import AgentMeta, TranscriptStore
from tests.reported import tool_outputs

pytestmark = pytest.mark.anyio


def strip_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache_control(v) for v in value]
    return value


async def test_resume_after_restart_reads_its_own_prefix(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    first = make_session(auto_respond=False)
    await first.ask("Context:\n" + "observations. " * 400)
    task = await first.fork("Profile it `py: 2 ** 10`", name="profiler")
    await first.wait(task.id, timeout=30)
    assert task.status == "completed"
    assert tool_outputs(task.result or "") == ["1024"], task.result
    output = Path(task.output_file or "")
    assert output.is_file() and "tool Python" in output.read_text()
    assert "result:" in output.read_text()
    assert tool_outputs(output.read_text().split("result:")[-1]) == ["1024"]
    await first.aclose()
    last_body = emulator.api_requests()[-1].body

    # a new process: a new Session in the same work dir knows nothing of the worker
    second = make_session(auto_respond=False)
    assert second.tasks == []
    reply = await second.send("profiler", "Now `py: 3 ** 3`")
    assert "resumed from its transcript" in reply
    [resumed] = await second.wait(timeout=30)
    assert resumed.id == task.id and resumed.status == "completed", resumed.error
    assert tool_outputs(resumed.result or "") == ["27"], resumed.result
    body = emulator.api_requests()[-2].body  # the resumed run's first request
    n = len(last_body["messages"])
    old = strip_cache_control(last_body["messages"])
    new = strip_cache_control(body["messages"][:n])
    assert json.dumps(old[:-1]) == json.dumps(new[:-1])  # byte-identical history
    assert strip_cache_control(body["system"]) == strip_cache_control(last_body["system"])
    assert strip_cache_control(body["tools"]) == strip_cache_control(last_body["tools"])
    usage = {e.request_id: e.usage for e in emulator.ledger.entries()}
    rec = emulator.api_requests()[-2]
    assert usage[rec.request_id]["cache_read_input_tokens"] > 1000
    assert "changed since it last ran" not in reply
    await second.aclose()

    # a later process whose parent prompt differs: the resume says it cannot read the cache
    third = make_session(auto_respond=False, system_prompt="Another system prompt.")
    reply = await third.send("profiler", "Once more `py: 1 + 1`")
    assert "Its system changed since it last ran" in reply
    await third.wait(timeout=30)


async def test_fork_transcripts_share_the_parents_file(make_session: Any, tmp_path: Path) -> None:
    session = make_session(auto_respond=False)
    await session.ask("Some context to inherit.")
    tasks = [await session.fork(f"part {i} `py: {i}`") for i in range(3)]
    await session.wait(timeout=30)
    assert session.store is not None
    store = TranscriptStore(session.store.root, "reader")
    for task in tasks:
        loaded = await store.aload(task.id)
        assert loaded.meta.inherits_from == "main"
        assert loaded.messages[: len(session.messages[:2])] == session.messages[:2]
        own = (session.store.dir / "agents" / f"{task.id}.jsonl").read_text()
        assert "Some context to inherit." not in own  # not copied: inherited by reference
    with pytest.raises(Exception, match="No transcript found"):
        await store.aload("a0000000000000000")


async def test_truncated_last_line_is_skipped(tmp_path: Path) -> None:
    from forkagent_jupyter.runtime.transcripts.store import AgentMeta

    store = TranscriptStore(tmp_path, "s1")
    t = store.open(AgentMeta(agent_id="a1", kind="fork"))
    t.append_message({"role": "user", "content": [{"type": "text", "text": "héllo"}]})
    t.append_message({"content": [{"text": "ok", "type": "text"}], "role": "assistant"})
    await store.aflush()  # on disk before the file is damaged behind the store's back
    with t.path.open("a") as f:
        f.write('{"seq": 3, "type": "mess')
    loaded = await store.aload("a1")
    assert [m["role"] for m in loaded.messages] == ["user", "assistant"]
    assert list(loaded.messages[1]) == ["content", "role"]  # key order kept


def _cut_off_session(root: Path, name: str) -> TranscriptStore:
    """A session of another process: `done` ended; `cut` was running a call when it ended
    (a kernel restart), one call before had failed."""
    store = TranscriptStore(root, name)
    done = store.open(AgentMeta(agent_id="adone", kind="fork", name="done", description="d"))
    done.append_message({"role": "user", "content": "Sum it `py: 20 + 22`"})
    done.append_message({"role": "assistant", "content": [{"type": "text", "text": "42"}]})
    done.set_result("the sum is 42", "completed")
    cut = store.open(AgentMeta(agent_id="acut", kind="fork", name="cut", description="long job"))
    cut.append_message({"role": "user", "content": "Work on it."})
    for call, result in (("t1", "ZeroDivisionError: division by zero"), ("t2", None)):
        use = {"type": "tool_use", "id": call, "name": "Python", "input": {"code": "1 / 0"}}
        cut.append_message({"role": "assistant", "content": [use]})
        if result is not None:
            block = {"type": "tool_result", "tool_use_id": call, "content": result}
            cut.append_message({"role": "user", "content": [{**block, "is_error": True}]})
    return store


async def test_after_a_restart_the_workers_it_cut_off_are_interrupted_and_resume_so(
    make_session: Any, tmp_path: Path
) -> None:
    """After a restart nothing said which workers had been running; resumed, a worker whose
    run had been cut off showed plain `completed`."""
    root = tmp_path / ".forkagent" / "sessions"
    old = _cut_off_session(root, "old")
    session = make_session(auto_respond=False)
    assert await session.interrupted() == []  # that session is still open (its lock held)
    await old.aclose()
    session = make_session(auto_respond=False)
    [cut] = await session.interrupted()
    assert (cut.label, cut.session, cut.tool_uses, cut.tool_errors, cut.cut_off) == (
        "cut",
        "old",
        2,
        2,
        1,
    )
    assert cut.failed_calls == "2 of 2 tool calls failed" and "interrupted" in cut.line()

    reply = await session.send("cut", "Go on `py: 2 + 2`")
    assert "resumed from its transcript" in reply
    [task] = await session.wait("cut", timeout=60)
    assert task.status == "completed"
    assert task.failed_calls == "2 of 3 tool calls failed", task.summary()
    assert task.summary().endswith("completed, 2 of 3 tool calls failed")
    assert any("interrupted before it finished" in note for note in task.notes), task.notes
    assert any("1 tool call(s) it was running got no result" in n for n in task.notes)
    assert await session.interrupted() == []  # resumed: listed as a task now

    # a worker that had ended: resumed, its earlier result stays readable
    await session.send("done", "Again `py: 1 + 1`")
    [again] = await session.wait("done", timeout=60)
    assert again.results[1:] == ["the sum is 42"] and again.results[0] == again.result
    assert again.notes == [] and again.failed_calls == ""


async def test_a_real_run_records_how_it_ended(make_session: Any, tmp_path: Path) -> None:
    first = make_session(auto_respond=False)
    task = await first.fork("Fail `py: 1 / 0`", name="failing")
    await first.wait(task.id, timeout=60)
    await first.aclose()
    second = make_session(auto_respond=False)
    assert await second.interrupted() == []  # it ended: nothing was cut off
    assert first.store is not None
    loaded = await first.store.aload(task.id)
    assert loaded.past.ended and loaded.past.results == (task.result,)
    assert (loaded.past.tool_uses, loaded.past.tool_errors) == (1, 1)


def test_a_forks_counts_leave_out_its_parents_calls() -> None:
    """A fork resumed in a later session writes its whole history to its new file, its
    parent's conversation first: those calls are not the fork's."""
    from forkagent_jupyter.runtime.transcripts.reading import past_runs

    def use(call: str) -> dict[str, Any]:
        return {"type": "tool_use", "id": call, "name": "Python", "input": {"code": "1"}}

    def result(call: str, error: bool) -> dict[str, Any]:
        return {"type": "tool_result", "tool_use_id": call, "content": "x", "is_error": error}

    messages = [
        {"role": "user", "content": "Look."},
        {"role": "assistant", "content": [use("p1")]},
        {"role": "user", "content": [result("p1", True)]},
        {"role": "assistant", "content": [use("p2")]},
        {
            "role": "user",
            "content": [
                result("p2", False),
                {"type": "text", "text": "<fork-directive>go</fork-directive>"},
            ],
        },
        {"role": "assistant", "content": [use("f1")]},
        {"role": "user", "content": [result("f1", False)]},
        {"role": "assistant", "content": [use("f2")]},
    ]
    records = [{"type": "message", "message": m} for m in messages]
    past = past_runs(records, is_fork=True)
    assert not past.ended and (past.tool_uses, past.tool_errors, past.cut_off) == (2, 1, 1)
    named = past_runs(records, is_fork=False)
    assert (named.tool_uses, named.tool_errors, named.cut_off) == (4, 2, 1)
    ended = past_runs([*records, {"type": "event", "kind": "result", "data": {"text": "r"}}], True)
    assert ended.ended and ended.results == ("r",) and ended.cut_off == 0
