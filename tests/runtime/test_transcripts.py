"""Sidechain transcripts on real files: exact round trips, crash tolerance, resume, redaction."""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.runtime.errors import UsageError
from forkagent_jupyter.runtime.history import append_message
from forkagent_jupyter.runtime.transcripts.store import (
    INTERRUPTED_RESULT,
    MAX_OPEN_FILES,
    RESET_EVENT,
    AgentMeta,
    TranscriptError,
    TranscriptStore,
    fingerprint,
    repair_for_resume,
)

AGENT = "a0123456789abcdef"

ODD_MESSAGES: list[dict[str, Any]] = [
    {"content": "Ünïcödé: 日本語 🧪 עברית, line\u2028separators\x85\u2029", "role": "user"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "signature": "c2ln", "thinking": "z before a"},
            {"text": "Zeilen: 3 — ok\n\ttab", "type": "text"},
            {"name": "Python", "type": "tool_use", "input": {"z": 1, "a": [2.5, None]}, "id": "t1"},
        ],
    },
    {
        "content": [
            {"tool_use_id": "t1", "type": "tool_result", "content": '"quoted" \\ back'},
            {"type": "text", "text": "", "cache_control": {"type": "ephemeral", "ttl": "5m"}},
        ],
        "role": "user",
    },
    {"role": "assistant", "content": [{"type": "text", "text": "Fertig. ✅ 1e-7 0.1"}]},
]


def fake_key() -> str:
    return "-".join(["sk", "ant", "api03", "Zx9" * 12 + "AAAA"])  # built, not written out


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_round_trip_is_byte_identical(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, "s1")
    t = store.open(AGENT, AgentMeta(agent_id=AGENT, kind="fork", name="profiler"))
    for message in ODD_MESSAGES:
        t.append_message(message)
    t.append_event("permission", {"tool": "Bash", "decision": "allow"})
    loaded = store.load(AGENT)
    assert json.dumps(loaded.messages) == json.dumps(ODD_MESSAGES)
    assert json.dumps(loaded.messages, ensure_ascii=False) == json.dumps(
        ODD_MESSAGES, ensure_ascii=False
    )
    assert loaded.repairs == [] and loaded.meta.name == "profiler"
    assert loaded.session_dir == tmp_path / "s1"
    records = lines(t.path)
    assert [r["type"] for r in records] == ["message"] * 4 + ["event"]
    assert [r["seq"] for r in records] == [1, 2, 3, 4, 5]
    assert all(isinstance(r["t"], float) for r in records)
    assert records[4]["kind"] == "permission" and records[4]["data"]["decision"] == "allow"
    raw = t.path.read_text(encoding="utf-8")
    assert "日本語" in raw and "🧪" in raw  # written as is, not \\u-escaped
    assert "\u2028" not in raw and "\\u2028" in raw  # but no line break other than \n


def test_same_role_messages_merge_as_in_memory(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, "s1")
    t = store.open(AgentMeta(agent_id=AGENT, kind="fork"))
    in_memory: list[dict[str, Any]] = []
    appended = [
        {"role": "user", "content": "first"},
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "answer"}]},
    ]
    for message in appended:
        append_message(in_memory, message)
        t.append_message(message)
    assert json.dumps(store.load(AGENT).messages) == json.dumps(in_memory)
    assert len(in_memory) == 2


def test_reset_event_starts_over(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, "s1")
    t = store.open(AgentMeta(agent_id="main", kind="main"))
    t.append_message({"role": "user", "content": "old"})
    t.append_event(RESET_EVENT)
    t.append_message({"role": "user", "content": "new"})
    assert store.load("main").messages == [{"role": "user", "content": "new"}]


