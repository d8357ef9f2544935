"""Teams as the reference design runs them, through the model's own tool calls: the Agent
tool's `name` and `team_name` spawn a teammate; the roster is flat; teammates talk through
mailboxes with SendMessage (`summary` for plain text, `*` for the team, structured messages to
one recipient); a teammate that ends its turn waits, idle, for mail; the person or the lead
ends it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain, last_user_text
from forkagent_jupyter.runtime.session.session import STOPPED_BY_USER

from .helpers import git, until

pytestmark = pytest.mark.anyio


def spawn(name: str | None, prompt: str, team: str | None = None, **extra: Any) -> Reply:
    """The lead's Agent call that spawns `name` (into `team`, if given)."""
    call: dict[str, Any] = {"description": f"{name} works", "prompt": prompt, **extra}
    if name is not None:
        call["name"] = name
    if team is not None:
        call["team_name"] = team
    return Reply.tool_use("Agent", call)


def send(to: str, message: Any, summary: str | None = "a short note") -> Reply:
    call: dict[str, Any] = {"to": to, "message": message}
    if summary is not None:
        call["summary"] = summary
    return Reply.tool_use("SendMessage", call)


def results(history: list[dict[str, Any]]) -> list[tuple[bool, str]]:
    """(is_error, text) of every tool result in an agent's conversation, in order."""
    found = []
    for message in history:
        if message["role"] != "user" or isinstance(message["content"], str):
            continue
        for block in message["content"]:
            if block.get("type") == "tool_result":
                content = block.get("content")
                text = (
                    content
                    if isinstance(content, str)
                    else "".join(b.get("text", "") for b in content or [])
                )
                found.append((bool(block.get("is_error")), text))
    return found


def said(history: list[dict[str, Any]]) -> str:
    """Every text block of an agent's conversation, one after the other."""
    return "\n".join(
        str(b.get("text", ""))
        for m in history
        if not isinstance(m["content"], str)
        for b in m["content"]
        if b.get("type") == "text"
    )


def requests_of(emulator: Any, needle: str) -> list[dict[str, Any]]:
    """The bodies of the requests whose first message holds `needle` (one agent's)."""
    return [
        r.body
        for r in emulator.api_requests()
        if needle in json.dumps(r.body["messages"][0], ensure_ascii=False)
    ]


def scripted(emulator: Any) -> ScriptedBrain:
    brain = ScriptedBrain(when_empty=OfflineBrain())
    emulator.brain = brain
    return brain


async def test_name_and_team_name_spawn_a_teammate_and_the_team_becomes_current(
    emulator: Any, make_session: Any
) -> None:
    brain = scripted(emulator)
    brain.when_last_user_contains("FORM", spawn("ana", "ANA-JOB count rows", "analysts"), times=1)
    brain.when_last_user_contains("MORE", spawn("bob", "BOB-JOB sum columns"), times=1)
    session = make_session(auto_respond=False)
    turn = await session.ask("FORM a team")
    [call] = turn.tool_calls
    assert not call.is_error, call.result
    [ana] = session.tasks
    assert call.result.startswith("status: teammate_spawned\n")
    assert f"agent_id: {ana.id}\nname: ana\nteam_name: analysts\n" in call.result
    assert ana.team == "analysts" and ana.name == "ana" and ana.status == "running"
    # its instructions come from its lead's mailbox; it can write back
    await until(lambda: bool(requests_of(emulator, "ANA-JOB")))
    first = requests_of(emulator, "ANA-JOB")[0]
    assert first["messages"][0]["content"][0]["text"].startswith(
        '<teammate-message teammate_id="team-lead" summary="ana works">\nANA-JOB'
    )
    tools = {t["name"] for t in first["tools"]}
    assert {"SendMessage", "Agent", "TaskStop", "TaskOutput"} <= tools
    assert 'You are "ana", a teammate in the team "analysts"' in first["system"][0]["text"]
    # `name` alone now joins the current team
    turn = await session.ask("MORE help")
    assert "status: teammate_spawned" in turn.tool_calls[0].result
    assert "team_name: analysts" in turn.tool_calls[0].result
    assert [t.name for t in session.teams["analysts"]] == ["ana", "bob"]
    assert session.workers.teams.current == "analysts"


