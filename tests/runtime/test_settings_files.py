"""Settings files as Claude Code reads them: user, project and local files (and their
`.forkagent` twins), lists merged, the strongest file's defaultMode, additionalDirectories;
what cannot be honoured is listed as refused with why. Files written here for the tests, the
home folder a temporary one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import Reply
from forkagent_jupyter.runtime.config.settings import describe, read_settings
from forkagent_jupyter.runtime.permissions.gate import Allow, Deny, ScriptedPolicy
from forkagent_jupyter.runtime.tools.base import ToolContext
from forkagent_jupyter.runtime.tools.files import ReadTool, WriteTool
from forkagent_jupyter.runtime.tools.shell import BashTool
from tests.runtime.helpers import trust_folder

pytestmark = pytest.mark.anyio

BASH, READ, WRITE = BashTool(), ReadTool(), WriteTool()


def write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def perms(**kw: Any) -> dict[str, Any]:
    return {"permissions": kw}


async def check(session: Any, tool: Any, **raw: Any) -> Any:
    ctx = ToolContext(workdir=session.workdir)
    return await session.gate.check(tool, tool.parse(raw), ctx, raw)


async def test_files_merge_with_claude_codes_precedence(
    make_session: Any, home: Path, project: Path
) -> None:
    write(home / ".claude/settings.json", perms(allow=["Bash(npm run *)"], defaultMode="plan"))
    write(home / ".forkagent/settings.json", perms(deny=["Bash(curl:*)"]))
    write(
        project / ".claude/settings.json",
        perms(allow=["Bash(make *)"], ask=["Bash(make deploy)"], defaultMode="acceptEdits"),
    )
    write(project / ".claude/settings.local.json", perms(deny=["Read(secrets/**)"]))
    write(project / ".forkagent/settings.local.json", perms(defaultMode="dontAsk"))
    trust_folder(project, home)
    session = make_session(workdir=project, home=home, permission_policy=ScriptedPolicy())
    summary = await session.parent.load_settings()
    assert summary["mode"] == "dontAsk"  # the strongest file's
    assert summary["mode_source"] == ".forkagent/settings.local.json"
    assert summary["allow"] == [
        {"rule": "Bash(npm run *)", "source": "~/.claude/settings.json"},
        {"rule": "Bash(make *)", "source": ".claude/settings.json"},
    ]
    assert summary["ask"] == [{"rule": "Bash(make deploy)", "source": ".claude/settings.json"}]
    assert [d["rule"] for d in summary["deny"]] == ["Bash(curl:*)", "Read(secrets/**)"]
    assert len(summary["files"]) == 5 and summary["refused"] == []
    # the rules decide: allow, ask (refused without asking in dontAsk), deny, and nothing else
    assert isinstance(await check(session, BASH, command="make test"), Allow)
    assert isinstance(await check(session, BASH, command="make deploy"), Deny)
    assert isinstance(await check(session, BASH, command="curl x | sh"), Deny)
    assert isinstance(await check(session, BASH, command="ls"), Deny)
    assert session.gate.policy.requests == []


async def test_what_cannot_be_honoured_is_refused_with_why_and_the_rest_loads(
    make_session: Any, home: Path, project: Path
) -> None:
    write(home / ".claude/settings.json", "{not json")
    write(
        project / ".claude/settings.json",
        perms(
            allow=["Bash()", "bash", "Bash(git status:*)", 7],
            deny="Bash(rm:*)",
            ask=["Shell(x)"],
            defaultMode="bypassPermissions",
            additionalDirectories=["../missing", "../data", ""],
        ),
    )
    write(project / ".claude/settings.local.json", perms(defaultMode="yolo"))
    (project.parent / "data").mkdir()
    trust_folder(project, home)
    session = make_session(workdir=project, home=home)
    summary = await session.parent.load_settings()
    refused = {(r["rule"], r["source"]): r["reason"] for r in summary["refused"]}
    assert "is not JSON" in refused[("the file", "~/.claude/settings.json")]
    assert "empty spec" in refused[("Bash()", ".claude/settings.json")]
    assert "did you mean Bash" in refused[("bash", ".claude/settings.json")]
    assert "7" in {r for r, _ in refused}
    assert "is not a list" in refused[("permissions.deny", ".claude/settings.json")]
    assert "names no tool" in refused[("Shell(x)", ".claude/settings.json")]
    assert (
        "cannot turn it on" in refused[("defaultMode 'bypassPermissions'", ".claude/settings.json")]
    )
    assert "not one of" in refused[("defaultMode 'yolo'", ".claude/settings.local.json")]
    assert (
        "is not a folder"
        in refused[("additionalDirectories '../missing'", ".claude/settings.json")]
    )
    assert summary["allow"] == [{"rule": "Bash(git status:*)", "source": ".claude/settings.json"}]
    assert summary["mode"] == "default"
    assert summary["directories"] == [
        {"path": str((project.parent / "data").resolve()), "source": ".claude/settings.json"}
    ]
    text = describe(summary)
    assert "refused (" in text and "Bash(git status:*)  .claude/settings.json" in text


async def test_bypass_from_the_users_own_file_and_deny_still_holds(
    make_session: Any, home: Path, project: Path
) -> None:
    write(
        home / ".claude/settings.json",
        perms(defaultMode="bypassPermissions", deny=["Bash(rm:*)", "WebSearch"]),
    )
    session = make_session(workdir=project, home=home, permission_policy=None)
    await session.parent.load_settings()
    assert session.gate.mode == "bypassPermissions"
    assert isinstance(await check(session, BASH, command="touch x"), Allow)
    assert isinstance(await check(session, BASH, command="env -i rm -rf .."), Deny)


async def test_a_mode_given_to_the_session_wins_over_the_files(
    make_session: Any, home: Path, project: Path
) -> None:
    write(project / ".claude/settings.json", perms(defaultMode="acceptEdits"))
    trust_folder(project, home)
    planning = make_session(workdir=project, home=home, permission_mode="plan")
    await planning.parent.load_settings()
    assert planning.gate.mode == "plan"
    default = make_session(workdir=project, home=home)
    await default.parent.load_settings()
    assert default.gate.mode == "acceptEdits"
    default.gate.mode = "default"  # set by hand: the files no longer decide
    await default.parent.load_settings()
    assert default.gate.mode == "default"


async def test_configure_sets_the_mode_the_files_chose_back_to_the_one_asked(
    make_session: Any, home: Path, project: Path
) -> None:
    write(project / ".claude/settings.json", perms(defaultMode="acceptEdits"))
    trust_folder(project, home)
    session = make_session(workdir=project, home=home, permission_policy=None)
    await session.parent.load_settings()
    assert session.gate.mode == "acceptEdits"
    session.configure(permission_mode="default")  # the options already said "default"
    assert session.gate.mode == "default"
    assert isinstance(await check(session, WriteTool(), file_path="a.txt", content="x"), Deny)
    await session.parent.load_settings()  # set by hand: the files no longer decide
    assert session.gate.mode == "default"


async def test_additional_directories_widen_where_tools_may_go(
    make_session: Any, home: Path, project: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.csv").write_text("a,b\n")
    trust_folder(project, home)
    session = make_session(workdir=project, home=home)
    assert isinstance(await check(session, READ, file_path=str(data / "x.csv")), Deny)
    write(project / ".claude/settings.json", perms(additionalDirectories=[str(data)]))
    await session.parent.load_settings()
    assert isinstance(await check(session, READ, file_path=str(data / "x.csv")), Allow)
    assert isinstance(await check(session, READ, file_path=str(tmp_path / "other")), Deny)


async def test_a_turn_reads_an_additional_directory(
    emulator: Any, make_session: Any, home: Path, project: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.csv").write_text("a,b\n1,2\n")
    write(home / ".claude/settings.json", perms(additionalDirectories=[str(data)]))
    session = make_session(workdir=project, home=home)
    emulator.script(
        Reply(({"type": "tool_use", "name": "Read", "input": {"file_path": str(data / "x.csv")}},)),
        Reply.text("ok"),
    )
    turn = await session.ask("read the data")
    assert not turn.tool_calls[0].is_error and "1,2" in turn.tool_calls[0].result


async def test_files_are_read_again_each_turn_and_edits_to_them_are_always_asked(
    emulator: Any, make_session: Any, home: Path, project: Path
) -> None:
    policy = ScriptedPolicy(default=Deny("not that"))
    session = make_session(
        workdir=project, home=home, permission_policy=policy, permission_mode="bypassPermissions"
    )
    emulator.script(
        Reply(({"type": "tool_use", "name": "Bash", "input": {"command": "echo one"}},)),
        Reply.text("ok"),
        Reply(({"type": "tool_use", "name": "Bash", "input": {"command": "echo two"}},)),
        Reply.text("ok"),
        Reply(
            (
                {
                    "type": "tool_use",
                    "name": "Write",
                    "input": {
                        "file_path": ".claude/settings.local.json",
                        "content": '{"permissions": {"allow": ["Bash"]}}',
                    },
                },
            )
        ),
        Reply.text("ok"),
    )
    first = await session.ask("one")
    assert not first.tool_calls[0].is_error
    write(project / ".claude/settings.json", perms(deny=["Bash(echo:*)"]))
    second = await session.ask("two")  # the new file holds from the next turn
    assert second.tool_calls[0].is_error and "Bash(echo:*)" in second.tool_calls[0].result
    third = await session.ask("widen your rights")
    assert third.tool_calls[0].is_error and third.tool_calls[0].result == "not that"
    assert [r.tool_name for r in policy.requests] == ["Write"]  # asked even in bypass
    assert not (project / ".claude/settings.local.json").exists()


def test_settings_are_read_as_text_files_only(home: Path, project: Path) -> None:
    write(project / ".claude/settings.json", perms(allow=["Bash(ls)"]))
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").mkdir()  # a folder where a file should be
    trust_folder(project, home)
    read = read_settings(project, home)
    assert read.rules == [("allow", "Bash(ls)", ".claude/settings.json")]
    assert [what for what, _, _ in read.refused] == ["the file"]


async def test_shapes_from_real_settings_files_load_and_decide(
    make_session: Any, home: Path, project: Path
) -> None:
    # shapes seen in users' files: a `$schema` key, spaces around a `:*` spec, a rule for a
    # Claude Code tool this runtime lacks (PowerShell, Windows), servers and unknown keys
    write(
        project / ".claude/settings.json",
        {
            "$schema": "https://json.schemastore.org/claude-code-settings.json",
            "permissions": {
                "allow": ["Bash(ls:*)", "PowerShell(Get-ChildItem *)", "AskUserQuestion"],
                "deny": ["Bash(sudo :* )", "Bash(git push :* )", "Write(.env*)"],
                "defaultIfNoMatch": "ask",
            },
            "mcpServers": {"db": {"command": "python", "args": ["server.py"]}},
            "theme": "dark",
        },
    )
    trust_folder(project, home)
    session = make_session(workdir=project, home=home, permission_policy=None)
    summary = await session.parent.load_settings()
    assert summary["refused"] == []
    assert [r["rule"] for r in summary["deny"]] == [
        "Bash(sudo :*)",
        "Bash(git push :*)",
        "Write(.env*)",
    ]
    assert isinstance(await check(session, BASH, command="sudo -n ls"), Deny)
    assert isinstance(await check(session, BASH, command="git push origin main"), Deny)
    assert isinstance(await check(session, WRITE, file_path=".env.local", content="x"), Deny)
    assert isinstance(await check(session, BASH, command="ls -la"), Allow)


@pytest.mark.parametrize(
    "target",
    [".claude.json", ".claude/settings.json", ".claude/agents/helper.md", ".forkagent/agents/a.md"],
)
async def test_the_persons_own_files_are_asked_for_when_the_work_dir_is_home(
    emulator: Any, make_session: Any, home: Path, target: str
) -> None:
    """A notebook opened in the home folder (Jupyter started there): the person's own
    ~/.claude.json (user MCP servers: commands the session starts), settings and agent files
    (their hooks run unasked) are files of the work dir, and a write to them is asked, as a
    write to the project's settings is, even in bypassPermissions."""
    policy = ScriptedPolicy(default=Deny("not that"))
    session = make_session(
        workdir=home, home=home, permission_policy=policy, permission_mode="bypassPermissions"
    )
    emulator.script(
        Reply(
            (
                {
                    "type": "tool_use",
                    "name": "Write",
                    "input": {"file_path": target, "content": '{"mcpServers": {}}'},
                },
            )
        ),
        Reply.text("ok"),
    )
    turn = await session.ask("widen your rights")
    assert turn.tool_calls[0].is_error and turn.tool_calls[0].result == "not that"
    assert [r.tool_name for r in policy.requests] == ["Write"]
    assert not (home / target).exists()


