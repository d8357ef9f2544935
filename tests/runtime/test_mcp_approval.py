"""A project's `.mcp.json` (it comes with the repository) starts a server only once the person
approves it, as in Claude Code: `enableAllProjectMcpServers` or `enabledMcpjsonServers` in their
own settings (`~/.claude/settings.json`, `.claude/settings.local.json`), never in the committed
`.claude/settings.json`; `disabledMcpjsonServers` always wins. Real servers through the `mcp`
SDK: a server that is started writes its process id to a marker file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from forkagent_jupyter.runtime.config.mcp_config import approve_server
from forkagent_jupyter.runtime.errors import ConfigError
from forkagent_jupyter.runtime.mcp.servers import McpServers, describe

from .helpers import trust_folder
from .test_mcp import DEMO, approve, stdio
from .test_mcp_agents import agent_file, start

pytestmark = pytest.mark.anyio


def project(folder: Path, *names: str) -> dict[str, Path]:
    """A `.mcp.json` with one demo server per name, nothing approved, in a folder the person
    trusts (`folder/home/.claude.json`: the approval is what is left); each server's marker."""
    trust_folder(folder, folder / "home")
    marks = {n: folder / f"ran-{n}" for n in names}
    servers = {n: stdio(DEMO, PID_FILE=str(marks[n])) for n in names}
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return marks


def settings(path: Path, **keys: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(keys))


async def started(work: Path, home: Path) -> McpServers:
    servers = McpServers(work, home, startup_timeout=30)
    await servers.start()
    return servers


async def test_an_unapproved_project_server_does_not_run_and_says_how_to_approve(
    tmp_path: Path,
) -> None:
    marks = project(tmp_path, "theirs")
    servers = await started(tmp_path, tmp_path / "home")
    try:
        assert servers.servers == {}
        assert not marks["theirs"].exists()  # its command never ran
        text = describe(servers)
        assert "  theirs  not approved  (stdio, .mcp.json)" in text
        assert (
            "  (to approve a project server, run %mcp approve NAME (it starts at the next turn), "
            "or add its name to enabledMcpjsonServers (or set enableAllProjectMcpServers: true) "
            "in .claude/settings.local.json or ~/.claude/settings.json (read at the next "
            "session))"
        ) in text
    finally:
        await servers.aclose()


@pytest.mark.parametrize(
    ("where", "keys"),
    [
        ("home", {"enableAllProjectMcpServers": True}),
        ("home", {"enabledMcpjsonServers": ["ok"]}),
        ("local", {"enableAllProjectMcpServers": True}),
        ("local", {"enabledMcpjsonServers": ["ok"]}),
    ],
)
async def test_the_persons_settings_approve_a_project_server(
    tmp_path: Path, where: str, keys: dict[str, Any]
) -> None:
    """The same project before the approval (nothing runs) and in the next session after it."""
    home = tmp_path / "home"
    marks = project(tmp_path, "ok", "other")
    before = await started(tmp_path, home)
    await before.aclose()
    assert before.servers == {} and sorted(before.unapproved) == ["ok", "other"]
    assert not marks["ok"].exists() and not marks["other"].exists()
    base = home if where == "home" else tmp_path
    name = "settings.json" if where == "home" else "settings.local.json"
    settings(base / ".claude" / name, **keys)
    servers = await started(tmp_path, home)
    try:
        assert servers.servers["ok"].state == "connected"
        assert marks["ok"].read_text().split()  # its process ran
        everything = keys.get("enableAllProjectMcpServers") is True
        assert ("other" in servers.servers) is everything
        assert marks["other"].exists() is everything
    finally:
        await servers.aclose()


async def test_disabled_wins_wherever_it_is_written(tmp_path: Path) -> None:
    home = tmp_path / "home"
    marks = project(tmp_path, "a", "b", "c")
    settings(home / ".claude" / "settings.json", enableAllProjectMcpServers=True)
    approve(tmp_path, enabledMcpjsonServers=["a", "b", "c"], disabledMcpjsonServers=["a"])
    settings(tmp_path / ".claude" / "settings.json", disabledMcpjsonServers=["b"])
    servers = await started(tmp_path, home)
    try:
        assert sorted(servers.servers) == ["c"]
        assert not marks["a"].exists() and not marks["b"].exists()
        assert marks["c"].exists()
        text = describe(servers)
        assert "  a  disabled (disabledMcpjsonServers in .claude/settings.local.json)" in text
        assert "  b  disabled (disabledMcpjsonServers in .claude/settings.json)" in text
    finally:
        await servers.aclose()