def test_truncated_last_line_is_skipped_and_cut_before_appending(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = TranscriptStore(tmp_path, "s1")
    t = store.open(AgentMeta(agent_id=AGENT, kind="fork"))
    for message in ODD_MESSAGES[:2]:
        t.append_message(message)
    t.close()
    with t.path.open("a", encoding="utf-8") as f:
        f.write('{"type":"message","message":{"role":"user","content":"cut in the mid')
    with caplog.at_level(logging.WARNING, logger="forkagent_jupyter.runtime.transcripts"):
        loaded = store.load(AGENT)
    assert "truncated last line" in caplog.text
    assert json.dumps(loaded.messages[:2]) == json.dumps(ODD_MESSAGES[:2])

    # the same agent continues (a new process): the cut-off line goes, appends stay valid
    again = TranscriptStore(tmp_path, "s1").open(AgentMeta(agent_id=AGENT, kind="fork"))
    again.append_message(ODD_MESSAGES[2])
    assert [r["seq"] for r in lines(again.path)] == [1, 2, 3]
    assert json.dumps(store.load(AGENT).messages[:3]) == json.dumps(ODD_MESSAGES[:3])


def test_damage_before_the_last_line_is_an_error(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, "s1")
    t = store.open(AgentMeta(agent_id=AGENT, kind="fork"))
    t.append_message({"role": "user", "content": "hi"})
    with t.path.open("a", encoding="utf-8") as f:
        f.write("garbage\n")
    t.append_message({"role": "assistant", "content": "ok"})
    with pytest.raises(TranscriptError, match=r"line 2 is not valid JSON"):
        store.load(AGENT)


def test_resume_after_restart_finds_the_agent_in_its_old_session(tmp_path: Path) -> None:
    first = TranscriptStore(tmp_path, "session-1")
    t = first.open(AgentMeta(agent_id=AGENT, kind="reviewer", name="profiler", model="m"))
    for message in ODD_MESSAGES:
        t.append_message(message)
    first.close()

    second = TranscriptStore(tmp_path, "session-2")  # the process restarted
    assert second.agent_ids() == [] and not second.exists(AGENT)
    assert second.find(AGENT) is None and second.find("profiler") is None  # this session only
    assert second.agent_id_for("profiler") == AGENT
    assert second.agent_id_for(AGENT) == AGENT
    assert TranscriptStore.search(tmp_path, "profiler") == (tmp_path / "session-1", AGENT)
    assert second.agent_id_for("nobody") is None
    loaded = second.load(AGENT)
    assert loaded.meta.kind == "reviewer" and loaded.meta.model == "m"
    assert json.dumps(loaded.messages) == json.dumps(ODD_MESSAGES)

    # resumed here, it gets a copy in this session, which is newer and wins from now on
    copy = second.open(loaded.meta.model_copy(update={"created_at": loaded.meta.created_at + 1}))
    for message in loaded.messages:
        copy.append_message(message)
    copy.append_message({"role": "user", "content": "more"})
    assert second.find("profiler") == AGENT and second.exists(AGENT)
    assert TranscriptStore.search(tmp_path, AGENT) == (tmp_path / "session-2", AGENT)
    assert len(TranscriptStore(tmp_path, "session-3").load(AGENT).messages) == 5
    with pytest.raises(UsageError, match="No transcript found for agent 'a-ghost'"):
        second.load("a-ghost")


def test_newest_agent_of_a_name_wins(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, "s1")
    store.open(AgentMeta(agent_id="a1", kind="fork", name="twin", created_at=100.0))
    store.open(AgentMeta(agent_id="a2", kind="fork", name="twin", created_at=200.0))
    assert store.find("twin") == "a2"
    assert store.agent_ids() == ["a1", "a2"]


def test_api_key_never_reaches_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = fake_key()
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    store = TranscriptStore(tmp_path, "s1")
    t = store.open(AgentMeta(agent_id=AGENT, kind="fork", description=f"uses {key}"))
    t.append_message({"role": "user", "content": [{"type": "text", "text": f"key={key}!"}]})
    t.append_event("permission", {"command": f"curl -H 'x-api-key: {key}'"})
    t.output(f"tool Bash: echo {key}")
    t.set_result(f"The key is {key}")
    t.update_meta(worktree_path=f"/tmp/{key}")
    written = list((tmp_path / "s1").rglob("*"))
    assert {p.name for p in written if p.is_file()} >= {f"{AGENT}.jsonl", f"{AGENT}.output"}
    for path in written:
        if path.is_file():
            data = path.read_bytes()
            assert key.encode() not in data, path
            assert b"sk-ant-" not in data, path
    assert "key=[redacted]!" in t.path.read_text()
    assert "[redacted]" in t.output_path.read_text()


def test_output_file_is_plain_text_from_the_start(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, "s1")
    t = store.open(AgentMeta(agent_id=AGENT, kind="fork"))
    assert t.output_path == tmp_path / "s1" / "tasks" / f"{AGENT}.output"
    assert t.output_path.read_text() == ""  # exists at once: `tail -f` works
    t.output("started fork: profile the data")
    t.output("tool Python: df.describe()\nsecond line")
    t.set_result("Scope: profiling\nResult: 3 columns")
    text = t.output_path.read_text()
    first, second, third, *rest = text.splitlines()
    assert first.endswith("] started fork: profile the data") and first.startswith("[")
    assert second.endswith("tool Python: df.describe()")
    assert third == " " * 11 + "second line"
    assert rest[0].endswith("] result:") and rest[1:] == ["Scope: profiling", "Result: 3 columns"]
    assert lines(t.path)[-1]["kind"] == "result"


def test_meta_file_and_cache_parity(tmp_path: Path) -> None:
    system = [{"type": "text", "text": "You are helpful."}]
    tools = [{"name": "Read", "input_schema": {"type": "object", "properties": {}}}]
    store = TranscriptStore(tmp_path, "s1")
    meta = AgentMeta(
        agent_id=AGENT,
        kind="reviewer",
        description="review",
        name="rev",
        model="claude-x",
        owner="a-parent",
        worktree_path="/w",
        system_hash=fingerprint(system),
        tools_hash=fingerprint(tools),
    )
    t = store.open(AGENT, meta)
    on_disk = json.loads(t.meta_path.read_text())
    assert on_disk["owner"] == "a-parent" and on_disk["worktree_path"] == "/w"
    assert on_disk["system_hash"] == fingerprint(system) and len(on_disk["tools_hash"]) == 64
    loaded = store.load(AGENT).meta
    assert loaded.cache_mismatches(system=system, tools=tools) == []
    reordered = [{"input_schema": tools[0]["input_schema"], "name": "Read"}]
    assert loaded.cache_mismatches(system=system, tools=reordered) == ["tools"]
    t.update_meta(worktree_path=None)
    assert store.load(AGENT).meta.worktree_path is None
    with pytest.raises(UsageError):
        store.open("a-other", meta)


def test_fork_inherits_the_parents_prefix_by_reference(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, "s1")
    main = store.open(AgentMeta(agent_id="main", kind="main"))
    for message in ODD_MESSAGES[:3]:
        main.append_message(message)
    fork = store.open(
        AgentMeta(agent_id=AGENT, kind="fork", inherits_from="main", inherits_count=3)
    )
    own = {"role": "assistant", "content": [{"type": "text", "text": "fork's answer"}]}
    fork.append_message(own)
    # the parent goes on, even starts over: the fork's history does not change
    main.append_message(ODD_MESSAGES[3])
    main.append_event(RESET_EVENT)
    main.append_message({"role": "user", "content": "a new conversation"})
    loaded = store.load(AGENT)
    assert loaded.meta.inherits_seq == 3
    assert json.dumps(loaded.messages) == json.dumps([*ODD_MESSAGES[:3], own])
    assert "Ünïcödé" not in fork.path.read_text(encoding="utf-8")  # not copied
    assert TranscriptStore(tmp_path, "later").load(AGENT).messages == loaded.messages


def test_many_agents_share_a_bounded_number_of_open_files(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, "s1")
    transcripts = [store.open(AgentMeta(agent_id=f"a{i}", kind="fork")) for i in range(100)]
    for round_ in range(3):
        for t in transcripts:
            t.append_message({"role": "user" if round_ % 2 == 0 else "assistant", "content": "x"})
            t.output(f"round {round_}")
    assert len(store._files._open) <= MAX_OPEN_FILES
    for t in transcripts:
        assert [r["seq"] for r in lines(t.path)] == [1, 2, 3]
        assert len(t.output_path.read_text().splitlines()) == 3
    store.close()
    assert not store._files._open


def test_repair_answers_interrupted_tool_calls_and_keeps_the_prefix() -> None:
    history = [
        *ODD_MESSAGES,
        {"role": "user", "content": "go on"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Running two tools."},
                {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "t3", "name": "Read", "input": {"file_path": "x"}},
            ],
        },
    ]
    repaired, repairs = repair_for_resume(history)
    assert json.dumps(repaired[: len(history)]) == json.dumps(history)  # nothing before changes
    last = repaired[-1]
    assert last["role"] == "user" and len(repaired) == len(history) + 1
    assert [b["tool_use_id"] for b in last["content"]] == ["t2", "t3"]
    assert all(b["is_error"] and b["content"] == INTERRUPTED_RESULT for b in last["content"])
    assert repairs == ["answered 2 interrupted tool call(s) with an error result"]
    roles = [m["role"] for m in repaired]
    assert all(a != b for a, b in itertools.pairwise(roles))


