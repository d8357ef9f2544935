"""What a session lends the tools of one agent: one typed field per service.

A tool that needs a service it is not lent (a bare `ToolContext` in a script, a session
without background agents) says so as its error. Each agent has its own `ToolServices`: the
session makes one per agent from its own, the agent's run and Python runner filled in.

The tools sit below the parts that lend these services (the session, its workers, its MCP
servers, the model client for the web tools), so what a tool calls on those is declared here
as a protocol. `workers` and `agent_run` are the session's own `Workers` and the agent's
`AgentRun`: their protocols name what TodoWrite uses, and the Agent tools (in workers/, above
both) check that they are those classes and use them whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ...messages_api.shapes import JSON
from ..events import ModelResponse
from ..executors.base import CodeRunner
from ..tasks.registry import Task, TaskRegistry, Todo
from .shells import ShellRegistry

__all__ = [
    "AgentServers",
    "ReadGuard",
    "RunningAgent",
    "SessionAgents",
    "ToolServices",
    "WebModel",
]

ReadGuard = Callable[[Path], bool]
"""Whether Glob and Grep may show a file (a real path): False where a deny or ask rule for
a reading tool matches it."""


class WebModel(Protocol):
    """How WebSearch and WebFetch reach the model (`web.WebAccess`)."""

    async def ask(self, agent_id: str, tool: dict[str, JSON], text: str) -> ModelResponse: ...


class SessionAgents(Protocol):
    """The session's `Workers`, as the tools below them reach them: its task registry."""

    @property
    def registry(self) -> TaskRegistry: ...


class RunningAgent(Protocol):
    """The calling agent's own `AgentRun`, as the tools below it reach it: its todo list
    and its task (None for the parent conversation)."""

    todos: list[Todo]

    @property
    def task(self) -> Task | None: ...


class AgentServers(Protocol):
    """A session's MCP servers, as the Agent tool starts and stops an agent's own
    (`mcp_servers.McpServers`)."""

    async def start_agent(
        self,
        agent_id: str,
        entries: Sequence[str | Mapping[str, object]] | None,
        required: Iterable[str],
        source: str,
        *,
        trusted: bool = False,
    ) -> list[str]: ...

    async def stop_agent(self, agent_id: str) -> None: ...


@dataclass
class ToolServices:
    workers: SessionAgents | None = None
    """The session's `Workers` (Agent, SendMessage, TaskStop, TaskOutput, TodoWrite)."""
    agent_run: RunningAgent | None = None
    """The calling agent's own `AgentRun` (set when the run starts)."""
    python_runner: CodeRunner | None = None
    """Where the agent's Python code runs (the Python tool)."""
    web: WebModel | None = None
    """How WebSearch and WebFetch reach the model."""
    mcp: AgentServers | None = None
    """The session's MCP servers (an agent's own are stopped with it)."""
    shells: ShellRegistry | None = None
    """Background Bash commands, one registry per session."""
    shell_groups: set[int] | None = None
    """The process groups of the agent's Bash calls (killed when the agent is stopped)."""
    read_guard: ReadGuard | None = None
    """Set by the permission gate before a reading tool's call (the rules in force)."""
