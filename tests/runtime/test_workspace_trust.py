"""Workspace trust: what a folder's own files grant (allow rules, a wider mode, additional
directories, hooks, MCP servers, disableAllHooks) waits until the person trusts the folder,
recorded where Claude Code records it (`~/.claude.json` `projects[<path>]
.hasTrustDialogAccepted`); what they forbid (deny and ask rules, a narrower mode) applies at
once. The model is the strict emulator's scripted one, asking for what the folder's files
would allow; hooks and the MCP server are real processes that leave a marker when they run."""

from __future__ import annotations

import json
import logging
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import Reply
from forkagent_jupyter.runtime.config.hook_approval import describe as describe_hooks
from forkagent_jupyter.runtime.config.hook_approval import waiting
from forkagent_jupyter.runtime.config.mcp_config import NOT_TRUSTED
from forkagent_jupyter.runtime.config.settings import describe, read_settings, shown_command
from forkagent_jupyter.runtime.config.trust import folder_trust, record_trust
from forkagent_jupyter.runtime.errors import ConfigError
from forkagent_jupyter.runtime.permissions.gate import Allow, Deny, ScriptedPolicy
from forkagent_jupyter.runtime.tools.base import ToolContext
from forkagent_jupyter.runtime.tools.files import ReadTool

from .helpers import git, make_repo, trust_folder
from .test_hooks import LOG, bash, read_log, script
from .test_mcp import DEMO, stdio

pytestmark = pytest.mark.anyio