def test_repair_completes_a_partial_result_message() -> None:
    history = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "Read", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                {"type": "text", "text": "a queued message"},
            ],
        },
    ]
    repaired, _ = repair_for_resume(history)
    assert repaired[:2] == history[:2] and len(repaired) == 3
    blocks = repaired[2]["content"]
    assert [b.get("tool_use_id") for b in blocks] == ["t1", "t2", None]
    assert history[2]["content"][1]["text"] == "a queued message"  # the input is not mutated
    assert len(history[2]["content"]) == 2


def test_repair_drops_empty_trailing_assistant_messages(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, "s1")
    t = store.open(AgentMeta(agent_id=AGENT, kind="fork"))
    t.append_message({"role": "user", "content": "question"})
    t.append_message({"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]})
    loaded = store.load(AGENT)
    assert loaded.messages == [{"role": "user", "content": "question"}]
    assert loaded.repairs == ["dropped an empty assistant message at the end"]
    whitespace = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "  \n"}]
    assert repair_for_resume(whitespace)[0] == whitespace[:1]
    done = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "answer"}]
    assert repair_for_resume(done) == (done, [])
    assert repair_for_resume([]) == ([], [])


@pytest.mark.anyio
async def test_appends_on_the_event_loop_leave_it_free_and_keep_their_order(
    tmp_path: Path, loop_guard: Any
) -> None:
    store = TranscriptStore(tmp_path, "s1")
    t = store.open(AgentMeta(agent_id=AGENT, kind="fork"))
    for i in range(300):
        t.append_event("step", {"i": i})
        t.output(f"line {i}")
    t.set_result("done")
    assert not loop_guard.findings, loop_guard.report()  # the writer thread did the writes
    await store.aflush()
    records = lines(t.path)
    assert [r["seq"] for r in records] == list(range(1, 302))
    assert [r["data"]["i"] for r in records[:300]] == list(range(300))
    assert records[-1]["kind"] == "result"
    output = t.output_path.read_text().splitlines()
    assert [x.split("] ", 1)[1] for x in output[:300]] == [f"line {i}" for i in range(300)]
    assert output[-1] == "done"
    assert (tmp_path / ".gitignore").read_text() == "*\n"
    await store.aclose()


