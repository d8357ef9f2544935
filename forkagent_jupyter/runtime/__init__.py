"""The agent runtime: asyncio and pydantic, no Jupyter. This module is its facade.

What a program (and the kernel) uses of the runtime is named here; the packages below are its
rooms, each saying in its own `__init__` what it holds and what it may import:

    errors, secrets, events, history, output   leaves, imported everywhere
    executors/    where tool code runs: a thread, a process snapshot (sandboxed), Dask
    tasks/        one task vocabulary, one state machine, one notification format
    model/        talking to the model: SDK client and backends, streams, retries, the pacer
    transcripts/  transcripts on disk and read back; the timeline
    config/       Claude Code's files read as Claude Code reads them
    tools/        leaf tools, one module per tool family
    permissions/  the gate, modes, policies, the rule language, shell syntax
    loop/         one turn of one conversation: the tool-use loop, compaction, forks
    mcp/          MCP servers: lifecycle, client, the MCP tool
    workers/      agents in the background: launch, run, message, resume; the Agent tool
    batch/        fan-out through the Message Batches API
    session/      the public API (`Session`) and what only it uses

Each imports only from the rooms above it in this list (tests/test_layering.py).
Names are loaded when first used, so importing one room does not load them all.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .batch.fan_out import BatchRun, in_batch, resume_batches
    from .config.commands import CommandScan
    from .config.commands import describe as describe_commands
    from .config.hook_approval import approve as approve_hooks
    from .config.hook_approval import describe as describe_hooks
    from .config.hook_approval import waiting as hooks_waiting
    from .config.settings import describe as describe_settings
    from .config.trust import FolderTrust, folder_trust, record_trust
    from .errors import (
        AgentError,
        ConfigError,
        ModelError,
        RunEndedError,
        StreamInterruptedError,
        UsageError,
    )
    from .events import (
        Compacted,
        LoopEvent,
        Retrying,
        Stop,
        StreamedText,
        TextDelta,
        ToolResult,
        ToolUse,
        UsageReport,
    )
    from .executors import ClearOutput, Display, Output, PullError, StreamText
    from .executors.cluster.shipping import DaskClient
    from .executors.confinement.sandbox import guard_kernel
    from .executors.memory import (
        Held,
        Rollup,
        WorkerProcess,
        default_worker_memory_mb,
        rollups_supported,
    )
    from .executors.process.child import value_summary
    from .history import Block, Message
    from .mcp.servers import describe as describe_mcp_servers
    from .model.backends import mark_offline_announced
    from .model.budget import CostBudget
    from .model.client import default_model_name
    from .model.credentials import anthropic_client
    from .model.pacer import rate_wait
    from .model.request_log import RequestLog
    from .permissions.policies import (
        Allow,
        AllowAll,
        CallbackPolicy,
        Deny,
        DenyAll,
        PermissionPolicy,
        PermissionRequest,
        ScriptedPolicy,
    )
    from .session.options import OptionRefusedError, SessionOptions
    from .session.report import CostReport, cost_report
    from .session.session import Session
    from .session.turns.turn_result import AutoTurn, Turn
    from .tasks.registry import Task
    from .tasks.snapshot import TaskSnapshot
    from .transcripts.earlier import InterruptedAgent
    from .transcripts.store import answered_notifications, answers_covering
    from .transcripts.timeline import Timeline, aload_timeline, load_timeline
    from .transcripts.timeline import describe as describe_timeline
    from .transcripts.timeline_figure import draw as draw_timeline
    from .transcripts.timeline_figure import png as timeline_png

_WHERE: dict[str, tuple[str, str]] = {
    # the public API: a session, its settings, its turns and tasks
    "Session": ("session.session", "Session"),
    "SessionOptions": ("session.options", "SessionOptions"),
    "OptionRefusedError": ("session.options", "OptionRefusedError"),
    "Turn": ("session.turns.turn_result", "Turn"),
    "AutoTurn": ("session.turns.turn_result", "AutoTurn"),
    "Task": ("tasks.registry", "Task"),
    "TaskSnapshot": ("tasks.snapshot", "TaskSnapshot"),
    "CostBudget": ("model.budget", "CostBudget"),
    "CostReport": ("session.report", "CostReport"),
    "cost_report": ("session.report", "cost_report"),
    # errors that end a run (a tool's error is a result the model sees, not one of these)
    "AgentError": ("errors", "AgentError"),
    "ConfigError": ("errors", "ConfigError"),
    "UsageError": ("errors", "UsageError"),
    "ModelError": ("errors", "ModelError"),
    "StreamInterruptedError": ("errors", "StreamInterruptedError"),
    "RunEndedError": ("errors", "RunEndedError"),
    # permission answers and policies
    "Allow": ("permissions.policies", "Allow"),
    "Deny": ("permissions.policies", "Deny"),
    "PermissionRequest": ("permissions.policies", "PermissionRequest"),
    "PermissionPolicy": ("permissions.policies", "PermissionPolicy"),
    "AllowAll": ("permissions.policies", "AllowAll"),
    "DenyAll": ("permissions.policies", "DenyAll"),
    "ScriptedPolicy": ("permissions.policies", "ScriptedPolicy"),
    "CallbackPolicy": ("permissions.policies", "CallbackPolicy"),
    # the events of a turn
    "LoopEvent": ("events", "LoopEvent"),
    "TextDelta": ("events", "TextDelta"),
    "StreamedText": ("events", "StreamedText"),
    "ToolUse": ("events", "ToolUse"),
    "ToolResult": ("events", "ToolResult"),
    "UsageReport": ("events", "UsageReport"),
    "Retrying": ("events", "Retrying"),
    "Compacted": ("events", "Compacted"),
    "Stop": ("events", "Stop"),
    # the conversation: its messages and their content blocks
    "Message": ("history", "Message"),
    "Block": ("history", "Block"),
    "DaskClient": ("executors.cluster.shipping", "DaskClient"),
    # what a worker's code shows (its card renders these), and what a pull can say
    "Output": ("executors", "Output"),
    "StreamText": ("executors", "StreamText"),
    "Display": ("executors", "Display"),
    "ClearOutput": ("executors", "ClearOutput"),
    "PullError": ("executors", "PullError"),
    "value_summary": ("executors.process.child", "value_summary"),
    "WorkerProcess": ("executors.memory", "WorkerProcess"),
    "Held": ("executors.memory", "Held"),
    "Rollup": ("executors.memory", "Rollup"),
    "rollups_supported": ("executors.memory", "rollups_supported"),
    "default_worker_memory_mb": ("executors.memory", "default_worker_memory_mb"),
    "guard_kernel": ("executors.confinement.sandbox", "guard_kernel"),
    # batches
    "BatchRun": ("batch.fan_out", "BatchRun"),
    "in_batch": ("batch.fan_out", "in_batch"),
    "resume_batches": ("batch.fan_out", "resume_batches"),
    # the model
    "default_model_name": ("model.client", "default_model_name"),
    "anthropic_client": ("model.credentials", "anthropic_client"),
    "mark_offline_announced": ("model.backends", "mark_offline_announced"),
    "rate_wait": ("model.pacer", "rate_wait"),
    "RequestLog": ("model.request_log", "RequestLog"),
    # transcripts and the timeline
    "answered_notifications": ("transcripts.store", "answered_notifications"),
    "answers_covering": ("transcripts.store", "answers_covering"),
    "InterruptedAgent": ("transcripts.earlier", "InterruptedAgent"),
    "Timeline": ("transcripts.timeline", "Timeline"),
    "load_timeline": ("transcripts.timeline", "load_timeline"),
    "aload_timeline": ("transcripts.timeline", "aload_timeline"),
    "describe_timeline": ("transcripts.timeline", "describe"),
    "draw_timeline": ("transcripts.timeline_figure", "draw"),
    "timeline_png": ("transcripts.timeline_figure", "png"),
    # what the settings files, hooks and MCP servers say (%permissions, %hooks, %mcp)
    "describe_settings": ("config.settings", "describe"),
    # the slash commands and skills a prompt can run as /name (%commands)
    "CommandScan": ("config.commands", "CommandScan"),
    "describe_commands": ("config.commands", "describe"),
    "describe_mcp_servers": ("mcp.servers", "describe"),
    "hooks_waiting": ("config.hook_approval", "waiting"),
    "describe_hooks": ("config.hook_approval", "describe"),
    "approve_hooks": ("config.hook_approval", "approve"),
    # workspace trust: whether the folder's own files may grant (%trust, Session.trust)
    "FolderTrust": ("config.trust", "FolderTrust"),
    "folder_trust": ("config.trust", "folder_trust"),
    "record_trust": ("config.trust", "record_trust"),
}

__all__ = [
    "AgentError",
    "Allow",
    "AllowAll",
    "AutoTurn",
    "BatchRun",
    "Block",
    "CallbackPolicy",
    "ClearOutput",
    "CommandScan",
    "Compacted",
    "ConfigError",
    "CostBudget",
    "CostReport",
    "DaskClient",
    "Deny",
    "DenyAll",
    "Display",
    "FolderTrust",
    "Held",
    "InterruptedAgent",
    "LoopEvent",
    "Message",
    "ModelError",
    "OptionRefusedError",
    "Output",
    "PermissionPolicy",
    "PermissionRequest",
    "PullError",
    "RequestLog",
    "Retrying",
    "Rollup",
    "RunEndedError",
    "ScriptedPolicy",
    "Session",
    "SessionOptions",
    "Stop",
    "StreamInterruptedError",
    "StreamText",
    "StreamedText",
    "Task",
    "TaskSnapshot",
    "TextDelta",
    "Timeline",
    "ToolResult",
    "ToolUse",
    "Turn",
    "UsageError",
    "UsageReport",
    "WorkerProcess",
    "aload_timeline",
    "answered_notifications",
    "answers_covering",
    "anthropic_client",
    "approve_hooks",
    "cost_report",
    "default_model_name",
    "default_worker_memory_mb",
    "describe_commands",
    "describe_hooks",
    "describe_mcp_servers",
    "describe_settings",
    "describe_timeline",
    "draw_timeline",
    "folder_trust",
    "guard_kernel",
    "hooks_waiting",
    "in_batch",
    "load_timeline",
    "mark_offline_announced",
    "rate_wait",
    "record_trust",
    "resume_batches",
    "rollups_supported",
    "timeline_png",
    "value_summary",
]


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = where
    value: object = getattr(import_module(f"{__name__}.{module}"), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