async def test_two_spawns_in_one_reply_form_one_team_listed_in_the_replys_order(
    emulator: Any, make_session: Any, tmp_path: Any
) -> None:
    """The calls run side by side: ana's worktree (git, on a thread) makes her start after
    bob, yet the roster lists the team as the lead's reply asked for it."""
    git(tmp_path, "init", "-q", "-b", "main")
    git(
        tmp_path,
        "-c",
        "user.email=t@example.com",
        "-c",
        "user.name=T",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "init",
    )
    brain = scripted(emulator)
    ana = spawn("ana", "ANA-JOB", "analysts", isolation="worktree").blocks()[0]
    bob = spawn("bob", "BOB-JOB").blocks()[0]  # name alone: the team of the call beside it
    brain.when_last_user_contains("FORM", Reply((ana, bob)), times=1)
    session = make_session(auto_respond=False)
    turn = await session.ask("FORM a team")
    assert [c.is_error for c in turn.tool_calls] == [False, False], turn.tool_calls
    assert all("team_name: analysts" in c.result for c in turn.tool_calls)
    started = sorted(session.teams["analysts"], key=lambda t: t.started_at)
    assert [t.name for t in started] == ["bob", "ana"]  # the race this test is about
    assert [t.name for t in session.teams["analysts"]] == ["ana", "bob"]


async def test_a_teammates_file_decides_its_tools_and_send_message_is_always_there(
    emulator: Any, make_session: Any, tmp_path: Any
) -> None:
    folder = tmp_path / ".forkagent" / "agents"
    folder.mkdir(parents=True)
    (folder / "counter.md").write_text(
        "---\ndescription: Counts\ntools: Read, Python\n---\nCount.\n"
    )
    (folder / "lister.md").write_text(
        "---\ndescription: Lists\ndisallowedTools: Agent\n---\nList.\n"
    )
    brain = scripted(emulator)
    ana = spawn("ana", "ANA-JOB", "analysts", subagent_type="counter").blocks()[0]
    bob = spawn("bob", "BOB-JOB", "analysts", subagent_type="lister").blocks()[0]
    brain.when_last_user_contains("FORM", Reply((ana, bob)), times=1)
    session = make_session(auto_respond=False)
    await session.ask("FORM a team")
    await until(lambda: bool(requests_of(emulator, "ANA-JOB") and requests_of(emulator, "BOB-JOB")))
    [ana_tools] = [[t["name"] for t in r["tools"]] for r in requests_of(emulator, "ANA-JOB")[:1]]
    assert ana_tools == ["Read", "Python", "SendMessage"]
    bob_tools = {t["name"] for t in requests_of(emulator, "BOB-JOB")[0]["tools"]}
    assert {"SendMessage", "TaskStop", "TaskOutput"} <= bob_tools and "Agent" not in bob_tools


async def test_without_a_team_name_registers_an_ordinary_agent_for_send_message(
    emulator: Any, make_session: Any
) -> None:
    brain = scripted(emulator)
    sleep = "`py: __import__('time').sleep(3) or 'slept'`"
    brain.when_last_user_contains("START", spawn("solo", f"SOLO-JOB {sleep}"), times=1)
    brain.when_last_user_contains("BARE", send("solo", "NO SUMMARY", summary=None), times=1)
    brain.when_last_user_contains("TELL", send("solo", "ALSO CHECK NULLS"), times=1)
    session = make_session(auto_respond=False)
    turn = await session.ask("START one")
    assert "Started background agent" in turn.tool_calls[0].result
    [solo] = session.tasks
    assert solo.team is None and solo.name == "solo" and session.teams == {}
    [bare] = (await session.ask("BARE message")).tool_calls  # plain text needs a summary
    assert bare.is_error and "summary is required" in bare.result
    [sent] = (await session.ask("TELL it")).tool_calls
    assert not sent.is_error and "Message queued for solo" in sent.result
    await session.wait(solo.id, timeout=30)
    assert "ALSO CHECK NULLS" in said(session.history(solo.id))
    assert "NO SUMMARY" not in said(session.history(solo.id))


async def test_a_teammate_spawns_no_teammate_and_no_background_agent(
    emulator: Any, make_session: Any
) -> None:
    brain = scripted(emulator)
    brain.when_last_user_contains("FORM", spawn("ana", "ANA-JOB go", "analysts"), times=1)
    # the teammate tries a teammate of its own, then a background (forked) agent
    brain.when_last_user_contains("ANA-JOB", spawn("sub", "SUB-JOB", "analysts"), times=1)
    brain.add_rule(
        lambda r: "ANA-JOB" in json.dumps(r["messages"][0]) and len(r["messages"]) == 3,
        spawn(None, "FORKED-JOB"),
        times=1,
    )
    session = make_session(auto_respond=False)
    await session.ask("FORM a team")
    [ana] = session.tasks
    await until(lambda: ana.idle)
    tried = results(session.history(ana.id))
    assert tried[0][0] and "roster is flat" in tried[0][1], tried
    assert tried[1][0] and "cannot start background agents" in tried[1][1], tried
    assert [t.id for t in session.tasks] == [ana.id]  # nothing else was started
    assert not requests_of(emulator, "SUB-JOB") and not requests_of(emulator, "FORKED-JOB")


