"""Teammates after a restart, through the model's own tool calls: a teammate's transcript
records its team; a new session lists the teammates a restart cut off under their team;
`send` brings one back as a teammate (in its team's roster, waiting for mail after its turn);
resumed and live teammates message each other by name; a message to the whole team reaches
the members the restart cut off too."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import Reply
from forkagent_jupyter.runtime.transcripts.earlier import in_use
from forkagent_jupyter.runtime.transcripts.store import TranscriptStore

from .helpers import until
from .test_teams import requests_of, said, scripted, send, spawn

pytestmark = pytest.mark.anyio


async def restart(session: Any) -> None:
    """What a kernel restart leaves of `session`: its files on disk, its worker processes
    gone (a snapshot process forked from this one holds its lock too) and its lock released.
    Its teammates, idle, never write a result: they wait in memory, out of every later
    session's reach, until the test ends."""
    await session.compute.aclose()  # kills them; they end a moment later
    await session.store.aclose()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while await asyncio.to_thread(in_use, session.store.dir):
        assert loop.time() < deadline, "the session's processes did not end"
        await asyncio.sleep(0.02)


async def team_of_two(emulator: Any, make_session: Any) -> tuple[Any, Any]:
    """A session whose lead formed team analysts (ana, bob), both idle; its brain."""
    brain = scripted(emulator)
    ana = spawn("ana", "ANA-JOB count rows", "analysts").blocks()[0]
    bob = spawn("bob", "BOB-JOB sum columns", "analysts").blocks()[0]
    brain.when_last_user_contains("FORM", Reply((ana, bob)), times=1)
    first = make_session(auto_respond=False)
    turn = await first.ask("FORM a team")
    assert [c.is_error for c in turn.tool_calls] == [False, False], turn.tool_calls
    await until(lambda: all(t.idle for t in first.tasks))
    return first, brain


