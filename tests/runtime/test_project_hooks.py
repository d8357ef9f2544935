"""Hooks someone else wrote run only once the person approved them: a command hook of the
project's committed `.claude/settings.json` or of a project agent file (anyone who
contributed to the repository may have written it) does not run until the person's own
settings approve it (`enableAllProjectHooks`, or its exact command in `enabledProjectHooks`);
it is said once, with how to approve it. The project file's permission rules keep working
(they only narrow), and it cannot approve its own hooks. The model is the emulator's scripted
one, asking for `rm`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain
from forkagent_jupyter.runtime.config.hook_approval import approve
from forkagent_jupyter.runtime.config.mcp_config import approve_server
from forkagent_jupyter.runtime.config.settings import read_settings
from forkagent_jupyter.runtime.errors import ConfigError
from tests.reported import tool_outputs

from .helpers import trust_folder
from .test_hooks import LOG, bash, on, read_log, script, settings

pytestmark = pytest.mark.anyio


def _own(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


async def test_a_projects_committed_hooks_run_only_once_the_person_approves_them(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    (tmp_path / "data.csv").write_text("a\n1\n")
    log = script(tmp_path, "log.py", LOG)
    pre, post, prompt, stop = (tmp_path / f"{n}.jsonl" for n in ("pre", "post", "prompt", "stop"))
    commands = {n: f"{log} {p}" for n, p in (("pre", pre), ("post", post))}
    settings(
        tmp_path,
        {
            "PreToolUse": on("Bash", commands["pre"]),
            "PostToolUse": on("*", commands["post"]),
            "UserPromptSubmit": on("", f"{log} {prompt}"),
            "Stop": on("", f"{log} {stop}"),
        },
        name="settings.json",  # the committed file: someone else's
        top={"enableAllProjectHooks": True, "enabledProjectHooks": [commands["pre"]]},
        deny=["Bash(rm:*)"],
    )
    session = make_session()
    emulator.script(bash("echo hi"), bash("rm -f data.csv"), Reply.text("ok"))
    turn = await session.ask("clean up")
    ran, removed = turn.tool_calls
    assert not ran.is_error and "hi" in ran.result
    assert removed.is_error and (tmp_path / "data.csv").exists()  # the project's deny holds
    for marker in (pre, post, prompt, stop):
        assert not marker.exists(), marker  # none of the four commands ran
    lines = list(session.contexts.hooks.lines)
    assert len(lines) == 4, lines  # one line per hook, with how to approve it
    assert all(
        line.startswith("hook of .claude/settings.json not run: ")
        and "is not approved" in line
        and "enabledProjectHooks" in line
        and "enableAllProjectHooks: true" in line
        and "\n" not in line
        for line in lines
    ), lines
    assert any(f"PreToolUse command {commands['pre']!r}" in line for line in lines)
    refused = {r["rule"] for r in (await session.parent.load_settings())["refused"]}
    assert {"enableAllProjectHooks", "enabledProjectHooks"} <= refused  # it cannot approve itself

    emulator.script(bash("echo again"), Reply.text("ok"))
    await session.ask("once more")
    assert session.contexts.hooks.lines == lines  # said once, not every turn
    assert not post.exists()

    # the person approves one command exactly: that one runs from the next turn, only it
    _own(tmp_path / ".claude" / "settings.local.json", {"enabledProjectHooks": [commands["post"]]})
    emulator.script(bash("echo approved"), Reply.text("ok"))
    await session.ask("and now")
    [entry] = read_log(post)
    assert entry["hook_event_name"] == "PostToolUse"
    assert entry["tool_input"] == {"command": "echo approved"}
    assert not pre.exists() and not prompt.exists() and not stop.exists()

    # approving them all in their own user settings: every one runs
    _own(session.home / ".claude" / "settings.json", {"enableAllProjectHooks": True})
    emulator.script(bash("echo all"), Reply.text("ok"))
    await session.ask("all of them")
    assert [e["hook_event_name"] for e in read_log(pre)] == ["PreToolUse"]
    assert [e["hook_event_name"] for e in read_log(prompt)] == ["UserPromptSubmit"]
    assert [e["hook_event_name"] for e in read_log(stop)] == ["Stop"]
    assert session.contexts.hooks.lines == lines


def _agent_file(folder: Path, log: str, marker: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "checker.md").write_text(
        "---\nname: checker\ndescription: Checks numbers\nhooks:\n"
        "  PostToolUse:\n    - matcher: Python\n      hooks:\n        - type: command\n"
        f"          command: {log} {marker}\n"
        "---\nYou check numbers.\n"
    )


def _checker(emulator: Any) -> None:
    brain = ScriptedBrain(when_empty=OfflineBrain())
    call = {"description": "check", "prompt": "check `py: 6 * 7`", "subagent_type": "checker"}
    brain.when_last_user_contains(
        "CHECK", Reply(({"type": "tool_use", "name": "Agent", "input": call},)), times=3
    )
    emulator.brain = brain


async def test_a_project_agent_files_hooks_run_only_once_approved(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    log = script(tmp_path, "log.py", LOG)
    marker = tmp_path / "agent.jsonl"
    _agent_file(tmp_path / ".claude" / "agents", log, marker)
    trust_folder(tmp_path, tmp_path / "home")  # trusted: the approval is what is left
    _checker(emulator)
    session = make_session(auto_respond=False, forking=False)
    turn = await session.ask("CHECK the numbers")
    assert tool_outputs(turn.tool_calls[0].result) == ["42"], turn.tool_calls[0].result
    assert not marker.exists()  # the agent ran, its file's hook did not
    [line] = session.contexts.hooks.lines
    assert "checker.md not run: PostToolUse command" in line and "enabledProjectHooks" in line
    await session.ask("CHECK the numbers again")
    assert len(session.contexts.hooks.lines) == 1  # said once
    _own(tmp_path / ".claude" / "settings.local.json", {"enabledProjectHooks": [f"{log} {marker}"]})
    await session.ask("CHECK the numbers")
    assert [e["tool_name"] for e in read_log(marker)] == ["Python"]


async def test_the_persons_own_agent_files_hooks_run_unasked(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    log = script(tmp_path, "log.py", LOG)
    marker = tmp_path / "agent.jsonl"
    _agent_file(tmp_path / "home" / ".claude" / "agents", log, marker)
    _checker(emulator)
    session = make_session(auto_respond=False, forking=False)
    await session.ask("CHECK the numbers")
    assert [e["tool_name"] for e in read_log(marker)] == ["Python"]
    assert session.contexts.hooks.lines == []
    assert sys.executable in log


def _git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=folder,
        check=True,
        capture_output=True,
    )


async def test_a_committed_settings_local_json_is_someone_elses(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    """A repository that commits `.claude/settings.local.json` (Claude Code keeps it out of
    git) cannot approve its own hooks or run them that way: the file is read as a project's."""
    log = script(tmp_path, "log.py", LOG)
    marker = tmp_path / "pre.jsonl"
    command = f"{log} {marker}"
    settings(  # settings.local.json, approving everything it brings
        tmp_path,
        {"PreToolUse": on("Bash", command)},
        top={"enableAllProjectHooks": True, "enableAllProjectMcpServers": True},
    )
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".claude/settings.local.json")
    _git(tmp_path, "commit", "-q", "-m", "x")
    session = make_session()
    emulator.script(bash("echo hi"), Reply.text("ok"))
    turn = await session.ask("say hi")
    assert "hi" in turn.tool_calls[0].result
    assert not marker.exists()  # the committed file's hook did not run
    [line] = session.contexts.hooks.lines
    assert line.startswith("hook of .claude/settings.local.json not run: ")
    refused = {r["rule"] for r in (await session.parent.load_settings())["refused"]}
    assert {"enableAllProjectHooks", "enableAllProjectMcpServers"} <= refused

    # the same file, not committed (the person's own): its hook runs unasked
    _git(tmp_path, "rm", "-q", "--cached", ".claude/settings.local.json")
    emulator.script(bash("echo again"), Reply.text("ok"))
    await session.ask("again")
    assert [e["tool_input"] for e in read_log(marker)] == [{"command": "echo again"}]


