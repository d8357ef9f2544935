"""A session's MCP servers: the configured ones (`mcp_config.read_servers`), started once at the
session's first turn, and each named agent's own (its file's `mcpServers`), started with the
agent and stopped when it ends. Their tools (`tool.py`) are offered in name order after
the session's own tools, so the `tools` array is the same bytes from turn to turn while the
servers stay up (a fork sends its parent's exact list).

Starting never blocks the event loop: the files are read on a thread, each server connects in
its own task; the first turn waits for them at most `startup_timeout` seconds, and a server
that is not up by then is left out of that turn (it is offered from the turn after it comes
up). `aclose` stops every server (their processes end with the session).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal, TypedDict

from ..config.mcp_config import (
    AGENT_APPROVE_HINT,
    APPROVE_HINT,
    ServerSpec,
    agent_servers,
    approval,
    approve_server,
    read_config,
)
from ..permissions.rules import Rule
from ..tasks.registry import Task
from .client import McpConnection, State
from .tool import McpTool

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_STARTUP_TIMEOUT",
    "McpServers",
    "ServerRow",
    "covers",
    "describe",
]

log = logging.getLogger(__name__)

DEFAULT_STARTUP_TIMEOUT = 30.0
DEFAULT_CALL_TIMEOUT = 120.0
MAX_LINES = 200


def covers(pattern: str, name: str) -> bool:
    """Whether a tool-list entry (`mcp__server`, `mcp__server__*`, `mcp__server__tool`, or a
    plain tool name) names the tool `name`."""
    if not pattern.startswith("mcp__"):
        return pattern == name
    try:
        return Rule.parse(pattern).covers(name)
    except ValueError:
        return False


class ServerRow(TypedDict):
    """One server as `McpServers.summary` gives it (`%mcp`)."""

    name: str
    agent: str  # "" for the session's own
    source: str
    transport: Literal["stdio", "http"]
    state: State
    reason: str
    tools: list[str]
    skipped: list[str]


class McpServers:
    """The MCP servers of one session (see the module doc)."""

    def __init__(
        self,
        workdir: Path,
        home: Path,
        *,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
    ) -> None:
        self.workdir = workdir
        self.home = home
        self.startup_timeout = startup_timeout
        self.call_timeout = call_timeout
        self.servers: dict[str, McpConnection] = {}
        self.agents: dict[str, dict[str, McpConnection]] = {}  # agent id -> its own servers
        self.problems: list[str] = []  # configuration problems, one line each
        self.unapproved: dict[str, tuple[ServerSpec, str]] = {}
        """The project's (`.mcp.json`) servers not started: not approved, or disabled."""
        self.lines: list[str] = []  # failures during the session, one line each
        self.on_note: Callable[[str, str], bool] | None = None
        """Puts a line on an agent's card; whether it had one."""
        self._started: asyncio.Task[None] | None = None
        self._approved: dict[str, ServerSpec] = {}
        """Servers approved while the session runs (`approve`): started at the next use."""
        self._tools: dict[int, list[McpTool]] = {}
        self._closed = False
        self.trusted: bool | None = None
        """The session's own decision on trusting the folder (`Session(trusted=...)`; None:
        as `~/.claude.json` records it): until trusted, no project server starts."""

    # -- the session's servers ---------------------------------------------------------------

    async def start(self, wait: bool = True) -> None:
        """Read the configuration and start the servers (once); with `wait`, wait until each
        is up or failed (at most the startup timeout)."""
        if self._closed:
            return
        if self._started is None:
            self._started = asyncio.get_running_loop().create_task(self._start())
        if wait:
            await asyncio.shield(self._started)
        if self._approved and self._started.done():
            late = [self._add(spec) for spec in self._approved.values()]
            self._approved.clear()
            if wait:
                await self._ready(late)

    def _add(self, spec: ServerSpec) -> McpConnection:
        conn = self.servers[spec.name] = self._connection(spec)
        return conn

    async def approve(self, name: str) -> str:
        """Approve the project server `name` for this project (`approve_server`: the person's
        `.claude/settings.local.json`) and for this session: one the session left out starts
        at its next use (the next turn, agent or `%mcp`). One line says which; ConfigError
        (one line) when the file cannot take it."""
        said = await asyncio.to_thread(approve_server, self.workdir, name)
        if self._started is None or self._closed:
            return f"{said}; it starts at this session's next turn"
        await self.reconsider()
        if name in self.servers:
            return f"{said}; it runs in this session already"
        if name in self._approved:
            return f"{said}; it starts at this session's next turn"
        if name in self.unapproved:
            return f"{said}; it stays off: {self.unapproved[name][1]}"
        return (
            f"{said}; no .mcp.json server has that name: a project agent's server of that "
            "name starts at the agent's next launch"
        )

    async def reconsider(self) -> None:
        """Read the configuration again once the session's servers have started: a project
        server approved or trusted since (by the person's files, `%mcp approve`, `%trust
        yes`) starts at its next use (the next turn, agent or `%mcp`)."""
        if self._started is None or self._closed:
            return
        await asyncio.shield(self._started)
        config = await asyncio.to_thread(read_config, self.workdir, self.home, None, self.trusted)
        self.unapproved = config.unapproved
        for spec in config.servers.values():  # approved now, by this or the person's files
            if spec.name not in self.servers:
                self._approved[spec.name] = spec

    async def _start(self) -> None:
        try:
            config = await asyncio.to_thread(
                read_config, self.workdir, self.home, None, self.trusted
            )
            found, problems = config.servers, config.problems
            self.unapproved = config.unapproved
        except Exception as exc:  # never a reason for a turn to fail
            found, problems = {}, [f"the MCP configuration could not be read: {exc}"]
        self.problems.extend(problems)
        for line in problems:
            log.warning("MCP: %s", line)
        for name, spec in sorted(found.items()):
            self.servers[name] = self._connection(spec)
        await self._ready(self.servers.values())

    def _connection(self, spec: ServerSpec, owner: str = "") -> McpConnection:
        conn = McpConnection(
            spec,
            startup_timeout=self.startup_timeout,
            call_timeout=self.call_timeout,
            owner=owner,
        )
        conn.start()
        return conn

    async def _ready(self, conns: Iterable[McpConnection]) -> None:
        waiting = [c.ready(self.startup_timeout + 1) for c in conns]
        if waiting:
            await asyncio.gather(*waiting)
        for conn in conns:
            if conn.state == "failed":
                self.note("", f"MCP server '{conn.name}' failed to start: {conn.reason}")

    def _tools_of(self, conn: McpConnection) -> list[McpTool]:
        """The tools of a connected server (made once per connection: the same objects and
        so the same bytes every turn)."""
        if conn.state != "connected":
            return []
        made = self._tools.get(id(conn))
        if made is None:
            made = [McpTool(conn, info, self) for info in conn.tools]
            self._tools[id(conn)] = made
        return made

    def tools(self) -> list[McpTool]:
        """The session's servers' tools, in name order (connected servers only)."""
        return self._unique(c for c in self.servers.values())

    def _unique(self, conns: Iterable[McpConnection], taken: Iterable[str] = ()) -> list[McpTool]:
        """The tools of `conns` in name order; a name already taken (two servers whose names
        differ only in characters a tool name cannot hold) is left out."""
        seen = set(taken)
        out: list[McpTool] = []
        for tool in sorted((t for c in conns for t in self._tools_of(c)), key=lambda t: t.name):
            if tool.name in seen:
                continue
            seen.add(tool.name)
            out.append(tool)
        return out

    # -- an agent's servers ------------------------------------------------------------------

    async def start_agent(
        self,
        agent_id: str,
        entries: object,
        required: Iterable[str],
        source: str,
        *,
        trusted: bool = False,
    ) -> list[str]:
        """Start an agent's own servers and wait (bounded) for them and for the servers it
        requires. Returns notes for its card; raises ValueError (one line) when a required
        server is not up. Unless the agent file is `trusted` (the person's own), a server it
        defines inline starts only once approved, as a project's `.mcp.json` server."""
        await self.start()
        named, own, problems = agent_servers(
            entries, source, cwd=self.workdir, credentials=trusted is True
        )
        notes = list(problems)
        refused: dict[str, str] = {}
        if own and trusted is not True:
            why_not = await asyncio.to_thread(approval, self.workdir, self.home, self.trusted)
            for spec in own:
                why = why_not(spec.name)
                if why is not None:
                    hint = f": {AGENT_APPROVE_HINT}" if why == "not approved" else ""
                    refused[spec.name] = f"{why}{hint}"
                    line = f"MCP server '{spec.name}' of {source} not started: {why}{hint}"
                    notes.append(line)
                    self.lines.append(line)
            own = [spec for spec in own if spec.name not in refused]
        mine = {spec.name: self._connection(spec, agent_id) for spec in own}
        if mine:
            self.agents[agent_id] = mine
        for name in named:
            if name not in self.servers and name not in mine:
                notes.append(f"MCP server '{name}' is {self._absent(name)}")
        await self._ready(mine.values())
        for conn in mine.values():
            if conn.state != "connected":
                notes.append(f"MCP server '{conn.name}' failed: {conn.reason}")
        missing: list[str] = []
        for name in required:
            found = mine.get(name) or self.servers.get(name)
            if found is None and name in refused:
                missing.append(f"'{name}' ({refused[name]})")
            elif found is None:
                missing.append(f"'{name}' ({self._absent(name)})")
            elif not await found.ready(self.startup_timeout):
                missing.append(
                    f"'{name}' ({found.state}{': ' + found.reason if found.reason else ''})"
                )
        if missing:
            await self.stop_agent(agent_id)
            raise ValueError(
                "The agent needs MCP servers that are not available: " + ", ".join(missing)
            )
        return notes

    def _absent(self, name: str) -> str:
        """Why a server the session does not run is not there."""
        if name in self.unapproved:
            why = self.unapproved[name][1]
            return f"{why}: {APPROVE_HINT}" if why == "not approved" else why
        return "not configured"

    def agent_tools(self, agent_id: str, taken: Iterable[str] = ()) -> list[McpTool]:
        """The tools of an agent's own servers, in name order (names in `taken` left out)."""
        return self._unique(self.agents.get(agent_id, {}).values(), taken)

    def follow(self, jobs: set[asyncio.Task[object]], task: Task) -> None:
        """A task registry's listener: a named agent's own servers stop when it ends (the
        stop is one of `jobs`, which the session awaits when it closes)."""
        if task.done and task.id in self.agents:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop runs: aclose stops them
                return
            job = loop.create_task(self.stop_agent(task.id))
            jobs.add(job)
            job.add_done_callback(jobs.discard)

    async def stop_agent(self, agent_id: str) -> None:
        """Stop the agent's own servers (it ended)."""
        mine = self.agents.pop(agent_id, {})
        for conn in mine.values():
            self._tools.pop(id(conn), None)
        if mine:
            await asyncio.gather(*(c.close() for c in mine.values()))

    # -- lines -------------------------------------------------------------------------------

    def note(self, agent_id: str, line: str) -> None:
        """A failure the person should see: kept for `%mcp`, and on the agent's card (a
        worker's line goes there only, not into whichever cell runs now); the parent's is a
        logged warning (in a kernel: a line in its cell)."""
        self.lines.append(line)
        if len(self.lines) > MAX_LINES:
            del self.lines[: MAX_LINES // 10]
        carded = bool(agent_id) and self.on_note is not None and self.on_note(agent_id, line)
        log.log(logging.INFO if carded else logging.WARNING, "%s", line)

    def summary(self) -> list[ServerRow]:
        """Every server, the session's then the agents', with its state and tools."""
        rows: list[ServerRow] = []
        groups = [("", self.servers), *self.agents.items()]
        for owner, conns in groups:
            for conn in conns.values():
                rows.append(
                    {
                        "name": conn.name,
                        "agent": owner,
                        "source": conn.spec.source,
                        "transport": conn.spec.config.type,
                        "state": conn.state,
                        "reason": conn.reason,
                        "tools": sorted(t.name for t in self._tools_of(conn)),
                        "skipped": list(conn.skipped),
                    }
                )
        return rows

    async def aclose(self) -> None:
        """Stop every server; no new one starts afterwards."""
        self._closed = True
        if self._started is not None and not self._started.done():
            self._started.cancel()
            await asyncio.wait({self._started})
        conns = [*self.servers.values(), *(c for m in self.agents.values() for c in m.values())]
        self.agents.clear()
        self._tools.clear()
        if conns:
            await asyncio.gather(*(c.close() for c in conns))


def describe(servers: McpServers) -> str:
    """The text `%mcp` shows: each server with its state (a failed one with why), where it was
    configured and its tools; then the configuration problems and the recent failures."""
    rows = servers.summary()
    if not rows and not servers.problems and not servers.unapproved:
        return (
            "No MCP servers configured (.mcp.json in the work directory, mcpServers in "
            "~/.claude.json, or an agent file's mcpServers)."
        )
    lines = [f"MCP servers ({len(rows)}):"] if rows else []
    for row in rows:
        state = row["state"] + (f": {row['reason']}" if row["reason"] else "")
        owner = f", agent {row['agent']}" if row["agent"] else ""
        lines.append(f"  {row['name']}  {state}  ({row['transport']}, {row['source']}{owner})")
        if row["tools"]:
            lines.append("    tools: " + ", ".join(row["tools"]))
        lines.extend(f"    not offered: {why}" for why in row["skipped"])
    if servers.unapproved:
        lines.append(f"not started ({len(servers.unapproved)}):")
        for name, (spec, why) in sorted(servers.unapproved.items()):
            lines.append(f"  {name}  {why}  ({spec.config.type}, {spec.source})")
        if any(why == "not approved" for _, why in servers.unapproved.values()):
            lines.append(f"  ({APPROVE_HINT})")
    if servers.problems:
        lines.append(f"refused ({len(servers.problems)}):")
        lines.extend(f"  {p}" for p in servers.problems)
    if servers.lines:
        lines.append("recent failures:")
        lines.extend(f"  {x}" for x in servers.lines[-10:])
    return "\n".join(lines)