async def test_a_teammates_transcript_records_its_team_and_an_older_one_reads_as_a_plain_agent(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    brain = scripted(emulator)
    brain.when_last_user_contains("START", spawn(None, "FORK-JOB `py: 1 + 1`"), times=1)
    ana = spawn("ana", "ANA-JOB", "analysts").blocks()[0]
    bob = spawn("bob", "BOB-JOB", "analysts", mode="plan").blocks()[0]
    brain.when_last_user_contains("FORM", Reply((ana, bob)), times=1)
    approve = {"type": "plan_approval_response", "request_id": "plan-1", "approve": True}
    brain.when_last_user_contains("APPROVE", send("bob", approve), times=1)
    session = make_session(auto_respond=False)
    await session.ask("START a plain worker")
    [plain] = session.tasks
    await session.ask("FORM a team")
    ana_task, bob_task = session.teams["analysts"]
    await until(lambda: ana_task.idle and bob_task.idle)
    store = session.store

    async def team(task: Any) -> Any:
        """The team its transcript's meta records, as written on disk."""
        meta = (await store.aload(task.id)).meta
        return meta.team.model_dump() if meta.team is not None else None

    assert await team(ana_task) == {"name": "analysts", "member": "ana", "plan": False}
    assert await team(bob_task) == {"name": "analysts", "member": "bob", "plan": True}
    assert await team(plain) is None  # a fork is no teammate
    [sent] = (await session.ask("APPROVE bob's plan")).tool_calls
    assert not sent.is_error, sent.result
    assert await team(bob_task) == {"name": "analysts", "member": "bob", "plan": False}

    # a transcript written before teams were recorded (no `team` in its meta): a plain agent
    older = tmp_path / "older"
    (older / "agents").mkdir(parents=True)
    agents = store.dir / "agents"
    fields = json.loads((agents / f"{ana_task.id}.meta.json").read_text())
    del fields["team"]
    (older / "agents" / f"{ana_task.id}.meta.json").write_text(json.dumps(fields))
    jsonl = (agents / f"{ana_task.id}.jsonl").read_text()
    (older / "agents" / f"{ana_task.id}.jsonl").write_text(jsonl)
    loaded = await TranscriptStore(tmp_path, "reader").aload(ana_task.id, older)
    assert loaded.meta.team is None and loaded.meta.name == "ana"
    assert loaded.meta.kind == "general-purpose" and loaded.messages


async def test_after_a_restart_and_a_resume_its_teammates_are_listed_under_their_team(
    emulator: Any, make_session: Any
) -> None:
    first, _brain = await team_of_two(emulator, make_session)
    await restart(first)
    second = make_session(auto_respond=False)
    await second.resume(first.session_id)
    listed = await second.interrupted()
    assert sorted((a.label, a.team) for a in listed) == [("ana", "analysts"), ("bob", "analysts")]
    assert {a.agent_id for a in listed} == {t.id for t in first.tasks}
    assert all(
        a.line().endswith("resumes it from its transcript, back in team analysts") for a in listed
    )
    assert second.teams == {} and second.tasks == []  # nothing of it runs here yet


async def test_send_resumes_an_interrupted_teammate_as_a_teammate_of_its_team(
    emulator: Any, make_session: Any
) -> None:
    first, _brain = await team_of_two(emulator, make_session)
    ana_id = first.task("ana").id
    before = requests_of(emulator, "ANA-JOB")[-1]
    await restart(first)
    second = make_session(auto_respond=False)
    reply = await second.send("ana", "ANA-AGAIN `py: 2 + 3`")
    assert "resumed from its transcript" in reply and "back in team analysts" in reply, reply
    assert "changed since it last ran" not in reply  # a teammate's prompt and tools, as before
    ana = second.task("ana")
    assert ana.id == ana_id and ana.team == "analysts"
    assert [t.name for t in second.teams["analysts"]] == ["ana"]  # the team made again
    assert second.workers.teams.current == "analysts"
    await until(lambda: ana.idle)
    assert ana.status == "running" and not ana.done  # it waits for mail, as a teammate does
    assert '<teammate-message teammate_id="user">\nANA-AGAIN' in said(second.history(ana.id))
    after = requests_of(emulator, "ANA-JOB")[-1]
    assert after["system"] == before["system"] and after["tools"] == before["tools"]
    [idle] = second.queue.drain("main")  # it told its lead it is idle, with its last reply
    assert idle.task_id == ana.id and "idle_notification" in idle.text and "5" in idle.text
    assert [a.label for a in await second.interrupted()] == ["bob"]  # ana is a task now
    # mail wakes it again, and the person stops it as any teammate
    assert "mailbox" in await second.send("ana", "ANA-MORE note")
    await until(lambda: "ANA-MORE" in said(second.history(ana.id)) and ana.idle)
    assert (await second.stop("ana")).status == "killed"


async def test_a_resumed_teammate_messages_a_live_and_a_resumed_teammate_by_name(
    emulator: Any, make_session: Any
) -> None:
    first, brain = await team_of_two(emulator, make_session)
    await restart(first)
    # ana, resumed, writes to bob (cut off: resumed by her message); bob answers her; she
    # reports to the lead; cyd, spawned live into the team, writes to ana
    brain.when_last_user_contains("ANA-AGAIN", send("bob", "PEER-NOTE from ana", "peer"), times=1)
    brain.when_last_user_contains("PEER-NOTE", send("ana", "BACK-NOTE from bob", "back"), times=1)
    brain.when_last_user_contains("BACK-NOTE", send("team-lead", "LEAD-NOTE done", "done"), times=1)
    brain.when_last_user_contains("MORE", spawn("cyd", "CYD-JOB"), times=1)
    brain.when_last_user_contains("CYD-JOB", send("ana", "CYD-NOTE hello", "hello"), times=1)
    second = make_session(auto_respond=False)
    await second.send("ana", "ANA-AGAIN talk to bob")
    ana = second.task("ana")
    await until(lambda: "BACK-NOTE" in said(second.history(ana.id)))
    bob = second.task("bob")
    assert bob.team == "analysts" and bob.id == first.task("bob").id
    assert '<teammate-message teammate_id="ana" summary="peer">\nPEER-NOTE' in said(
        second.history(bob.id)
    )
    assert '<teammate-message teammate_id="bob" summary="back">\nBACK-NOTE' in said(
        second.history(ana.id)
    )
    await until(lambda: ana.idle and bob.idle)
    texts = [c.text for c in second.queue.drain("main")]
    assert any(t.startswith('<teammate-message teammate_id="ana" summary="done">') for t in texts)
    turn = await second.ask("MORE hands")  # name alone: the team the restart brought back
    assert "team_name: analysts" in turn.tool_calls[0].result, turn.tool_calls
    cyd = second.task("cyd")
    await until(lambda: "CYD-NOTE" in said(second.history(ana.id)) and cyd.idle and ana.idle)
    assert '<teammate-message teammate_id="cyd" summary="hello">' in said(second.history(ana.id))
    assert [t.name for t in second.teams["analysts"]] == ["ana", "bob", "cyd"]
    assert all(t.status == "running" for t in second.teams["analysts"])


async def test_a_message_to_the_team_reaches_its_members_a_restart_cut_off(
    emulator: Any, make_session: Any
) -> None:
    first, _brain = await team_of_two(emulator, make_session)
    await restart(first)
    second = make_session(auto_respond=False)
    await second.send("ana", "WAKE-ANA first")  # ana runs here again; bob is still on disk
    ana = second.task("ana")
    await until(lambda: ana.idle)
    reply = await second.asend_team("*", "ALL-NOTE rows are 42")
    assert "broadcast to 1 teammate(s): ana" in reply, reply
    assert "back in team analysts: bob" in reply, reply
    bob = second.task("bob")
    assert bob.team == "analysts"
    note = '<teammate-message teammate_id="user">\nALL-NOTE rows are 42'
    await until(lambda: all(note in said(second.history(t.id)) for t in (ana, bob)))
    await until(lambda: ana.idle and bob.idle)
    assert said(second.history(ana.id)).count("ALL-NOTE") == 1  # once each
    assert await second.interrupted() == []


async def test_a_teammate_comes_back_in_plan_mode_and_not_under_a_name_taken_here(
    emulator: Any, make_session: Any
) -> None:
    brain = scripted(emulator)
    ana = spawn("ana", "ANA-JOB", "analysts").blocks()[0]
    bob = spawn("bob", "BOB-JOB", "analysts", mode="plan").blocks()[0]
    brain.when_last_user_contains("FORM", Reply((ana, bob)), times=1)
    first = make_session(auto_respond=False)
    await first.ask("FORM a team")
    await until(lambda: all(t.idle for t in first.tasks))
    ana_id = first.task("ana").id
    await restart(first)
    # a new team in the new session takes the name "ana"
    brain.when_last_user_contains("NEW", spawn("ana", "NEW-ANA-JOB", "reviewers"), times=1)
    second = make_session(auto_respond=False)
    await second.ask("NEW team")
    assert second.task("ana").team == "reviewers"
    with pytest.raises(Exception, match="'ana' is a running member of team 'reviewers'"):
        await second.send(ana_id, "OLD-ANA wake")
    assert second.find_task(ana_id) is None  # nothing started
    assert [a.agent_id for a in await second.interrupted() if a.label == "ana"] == [ana_id]
    # bob had not had its plan approved: it comes back in plan mode
    await second.send("bob", "BOB-AGAIN")
    gate = second.workers.runs[second.task("bob").id].config.gate
    assert gate.mode == "plan"
    assert [t.name for t in second.teams["analysts"]] == ["bob"]
    assert second.workers.teams.current == "reviewers"  # the lead's own team stays current


async def test_a_team_record_edited_into_a_bad_name_is_refused_naming_the_file_and_field(
    emulator: Any, make_session: Any
) -> None:
    first, _brain = await team_of_two(emulator, make_session)
    ana_id = first.task("ana").id
    await restart(first)
    meta = first.store.dir / "agents" / f"{ana_id}.meta.json"
    fields = json.loads(meta.read_text())
    fields["team"]["member"] = 'ana" and more'
    meta.write_text(json.dumps(fields))
    second = make_session(auto_respond=False)
    before = len(emulator.api_requests())
    with pytest.raises(Exception, match=r"\.meta\.json: team\.member: a teammate's name is one"):
        await second.send(ana_id, "WAKE")
    assert second.find_task(ana_id) is None and second.teams == {}
    assert len(emulator.api_requests()) == before  # nothing was sent to the model
