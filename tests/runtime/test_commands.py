"""Slash commands and skills in the parent conversation, through the real SDK against the
strict emulator: `/name args` runs the command (inline, or in a fork of the conversation
with `context: fork`), `allowed-tools` narrows and never grants, shell lines go through the
gate, and a `/word` that names nothing is one line."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain
from forkagent_jupyter.runtime.errors import UsageError
from forkagent_jupyter.runtime.loop.fork import FORK_TAG
from forkagent_jupyter.runtime.model.names import MODEL_ALIASES
from forkagent_jupyter.runtime.permissions.policies import Allow, Deny, ScriptedPolicy
from tests.reported import tool_outputs

from .helpers import first_fork_requests, until

pytestmark = pytest.mark.anyio

CONTEXT = "Context:\n" + "notes about the sales table. " * 300
REVIEW = (
    "---\n"
    "description: Review the totals in a fork\n"
    "context: fork\n"
    "allowed-tools: Python, Read\n"
    "argument-hint: [what]\n"
    "---\n"
    "Review $ARGUMENTS: the total is `py: sum(data)`.\n"
)


def command(workdir: Path, name: str, text: str, folder: str = "commands") -> None:
    path = workdir / ".claude" / folder / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def last_user_blocks(body: dict[str, Any]) -> list[str]:
    return [b.get("text", "") for b in body["messages"][-1]["content"] if b["type"] == "text"]


async def test_a_fork_command_runs_in_a_fork_and_its_output_is_the_commands(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    command(tmp_path, "review", REVIEW)
    session = make_session(auto_respond=False)
    session.namespace["data"] = [1, 2, 3]
    await session.ask(CONTEXT)
    parent_prompt = emulator.ledger.entries()[-1].usage
    # a %fork from the same point, to compare the command's fork with
    plain = await session.fork("count `py: len(data)`")
    await session.wait(plain.id, timeout=30)
    before = len(emulator.api_requests())

    turn = await session.ask("/review the totals")

    assert turn.stop_reason == "end_turn", turn.error
    assert tool_outputs(turn.text) == ["6"]  # the fork's report is the turn's text
    task = next(t for t in session.tasks if t.id != plain.id)
    assert (task.kind, task.description) == ("fork", "/review the totals")
    assert task.status == "completed"
    # only the fork's requests: the parent model was not called for the command
    sent = emulator.api_requests()[before:]
    assert sent and all(f"<{FORK_TAG}>" in json.dumps(r.body["messages"]) for r in sent)
    # the directive is the command's text, its arguments put in, its limit told
    directive = last_user_blocks(sent[0].body)[-1]
    assert directive.endswith(
        "Directive: Review the totals: the total is `py: sum(data)`.\n\n\n(This command may use "
        "only these tools: Python, Read. Calls to any other tool, or other uses of these, are "
        "refused.)"
    )
    # the same cached prefix as the %fork: byte-identical up to the directive, read from cache
    [(plain_body, _), (command_body, usage)] = first_fork_requests(emulator)
    raw = [r.raw for r in emulator.api_requests() if r.body in (plain_body, command_body)]
    cut = raw[0].index(f"<{FORK_TAG}>".encode())
    assert raw[0][:cut] == raw[1][:cut]
    assert command_body["tools"] == plain_body["tools"]  # allowed-tools did not change them
    keys = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    assert usage["cache_read_input_tokens"] >= sum(parent_prompt[k] for k in keys)
    # the command's output enters the parent conversation as its output, not a notification
    assert session.messages[-1]["role"] == "user"
    typed, output = (b["text"] for b in session.messages[-1]["content"])
    assert typed == "/review the totals"
    assert output.startswith("<local-command-stdout>\nScope:")
    assert output.endswith("</local-command-stdout>") and "```\n6\n```" in output
    assert task.quiet
    assert [c.task_id for c in session.queue.pending()] == [plain.id]  # the %fork's only
    # the parent's next turn reads it, after the prompt merged into the same user message
    await session.ask("And now?")
    last = last_user_blocks(emulator.api_requests()[-1].body)
    assert last[:2] == [typed, output] and last[-1] == "And now?"


async def test_allowed_tools_limit_the_forks_calls_and_grant_nothing(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    command(tmp_path, "review", REVIEW.replace("Review $ARGUMENTS", "CHECK-LIMIT $ARGUMENTS"))
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("CHECK-LIMIT", Reply.tool_use("Bash", {"command": "ls"}), times=1)
    brain.add_rule(
        lambda req: "Bash call refused" in json.dumps(req["messages"][-1]),
        Reply.tool_use("Python", {"code": "sum(data)"}),
        times=1,
    )
    emulator.brain = brain
    policy = ScriptedPolicy(default=Allow())
    session = make_session(auto_respond=False, permission_policy=policy)
    session.namespace["data"] = [4, 5]
    turn = await session.ask("/review now")
    assert turn.stop_reason == "end_turn", turn.error
    [task] = session.tasks
    results = [
        b
        for m in session.history(task.id)
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    refused = results[0]
    assert refused["is_error"] and refused["content"] == (
        "Bash call refused: /review's allowed-tools allows only Python, Read. Do the task with "
        "those tools, or say what else it needs."
    )
    assert [e["by"] for e in session.gate.log if e["tool"] == "Bash"] == ["limit"]
    # the tool it lists is still decided by the gate: Python needs approval, so it was asked
    # (and nobody was asked about the refused call)
    assert [r.tool_name for r in policy.requests] == ["Python"]
    assert [e["by"] for e in session.gate.log if e["tool"] == "Python"] == ["policy"]
    assert results[1] == {
        "type": "tool_result",
        "tool_use_id": results[1]["tool_use_id"],
        "content": "9",
    }


async def test_an_inline_command_is_the_prompt_of_a_parent_turn(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    command(
        tmp_path,
        "explain",
        "---\ndescription: Explain a column\nmodel: haiku\nallowed-tools: Read\n---\n"
        "Explain the column $0 of $1.\n",
    )
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("Explain the column", Reply.tool_use("Bash", {"command": "ls"}))
    emulator.brain = brain
    session = make_session(auto_respond=False)
    await session.ask("Hello.")
    first = emulator.api_requests()[-1].body
    turn = await session.ask("/explain price sales")
    body = emulator.api_requests()[-2].body  # the turn's first request (then the tool result)
    assert last_user_blocks(body) == [
        "<command-message>explain</command-message>\n<command-name>/explain</command-name>\n"
        "<command-args>price sales</command-args>",
        "Explain the column price of sales.\n\n\n(This command may use only these tools: "
        "Read. Calls to any other tool, or other uses of these, are refused.)",
    ]
    assert body["model"] == MODEL_ALIASES["haiku"]  # the command's model, for its turn
    assert body["tools"] == first["tools"]
    [call] = turn.tool_calls
    assert call.is_error and call.result.startswith("Bash call refused: /explain's allowed-tools")
    # the next turn is the session's again: its model, no limit
    brain.clear()
    await session.ask("Run `py: 1 + 1`")
    assert emulator.api_requests()[-1].body["model"] == session.model
    assert [e["by"] for e in session.gate.log if e["tool"] == "Python"] == ["policy"]


async def test_an_unknown_name_is_one_line_and_a_path_is_a_prompt(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    command(tmp_path, "review", REVIEW)
    command(tmp_path, "review-pr", "Review the PR.\n")
    session = make_session(auto_respond=False)
    with pytest.raises(UsageError) as caught:
        await session.ask("/revew the totals")
    assert str(caught.value) == "Unknown command /revew. Closest: /review, /review-pr."
    with pytest.raises(UsageError, match=r"^Unknown command /compact \(Claude Code's own"):
        await session.ask("/compact")
    assert emulator.api_requests() == []  # nothing was sent
    turn = await session.ask("/usr/bin/env python3 -V: which python is that?")
    assert turn.stop_reason == "end_turn"
    assert last_user_blocks(emulator.api_requests()[-1].body)[-1].startswith("/usr/bin/env")


async def test_shell_lines_run_through_the_gate_before_the_model_reads_the_text(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    command(tmp_path, "status", "---\ndescription: s\n---\nThe state: !`echo state-is-clean`\n")
    policy = ScriptedPolicy(answers=[Allow()], default=Deny("no"))
    session = make_session(auto_respond=False, permission_policy=policy)
    turn = await session.ask("/status")
    [asked] = policy.requests  # the person was asked, with the command line
    assert asked.tool_name == "Bash" and asked.input == {"command": "echo state-is-clean"}
    assert turn.tool_calls[0].name == "Bash" and turn.tool_calls[0].result == "state-is-clean"
    sent = last_user_blocks(emulator.api_requests()[-1].body)
    assert sent[-1] == "The state: state-is-clean\n"
    # refused: the command stops in one line and nothing is sent
    before = len(emulator.api_requests())
    with pytest.raises(UsageError) as caught:
        await session.ask("/status")
    assert str(caught.value) == (
        "/status was not run: its shell line '!`echo state-is-clean`' did not run or failed: no"
    )
    assert len(emulator.api_requests()) == before
    # a deny rule holds without anyone being asked
    denied = make_session(auto_respond=False, permission_policy=policy, deny=["Bash(echo:*)"])
    with pytest.raises(UsageError, match="denied by the rule Bash\\(echo:\\*\\)"):
        await denied.ask("/status")
    assert len(policy.requests) == 2


async def test_an_agent_named_by_a_fork_skill_runs_it_or_the_fork_does(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "auditor.md").write_text("---\ndescription: Audits\n---\nYou audit sums.\n")
    skill = "---\ndescription: d\ncontext: fork\nagent: {agent}\n---\nAudit `py: 2 * 21`.\n"
    command(tmp_path, "audit/SKILL", skill.format(agent="auditor"), folder="skills")
    command(tmp_path, "explore/SKILL", skill.format(agent="Explore"), folder="skills")
    session = make_session(auto_respond=False)
    session.namespace["x"] = 1
    turn = await session.ask("/audit")
    assert tool_outputs(turn.text) == ["42"]
    [task] = session.tasks
    assert task.kind == "auditor"  # the named agent, with its own prompt and context
    body = emulator.api_requests()[0].body
    assert body["system"][0]["text"].startswith("You audit sums.")
    assert "Audit `py: 2 * 21`." in last_user_blocks(body)[-1]
    turn = await session.ask("/explore")
    assert turn.text.startswith(
        "/explore asks for the agent 'Explore', which is not defined here (.claude/agents); "
        "it runs in a fork of the conversation."
    )
    assert tool_outputs(turn.text) == ["42"] and session.tasks[-1].kind == "fork"


async def test_a_model_only_skill_cannot_be_typed(make_session: Any, tmp_path: Path) -> None:
    command(tmp_path, "legacy/SKILL", "---\nuser-invocable: false\n---\nx\n", folder="skills")
    session = make_session(auto_respond=False)
    with pytest.raises(UsageError, match="is a skill for the model only"):
        await session.ask("/legacy")


async def test_a_fork_command_moved_to_the_background_reports_as_a_notification(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    command(tmp_path, "slow", "---\ncontext: fork\n---\nSLOW work\n")
    gate = threading.Event()

    class Held:
        """Answers once the test lets it (on the emulator's thread)."""

        def reply(self, request: Any) -> Reply:
            gate.wait(60)
            return Reply.text("Scope: slow\nResult: done")

    emulator.brain = Held()
    session = make_session(auto_respond=False)
    asked = asyncio.ensure_future(session.ask("/slow"))
    await until(lambda: bool(session.tasks) and session.tasks[0].foreground)
    [task] = session.tasks
    session.background(task.id)
    turn = await asyncio.wait_for(asked, 30)
    assert turn.text == (
        f"/slow moved to the background (task {task.id}); its result comes back as a notification."
    )
    gate.set()
    await session.wait(task.id, timeout=30)
    [pending] = session.queue.pending("main")
    assert pending.task_id == task.id and "Result: done" in pending.text
