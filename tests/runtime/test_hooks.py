"""Hooks as Claude Code runs them: real scripts from the settings files and from an agent's
file, fed JSON on stdin; exit 2 blocks with stderr as the reason; JSON output decides; a hook
that fails or hangs is one line and the session goes on. The model is the emulator's scripted
one (hostile: it asks for `rm`)."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain, last_user_text
from forkagent_jupyter.runtime.config.agent_definitions import AgentFileError, load_agent_file
from forkagent_jupyter.runtime.config.hooks import STOP_BLOCK_LIMIT, parse_hooks
from forkagent_jupyter.runtime.errors import UsageError
from forkagent_jupyter.runtime.permissions.gate import Deny, ScriptedPolicy
from tests.reported import tool_outputs
from tests.runtime.helpers import trust_folder

pytestmark = pytest.mark.anyio

BLOCK_RM = """
import json, sys
data = json.load(sys.stdin)
command = data["tool_input"].get("command", "")
if command.split()[:1] == ["rm"] or " rm " in f" {command} ":
    print(f"rm is not allowed here (asked: {command})", file=sys.stderr)
    sys.exit(2)
"""
LOG = """
import json, sys
with open(sys.argv[1], "a") as f:
    f.write(json.dumps(json.load(sys.stdin)) + "\\n")
"""
ANSWER = """
import json, sys
json.load(sys.stdin)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                  "permissionDecision": sys.argv[1], "permissionDecisionReason": "said so"}}))
"""

STOP_ONCE = """
import json, sys
data = json.load(sys.stdin)
with open(sys.argv[1], "a") as f:
    f.write(json.dumps(data) + "\\n")
if not data["stop_hook_active"]:
    print("Say which unit the total is in.", file=sys.stderr)
    sys.exit(2)
"""
BLOCK_JSON_ONCE = """
import json, sys
data = json.load(sys.stdin)
with open(sys.argv[1], "a") as f:
    f.write(json.dumps(data) + "\\n")
if not data["stop_hook_active"]:
    print(json.dumps({"decision": "block", "reason": "Give the unit too."}))
"""
NEVER_DONE = """
import json, sys
data = json.load(sys.stdin)
with open(sys.argv[1], "a") as f:
    f.write(json.dumps(data) + "\\n")
