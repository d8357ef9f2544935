"""What every parent turn starts with: the settings files read again (their rules, default
mode, additional directories and hooks applied, as far as the folder's trust lets them), the
MCP servers started and their tools joined to the parent's, a line when the folder is not
trusted and asks for something, and the named agents as the model is told them."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ...config.agent_definitions import agent_listing, scan_agents
from ...config.hooks import Hooks
from ...config.settings import SettingsRead, hook_trust, read_settings
from ...config.trust import notice
from ...config.trust_asks import folder_asks
from ...mcp.servers import McpServers
from ...workers.configs import with_mcp_tools
from ..agent_setup import AgentContexts
from ..place import Place

__all__ = ["TurnSetup"]

log = logging.getLogger(__name__)


class TurnSetup:
    """Reads the folder's files for the parent's turns and applies them to what its agents
    are made of (`contexts`); starts the MCP servers (`mcp`)."""

    def __init__(self, *, contexts: AgentContexts, mcp: McpServers, place: Place) -> None:
        self.contexts = contexts
        """The permission gate, the hooks and the parent's tools this replaces or changes; the
        session's options (`trusted`: whether the session was told the folder is trusted,
        None: as `~/.claude.json` says, read at each use: `configure` may change it)."""
        self.mcp = mcp
        self.place = place
        self.read: SettingsRead | None = None  # the settings files as the last turn read them
        self.trust_said: str | None = None  # the last line said of a folder not trusted

    async def prepare(self) -> None:
        """Before a parent turn: the settings files read, the MCP servers started, the trust
        line said, the MCP tools joined."""
        await self.load_settings()
        await self.mcp.start()
        await self.say_trust()
        self.sync_mcp_tools()

    async def load_settings(self) -> dict[str, Any]:
        """Read the settings files again (on a thread) and apply their rules, default mode
        and additional directories (`config/settings.py`), as far as the folder's trust lets
        them; the rules in force, as `PermissionGate.summary` gives them. Done at the start of
        every parent turn."""
        contexts, place = self.contexts, self.place
        trusted = contexts.settings().trusted
        read = await asyncio.to_thread(read_settings, place.workdir, place.home, trusted)
        if read.trusted and self.read is not None and not self.read.trusted:
            await self.mcp.reconsider()  # trusted since: its approved servers start now
        self.read = read
        contexts.gate.apply_settings(read)
        contexts.hooks = Hooks(
            read.hooks,
            workdir=place.workdir,
            session_id=place.session_id,
            lines=contexts.hooks.lines,
            trust=hook_trust(read),
            said=contexts.hooks.said,
        )
        for entry in read.unapproved_hooks:  # the project's, not approved: said once each
            contexts.hooks.not_approved(entry)
        return contexts.gate.summary()

    async def say_trust(self) -> None:
        """In a folder the person does not trust whose files ask for something: one line
        saying what and how to trust it (a logged warning: in a kernel, a line in the cell),
        said again only when it changes."""
        read = self.read
        if read is None or read.trusted or read.trust is None:
            return
        asks = await asyncio.to_thread(folder_asks, self.place.workdir, self.place.home, read)
        line = notice(read.trust, asks)
        if line is not None and line != self.trust_said:
            log.warning("%s", line)
        self.trust_said = line

    def sync_mcp_tools(self) -> None:
        """The MCP tools connected now join the parent's tools (`with_mcp_tools`)."""
        tools = with_mcp_tools(self.contexts.tools, self.mcp.tools())
        if tools is not None:
            self.contexts.tools = tools

    def agent_listing(self) -> str | None:
        """The named agents as the model is told them (None without the Agent tool). Files
        that do not load are left out here (each said once); starting one reports its
        error. Tools an agent's file names that it does not get here are said."""
        contexts = self.contexts
        if contexts.tools.get("Agent") is None:
            return None
        available = [*contexts.tools.names(), *contexts.named_tools.names()]
        scan = scan_agents(self.place.workdir, self.place.home)
        return agent_listing(scan.agents, available)