def test_appends_off_the_event_loop_are_on_disk_when_they_return(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, "s1")
    t = store.open(AgentMeta(agent_id=AGENT, kind="fork"))
    for i in range(3):
        t.append_event("step", {"i": i})
        assert len(lines(t.path)) == i + 1
    store.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A real 256 KiB filesystem (tmpfs) and a way to fill it up and free it again."""
    import contextlib
    import os
    import shutil
    import subprocess

    mount = tmp_path / "small"
    mount.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")

    class Disk:
        path = mount
        filler = mount / "filler"

        def fill(self) -> None:
            fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            try:
                for size in (4096, 1):
                    with contextlib.suppress(OSError):
                        while True:
                            os.write(fd, b"x" * size)
            finally:
                os.close(fd)
            with pytest.raises(OSError):  # really full: not even one more byte
                (mount / "probe").write_bytes(b"x" * 4096)

        def free(self) -> None:
            self.filler.unlink()
            (mount / "probe").unlink(missing_ok=True)

    try:
        yield Disk()
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_loses_nothing_and_the_transcript_catches_up(
    small_disk: Any, caplog: pytest.LogCaptureFixture
) -> None:
    store = TranscriptStore(small_disk.path / "sessions", "s1")
    t = store.open(AGENT, AgentMeta(agent_id=AGENT, kind="fork", name="profiler"))
    history: list[dict[str, Any]] = []
    t.append_message(ODD_MESSAGES[0])
    append_message(history, ODD_MESSAGES[0])
    store.flush()
    small_disk.fill()
    with caplog.at_level(logging.WARNING, "forkagent_jupyter.runtime.transcripts"):
        for message in ODD_MESSAGES[1:] * 20:  # more than a few blocks: part-written lines too
            t.append_message(message)
            append_message(history, message)
            t.output("a line of output " * 20)
        t.update_meta(name="renamed")
        store.flush()
        assert store.behind >= 2  # the transcript, its output and its meta wait in memory
        assert "kept in memory" in caplog.text
        small_disk.free()
        store.flush()  # the next write or flush catches up
    assert store.behind == 0
    assert "caught up" in caplog.text
    loaded = TranscriptStore(small_disk.path / "sessions", "s2").load(AGENT)
    assert loaded.messages == history and loaded.repairs == []
    assert loaded.meta.name == "renamed"
    assert [r["seq"] for r in lines(t.path)] == list(range(1, len(ODD_MESSAGES[1:]) * 20 + 2))
    assert t.output_path.read_text().count("a line of output") == 20 * 20 * 3


@pytest.mark.anyio
async def test_a_session_on_a_full_disk_catches_up_when_space_returns(
    small_disk: Any, tmp_path: Path
) -> None:
    from forkagent_jupyter.runtime.permissions.gate import AllowAll
    from forkagent_jupyter.runtime.session.session import Session

    root = small_disk.path / "sessions"
    work = tmp_path / "work"
    work.mkdir()
    async with Session(
        backend="offline", workdir=work, transcripts=root, permission_policy=AllowAll()
    ) as s:
        await s.ask("Start. `py: 1 + 1`")
        await s.wait()
        small_disk.fill()
        await s.ask("Go on while the disk is full. `py: 6 * 7`")
        task = await s.fork("report the answer `py: 40 + 2`", name="w")
        await s.wait()
        assert s.store is not None and s.store.behind > 0
        small_disk.free()
        await s.ask("Space is back.")
        await s.wait()
        assert s.store.behind == 0
        main_history = list(s.main.history)
        worker_history = list(s.workers.runs[task.id].history)
        session_id = s.session_id
    later = TranscriptStore(root, "later")
    assert (await later.aload("main", root / session_id)).messages == main_history
    assert (await later.aload(task.id)).messages == worker_history
    assert await later.aagent_id_for("w") == task.id


@pytest.mark.anyio
async def test_a_process_forked_from_the_kernel_does_not_keep_its_session_open(
    make_session: Any,
) -> None:
    """A snapshot process (forked from the kernel to start workers) holds no copy of the
    session's lock: a copy holds the lock as long as it is open, so a worker still dying after
    its kernel had gone kept the session looking open, and a restarted kernel did not list its
    interrupted agents."""
    import asyncio
    import os
    import time

    from forkagent_jupyter.runtime.executors.process.process import Snapshot
    from forkagent_jupyter.runtime.transcripts.earlier import in_use
    from forkagent_jupyter.runtime.transcripts.store import LOCK_FILE

    session = make_session()
    lock = (session.store.dir / LOCK_FILE).resolve()
    deadline = time.monotonic() + 30
    while not await asyncio.to_thread(in_use, session.store.dir):  # the writer thread takes it
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)

    def opened(pid: int) -> set[str]:
        found = set()
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                found.add(str(fd.readlink()))
            except OSError:
                continue
        return found

    assert str(lock) in await asyncio.to_thread(opened, os.getpid())  # the session holds it
    snapshot = Snapshot({})
    try:
        _pid, sock = await asyncio.wait_for(snapshot.spawn(), 60)  # it has settled by then
        sock.close()
        assert str(lock) not in await asyncio.to_thread(opened, snapshot.pid)
    finally:
        snapshot.close()
