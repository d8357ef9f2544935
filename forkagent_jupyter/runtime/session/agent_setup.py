"""What each agent of a session is given to run with: its `ToolContext` (workdir, namespace,
scrubbed environment) and its own `ToolServices` (its Python runner, web access, the MCP
servers), and its `AgentConfig`: the parent's, a fork's or a named agent's
(`workers/configs.py` derives the workers' from the parent's).

Everything is read when an agent starts or a parent turn begins (the session's options as
they stand, the tools and hooks the last turn set), so a setting or tool set changed in
between is the one used."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ...messages_api.usage import Usage
from ..config.agent_definitions import AgentDefinition
from ..config.hooks import Hooks
from ..executors import ComputePlane
from ..executors.base import CodeRunner
from ..loop.compaction import CompactPolicy
from ..loop.config import AgentConfig
from ..loop.thinking import with_budget
from ..mcp.servers import McpServers
from ..model.client import ModelClient
from ..model.retry import StreamRetry
from ..permissions.gate import PermissionGate, RuleBook
from ..secrets import scrubbed_env
from ..tools import builtin_tools, claude_code_tools
from ..tools.base import ToolContext, ToolSet
from ..tools.services import ToolServices
from ..tools.web import WebAccess
from ..workers.agent_tools import agent_tools
from ..workers.configs import fork_config, named_config
from ..workers.workers import AgentRun
from .options import SessionOptions
from .place import Place
from .turns.prompts import default_system_prompt

__all__ = ["AgentContexts", "ToolContexts", "WebUsage", "parent_tools"]

WebUsage = Callable[[str, Usage, float], None]
"""Where a WebSearch or WebFetch request's usage and cost are charged: (agent id, ...)."""


def parent_tools(o: SessionOptions) -> tuple[ToolSet, ToolSet, PermissionGate]:
    """The parent's tools (`tools`, or the built-in ones and the Agent tool that matches
    `forking`), the tools only a named agent whose file names them gets (Claude Code's
    MultiEdit, NotebookEdit, LS, TodoWrite: not in the parent's requests), and the
    permission gate over both."""
    tools = ToolSet([*builtin_tools(), *agent_tools(o.forking)] if o.tools is None else o.tools)
    named_tools = ToolSet(
        [t for t in claude_code_tools() if tools.get(t.name) is None] if o.tools is None else []
    )
    gate = PermissionGate(
        mode=o.permission_mode,
        policy=o.permission_policy,
        rules=RuleBook(
            tools=frozenset(tools.names() + named_tools.names()),
            home=Path(o.home) if o.home is not None else Path.home(),
        ),
        allow=list(o.allow),
        deny=list(o.deny),
        ask=list(o.ask),
        approval_timeout=o.approval_timeout,
    )
    return tools, named_tools, gate


class ToolContexts:
    """Makes each agent's `ToolContext` and its own `ToolServices`: the session's services
    with the agent's Python runner (from the compute plane), its web access and the MCP
    servers."""

    def __init__(
        self,
        *,
        workdir: Path,
        compute: ComputePlane,
        services: ToolServices,
        mcp: McpServers,
        web: Callable[[], WebAccess],
    ) -> None:
        self.workdir = workdir
        self.compute = compute
        self.base_services = services
        """The session's services; each agent gets a copy with its own runner and web."""
        self.mcp = mcp
        self.web = web
        """How WebSearch and WebFetch reach the model as the session stands (their own
        requests, paced and budgeted like every other; their cost is the calling agent's)."""

    def context(self, agent_id: str, workdir: Path | None = None) -> ToolContext:
        return ToolContext(
            workdir=workdir or self.workdir,
            namespace=self.compute.namespace,
            agent_id=agent_id,
            env=scrubbed_env(),
            services=self.services(self.compute.main),
        )

    def worker_services(self, agent_id: str, namespace: str | None) -> ToolServices:
        return self.services(self.compute.runner_for(agent_id, namespace))

    def services(self, runner: CodeRunner) -> ToolServices:
        """One agent's own services: the session's, with `runner` for its Python code."""
        return replace(self.base_services, python_runner=runner, web=self.web(), mcp=self.mcp)


class AgentContexts:
    """Builds the configs of one session's agents. It keeps what they are made of that a
    parent turn replaces: the parent's `tools` (the MCP tools joined) and the settings
    files' `hooks` (read again); with them, the tools only a named agent whose file names
    them gets (`named_tools`) and the permission `gate` over both. The retry and compaction
    policies are the session's, shared by every agent's config (changed live)."""

    def __init__(
        self,
        *,
        settings: Callable[[], SessionOptions],
        model: Callable[[], ModelClient],
        tool_contexts: ToolContexts,
        place: Place,
        stream_retry: StreamRetry,
        compaction: CompactPolicy,
    ) -> None:
        self.settings = settings
        """The session's options as they stand (changed live by `configure`)."""
        self.model = model
        """The model client of the session's agents as it stands: paced and budgeted."""
        self.tool_contexts = tool_contexts
        self.stream_retry = stream_retry
        self.compaction = compaction
        o = settings()
        self.tools, self.named_tools, self.gate = parent_tools(o)
        self.hooks = Hooks([], workdir=place.workdir, session_id=place.session_id)
        """The settings files' hooks (config/hooks.py), read again at each parent turn."""
        self.default_prompt = default_system_prompt(place.workdir)
        """The parent's system prompt when the options give none."""

    @property
    def system_prompt(self) -> str:
        return self.settings().system_prompt or self.default_prompt

    def parent_config(self, main: AgentRun | None = None) -> AgentConfig:
        """The parent's config as the session's settings stand now (`main`: the parent's
        run, which its tools act for; none while it is being made)."""
        o = self.settings()
        ctx = self.tool_contexts.context("main")
        config = AgentConfig(
            client=self.model(),
            model=o.model,
            system=[{"type": "text", "text": self.system_prompt}],
            tools=self.tools,
            gate=self.gate,
            ctx=ctx,
            max_turns=o.max_turns,
            max_tokens=with_budget(o.max_tokens, o.thinking),
            thinking=o.thinking,
            cache_ttl=o.cache_ttl,
            stream_retry=self.stream_retry,
            compaction=self.compaction,
            hooks=self.hooks,
        )
        if main is not None:
            ctx.services.agent_run = main
        return config

    def fork_config(
        self, parent: AgentRun, agent_id: str, namespace: str | None = None
    ) -> AgentConfig:
        """A fork's config (`agent_configs.fork_config`): its code runs in a snapshot of the
        namespace taken now (or, `shared`, in the namespace)."""
        return fork_config(
            parent.config, agent_id, self.tool_contexts.worker_services(agent_id, namespace)
        )

    def named_config(
        self, parent: AgentRun, definition: AgentDefinition, agent_id: str, model: str | None
    ) -> AgentConfig:
        o = self.settings()
        return named_config(
            parent.config,
            definition,
            agent_id,
            model,
            tools=self.tools,
            named_tools=self.named_tools,
            own=self.tool_contexts.mcp.agent_tools(agent_id, taken=self.tools.names()),
            services=self.tool_contexts.worker_services(agent_id, definition.namespace),
            system_prompt=self.system_prompt,
            max_turns=o.max_turns,
            max_tokens=o.max_tokens,
            hooks=self.hooks,
        )
