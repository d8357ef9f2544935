"""Settings changed while a session runs: `configure` checks each change (`SessionOptions`)
and pushes it to the part of the session that holds it (`apply_setting`); a refused value
leaves that setting and the ones after it as they were. A setting read where it is used
needs nothing here."""

from __future__ import annotations

from typing import Any, Protocol

from ..executors import ComputePlane
from ..loop.compaction import CompactPolicy
from ..model.retry import StreamRetry
from ..permissions.gate import PermissionGate
from ..tools.base import ToolSet
from ..workers.agent_tools import AgentTool, agent_tool
from ..workers.workers import Workers
from .compute_settings import COMPUTE_SETTINGS, apply_compute
from .options import SessionOptions
from .spending import Spending

__all__ = ["SettingHolders", "apply_setting", "change_settings"]


class SettingHolders(Protocol):
    """The parts of a session a live setting is pushed to (`Session` has them)."""

    options: SessionOptions
    gate: PermissionGate
    workers: Workers
    tools: ToolSet
    stream_retry: StreamRetry
    compaction: CompactPolicy
    compute: ComputePlane
    spending: Spending


def change_settings(
    host: SettingHolders, options: SessionOptions | None, changes: dict[str, Any]
) -> None:
    """`Session.configure`: `changes` by name, after the fields of `options` that differ."""
    if options is not None:
        given = {n: v for n, v in options if v != getattr(host.options, n)}
        changes = {**given, **changes}
    for name, value in changes.items():
        before = host.options
        host.options = before.changed(**{name: value})
        if getattr(host.options, name) == getattr(before, name) and name != "permission_mode":
            continue  # the mode in force may be the settings files' (`defaultMode`)
        try:
            apply_setting(host, name)
        except Exception:
            host.options = before
            raise


def apply_setting(host: SettingHolders, name: str) -> None:
    """A changed setting, pushed to the part of the session that holds it."""
    o = host.options
    if name == "permission_mode":
        host.gate.mode = o.permission_mode
    elif name == "approval_timeout":
        host.gate.approval_timeout = o.approval_timeout
    elif name == "forking":
        host.workers.forking = o.forking
        current = host.tools.get("Agent")
        if isinstance(current, AgentTool) and current.forking != o.forking:
            host.tools.replace(agent_tool(o.forking))
    elif name == "auto_background_after":
        host.workers.auto_background_after = o.auto_background_after
    elif name == "stream_retries":
        host.stream_retry.set_retries(o.stream_retries)
    elif name == "stream_retry_delay":
        host.stream_retry.base_delay = o.stream_retry_delay
    elif name in ("compact_at", "compact_keep_turns", "context_window"):
        host.compaction.compact_at = o.compact_at
        host.compaction.keep_turns = o.compact_keep_turns
        host.compaction.window = o.context_window
    elif name == "max_cost_usd":
        host.spending.budget_changed(o.max_cost_usd)
    elif name in COMPUTE_SETTINGS:
        apply_compute(o, host.compute, name)