@pytest.mark.parametrize(
    "target",
    [
        ".claude.json",
        ".claude/settings.json",
        ".claude/agents/helper.md",
        ".forkagent/settings.json",
        ".forkagent/agents/a.md",
    ],
)
async def test_the_persons_own_files_are_asked_for_in_an_additional_directory(
    emulator: Any, make_session: Any, home: Path, project: Path, target: str
) -> None:
    """The home folder among the additional directories the tools may use: a write to the
    person's own settings, agent files or ~/.claude.json is asked even in bypassPermissions."""
    write(home / ".claude" / "settings.json", perms(additionalDirectories=[str(home)]))
    policy = ScriptedPolicy(default=Deny("not that"))
    session = make_session(
        workdir=project, home=home, permission_policy=policy, permission_mode="bypassPermissions"
    )
    emulator.script(
        Reply(
            (
                {
                    "type": "tool_use",
                    "name": "Write",
                    "input": {"file_path": str(home / target), "content": "{}"},
                },
            )
        ),
        Reply.text("ok"),
    )
    before = (home / target).read_text() if (home / target).exists() else None
    turn = await session.ask("widen your rights")
    assert turn.tool_calls[0].is_error and turn.tool_calls[0].result == "not that", turn
    assert [r.tool_name for r in policy.requests] == ["Write"]
    after = (home / target).read_text() if (home / target).exists() else None
    assert after == before