async def test_without_forking_a_teammate_waits_for_its_sub_agent_but_starts_none_in_the_background(
    emulator: Any, make_session: Any
) -> None:
    brain = scripted(emulator)
    brain.when_last_user_contains("FORM", spawn("ana", "ANA-JOB go", "analysts"), times=1)
    background = {"subagent_type": "general-purpose", "run_in_background": True}
    brain.when_last_user_contains("ANA-JOB", spawn(None, "BG-JOB", **background), times=1)
    waited = {"subagent_type": "general-purpose"}
    brain.add_rule(
        lambda r: "ANA-JOB" in json.dumps(r["messages"][0]) and len(r["messages"]) == 3,
        spawn(None, "SYNC-JOB `py: 6 * 7`", **waited),
        times=1,
    )
    session = make_session(auto_respond=False, forking=False)
    await session.ask("FORM a team")
    ana = session.tasks[0]
    await until(lambda: ana.idle)
    tried = results(session.history(ana.id))
    assert tried[0][0] and "cannot start background agents" in tried[0][1], tried
    assert not tried[1][0] and "agentId: " in tried[1][1], tried  # answered in the call
    assert not requests_of(emulator, "BG-JOB")
    [sub] = [t for t in session.tasks if t.id != ana.id]
    assert sub.owner == ana.id and sub.status == "completed" and sub.team is None


async def test_send_message_needs_a_summary_and_broadcasts_only_plain_text(
    emulator: Any, make_session: Any
) -> None:
    brain = scripted(emulator)
    brain.when_last_user_contains("FORM", spawn("ana", "ANA-JOB wait", "analysts"), times=1)
    brain.when_last_user_contains("BOB", spawn("bob", "BOB-JOB wait", "analysts"), times=1)
    brain.when_last_user_contains("NOSUM", send("ana", "hello", summary=None), times=1)
    shutdown = {"type": "shutdown_request", "reason": "done"}
    brain.when_last_user_contains("STRUCT", send("*", shutdown), times=1)
    brain.when_last_user_contains("ALL", send("*", "TEAM-NEWS rows are 42", "rows"), times=1)
    session = make_session(auto_respond=False)
    await session.ask("FORM a team")
    await session.ask("BOB too")
    ana, bob = session.tasks
    await until(lambda: ana.idle and bob.idle)
    [nosum] = (await session.ask("NOSUM")).tool_calls
    assert nosum.is_error and "summary is required" in nosum.result
    [struct] = (await session.ask("STRUCT")).tool_calls
    assert struct.is_error and "cannot be broadcast" in struct.result
    assert ana.status == bob.status == "running"  # the refused ones reached nobody
    [sent] = (await session.ask("ALL of you")).tool_calls
    assert not sent.is_error and "broadcast to 2 teammate(s): ana, bob" in sent.result
    note = '<teammate-message teammate_id="team-lead" summary="rows">\nTEAM-NEWS rows are 42'
    await until(lambda: all(note in said(session.history(t.id)) for t in (ana, bob)))


async def test_a_teammate_that_ends_its_turn_waits_for_mail_and_is_woken_by_it(
    emulator: Any, make_session: Any
) -> None:
    brain = scripted(emulator)
    brain.when_last_user_contains("FORM", spawn("ana", "ANA-JOB `py: 6 * 7`", "analysts"), times=1)
    brain.when_last_user_contains("AGAIN", send("ana", "ANA-MORE `py: 2 + 3`", "more"), times=1)
    session = make_session(auto_respond=False)
    await session.ask("FORM a team")
    [ana] = session.tasks
    await until(lambda: ana.idle)
    assert ana.status == "running" and not ana.done  # waiting, not ended
    await session.idle()  # an idle teammate keeps nobody waiting
    # it did not message its lead: its idle notice carries its last reply
    [idle] = session.queue.drain("main")
    assert idle.mode == "message" and idle.task_id == ana.id
    assert idle.text.startswith('<teammate-message teammate_id="ana">\n')
    body = json.loads(idle.text.split("\n")[1].replace("&lt;", "<").replace("&gt;", ">"))
    assert body["type"] == "idle_notification" and "42" in body["lastReply"]
    before = len(requests_of(emulator, "ANA-JOB"))
    [sent] = (await session.ask("AGAIN please")).tool_calls
    assert not sent.is_error and "mailbox" in sent.result
    await until(lambda: len(requests_of(emulator, "ANA-JOB")) > before and ana.idle)
    assert "ANA-MORE" in said(session.history(ana.id)) and ana.status == "running"
    stopped = await session.stop("ana")  # the person stops it
    assert stopped.status == "killed"