def write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def hook(command: str) -> dict[str, Any]:
    return {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": command}]}]}


async def readable(session: Any, path: Path) -> bool:
    """Whether the gate lets the Read tool read `path` (outside the folder: only in an
    additional directory)."""
    raw = {"file_path": str(path)}
    ctx = ToolContext(workdir=session.workdir)
    return isinstance(await session.gate.check(ReadTool(), ReadTool().parse(raw), ctx, raw), Allow)


async def test_a_committed_settings_file_grants_nothing_until_the_folder_is_trusted(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / "notes.txt").parent.mkdir(parents=True)
    (home / "notes.txt").write_text("mine")
    log = script(tmp_path, "log.py", LOG)
    mine, theirs = tmp_path / "mine.jsonl", tmp_path / "theirs.jsonl"
    # the person's own hook, and their approval of every project hook
    write(
        home / ".claude" / "settings.json",
        {"hooks": hook(f"{log} {mine}"), "enableAllProjectHooks": True},
    )
    repo = make_repo(tmp_path / "repo")
    write(
        repo / ".claude" / "settings.json",
        {
            "permissions": {
                "allow": ["Bash", "Python"],
                "deny": ["Bash(rm:*)"],
                "defaultMode": "acceptEdits",
                "additionalDirectories": ["~"],
            },
            "disableAllHooks": True,
            "hooks": hook(f"{log} {theirs}"),
        },
    )
    git(repo, "add", ".claude/settings.json")
    git(repo, "commit", "-qm", "settings")
    policy = ScriptedPolicy(default=Deny("not now"))
    session = make_session(workdir=repo, home=home, permission_policy=policy)
    emulator.script(bash("echo ran > ran.txt"), bash("rm -f data.csv"), Reply.text("ok"))
    asked, removed = (await session.ask("go")).tool_calls
    assert asked.is_error and asked.result == "not now"  # asked, not run
    assert not (repo / "ran.txt").exists()
    assert [r.tool_name for r in policy.requests] == ["Bash"]
    assert removed.is_error and "Bash(rm:*)" in removed.result  # the deny holds at once
    assert (repo / "data.csv").exists() and len(policy.requests) == 1  # denied unasked
    assert session.gate.mode == "default"
    assert not await readable(session, home / "notes.txt")
    assert [e["hook_event_name"] for e in read_log(mine)] == ["UserPromptSubmit"]
    assert not theirs.exists()
    summary = await session.parent.load_settings()
    assert summary["allow"] == [] and summary["directories"] == []
    assert [w["what"] for w in summary["withheld"]] == [
        "disableAllHooks",
        f"hook UserPromptSubmit {shown_command(f'{log} {theirs}')}",
        "allow Bash",
        "allow Python",
        "defaultMode acceptEdits",
        "additionalDirectories ~",
    ]
    assert "not applied until this folder is trusted (6; %trust yes trusts it):" in describe(
        summary
    )

    said = await session.trust()
    assert said.startswith(f"trusted {repo} (~/.claude.json")
    recorded = json.loads((home / ".claude.json").read_text())
    assert recorded == {"projects": {str(repo): {"hasTrustDialogAccepted": True}}}
    emulator.script(bash("echo ran > ran.txt"), Reply.text("ok"))
    [ran] = (await session.ask("again")).tool_calls
    assert not ran.is_error and (repo / "ran.txt").exists()  # allowed: nobody was asked
    assert len(policy.requests) == 1
    assert session.gate.mode == "acceptEdits"
    assert await readable(session, home / "notes.txt")
    # the project's disableAllHooks turns its own hooks off, never the person's
    assert [e["hook_event_name"] for e in read_log(mine)] == ["UserPromptSubmit"] * 2
    assert not theirs.exists()


async def test_a_folder_without_git_starts_its_hooks_and_servers_only_once_trusted(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    """A folder that came as an archive: its `settings.local.json` approves everything it
    brings (hooks and the `.mcp.json` server); nothing of it runs until it is trusted."""
    work, home = tmp_path / "download", tmp_path / "home"
    log = script(tmp_path, "log.py", LOG)
    hooked, served = tmp_path / "hooked.jsonl", tmp_path / "served"
    write(work / ".mcp.json", {"mcpServers": {"demo": stdio(DEMO, PID_FILE=str(served))}})
    write(
        work / ".claude" / "settings.local.json",
        {
            "enableAllProjectMcpServers": True,
            "enabledMcpjsonServers": ["demo"],
            "enableAllProjectHooks": True,
            "hooks": hook(f"{log} {hooked}"),
        },
    )
    session = make_session(workdir=work, home=home, mcp_startup_timeout=30)
    await session.ask("hello")
    assert not hooked.exists() and not served.exists()
    assert session.mcp.servers == {}
    assert session.mcp.unapproved["demo"][1] == NOT_TRUSTED
    await session.trust()
    await session.ask("again")
    assert [e["hook_event_name"] for e in read_log(hooked)] == ["UserPromptSubmit"]
    assert served.read_text().split()  # the server's process ran
    assert session.mcp.servers["demo"].state == "connected"


@pytest.mark.parametrize(
    ("user", "project", "expected"),
    [
        (None, "plan", "plan"),
        (None, "dontAsk", "dontAsk"),
        ("acceptEdits", "default", "default"),
        (None, "acceptEdits", "default"),
        ("plan", "dontAsk", "plan"),
        ("dontAsk", "default", "dontAsk"),
    ],
)
def test_a_narrower_mode_and_ask_rules_apply_at_once(
    tmp_path: Path, user: str | None, project: str, expected: str
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    if user is not None:
        write(home / ".claude" / "settings.json", {"permissions": {"defaultMode": user}})
    write(
        work / ".claude" / "settings.json",
        {"permissions": {"defaultMode": project, "ask": ["Bash(git push:*)"]}},
    )
    read = read_settings(work, home)
    assert (read.mode[0] if read.mode else "default") == expected
    assert read.rules == [("ask", "Bash(git push:*)", ".claude/settings.json")]
    waits = [what for what, _ in read.withheld]
    assert waits == ([] if expected == project else [f"defaultMode {project}"])


def test_trust_is_recorded_where_claude_code_records_it_keeping_the_rest(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    home.mkdir()
    theirs = {
        "numStartups": 41,
        "oauthAccount": {"emailAddress": "me@example.com"},
        "projects": {"/elsewhere": {"allowedTools": [], "hasTrustDialogAccepted": False}},
        "mcpServers": {"db": {"command": "db-server", "args": ["--port", "5432"]}},
    }
    claude_json = home / ".claude.json"
    claude_json.write_text(json.dumps(theirs))
    claude_json.chmod(0o600)
    assert folder_trust(work, home).trusted is False
    said = record_trust(work, home)
    assert said == (
        f"trusted {work} (~/.claude.json: projects[...].hasTrustDialogAccepted); what its "
        "files grant applies from the next turn"
    )
    after = json.loads(claude_json.read_text())
    assert after["projects"].pop(str(work)) == {"hasTrustDialogAccepted": True}
    assert after == theirs  # every other key as it was
    assert stat.S_IMODE(claude_json.stat().st_mode) == 0o600
    assert sorted(p.name for p in home.iterdir()) == [".claude.json"]  # no file left beside it
    trust = folder_trust(work, home)
    assert trust.trusted and str(work) in trust.why
    assert record_trust(work, home) == f"{work} is trusted already (~/.claude.json)"
    # a file that cannot take it is one line and is left as it was
    claude_json.write_text("{not json")
    with pytest.raises(ConfigError, match=r"^~/.claude.json: is not JSON") as refused:
        record_trust(tmp_path / "other", home)
    assert str(refused.value).endswith("; not changed") and "\n" not in str(refused.value)
    assert claude_json.read_text() == "{not json"
    assert folder_trust(work, home).trusted is False  # what cannot be read trusts nothing


def test_a_trusted_repository_covers_its_subfolders_and_worktrees_a_plain_parent_does_not(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    repo = make_repo(tmp_path / "repo")
    (repo / "notebooks").mkdir()
    plain = tmp_path / "plain" / "sub"
    plain.mkdir(parents=True)
    record_trust(repo, home)
    record_trust(tmp_path / "plain", home)
    assert folder_trust(repo / "notebooks", home).trusted  # its git root is trusted
    assert not folder_trust(plain, home).trusted  # a plain parent folder is not its root
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"))
    assert folder_trust(tmp_path / "wt", home).trusted  # a worktree of the trusted repository
    # a `.git` file anyone can write, claiming to be a worktree of the trusted repository
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / ".git").write_text(f"gitdir: {repo / '.git' / 'worktrees' / 'wt'}\n")
    assert not folder_trust(fake, home).trusted
    nested = repo / "vendor"  # a repository of its own inside the trusted one
    subprocess.run(["git", "init", "-q", str(nested)], check=True)
    assert not folder_trust(nested, home).trusted


async def test_a_session_may_decide_trust_for_itself_without_recording_it(
    make_session: Any, tmp_path: Path
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    write(work / ".claude" / "settings.json", {"permissions": {"allow": ["Bash(make *)"]}})
    trusting = make_session(workdir=work, home=home, trusted=True)
    assert [r["rule"] for r in (await trusting.parent.load_settings())["allow"]] == ["Bash(make *)"]
    assert not (home / ".claude.json").exists()  # nothing recorded
    trust_folder(work, home)
    doubting = make_session(workdir=work, home=home, trusted=False)
    summary = await doubting.parent.load_settings()
    assert summary["allow"] == [] and summary["withheld"][0]["what"] == "allow Bash(make *)"
    assert "trusted=False" in await doubting.trust_report()
    doubting.configure(trusted=None)  # as ~/.claude.json records it
    assert [r["rule"] for r in (await doubting.parent.load_settings())["allow"]] == ["Bash(make *)"]


async def test_a_turn_in_a_folder_not_trusted_says_what_it_asks_for_once(
    emulator: Any, make_session: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    write(work / ".claude" / "settings.json", {"permissions": {"allow": ["Bash"]}})
    write(work / ".mcp.json", {"mcpServers": {"db": {"command": "db-server"}}})
    write(
        work / ".claude" / "agents" / "helper.md",
        "---\ndescription: Helps\nmcpServers:\n  - files: {command: files-server}\n---\nHelp.\n",
    )
    session = make_session(workdir=work, home=home)
    with caplog.at_level(logging.WARNING):
        await session.ask("hello")
        await session.ask("again")
    said = [r.getMessage() for r in caplog.records if "is not trusted" in r.getMessage()]
    assert said == [
        f"this folder ({work}) is not trusted, so what its files grant is not applied: allow "
        "Bash (.claude/settings.json); MCP server db (.mcp.json); MCP server files "
        "(.claude/agents/helper.md). Their deny and ask rules apply. %trust shows it; %trust "
        "yes trusts it (from the next turn)"
    ]
    report = await session.trust_report()
    assert report.startswith(f"{work}: not trusted\nwhat its files grant (3; not applied")
    await session.trust()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        await session.ask("trusted now")
    assert not [r for r in caplog.records if "is not trusted" in r.getMessage()]
    assert (await session.trust_report()).startswith(f"{work}: trusted (~/.claude.json, {work})")


def test_an_untrusted_folders_hooks_wait_for_trust_then_approval(tmp_path: Path) -> None:
    """A project hook in a folder not trusted is said with what to do: trust first."""
    home, work = tmp_path / "home", tmp_path / "work"
    write(work / ".claude" / "settings.json", {"hooks": hook("touch theirs")})
    in_force, pending, trusted = waiting(work, home)
    assert (in_force, [e.command for e in pending], trusted) == ([], ["touch theirs"], False)
    assert "not run (1): this folder is not trusted; %trust yes trusts it" in describe_hooks(
        in_force, pending, trusted
    )
    trust_folder(work, home)
    in_force, pending, trusted = waiting(work, home)
    assert ([e.command for e in pending], trusted) == (["touch theirs"], True)  # approval left
    assert "not approved (1; %hooks approve" in describe_hooks(in_force, pending, trusted)


def test_the_python_api_trusts_through_the_facade(tmp_path: Path) -> None:
    from forkagent_jupyter import runtime

    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    assert runtime.folder_trust(work, home).trusted is False
    runtime.record_trust(work, home)
    assert isinstance(runtime.folder_trust(work, home), runtime.FolderTrust)
    assert runtime.folder_trust(work, home).trusted
