"""How a worker's `AgentConfig` is derived from its parent's: a fork's (the parent's exact
prompt, tools, model and thinking) and a named agent's (its definition's tools, model,
prompt, permission mode, thinking and hooks); and the parent's tool set with the MCP tools
connected now."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..config.agent_definitions import AgentDefinition, resolve_model
from ..config.hooks import Hooks, parse_hooks
from ..config.skills_and_memory import system_text
from ..loop.config import AgentConfig
from ..loop.thinking import thinking_param, with_budget
from ..mcp.servers import covers
from ..mcp.tool import McpTool
from ..tools.base import Tool, ToolSet
from ..tools.services import ToolServices

__all__ = ["agent_hooks", "fork_config", "named_config", "with_mcp_tools"]


def fork_config(base: AgentConfig, agent_id: str, services: ToolServices) -> AgentConfig:
    """A fork inherits the parent's exact prompt, tools, model and thinking settings; only
    its permission gate, agent id and services (its Python runner) are its own."""
    return replace(
        base,
        gate=base.gate.for_worker(agent_id),
        ctx=replace(base.ctx, agent_id=agent_id, services=services),
    )


def named_config(
    base: AgentConfig,
    definition: AgentDefinition,
    agent_id: str,
    model: str | None,
    *,
    tools: ToolSet,
    named_tools: ToolSet,
    own: Sequence[Tool[Any]],
    services: ToolServices,
    system_prompt: str,
    max_turns: int,
    max_tokens: int,
    hooks: Hooks,
) -> AgentConfig:
    """A named agent's config: `tools` (the parent's), `named_tools` (those only a file that
    names them gets) and `own` (its own MCP servers' tools) filtered by its definition."""
    available = [*tools, *named_tools, *own]
    names = (
        definition.tools
        if definition.tools is not None and not definition.every_tool
        else tools.names()
    )
    wanted = {t.name for t in available if any(covers(n, t.name) for n in names)}
    wanted |= {t.name for t in own}  # its own servers' tools: its file asked for them
    wanted -= {
        t.name for t in available if any(covers(n, t.name) for n in definition.disallowedTools)
    }
    if definition.tools is None:  # no list: all but the agent tools (`*`: those too)
        wanted -= {"Agent", "SendMessage", "TaskStop", "TaskOutput"}
    chosen = model or definition.model
    thinking = thinking_param(definition.thinking)
    return replace(
        base,
        model=resolve_model(chosen, base.model, definition.permissionMode) or base.model,
        system=[{"type": "text", "text": system_text(definition, system_prompt)}],
        tools=ToolSet(t for t in available if t.name in wanted),
        # no permissionMode: acceptEdits in a default session, as in the reference
        gate=base.gate.for_worker(agent_id, mode=definition.permissionMode, unset="acceptEdits"),
        ctx=replace(base.ctx, agent_id=agent_id, services=services),
        max_turns=definition.maxTurns or max_turns,
        # thinking only where the definition asks for it (the reference turns it off for
        # agents that are not forks)
        max_tokens=with_budget(max_tokens, thinking),
        thinking=thinking,
        effort=definition.effort,
        hooks=agent_hooks(hooks, definition),
    )


def agent_hooks(hooks: Hooks, definition: AgentDefinition) -> Hooks:
    """The settings files' hooks plus those of the agent's file, for its run only (an
    agent it starts does not get them); a project agent file's only as far as approved."""
    if definition.hooks is None:
        return hooks
    own, _refused = parse_hooks(definition.hooks, str(definition.path or definition.name))
    # a project's agent file is someone else's: its commands run once the person approved them
    return hooks.scoped(own, trusted=definition.source in ("user", "built-in"))


def with_mcp_tools(tools: ToolSet, wanted: Sequence[Tool[Any]]) -> ToolSet | None:
    """The MCP tools connected now (`wanted`), after the session's own tools in name order;
    None when `tools` already is that set (a fork of an earlier turn keeps the set it was
    forked with, so its prefix stays its parent's)."""
    own = [t for t in tools if not isinstance(t, McpTool)]
    if [t.name for t in tools] == [*(t.name for t in own), *(t.name for t in wanted)]:
        return None
    names = {t.name for t in own}
    return ToolSet([*own, *(t for t in wanted if t.name not in names)])
