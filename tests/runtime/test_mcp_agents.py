"""An agent file's own MCP servers (started with the agent, stopped when it ends) and its
`requiredMcpServers` (the Agent call waits for them, or fails in one line). The model is the
strict emulator's scripted brain; the server is a real MCPServer (FastMCP) over stdio."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain
from forkagent_jupyter.runtime.mcp.servers import McpServers

from .helpers import trust_folder
from .test_mcp import DEMO, approve, gone, mcp_json, stdio, tool_names

pytestmark = pytest.mark.anyio


def agent_file(folder: Path, name: str, front: str) -> None:
    agents = folder / ".claude" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / f"{name}.md").write_text(
        f"---\nname: {name}\ndescription: Uses MCP\n{front}---\nGo.\n"
    )


def agent_bodies(emulator: Any) -> list[dict[str, Any]]:
    """The requests of the agent (its conversation starts with the Agent call's prompt)."""
    out = []
    for record in emulator.api_requests():
        first = record.body["messages"][0]["content"]
        if any("do the work" in str(b.get("text", "")) for b in first):
            out.append(record.body)
    return out


def start(agent: str, word: str) -> ScriptedBrain:
    """A brain whose parent starts `agent` when its prompt holds `word`."""
    brain = ScriptedBrain(when_empty=OfflineBrain())
    use = {"description": "work", "prompt": "do the work", "subagent_type": agent}
    brain.when_last_user_contains(
        word, Reply(({"type": "tool_use", "name": "Agent", "input": use},)), times=1
    )
    return brain


async def test_an_agents_own_server_runs_with_it_and_stops_when_it_ends(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    server = json.dumps({"mine": stdio(DEMO, PID_FILE=str(pids))})
    agent_file(tmp_path, "counter", f"tools: Read\nmcpServers:\n  - {server}\n")
    approve(tmp_path, enabledMcpjsonServers=["mine"])  # a project agent's server: approved
    trust_folder(tmp_path, tmp_path / "home")  # in a folder the person trusts
    brain = start("counter", "COUNT")
    brain.when_last_user_contains(
        "do the work", Reply.tool_use("mcp__mine__add", {"a": 20, "b": 22}), times=1
    )
    emulator.brain = brain
    session = make_session(auto_respond=False, forking=False, permission_mode="bypassPermissions")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the file loads without a warning
        turn = await session.ask("COUNT them")
    [agent_call] = turn.tool_calls
    assert not agent_call.is_error, agent_call.result
    [task] = session.tasks
    assert task.status == "completed"
    requests = emulator.api_requests()
    agent_requests = agent_bodies(emulator)
    agent_tools = tool_names(agent_requests[0])
    assert agent_tools[-4:] == [
        "mcp__mine__add",
        "mcp__mine__crash",
        "mcp__mine__hang",
        "mcp__mine__shout",
    ]
    assert "Read" in agent_tools and "Bash" not in agent_tools  # its own list, plus its servers
    assert "**mcp__mine__add** returned:\n```\n42\n```" in (task.result or "")
    parent_tools = tool_names(requests[0].body)
    assert not any(n.startswith("mcp__") for n in parent_tools)  # the agent's, not the parent's
    [pid] = [int(p) for p in pids.read_text().split()]
    assert await gone(pid), "the agent's MCP server still runs after the agent ended"
    assert session.mcp.summary() == []


async def test_required_servers_that_do_not_come_up_fail_the_agent_call_in_one_line(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    missing = json.dumps({"broken": {"command": str(tmp_path / "no-such-program")}})
    agent_file(tmp_path, "needy", "requiredMcpServers: [absent]\n")
    agent_file(tmp_path, "fragile", f"mcpServers:\n  - {missing}\nrequiredMcpServers: [broken]\n")
    approve(tmp_path, enabledMcpjsonServers=["broken"])
    trust_folder(tmp_path, tmp_path / "home")  # in a folder the person trusts
    brain = start("needy", "NEEDY")
    use = {"description": "work", "prompt": "do the work", "subagent_type": "fragile"}
    brain.when_last_user_contains(
        "FRAGILE", Reply(({"type": "tool_use", "name": "Agent", "input": use},)), times=1
    )
    emulator.brain = brain
    session = make_session(auto_respond=False, forking=False, mcp_startup_timeout=10)
    [needy] = (await session.ask("NEEDY")).tool_calls
    assert needy.is_error and needy.result == (
        "Agent 'needy' not started: The agent needs MCP servers that are not available: "
        "'absent' (not configured)"
    )
    [fragile] = (await session.ask("FRAGILE")).tool_calls
    assert fragile.is_error and "\n" not in fragile.result
    assert fragile.result.startswith(
        "Agent 'fragile' not started: The agent needs MCP servers that are not available: "
        "'broken' (failed: "
    )
    assert "no-such-program" in fragile.result
    assert session.tasks == [] and session.mcp.agents == {}  # nothing started, nothing left


async def test_a_server_failing_under_an_agent_is_a_line_on_its_card(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    mcp_json(tmp_path, demo=stdio(DEMO))
    agent_file(tmp_path, "breaker", "tools: mcp__demo\nmcpServers: [demo]\n")
    brain = start("breaker", "BREAK")
    brain.when_last_user_contains("do the work", Reply.tool_use("mcp__demo__crash", {}), times=1)
    emulator.brain = brain
    session = make_session(auto_respond=False, forking=False, permission_mode="bypassPermissions")
    await session.ask("BREAK it")
    [task] = session.tasks
    assert task.status == "completed"
    assert "MCP server 'demo' failed during crash" in (task.result or "")  # the model saw it
    [line] = [n for n in task.notes if "MCP server" in n]
    assert line.startswith("MCP server 'demo' failed during crash: the server closed")
    agent_body = agent_bodies(emulator)[0]
    assert tool_names(agent_body) == [
        "mcp__demo__add",
        "mcp__demo__crash",
        "mcp__demo__hang",
        "mcp__demo__shout",
    ]  # `tools: mcp__demo` names every tool of the server, and nothing else


async def test_a_required_server_is_checked_itself_not_the_agents_last_own_server(
    tmp_path: Path,
) -> None:
    """A configured server that failed is missing although the agent's own server is up; a
    configured server that is up is enough for an agent with no server of its own."""
    mcp_json(tmp_path, broken={"command": str(tmp_path / "no-such-program")}, demo=stdio(DEMO))
    servers = McpServers(tmp_path, tmp_path / "home", startup_timeout=20)
    try:
        own = [{"mine": stdio(DEMO)}]
        with pytest.raises(ValueError) as failed:
            await servers.start_agent("a1", own, ["broken"], "agent file")
        assert str(failed.value).startswith(
            "The agent needs MCP servers that are not available: 'broken' (failed: "
        )
        assert "a1" not in servers.agents
        assert await servers.start_agent("a2", None, ["demo"], "agent file") == []
    finally:
        await servers.aclose()
