"""What each agent of a session is given to run with: its `ToolContext` (workdir, namespace,
scrubbed environment) and its own `ToolServices` (its Python runner, web access, the MCP
servers), and its `AgentConfig`: the parent's, a fork's or a named agent's
(`workers/configs.py` derives the workers' from the parent's).

Everything is read from the session when an agent starts or a parent turn begins, so a
setting or tool set changed in between is the one used."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from ...messages_api.usage import Usage
from ..config.agent_definitions import AgentDefinition
from ..config.hooks import Hooks
from ..executors import ComputePlane
from ..executors.base import CodeRunner
from ..loop.compaction import CompactPolicy
from ..loop.config import AgentConfig
from ..loop.thinking import with_budget
from ..mcp.servers import McpServers
from ..model.budget import BudgetedModel, CostBudget
from ..model.client import CacheTTL, ModelClient
from ..model.pacer import PacedModel, RateLimits
from ..model.retry import StreamRetry
from ..permissions.gate import PermissionGate, RuleBook
from ..secrets import scrubbed_env
from ..tools import builtin_tools, claude_code_tools
from ..tools.base import ToolContext, ToolSet
from ..tools.services import ToolServices
from ..tools.web import WebAccess
from ..workers.agent_tools import agent_tools
from ..workers.configs import fork_config, named_config
from ..workers.workers import AgentRun, Workers
from .options import SessionOptions

__all__ = ["AgentContexts", "ContextHost", "WebUsage", "parent_tools"]

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


class ContextHost(Protocol):
    """What the contexts read of their session (`Session` is one), at the time of use."""

    workdir: Path
    namespace: dict[str, Any]
    compute: ComputePlane
    services: ToolServices
    workers: Workers
    mcp: McpServers
    client: ModelClient
    rate_limits: RateLimits
    budget: CostBudget
    tools: ToolSet
    named_tools: ToolSet
    gate: PermissionGate
    stream_retry: StreamRetry
    compaction: CompactPolicy
    hooks: Hooks
    main: AgentRun

    @property
    def model(self) -> str: ...
    @property
    def system_prompt(self) -> str: ...
    @property
    def max_turns(self) -> int: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def thinking(self) -> dict[str, Any] | None: ...
    @property
    def cache_ttl(self) -> CacheTTL: ...


class AgentContexts:
    """Builds the tool contexts and configs of one session's agents."""

    def __init__(self, host: ContextHost, web_usage: WebUsage) -> None:
        self.host = host
        self.web_usage = web_usage

    def context(self, agent_id: str, workdir: Path | None = None) -> ToolContext:
        host = self.host
        return ToolContext(
            workdir=workdir or host.workdir,
            namespace=host.namespace,
            agent_id=agent_id,
            env=scrubbed_env(),
            services=self.services(host.compute.main),
        )

    def worker_services(self, agent_id: str, namespace: str | None) -> ToolServices:
        return self.services(self.host.compute.runner_for(agent_id, namespace))

    def services(self, runner: CodeRunner) -> ToolServices:
        """One agent's own services: the session's, with `runner` for its Python code."""
        host = self.host
        return replace(
            host.services,
            workers=host.workers,
            python_runner=runner,
            web=self.web_access(),
            mcp=host.mcp,
        )

    def web_access(self) -> WebAccess:
        """How WebSearch and WebFetch reach the model (their own requests, paced and
        budgeted like every other; their cost is the calling agent's)."""
        host = self.host
        client = BudgetedModel(PacedModel(host.client, host.rate_limits), host.budget)
        return WebAccess(client, host.model, self.web_usage)

    def parent_config(self) -> AgentConfig:
        """The parent's config as the session's settings stand now."""
        host = self.host
        ctx = self.context("main")
        config = AgentConfig(
            client=BudgetedModel(PacedModel(host.client, host.rate_limits), host.budget),
            model=host.model,
            system=[{"type": "text", "text": host.system_prompt}],
            tools=host.tools,
            gate=host.gate,
            ctx=ctx,
            max_turns=host.max_turns,
            max_tokens=with_budget(host.max_tokens, host.thinking),
            thinking=host.thinking,
            cache_ttl=host.cache_ttl,
            stream_retry=host.stream_retry,
            compaction=host.compaction,
            hooks=host.hooks,
        )
        if hasattr(host, "main"):  # not while the parent's own run is being made
            ctx.services.agent_run = host.main
        return config

    def fork_config(
        self, parent: AgentRun, agent_id: str, namespace: str | None = None
    ) -> AgentConfig:
        """A fork's config (`agent_configs.fork_config`): its code runs in a snapshot of the
        namespace taken now (or, `shared`, in the namespace)."""
        return fork_config(parent.config, agent_id, self.worker_services(agent_id, namespace))

    def named_config(
        self, parent: AgentRun, definition: AgentDefinition, agent_id: str, model: str | None
    ) -> AgentConfig:
        host = self.host
        return named_config(
            parent.config,
            definition,
            agent_id,
            model,
            tools=host.tools,
            named_tools=host.named_tools,
            own=host.mcp.agent_tools(agent_id, taken=host.tools.names()),
            services=self.worker_services(agent_id, definition.namespace),
            system_prompt=host.system_prompt,
            max_turns=host.max_turns,
            max_tokens=host.max_tokens,
            hooks=host.hooks,
        )
