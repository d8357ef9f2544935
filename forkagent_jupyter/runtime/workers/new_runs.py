"""How a new agent run is made, before it starts: a fork of a parent, a named agent from its
definition, an agent brought back from its transcript.

Each gets its `Task` row, its first messages and loop state, and its worktree when it has
one; the session's configuration of it (tools, gate, client) comes in ready made.
"""

from __future__ import annotations

from pathlib import Path

from ..config.agent_definitions import AgentDefinition, missing_tools
from ..history import Message
from ..loop.config import AgentConfig, LoopState
from ..loop.fork import build_fork_messages
from ..tasks.registry import Task
from ..transcripts.store import LoadedTranscript
from .agent_run import AgentRun
from .run_worktree import isolate, place, require_dir
from .worktree import Worktree

__all__ = ["fork_run", "interrupted_note", "named_run", "restored_run"]


def fork_run(
    parent: AgentRun,
    source: list[Message],
    directive: str,
    config: AgentConfig,
    task: Task,
    *,
    worktree: Worktree | None,
    windowed: bool,
) -> tuple[AgentRun, int]:
    """A fork of `parent` continuing `source` with `directive` (`windowed`: `source` is a
    window of the parent's history, not all of it), and how many of its first messages are
    the parent's own (shared with its transcript)."""
    built = build_fork_messages(source, directive, own_tool_use_id=task.tool_use_id)
    state = LoopState(cache_points=[built.shared_end] if built.shared_end else [])
    run = AgentRun(task.id, config, built.messages, state, task, is_fork=True, owner=parent.id)
    isolate(run, worktree)
    shared = 0
    while shared < min(len(source), len(built.messages)) and (
        built.messages[shared] is source[shared]
    ):
        shared += 1
    measured = parent.state.previous_end
    if (
        not windowed
        and measured is not None
        and parent.state.context_tokens
        and (shared > measured)
    ):  # the parent's last request is a prefix of this one: its size is known
        state.context_tokens = parent.state.context_tokens
        state.previous_end = measured
        state.token_ratio = parent.state.token_ratio
    return run, shared


def named_run(
    parent: AgentRun,
    definition: AgentDefinition,
    prompt: str,
    config: AgentConfig,
    task: Task,
    *,
    worktree: Worktree | None,
) -> AgentRun:
    """A run of the named agent `definition` with `prompt`; what of its file cannot be
    honoured here is noted on its task."""
    missing = missing_tools(definition, config.tools.names())
    if missing:
        task.notes.append("not available here: " + ", ".join(missing))
    if definition.permissionMode == "bypassPermissions" and config.gate.mode not in (
        "bypassPermissions",
        "plan",
    ):
        task.notes.append(
            "permissionMode bypassPermissions not applied: an agent file bypasses only "
            "while the session itself does"
        )
    if definition.initialPrompt:  # the file's initial prompt goes first
        prompt = f"{definition.initialPrompt}\n\n{prompt}"
    history: list[Message] = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
    run = AgentRun(
        task.id, config, history, LoopState(), task, owner=parent.id, definition=definition
    )
    isolate(run, worktree)
    return run


def interrupted_note(cut_off: int) -> str:
    """What a resumed agent's card says when the run before was cut off (a restart)."""
    calls = f"; {cut_off} tool call(s) it was running got no result" if cut_off else ""
    return f"its earlier run was interrupted before it finished (a kernel restart){calls}"


def restored_run(
    loaded: LoadedTranscript,
    config: AgentConfig,
    definition: AgentDefinition | None,
    *,
    owner: str,
    answering: bool,
) -> AgentRun:
    """The agent of `loaded` again (a fork when `definition` is None), in the worktree it
    worked in (refused when that is gone), its task reporting to `owner`. `answering`: its
    next turn is a new message, so its last request's end is where the history ends now."""
    meta = loaded.meta
    worktree = None
    if meta.worktree is not None:
        worktree = Worktree.from_fields(meta.worktree.model_dump())
        if meta.worktree_path is not None:
            require_dir(Path(meta.worktree_path), meta.name or meta.agent_id)
    history = loaded.messages
    state = LoopState()
    if answering:
        ends = [i for i, m in enumerate(history) if m["role"] == "user"]
        state.previous_end = ends[-1] if ends else None
    past = loaded.past
    task = Task(
        id=meta.agent_id,
        kind=meta.kind,
        description=meta.description,
        owner=owner,
        name=meta.name,
        results=list(past.results),
        tool_uses=past.tool_uses,
        tool_errors=past.tool_errors,
    )
    if not past.ended:  # what it was doing never finished: its card says so
        task.notes.append(interrupted_note(past.cut_off))
    run = AgentRun(
        meta.agent_id,
        config,
        history,
        state,
        task,
        is_fork=definition is None,
        definition=definition,
    )
    if worktree is not None:  # where it worked, never the checkout
        place(run, worktree)
        run.reisolate = meta.worktree_path is None
    return run