print("Not done yet.", file=sys.stderr)
sys.exit(2)
"""


def script(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text)
    return f"{sys.executable} {path}"


def settings(
    project: Path,
    hooks: dict[str, Any],
    *,
    name: str = "settings.local.json",
    top: dict[str, Any] | None = None,
    **perms: Any,
) -> None:
    """A settings file of the project, in a folder the person trusts (recorded in the
    session's `~/.claude.json`, `project/home`): by default the person's own
    (`settings.local.json`, whose hooks run unasked); `name="settings.json"` is the committed
    one (someone else's)."""
    trust_folder(project, project / "home")
    folder = project / ".claude"
    folder.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"hooks": hooks, **(top or {})}
    if perms:
        data["permissions"] = perms
    (folder / name).write_text(json.dumps(data))


def on(matcher: str, *commands: str, timeout: float | None = None) -> list[dict[str, Any]]:
    hooks = [{"type": "command", "command": c} for c in commands]
    if timeout is not None:
        for hook in hooks:
            hook["timeout"] = timeout
    return [{"matcher": matcher, "hooks": hooks}]


def bash(command: str) -> Reply:
    return Reply(({"type": "tool_use", "name": "Bash", "input": {"command": command}},))


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_a_pre_tool_use_hook_blocks_rm_and_a_post_tool_use_hook_logs(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    (tmp_path / "data.csv").write_text("a\n1\n")
    log = tmp_path / "log.jsonl"
    settings(
        tmp_path,
        {
            "PreToolUse": on("Bash", script(tmp_path, "block_rm.py", BLOCK_RM)),
            "PostToolUse": on("Bash|Read", script(tmp_path, "log.py", LOG) + f" {log}"),
        },
    )
    session = make_session(permission_mode="bypassPermissions")
    emulator.script(bash("rm -f data.csv"), bash("echo kept && cat data.csv"), Reply.text("ok"))
    turn = await session.ask("clean up")
    blocked, ran = turn.tool_calls
    assert blocked.is_error and "PreToolUse hook" in blocked.result
    assert "rm is not allowed here (asked: rm -f data.csv)" in blocked.result
    assert (tmp_path / "data.csv").exists()  # bypassPermissions did not let it through
    assert not ran.is_error and "kept" in ran.result
    [entry] = read_log(log)  # the blocked call never ran: only the other one is logged
    assert entry["hook_event_name"] == "PostToolUse" and entry["tool_name"] == "Bash"
    assert entry["tool_input"] == {"command": "echo kept && cat data.csv"}
    assert "kept" in entry["tool_response"]["content"] and entry["cwd"] == str(tmp_path)
    assert entry["session_id"] == session.session_id and entry["agent_id"] == "main"
    assert session.contexts.hooks.lines == []


async def test_a_task_matcher_is_the_agent_tool(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    """`Task` is Claude Code's older name of `Agent`, and settings files in use still match it
    (`"matcher": "Task"`): such a hook had never seen an Agent call."""
    refuse = "import sys\nprint('no agents today', file=sys.stderr)\nsys.exit(2)\n"
    settings(tmp_path, {"PreToolUse": on("Task", script(tmp_path, "refuse.py", refuse))})
    session = make_session(permission_mode="bypassPermissions")
    start = {"description": "look around", "prompt": "list the files"}
    emulator.script(
        Reply(({"type": "tool_use", "name": "Agent", "input": start},)), Reply.text("ok")
    )
    turn = await session.ask("delegate it")
    [blocked] = turn.tool_calls
    assert blocked.is_error and "no agents today" in blocked.result, blocked.result
    assert list(session.tasks) == []  # no agent was started


async def test_a_hooks_allow_never_overrides_a_deny_rule_and_junk_is_a_deny(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    answer = script(tmp_path, "answer.py", ANSWER)
    settings(
        tmp_path,
        {"PreToolUse": [*on("Bash", answer + " allow"), *on("Write", answer + " maybe")]},
        deny=["Bash(echo:*)"],
    )
    session = make_session(permission_mode="bypassPermissions")
    write = {"file_path": "x.txt", "content": "x"}
    emulator.script(
        bash("echo hi"),
        Reply(({"type": "tool_use", "name": "Write", "input": write},)),
        Reply.text("ok"),
    )
    turn = await session.ask("go")
    denied, junk = turn.tool_calls
    assert denied.is_error and "Bash(echo:*)" in denied.result  # the rule still decides
    assert junk.is_error and "permissionDecision 'maybe'" in junk.result
    assert not (tmp_path / "x.txt").exists()


async def test_a_failing_or_hanging_hook_is_one_line_and_the_call_runs(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    crash = script(tmp_path, "crash.py", "import sys\nprint('boom', file=sys.stderr)\nsys.exit(1)")
    hang = script(tmp_path, "hang.py", "import time\ntime.sleep(30)")
    settings(
        tmp_path,
        {"PreToolUse": on("*", crash), "PostToolUse": on("", hang, timeout=0.5)},
    )
    session = make_session(permission_mode="bypassPermissions")
    emulator.script(bash("echo still-here"), Reply.text("ok"))
    turn = await session.ask("go")
    [call] = turn.tool_calls
    assert not call.is_error and "still-here" in call.result
    first, second = session.contexts.hooks.lines
    assert "PreToolUse hook" in first and "exited with 1: boom" in first
    assert "PostToolUse hook" in second and "timeout of 0.5 s" in second


async def test_user_prompt_submit_blocks_or_adds_context_and_stop_runs(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    gate = """
import json, sys
prompt = json.load(sys.stdin)["prompt"]
if "secret" in prompt:
    print("prompts about secrets are refused", file=sys.stderr)
    sys.exit(2)
print("Context from the hook: the table is sales.csv")
"""
    stop_log = tmp_path / "stop.jsonl"
    settings(
        tmp_path,
        {
            "UserPromptSubmit": on("", script(tmp_path, "gate.py", gate)),
            "Stop": on("", script(tmp_path, "log.py", LOG) + f" {stop_log}"),
        },
    )
    session = make_session()
    with pytest.raises(UsageError, match="prompts about secrets are refused"):
        await session.ask("print the secret key")
    assert emulator.api_requests() == []  # nothing was sent
    emulator.script(Reply.text("fine"))
    await session.ask("summarize")
    sent = json.dumps(emulator.api_requests()[-1].body["messages"][-1])
    assert "Context from the hook: the table is sales.csv" in sent
    [stopped] = read_log(stop_log)
    assert stopped["hook_event_name"] == "Stop" and stopped["stop_reason"] == "end_turn"


async def test_an_agent_files_hooks_run_for_its_run_only_and_subagent_stop_sees_the_result(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    ended, started, tools = tmp_path / "ended.jsonl", tmp_path / "started.jsonl", tmp_path / "t"
    log = script(tmp_path, "log.py", LOG)
    # the agent file is the project's: the person approved its two commands, exactly
    approved = [f"{log} {ended}", f"{log} {tools}"]
    settings(
        tmp_path,
        {"SubagentStart": on("checker", f"{log} {started}")},
        top={"enabledProjectHooks": approved},
    )
    folder = tmp_path / ".claude" / "agents"
    folder.mkdir(parents=True)
    (folder / "checker.md").write_text(
        "---\nname: checker\ndescription: Checks numbers\nhooks:\n"
        "  Stop:\n    - hooks:\n        - type: command\n"
        f"          command: {log} {ended}\n"
        "  PostToolUse:\n    - matcher: Python\n      hooks:\n        - type: command\n"
        f"          command: {log} {tools}\n"
        "---\nYou check numbers.\n"
    )
    brain = ScriptedBrain(when_empty=OfflineBrain())
    call = {"description": "check", "prompt": "check `py: 6 * 7`", "subagent_type": "checker"}
    brain.when_last_user_contains(
        "CHECK", Reply(({"type": "tool_use", "name": "Agent", "input": call},)), times=1
    )
    emulator.brain = brain
    session = make_session(auto_respond=False, forking=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the file loads without a warning
        turn = await session.ask("CHECK the numbers")
    assert not turn.tool_calls[0].is_error
    assert tool_outputs(turn.tool_calls[0].result) == ["42"], turn.tool_calls[0].result
    [stop] = read_log(ended)
    assert stop["hook_event_name"] == "SubagentStop" and stop["agent_type"] == "checker"
    assert stop["status"] == "completed" and tool_outputs(stop["result"]) == ["42"], stop
    [start] = read_log(started)
    assert start["hook_event_name"] == "SubagentStart" and start["agent_id"] == stop["agent_id"]
    [used] = read_log(tools)  # the agent's own PostToolUse hook: its Python call
    assert used["tool_name"] == "Python" and used["agent_id"] == stop["agent_id"]
    # the parent's own calls are not the agent's: a parent tool call logs nothing there
    emulator.brain = ScriptedBrain(when_empty=OfflineBrain())
    await session.ask("compute `py: 1 + 1`")
    assert len(read_log(tools)) == 1


def test_hook_configuration_that_cannot_be_used_is_refused_with_where(tmp_path: Path) -> None:
    entries, refused = parse_hooks(
        {
            "PreToolUse": [
                {"matcher": "Bash(", "hooks": [{"type": "command", "command": "x"}]},
                {"matcher": "Bash", "hooks": [{"type": "prompt", "prompt": "x"}]},
                {"matcher": "Bash", "hooks": [{"command": "ok", "timeout": -1}]},
                {"matcher": "Edit|Write", "hooks": [{"command": "fine"}]},
            ],
            "BeforeLunch": [],
        },
        ".claude/settings.json",
    )
    runnable = [(e.event, e.command, e.timeout) for e in entries if e.runnable]
    assert runnable == [("PreToolUse", "fine", 60.0)]
    assert [(e.matcher, e.runnable) for e in entries if not e.runnable] == [("Bash", False)]
    assert any("the calls it matches are asked instead" in r for r in refused)
    fine = next(e for e in entries if e.runnable)
    assert fine.matches("Write") and not fine.matches("WriteAll")
    assert len(refused) == 4 and all(".claude/settings.json" in r for r in refused)
    assert any("unknown event" in r for r in refused)
    # a real settings file's shapes: Claude Code events not run here, a long prompt hook
    _, refused = parse_hooks(
        {
            "SessionStart": on("*", "x"),
            "SubagentStop": [{"hooks": [{"type": "prompt", "prompt": "Check it.\n" * 200}]}],
        },
        ".claude/settings.json",
    )
    assert refused == [
        "hooks.SessionStart in .claude/settings.json: a Claude Code event this runtime does "
        "not run",
        "hooks.SubagentStop in .claude/settings.json: only hooks of type 'command' run here "
        "(this one is 'prompt')",
    ]
    bad = tmp_path / "bad.md"
    bad.write_text("---\ndescription: x\nhooks:\n  PreToolUse: 3\n---\nbody\n")
    with pytest.raises(AgentFileError, match=r"field 'hooks'.*not a list of matchers"):
        load_agent_file(bad)


async def test_a_notification_hook_hears_a_finished_fork(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    heard = tmp_path / "heard.jsonl"
    settings(tmp_path, {"Notification": on("", script(tmp_path, "log.py", LOG) + f" {heard}")})
    session = make_session(auto_respond=False)
    await session.ask("Hello.")  # reads the settings files
    task = await session.fork("count `py: 20 + 22`")
    await session.wait(task.id, timeout=30)
    deadline = anyio.current_time() + 60  # the hook is a process: slow on a loaded machine
    while not (heard.exists() and heard.read_text().endswith("\n")):
        assert anyio.current_time() < deadline, "the Notification hook did not run"
        await anyio.sleep(0.05)
    [note] = read_log(heard)
    assert note["hook_event_name"] == "Notification" and note["task_id"] == task.id
    assert tool_outputs(note["message"]) == ["42"], note["message"]


async def test_the_model_cannot_write_itself_a_hook_without_asking(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    policy = ScriptedPolicy(default=Deny("not that"))
    session = make_session(permission_mode="acceptEdits", permission_policy=policy)
    agent = (
        "---\nname: x\ndescription: x\nhooks:\n  SubagentStart:\n    - hooks:\n"
        "        - {type: command, command: 'touch pwned'}\n---\nx\n"
    )
    emulator.script(
        Reply(
            (
                {
                    "type": "tool_use",
                    "name": "Write",
                    "input": {"file_path": ".claude/agents/x.md", "content": agent},
                },
                {
                    "type": "tool_use",
                    "name": "Write",
                    "input": {"file_path": "notes.txt", "content": "fine"},
                },
            )
        ),
        Reply.text("ok"),
    )
    turn = await session.ask("go")
    hook_file, plain = turn.tool_calls
    assert hook_file.is_error and hook_file.result == "not that"  # asked, even in acceptEdits
    assert not plain.is_error and (tmp_path / "notes.txt").exists()  # the mode still holds
    assert [r.tool_name for r in policy.requests] == ["Write"]
    assert not (tmp_path / ".claude/agents/x.md").exists()


async def test_a_hook_gets_no_credential(
    emulator: Any, make_session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-should-not-leak")
    monkeypatch.setenv("JUPYTER_TOKEN", "jt-hook-test-7f3a9c2e51")  # the Jupyter server's
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "jh-hook-test-0d4b8e6a19")
    seen = tmp_path / "env.txt"
    show = "import os, sys\nopen(sys.argv[1], 'w').write(repr(sorted(os.environ)))"
    settings(tmp_path, {"PostToolUse": on("Bash", script(tmp_path, "env.py", show) + f" {seen}")})
    session = make_session(permission_mode="bypassPermissions")
    emulator.script(bash("echo hi"), Reply.text("ok"))
    await session.ask("go")
    names = seen.read_text()
    assert "CLAUDE_PROJECT_DIR" in names and "ANTHROPIC_API_KEY" not in names
    assert "JUPYTER_TOKEN" not in names and "JUPYTERHUB_API_TOKEN" not in names


@pytest.mark.parametrize("mode", ["default", "bypassPermissions"])
async def test_a_hooks_ask_asks_the_person_even_where_a_rule_or_the_mode_allows(
    emulator: Any, make_session: Any, tmp_path: Path, mode: str
) -> None:
    # the shape of a common user hook: "ask" for rm, "allow" for the rest
    asker = script(
        tmp_path,
        "ask_rm.py",
        "import json, sys\n"
        "command = json.load(sys.stdin)['tool_input'].get('command', '')\n"
        "answer = 'ask' if command.startswith('rm ') else 'allow'\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse',\n"
        "                  'permissionDecision': answer}}))\n",
    )
    settings(tmp_path, {"PreToolUse": on("Bash", asker)}, allow=["Bash"])
    (tmp_path / "data.csv").write_text("a\n1\n")
    policy = ScriptedPolicy([], default=Deny("the person said no"))
    session = make_session(permission_mode=mode, permission_policy=policy)
    emulator.script(bash("rm -f data.csv"), bash("echo fine"), Reply.text("ok"))
    turn = await session.ask("clean up")
    asked, fine = turn.tool_calls
    assert asked.is_error and "the person said no" in asked.result
    assert [r.subject for r in policy.requests] == ["rm -f data.csv"]
    assert (tmp_path / "data.csv").exists()
    assert not fine.is_error and "fine" in fine.result


async def test_a_pre_tool_use_check_of_a_type_not_run_here_asks_instead(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    # a real settings file's guard: an LLM-judged ("prompt") check before every Bash call
    settings(
        tmp_path,
        {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "prompt", "prompt": "Safe?"}]}]},
        allow=["Bash", "Write"],
    )
    policy = ScriptedPolicy([], default=Deny("the person said no"))
    session = make_session(permission_mode="bypassPermissions", permission_policy=policy)
    write = {"file_path": "x.txt", "content": "x"}
    emulator.script(
        bash("echo unchecked > y.txt"),
        Reply(({"type": "tool_use", "name": "Write", "input": write},)),
        Reply.text("ok"),
    )
    turn = await session.ask("go")
    guarded, other = turn.tool_calls
    assert guarded.is_error and "the person said no" in guarded.result
    assert [r.tool_name for r in policy.requests] == ["Bash"]
    assert not (tmp_path / "y.txt").exists()
    assert not other.is_error and (tmp_path / "x.txt").read_text() == "x"
    refused = (await session.parent.load_settings())["refused"]
    assert any("asked instead" in r["reason"] for r in refused), refused


async def test_a_stop_hook_that_blocks_gives_the_parent_another_turn_with_its_reason(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    log = tmp_path / "stops.jsonl"
    settings(tmp_path, {"Stop": on("", script(tmp_path, "stop_once.py", STOP_ONCE) + f" {log}")})
    session = make_session()
    emulator.script(Reply.text("The total is 42."), Reply.text("The total is 42 kg."))
    turn = await session.ask("What is the total?")
    assert turn.ok and turn.text.endswith("The total is 42 kg."), turn.text
    _first, second_request = (r.body for r in emulator.api_requests())
    assert last_user_text(second_request) == (
        "Stop hook feedback:\nSay which unit the total is in."
    )
    assert "The total is 42." in str(second_request["messages"])  # its first answer, kept
    first, again = read_log(log)
    assert first["hook_event_name"] == "Stop" and first["stop_hook_active"] is False
    assert first["last_assistant_message"] == "The total is 42."
    assert again["stop_hook_active"] is True
    assert again["last_assistant_message"] == "The total is 42 kg."
    assert session.contexts.hooks.lines == []


async def test_a_subagent_stop_hook_that_blocks_gives_the_agent_another_turn(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    """An agent file's Stop hook (run as SubagentStop) answers `decision: "block"` once: the
    agent works on with the reason, and its caller gets the answer it gave then."""
    log = tmp_path / "subagent.jsonl"
    folder = tmp_path / "home" / ".claude" / "agents"  # the person's own: runs unasked
    folder.mkdir(parents=True)
    hook = script(tmp_path, "block_json.py", BLOCK_JSON_ONCE) + f" {log}"
    (folder / "checker.md").write_text(
        "---\nname: checker\ndescription: Checks totals\nhooks:\n"
        f"  Stop:\n    - hooks:\n        - type: command\n          command: {hook}\n"
        "---\nYou check totals.\n"
    )
    call = {"description": "check", "prompt": "CHECK the total", "subagent_type": "checker"}
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("DELEGATE", Reply.tool_use("Agent", call), times=1)
    brain.when_last_user_contains("CHECK the total", Reply.text("It is 42."), times=1)
    brain.when_last_user_contains("Give the unit too.", Reply.text("It is 42 kg."), times=1)
    emulator.brain = brain
    session = make_session(auto_respond=False, forking=False)
    turn = await session.ask("DELEGATE the check")
    [result] = turn.tool_calls
    assert not result.is_error and result.result.startswith("It is 42 kg."), result.result
    first, again = read_log(log)
    assert first["hook_event_name"] == "SubagentStop" and first["agent_type"] == "checker"
    assert first["stop_hook_active"] is False and first["last_assistant_message"] == "It is 42."
    assert again["stop_hook_active"] is True and again["result"] == "It is 42 kg."


async def test_a_stop_hook_that_always_blocks_is_let_through_after_the_limit(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    log = tmp_path / "stops.jsonl"
    settings(tmp_path, {"Stop": on("", script(tmp_path, "never.py", NEVER_DONE) + f" {log}")})
    session = make_session()
    emulator.brain = ScriptedBrain(when_empty="ok")
    turn = await session.ask("Finish.")
    assert turn.ok
    assert len(emulator.api_requests()) == 1 + STOP_BLOCK_LIMIT  # sent back LIMIT times
    assert len(read_log(log)) == 1 + STOP_BLOCK_LIMIT  # the last block was let through
    [line] = session.contexts.hooks.lines
    assert f"the limit is {STOP_BLOCK_LIMIT}" in line and "Not done yet." in line