async def test_a_teammate_talks_to_its_lead_and_to_a_teammate_by_name(
    emulator: Any, make_session: Any
) -> None:
    brain = scripted(emulator)
    brain.when_last_user_contains("FORM", spawn("ana", "ANA-JOB", "analysts"), times=1)
    brain.when_last_user_contains("BOB", spawn("bob", "BOB-JOB", "analysts"), times=1)
    brain.when_last_user_contains("ANA-JOB", send("bob", "PEER-NOTE from ana", "peer"), times=1)
    brain.when_last_user_contains("PEER-NOTE", send("team-lead", "LEAD-NOTE done", "done"), times=1)
    session = make_session(auto_respond=False)
    await session.ask("BOB first")
    [bob] = session.tasks
    await until(lambda: bob.idle)
    [first] = session.queue.drain("main")  # its first turn: it messaged nobody
    assert "idle_notification" in first.text
    await session.ask("FORM the rest")
    bob, ana = session.tasks
    await until(lambda: bool(session.queue.pending("main")) and ana.idle and bob.idle)
    commands = session.queue.drain("main")
    texts = [c.text for c in commands]
    # bob read ana's note (signed by ana) and told the lead; it sent no idle notice after
    assert '<teammate-message teammate_id="ana" summary="peer">' in said(session.history(bob.id))
    lead_note = '<teammate-message teammate_id="bob" summary="done">\nLEAD-NOTE done'
    assert any(t.startswith(lead_note) for t in texts), texts
    assert not any("idle_notification" in t and '"from": "bob"' in t for t in texts), texts


async def test_the_lead_shuts_a_teammate_down_with_a_structured_request(
    emulator: Any, make_session: Any
) -> None:
    brain = scripted(emulator)
    brain.when_last_user_contains("FORM", spawn("ana", "ANA-JOB", "analysts"), times=1)
    brain.when_last_user_contains("BYE", send("ana", {"type": "shutdown_request"}), times=1)

    def asked(request: Any) -> bool:
        return "shutdown_request" in last_user_text(request)

    def answer(request_id: str) -> Reply:
        reply = {"type": "shutdown_response", "request_id": request_id, "approve": True}
        return send("team-lead", reply)

    session = make_session(auto_respond=False)
    await session.ask("FORM a team")
    [ana] = session.tasks
    await until(lambda: ana.idle)
    brain.add_rule(asked, answer("shutdown-1@ana"), times=1)
    [sent] = (await session.ask("BYE now")).tool_calls
    assert not sent.is_error and "Request ID: shutdown-1@ana" in sent.result
    await session.wait(ana.id, timeout=30)
    await until(lambda: ana.settled)
    assert ana.status == "completed"
    notes = [c.text for c in session.queue.drain("main")]
    assert any("<status>completed</status>" in t and ana.id in t for t in notes), notes


async def test_the_person_shuts_the_team_down(emulator: Any, make_session: Any) -> None:
    brain = scripted(emulator)
    brain.when_last_user_contains("FORM", spawn("ana", "ANA-JOB", "analysts"), times=1)
    brain.when_last_user_contains("BOB", spawn("bob", "BOB-JOB", "analysts"), times=1)
    session = make_session(auto_respond=False)
    await session.ask("FORM a team")
    await session.ask("BOB too")
    ana, bob = session.tasks
    await until(lambda: ana.idle and bob.idle)
    session.queue.drain("main")
    stopped = await session.stop_team("analysts")
    assert {t.name for t in stopped} == {"ana", "bob"}
    assert ana.status == bob.status == "killed"
    assert session.queue.pending("main") == []  # not handed to the model
    assert session.responder.auto_turns[-1].turn.text == STOPPED_BY_USER


async def test_a_plan_mode_teammate_leaves_plan_mode_when_its_plan_is_approved(
    emulator: Any, make_session: Any
) -> None:
    brain = scripted(emulator)
    brain.when_last_user_contains("FORM", spawn("ana", "ANA-JOB", "analysts", mode="plan"), times=1)
    approve = {"type": "plan_approval_response", "request_id": "plan-1", "approve": True}
    brain.when_last_user_contains("APPROVE", send("ana", approve), times=1)
    session = make_session(auto_respond=False)
    await session.ask("FORM a team")
    [ana] = session.tasks
    gate = session.workers.runs[ana.id].config.gate
    assert gate.mode == "plan"
    await until(lambda: ana.idle)
    [sent] = (await session.ask("APPROVE it")).tool_calls
    assert not sent.is_error and "Plan approved for ana" in sent.result
    assert gate.mode != "plan"