def test_a_settings_local_json_behind_a_committed_symlink_is_someone_elses(
    tmp_path: Path,
) -> None:
    """`.claude` committed as a symlink to a folder whose settings.local.json is committed:
    git does not look through the symlink, what it resolves to is tracked."""
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "settings.local.json").write_text(json.dumps({"enableAllProjectHooks": True}))
    (tmp_path / ".claude").symlink_to("shared")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "x")
    trust_folder(tmp_path, tmp_path / "home")  # even in a folder the person trusts
    read = read_settings(tmp_path, tmp_path / "home")
    assert read.hooks_enable_all is None
    assert [r[0] for r in read.refused] == ["enableAllProjectHooks"]
    # the person's own file, not in git: read as theirs
    _git(tmp_path, "rm", "-q", "--cached", "shared/settings.local.json")
    assert read_settings(tmp_path, tmp_path / "home").hooks_enable_all == (
        True,
        ".claude/settings.local.json",
    )


def test_an_approval_is_not_written_into_a_committed_settings_local_json(tmp_path: Path) -> None:
    """%hooks approve and %mcp approve write to .claude/settings.local.json: when git tracks
    it (read as the project's), the approval would not count, so it is refused in one line
    and the file is left as it was."""
    (tmp_path / ".claude").mkdir()
    local = tmp_path / ".claude" / "settings.local.json"
    local.write_text("{}")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "x")
    with pytest.raises(ConfigError, match="tracked by git") as hooks:
        approve(tmp_path, ["echo hi"])
    with pytest.raises(ConfigError, match="tracked by git") as servers:
        approve_server(tmp_path, "files")
    for refused in (hooks, servers):
        assert "\n" not in str(refused.value) and "~/.claude/settings.json" in str(refused.value)
    assert local.read_text() == "{}"
    _git(tmp_path, "rm", "-q", "--cached", ".claude/settings.local.json")
    assert "approved" in approve(tmp_path, ["echo hi"])
    assert json.loads(local.read_text()) == {"enabledProjectHooks": ["echo hi"]}