async def test_a_project_file_the_persons_agent_file_links_to_is_asked_for(
    emulator: Any, make_session: Any, home: Path, project: Path
) -> None:
    """~/.claude/agents/helper.md is a symlink to a file in the project: it is the person's
    agent file (its hooks run unasked), so editing it in the project is asked, even in
    acceptEdits."""
    (project / "notes").mkdir()
    target = project / "notes" / "helper.md"
    target.write_text("---\nname: helper\ndescription: Helps\n---\nYou help.\n")
    (home / ".claude" / "agents").mkdir(parents=True)
    (home / ".claude" / "agents" / "helper.md").symlink_to(target)
    policy = ScriptedPolicy(default=Deny("not that"))
    session = make_session(
        workdir=project, home=home, permission_policy=policy, permission_mode="acceptEdits"
    )
    emulator.script(
        Reply(
            (
                {
                    "type": "tool_use",
                    "name": "Write",
                    "input": {"file_path": "notes/helper.md", "content": "hooks"},
                },
            )
        ),
        Reply.text("ok"),
    )
    turn = await session.ask("widen your rights")
    assert turn.tool_calls[0].is_error and turn.tool_calls[0].result == "not that", turn
    assert [r.tool_name for r in policy.requests] == ["Write"]
    assert "You help." in target.read_text()


def test_claude_code_settings_not_honoured_here_are_refused_with_why(
    home: Path, project: Path
) -> None:
    write(
        project / ".claude/settings.json",
        {"model": "opus", "env": {"FOO": "1"}, "apiKeyHelper": "/bin/k", "theme": "dark"},
    )
    read = read_settings(project, home)
    refused = {what: why for what, _source, why in read.refused}
    assert set(refused) == {"model", "env", "apiKeyHelper"}  # the display-only theme: silent
    assert "ForkAgent.model" in refused["model"]
    assert "kernel's environment" in refused["env"]
    assert "ANTHROPIC_API_KEY" in refused["apiKeyHelper"]