async def test_the_committed_project_settings_cannot_approve_its_own_servers(
    tmp_path: Path,
) -> None:
    marks = project(tmp_path, "theirs")
    for folder in (".claude", ".forkagent"):
        settings(
            tmp_path / folder / "settings.json",
            enableAllProjectMcpServers=True,
            enabledMcpjsonServers=["theirs"],
        )
    servers = await started(tmp_path, tmp_path / "home")
    try:
        assert servers.servers == {}
        assert not marks["theirs"].exists()
        assert servers.unapproved["theirs"][1] == "not approved"
        assert (
            ".claude/settings.json: enableAllProjectMcpServers a project's committed file "
            "cannot approve its own MCP servers (set it in .claude/settings.local.json or "
            "~/.claude/settings.json)"
        ) in servers.problems
    finally:
        await servers.aclose()


async def test_an_unapproved_project_server_does_not_replace_the_persons_own(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    mine = tmp_path / "ran-mine"
    (home / ".claude.json").write_text(
        json.dumps({"mcpServers": {"db": stdio(DEMO, PID_FILE=str(mine))}})
    )
    marks = project(tmp_path, "db")
    servers = await started(tmp_path, home)
    try:
        assert servers.servers["db"].spec.source == "~/.claude.json"
        assert servers.servers["db"].state == "connected"
        assert mine.exists() and not marks["db"].exists()
    finally:
        await servers.aclose()


async def test_an_agent_requiring_an_unapproved_server_fails_with_that_reason(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    marks = project(tmp_path, "theirs")
    agent_file(tmp_path, "needy", "requiredMcpServers: [theirs]\n")
    emulator.brain = start("needy", "NEEDY")
    session = make_session(auto_respond=False, forking=False, mcp_startup_timeout=20)
    [needy] = (await session.ask("NEEDY")).tool_calls
    assert needy.is_error and "\n" not in needy.result
    assert needy.result.startswith(
        "Agent 'needy' not started: The agent needs MCP servers that are not available: "
        "'theirs' (not approved: to approve a project server, run %mcp approve NAME (it "
        "starts at the next turn), or add its name to enabledMcpjsonServers"
    )
    assert not marks["theirs"].exists()
    assert session.tasks == []


async def test_approve_server_writes_the_persons_local_file_for_the_next_session(
    tmp_path: Path,
) -> None:
    marks = project(tmp_path, "theirs")
    approve(tmp_path, permissions={"allow": ["Read"]}, enabledMcpjsonServers=["other"])
    said = await anyio.to_thread.run_sync(approve_server, tmp_path, "theirs")
    assert said.startswith("MCP server 'theirs' approved in .claude/settings.local.json")
    again = await anyio.to_thread.run_sync(approve_server, tmp_path, "theirs")
    assert again == said  # once in the list
    local = tmp_path / ".claude" / "settings.local.json"
    assert json.loads(local.read_text()) == {
        "permissions": {"allow": ["Read"]},
        "enabledMcpjsonServers": ["other", "theirs"],
    }
    servers = await started(tmp_path, tmp_path / "home")
    try:
        assert servers.servers["theirs"].state == "connected" and marks["theirs"].exists()
    finally:
        await servers.aclose()


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{not json", ".claude/settings.local.json: is not JSON"),
        ("[1]", ".claude/settings.local.json: is not a JSON object; not changed"),
        (
            '{"enabledMcpjsonServers": "x"}',
            ".claude/settings.local.json: enabledMcpjsonServers is not a list; not changed",
        ),
    ],
)
def test_approve_server_leaves_a_file_it_cannot_read_as_it_was(
    tmp_path: Path, content: str, said: str
) -> None:
    local = tmp_path / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text(content)
    with pytest.raises(ConfigError) as refused:
        approve_server(tmp_path, "theirs")
    assert str(refused.value).startswith(said) and "\n" not in str(refused.value)
    assert local.read_text() == content
    with pytest.raises(ConfigError, match="'a__b' is not a server name"):
        approve_server(tmp_path, "a__b")


def marked_agent(folder: Path, mark: Path, required: bool = False) -> None:
    """An agent file in `folder/.claude/agents` defining its own server `own` inline, whose
    process writes its id to `mark`."""
    server = json.dumps({"own": stdio(DEMO, PID_FILE=str(mark))})
    needs = "requiredMcpServers: [own]\n" if required else ""
    agent_file(folder, "inliner", f"tools: Read\nmcpServers:\n  - {server}\n{needs}")


@pytest.mark.parametrize("approved", [False, True])
async def test_a_project_agent_files_inline_server_starts_only_once_approved(
    emulator: Any, make_session: Any, tmp_path: Path, approved: bool
) -> None:
    """The model decides when an agent starts: a project agent file's own server is the
    project's, and runs only when the person approved it by name."""
    mark = tmp_path / "ran-own"
    marked_agent(tmp_path, mark)
    trust_folder(tmp_path, tmp_path / "home")  # trusted: the approval is what is left
    if approved:
        approve(tmp_path, enabledMcpjsonServers=["own"])
    emulator.brain = start("inliner", "INLINE")
    session = make_session(auto_respond=False, forking=False, mcp_startup_timeout=30)
    [call] = (await session.ask("INLINE")).tool_calls
    assert not call.is_error, call.result
    [task] = session.tasks
    await task.ended()
    assert task.status == "completed"
    said = [n for n in task.notes if "MCP server 'own'" in n]
    if approved:
        assert mark.read_text().split()  # its process ran
        assert said == [] and session.mcp.lines == []
    else:
        assert not mark.exists()  # its command never ran
        line = (
            f"MCP server 'own' of {tmp_path / '.claude' / 'agents' / 'inliner.md'} not "
            "started: not approved: to approve it, add its name to enabledMcpjsonServers (or "
            "set enableAllProjectMcpServers: true) in .claude/settings.local.json or "
            "~/.claude/settings.json, or run %mcp approve NAME; it starts at the agent's next "
            "launch"
        )
        assert said == [line] and session.mcp.lines == [line]


async def test_a_project_agent_requiring_its_unapproved_inline_server_fails_with_that_reason(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    mark = tmp_path / "ran-own"
    marked_agent(tmp_path, mark, required=True)
    trust_folder(tmp_path, tmp_path / "home")  # trusted: the approval is what is left
    settings(tmp_path / ".claude" / "settings.json", enableAllProjectMcpServers=True)
    emulator.brain = start("inliner", "INLINE")
    session = make_session(auto_respond=False, forking=False, mcp_startup_timeout=30)
    [call] = (await session.ask("INLINE")).tool_calls
    assert call.is_error and "\n" not in call.result
    assert call.result.startswith(
        "Agent 'inliner' not started: The agent needs MCP servers that are not available: "
        "'own' (not approved: to approve it, add its name to enabledMcpjsonServers"
    )
    assert not mark.exists() and session.tasks == []


async def test_the_persons_own_agent_files_inline_server_runs_unapproved(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    mark = tmp_path / "ran-own"
    home = tmp_path / "home"
    marked_agent(home, mark, required=True)
    emulator.brain = start("inliner", "INLINE")
    session = make_session(auto_respond=False, forking=False, mcp_startup_timeout=30, home=home)
    [call] = (await session.ask("INLINE")).tool_calls
    assert not call.is_error, call.result
    [task] = session.tasks
    await task.ended()
    assert task.status == "completed"
    assert mark.read_text().split()  # its process ran, nothing approved
    assert session.mcp.lines == []


async def test_approving_a_project_server_starts_it_at_the_next_turn_of_the_same_session(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    """`%mcp approve NAME` (McpServers.approve) takes effect in the session that runs: the
    server starts at its next use and the next request offers its tools."""
    marks = project(tmp_path, "theirs")
    session = make_session(auto_respond=False, mcp_startup_timeout=30)
    await session.ask("Hello.")
    offered = [t["name"] for t in emulator.api_requests()[-1].body["tools"]]
    assert not any(name.startswith("mcp__theirs__") for name in offered)
    assert not marks["theirs"].exists()
    said = await session.mcp.approve("theirs")
    assert said == (
        "MCP server 'theirs' approved in .claude/settings.local.json (enabledMcpjsonServers); "
        "it starts at this session's next turn"
    )
    assert "theirs" not in session.mcp.unapproved
    await session.ask("Again.")
    offered = [t["name"] for t in emulator.api_requests()[-1].body["tools"]]
    assert "mcp__theirs__add" in offered
    assert marks["theirs"].read_text().split()  # its process ran
    text = describe(session.mcp)
    assert "  theirs  connected  (stdio, .mcp.json)" in text and "not approved" not in text


async def test_approving_a_disabled_or_unknown_server_says_what_happens(
    make_session: Any, tmp_path: Path
) -> None:
    marks = project(tmp_path, "off")
    settings(tmp_path / ".claude" / "settings.json", disabledMcpjsonServers=["off"])
    session = make_session(auto_respond=False, mcp_startup_timeout=30)
    await session.mcp.start()
    off = await session.mcp.approve("off")
    assert off.endswith(
        "; it stays off: disabled (disabledMcpjsonServers in .claude/settings.json)"
    ), off
    other = await session.mcp.approve("elsewhere")
    assert other.endswith(
        "; no .mcp.json server has that name: a project agent's server of that name starts "
        "at the agent's next launch"
    ), other
    await session.mcp.start()
    assert session.mcp.servers == {} and not marks["off"].exists()