async def test_disable_all_hooks_turns_off_every_hook_the_persons_too(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    log = script(tmp_path, "log.py", LOG)
    mine, theirs, agent = (tmp_path / f"{n}.jsonl" for n in ("mine", "theirs", "agent"))
    # the person's own hook (runs unasked), a project hook they approved, an agent file's hook
    settings(tmp_path, {"PostToolUse": on("*", f"{log} {mine}")})
    settings(
        tmp_path,
        {"PostToolUse": on("*", f"{log} {theirs}")},
        name="settings.json",
    )
    _own(
        session_home := tmp_path / "home" / ".claude" / "settings.json",
        {"enableAllProjectHooks": True},
    )
    _agent_file(tmp_path / "home" / ".claude" / "agents", log, agent)
    _checker(emulator)
    session = make_session(auto_respond=False, forking=False)
    assert session.home / ".claude" / "settings.json" == session_home
    await session.ask("CHECK the numbers")
    assert mine.exists() and theirs.exists() and agent.exists()  # all three ran
    for path in (mine, theirs, agent):
        path.unlink()
    # one line in the person's user file turns every hook off, the agent file's included
    _own(session_home, {"enableAllProjectHooks": True, "disableAllHooks": True})
    turn = await session.ask("CHECK the numbers")
    assert tool_outputs(turn.tool_calls[0].result) == ["42"], turn.tool_calls[0].result
    assert not mine.exists() and not theirs.exists() and not agent.exists()
    assert session.contexts.hooks.lines == []  # nothing waits for approval: nothing runs at all
    # a value that is not true or false is refused with why, and hooks run again
    _own(session_home, {"enableAllProjectHooks": True, "disableAllHooks": "yes"})
    refused = (await session.parent.load_settings())["refused"]
    assert [r["reason"] for r in refused if r["rule"] == "disableAllHooks"] == [
        "is not true or false"
    ]
