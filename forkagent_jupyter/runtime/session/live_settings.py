"""Settings changed while a session runs: `Session.configure` checks each change
(`SessionOptions`) and `LiveSettings.apply` pushes it to the part of the session that holds
it; a refused value leaves that setting and the ones after it as they were. A setting read
where it is used needs nothing here."""

from __future__ import annotations

from ..executors import ComputePlane
from ..mcp.servers import McpServers
from ..workers.agent_tools import AgentTool, agent_tool
from .agent_setup import AgentContexts
from .compute_settings import COMPUTE_SETTINGS, apply_compute
from .options import SessionOptions
from .spending import Spending

__all__ = ["LiveSettings", "requested_changes"]


def requested_changes(
    current: SessionOptions, options: SessionOptions | None, changes: dict[str, object]
) -> dict[str, object]:
    """What `configure(options, **changes)` asks for: the fields of `options` that differ
    from `current`, then `changes` by name."""
    if options is None:
        return changes
    given = {n: v for n, v in options if v != getattr(current, n)}
    return {**given, **changes}


class LiveSettings:
    """The parts of a session a live setting is pushed to."""

    def __init__(
        self,
        *,
        contexts: AgentContexts,
        compute: ComputePlane,
        spending: Spending,
        mcp: McpServers,
    ) -> None:
        self.contexts = contexts
        """The permission gate, the parent's tools (the Agent tool follows `forking`) and the
        retry and compaction policies every agent's config shares."""
        self.compute = compute
        self.spending = spending
        """The budget's enforcement (`max_cost_usd`)."""
        self.mcp = mcp
        """The MCP servers: a project's start only in a trusted folder (`trusted`)."""

    def apply(self, o: SessionOptions, name: str) -> None:
        """The setting `name` changed (the options are now `o`): pushed to the part of the
        session that holds it."""
        gate = self.contexts.gate
        if name == "permission_mode":
            gate.mode = o.permission_mode
        elif name == "approval_timeout":
            gate.approval_timeout = o.approval_timeout
        elif name == "forking":  # the workers read it where they use it
            tools = self.contexts.tools
            current = tools.get("Agent")
            if isinstance(current, AgentTool) and current.forking != o.forking:
                tools.replace(agent_tool(o.forking))
        elif name == "stream_retries":
            self.contexts.stream_retry.set_retries(o.stream_retries)
        elif name == "stream_retry_delay":
            self.contexts.stream_retry.base_delay = o.stream_retry_delay
        elif name in ("compact_at", "compact_keep_turns", "context_window"):
            self.contexts.compaction.compact_at = o.compact_at
            self.contexts.compaction.keep_turns = o.compact_keep_turns
            self.contexts.compaction.window = o.context_window
        elif name == "trusted":  # the settings files are read with it at every turn
            self.mcp.trusted = o.trusted
        elif name == "max_cost_usd":
            self.spending.budget_changed(o.max_cost_usd)
        elif name in COMPUTE_SETTINGS:
            apply_compute(o, self.compute, name)
