"""The tools through which a model manages other agents: Agent, SendMessage, TaskStop,
TaskOutput. They act on the session's `Workers` (ctx.services.workers) on behalf of the
calling agent (ctx.services.agent_run)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from ..config.agent_definitions import AgentDefinition
from ..errors import ConfigError, UsageError
from ..loop.fork import FORK_RECURSION_ERROR
from ..tasks.registry import Task, shown_path
from ..tools.base import Tool, ToolContext, ToolError
from ..tools.shells import ShellRegistry
from .agent_run import AgentRun
from .teams import TEAM_LEAD, Structured
from .worktree import Worktree, create_worktree

if TYPE_CHECKING:
    from .workers import Workers

__all__ = [
    "AgentTool",
    "SendMessageTool",
    "SyncAgentTool",
    "TaskOutputTool",
    "TaskStopTool",
    "agent_tool",
    "agent_tools",
]


def new_agent_id() -> str:
    from .workers import new_agent_id as make

    return make()


def _workers(ctx: ToolContext) -> tuple[Workers, AgentRun]:
    """The session's `Workers` and the calling agent's `AgentRun`, which the session lends
    every agent's tools (the tools' own view of them names only what TodoWrite uses)."""
    from .workers import Workers

    workers = ctx.services.workers
    run = ctx.services.agent_run
    if not isinstance(workers, Workers) or not isinstance(run, AgentRun):
        raise ToolError("Background agents are not available in this session.")
    return workers, run


def launched_text(task: Task, prompt: str, ctx: ToolContext) -> str:
    """The Agent call's result for an agent that runs in the background: the reference's
    `async_launched` (id, description, prompt, output file and whether the caller can read
    it), recorded whole in the caller's transcript; the model reads its id, what to do
    meanwhile, and the output file only where it can read it (Read or Bash)."""
    caller = ctx.services.agent_run
    tools = getattr(getattr(caller, "config", None), "tools", None)
    readers = [name for name in ("Read", "Bash") if tools is not None and tools.get(name)]
    output = shown_path(task.output_file, ctx.workdir)
    can_read = bool(readers and output)
    transcript = getattr(caller, "transcript", None)
    if transcript is not None:
        launch = {
            "status": "async_launched",
            "agentId": task.id,
            "description": task.description,
            "prompt": prompt,
            "outputFile": output,
            "canReadOutputFile": can_read,
        }
        transcript.append_event("async_launched", launch)
    text = (
        f"Started background agent {task.id} ({task.description}).\n"
        "It works on its own; when it finishes you receive a <task-notification> with its "
        "result in a later message. Do not wait for it, guess its result, or redo its work.\n"
        f"To give it more instructions use SendMessage with to: '{task.id}'; to stop it, "
        "TaskStop.\n"
    )
    if not can_read:
        return text + (
            "Tell the user briefly what you started and end your reply: its result comes in "
            "a later message."
        )
    return text + (
        "Work on something it does not touch, or tell the user briefly what you started and "
        f"end your reply.\noutput_file: {output}\nIf asked how it is doing, read the end of "
        f"that file ({' or '.join(readers)})."
    )


def spawned_text(task: Task, notes: list[str]) -> str:
    """The Agent call's result when it spawned a teammate."""
    said = "".join(f"\n({note})" for note in notes)
    return (
        f"status: teammate_spawned\nagent_id: {task.id}\nname: {task.name}\n"
        f"team_name: {task.team}\n"
        f"{task.name} is running: it reads its instructions and your messages from its "
        f"mailbox (SendMessage with to: '{task.name}', or to: '*' for the whole team). It does "
        "not end when it finishes a turn: it waits for the next message, and tells you when "
        "it goes idle unless it has just messaged you. To let it go, send it a "
        f"shutdown_request.{said}"
    )


def moved_text(task: Task) -> str:
    """The Agent call's result when the user moved its agent to the background."""
    return (
        f"The user moved agent {task.id} ({task.description}) to the background; it is still "
        "working. Its result comes in a later message as a <task-notification>: do not wait "
        "for it or guess it; continue with other things, or end your reply."
    )


def finished_text(task: Task, failure: str | None = None) -> str:
    """A synchronous named agent's answer, as the Agent call's result; one that failed
    after writing some text answers with that text, `failure` naming what went wrong (as the
    reference returns a failed run's partial messages)."""
    u = task.usage
    duration = int(((task.ended_at or task.started_at) - task.started_at) * 1000)
    ended = f"\n\n{failure}" if failure else ""
    return (
        f"{task.result}{ended}\n\nagentId: {task.id} (use SendMessage with to: '{task.id}' "
        f"to continue it)\n<usage>total_tokens: {u.total_input_tokens + u.output_tokens}\n"
        f"tool_uses: {task.tool_uses}\nduration_ms: {duration}</usage>"
    )


_removing: set[asyncio.Task[object]] = set()


async def _new_worktree(ctx: ToolContext, agent_id: str) -> Worktree:
    """A worktree for a new agent; if the call is cancelled while git creates it, it is
    removed once created (no run will own it)."""
    creating = asyncio.ensure_future(create_worktree(ctx.workdir, agent_id))

    def orphaned(done: asyncio.Future[Worktree]) -> None:
        if not done.cancelled() and done.exception() is None:
            job = asyncio.ensure_future(done.result().finish())
            _removing.add(job)
            job.add_done_callback(_removing.discard)

    try:
        return await asyncio.shield(creating)
    except asyncio.CancelledError:
        creating.add_done_callback(orphaned)
        raise


PermissionMode = Literal["default", "acceptEdits", "bypassPermissions", "plan", "dontAsk"]
"""The modes a teammate may be asked for (the reference's); only `plan` changes anything."""


class AgentInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = Field(description="A short label for the task (3-6 words).")
    prompt: str = Field(
        description="The task. Without subagent_type this is a fork directive: the worker "
        "already knows the whole conversation, so say only what it should do and report."
    )
    subagent_type: str | None = Field(
        default=None,
        description="A named agent type to run instead of a fork of this conversation: one "
        "of the available agent types listed in the conversation.",
    )
    model: str | None = Field(
        default=None, description="Model for a named agent (forks always use yours)."
    )
    # not offered while forking is on (every agent then runs in the background), and
    # ignored if sent anyway; `SyncAgentInput` offers it
    run_in_background: SkipJsonSchema[bool | None] = None
    name: str | None = Field(
        default=None,
        description="A name for the agent: SendMessage reaches it by this name. With "
        "team_name (or once you lead a team) it joins the team as a teammate.",
    )
    team_name: str | None = Field(
        default=None,
        description="Spawn the agent (with name) as a teammate of this team, made if new; "
        "default: your current team, if you lead one.",
    )
    mode: PermissionMode | None = Field(
        default=None,
        description="Permission mode for a teammate: 'plan' makes it plan before it changes "
        "anything (approve its plan with a plan_approval_response).",
    )
    isolation: Literal["worktree"] | None = Field(
        default=None, description="'worktree' runs the agent in its own git worktree."
    )
    fork_turns: int | None = Field(
        default=None,
        ge=1,
        description="For a fork: inherit only the last N turns of this conversation (cheaper "
        "for a task that needs no older context); default: all of it.",
    )


class SyncAgentInput(AgentInput):
    """The Agent tool's input when forking is off: the caller chooses background or not."""

    prompt: str = Field(description="The task, with everything the agent needs to know.")
    fork_turns: SkipJsonSchema[int | None] = None  # refused with a subagent_type (no forks)
    run_in_background: bool | None = Field(
        default=None,
        description="true runs the agent in the background (its result comes later as a "
        "<task-notification>); by default you wait for its answer here, unless its "
        "definition says it runs in the background.",
    )


class AgentTool(Tool[AgentInput]):
    """The Agent tool of a session with forking on: every agent it starts, fork or named,
    runs in the background and reports back in a notification."""

    name = "Agent"
    description = (
        "Start another agent in the background. Without subagent_type it forks you: a worker "
        "that inherits this whole conversation and carries out one directive - use several "
        "in one message to work on independent parts in parallel. With subagent_type (one of "
        "the available agent types listed in the conversation) it starts that named agent "
        "with only your prompt as context. Either way the call returns at once and the "
        "agent's result comes back later as a <task-notification> message. With name and "
        "team_name (or name alone once you lead a team) it spawns a teammate instead: a named "
        "agent that stays, reads its mailbox and is reached with SendMessage."
    )
    input_model = AgentInput
    forking = True
    concurrency_safe = True  # several agents start (or are waited for) side by side
    needs_approval = False
    allowed_in_plan = True  # its workers inherit plan mode

    def describe(self, args: AgentInput) -> str:
        if args.name and args.team_name:
            return f"Agent (teammate {args.name} of {args.team_name}): {args.description}"
        return f"Agent ({args.subagent_type or 'fork'}): {args.description}"

    def permission_subject(self, args: AgentInput) -> str:
        """The agent type, so that `Agent(reviewer)` allows or denies that type ("fork" for
        a fork of the caller)."""
        return args.subagent_type or "fork"

    async def run(self, args: AgentInput, ctx: ToolContext) -> str:
        workers, parent = _workers(ctx)
        call = ctx.call
        tool_use_id = call.tool_use_id if call else None
        agent_type = args.subagent_type
        forking = bool(workers.forking)
        teams = workers.teams
        joining = teams.joining(parent, args.name, args.team_name)  # a teammate's team
        if joining is None and (forking or args.run_in_background):
            why = " (with forking on, every agent runs in the background)" if forking else ""
            teams.refuse_background(parent, why)
        if (agent_type is not None or joining is not None) and args.fork_turns is not None:
            raise ToolError(
                "fork_turns applies to forks only (no subagent_type, no teammate): a named "
                "agent starts with nothing but your prompt. Drop one of the two."
            )
        if agent_type is None and (joining is not None or not forking):
            agent_type = "general-purpose"
        agent_id = new_agent_id()
        definition = None if agent_type is None else await workers.definition(agent_type)
        if joining is None and definition is not None and definition.background:
            why = f" (agent type '{definition.name}' runs in the background by its file)"
            teams.refuse_background(parent, why)
        isolation = args.isolation or (definition.isolation if definition else None)
        worktree = None
        notes = await _start_servers(ctx, agent_id, definition)
        try:
            if isolation == "worktree":
                if parent.is_fork and agent_type is None:
                    raise ToolError(FORK_RECURSION_ERROR)
                worktree = await _new_worktree(ctx, agent_id)
            if joining is not None:
                assert definition is not None and args.name is not None
                task = teams.spawn(
                    parent,
                    definition,
                    args.prompt,
                    name=args.name,
                    team=joining,
                    description=args.description,
                    plan=args.mode == "plan",
                    model=args.model,
                    tool_use_id=tool_use_id,
                    agent_id=agent_id,
                    worktree=worktree,
                )
                if notes:
                    task.notes.extend(notes)
                said = []
                if args.mode not in (None, "plan"):
                    said.append(
                        f"mode {args.mode!r} not applied: a teammate asks for approvals as its "
                        "type's file says; only 'plan' changes that"
                    )
                return spawned_text(task, said)
            if agent_type is None:
                history = call.history if call else None
                task = workers.fork(
                    parent,
                    args.prompt,
                    description=args.description,
                    tool_use_id=tool_use_id,
                    history=history,
                    name=args.name,
                    agent_id=agent_id,
                    worktree=worktree,
                    turns=args.fork_turns,
                )
                return launched_text(task, args.prompt, ctx)
            assert definition is not None
            run = workers.named(
                parent,
                definition,
                args.prompt,
                description=args.description,
                tool_use_id=tool_use_id,
                name=args.name,
                model=args.model,
                agent_id=agent_id,
                worktree=worktree,
            )
        except Exception as exc:
            if worktree is not None:  # no run owns it: remove it (it is unchanged)
                await worktree.finish()
            servers = ctx.services.mcp
            if notes is not None and servers is not None:  # no run owns its servers: stop them
                await servers.stop_agent(agent_id)
            if isinstance(exc, (UsageError, ConfigError)):
                raise ToolError(str(exc)) from None
            raise
        # With forking on every agent runs in the background. Without, a named agent runs
        # while the caller waits, unless the call or its definition asks for the background.
        background = (
            forking or bool(args.run_in_background) or bool(definition and definition.background)
        )
        if notes and run.task is not None:
            run.task.notes.extend(notes)
        task = workers.start(run)
        if background:
            return launched_text(task, args.prompt, ctx)
        return await _wait_for(
            workers,
            run,
            task,
            lambda: launched_text(task, args.prompt, ctx),
            hold=parent.team is not None,
        )


async def _start_servers(
    ctx: ToolContext, agent_id: str, definition: AgentDefinition | None
) -> list[str] | None:
    """Start a named agent's own MCP servers and wait (bounded) for those it requires; the
    lines for its card (None: it has none). A required server that is not up is a ToolError
    in one line."""
    if definition is None or not (definition.mcpServers or definition.requiredMcpServers):
        return None
    servers = ctx.services.mcp
    if servers is None:
        if definition.requiredMcpServers:
            raise ToolError("This session has no MCP servers; the agent requires some.")
        return None
    source = str(definition.path or definition.name)
    try:
        notes: list[str] = await servers.start_agent(
            agent_id,
            definition.mcpServers,
            definition.requiredMcpServers,
            source,
            trusted=definition.source in ("user", "built-in"),  # a project's file: approve first
        )
    except ValueError as exc:
        raise ToolError(f"Agent '{definition.name}' not started: {exc}") from None
    return notes


async def _wait_for(
    workers: Workers, run: AgentRun, task: Task, launched: Callable[[], str], *, hold: bool = False
) -> str:
    """A synchronous agent's answer as the call's result. It moves to the background (its
    result then comes as a notification) when the user asks or after
    `workers.auto_background_after` seconds (not with `hold`: a teammate's agents stay in
    the foreground); it is stopped with the caller's turn."""
    task.foreground = True
    workers.registry.changed(task)
    ended = asyncio.ensure_future(task.ended())
    moved = asyncio.ensure_future(run.to_background.wait())
    limit = None if hold else workers.auto_background_after
    try:
        await asyncio.wait(
            {ended, moved},
            timeout=limit if limit is not None and limit > 0 else None,
            return_when=asyncio.FIRST_COMPLETED,
        )
    except asyncio.CancelledError:
        # the caller's turn was interrupted: its agent stops with it, and reports to no one
        # (the caller never learnt its id)
        if not task.done:
            workers.registry.suppress(task)
            workers.kill(task.id, "the turn that started it was interrupted")
        raise
    finally:
        ended.cancel()
        moved.cancel()
        task.foreground = False
    if not task.done:
        if run.to_background.is_set():  # the user moved it: its notification reports it
            return moved_text(task)
        run.to_background.set()  # ran too long to wait for: it goes on in the background
        workers.registry.changed(task)
        return launched()
    # reported here, as this call's result, and only here: its notification is never
    # enqueued (suppressed before its clean-up ends); then wait for that clean-up
    workers.registry.suppress(task)
    await task.wait()
    if task.status == "failed" and task.result:  # the text it wrote: the call's result
        failure = task.error or "no reason given"
        note = f"[The agent failed before it finished: {failure}. The text above is what it "
        return finished_text(task, note + "wrote until then.]")
    if task.status != "completed":
        what = f"Agent {task.id} {task.status}: {task.error or 'no reason given'}"
        if task.result:  # a stopped agent's text so far
            what += f"\n\nIts partial result:\n{task.result}"
        raise ToolError(what)
    return finished_text(task)


class SyncAgentTool(AgentTool):
    """The Agent tool of a session with forking off: a named agent answers in the call
    unless it is asked (or defined) to run in the background."""

    description = (
        "Start a named agent: subagent_type is one of the available agent types listed in "
        "the conversation (without it: general-purpose); it starts with only your prompt as "
        "context. You wait for its answer, which is this call's result, unless "
        "run_in_background is true or the agent type runs in the background (its result "
        "then comes back later as a <task-notification> message). With name and team_name "
        "(or name alone once you lead a team) it spawns a teammate instead: a named agent "
        "that stays, reads its mailbox and is reached with SendMessage."
    )
    input_model = SyncAgentInput
    forking = False


def agent_tool(forking: bool) -> AgentTool:
    """The Agent tool for a session with forking on or off."""
    return AgentTool() if forking else SyncAgentTool()


class SendMessageInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to: str = Field(
        description="Recipient: an agent's name or id (in a team: a teammate's name, "
        "'team-lead' for a teammate's lead), or '*' for everyone in your team (outside a "
        "team: every running agent you can reach)."
    )
    summary: str | None = Field(
        default=None,
        description="A 5-10 word summary shown as a preview (required when message is plain text).",
    )
    message: str | Structured = Field(
        description="Plain text, or a structured message to one teammate: a "
        "shutdown_request (the lead asks it to end), a shutdown_response (a teammate's "
        "answer, to 'team-lead'), a plan_approval_response (the lead's answer to a plan)."
    )


class SendMessageTool(Tool[SendMessageInput]):
    name = "SendMessage"
    description = (
        "Send a message to an agent: one you started (to: its id or name), a teammate (to: "
        "its name; 'team-lead' reaches a teammate's lead), or everyone in your team (to: "
        "'*'; outside a team, every running agent). A running agent reads it at its next "
        "step, an idle teammate wakes up for it, a finished agent is resumed with it and "
        "reports back again. Plain text needs a summary; a structured message goes to one "
        "recipient, never to '*'."
    )
    input_model = SendMessageInput
    concurrency_safe = True
    needs_approval = False
    allowed_in_plan = True  # a resumed worker inherits plan mode

    def describe(self, args: SendMessageInput) -> str:
        said = args.message if isinstance(args.message, str) else args.message.type
        return f"SendMessage to {args.to}: {args.summary or said}"

    async def run(self, args: SendMessageInput, ctx: ToolContext) -> str:
        workers, caller = _workers(ctx)
        to, message = args.to.strip(), args.message
        if not to:
            raise ToolError("to is empty: name the recipient (a name or an agent id), or '*'.")
        if isinstance(message, str) and not (args.summary or "").strip():
            raise ToolError(
                "summary is required when message is plain text: add a 5-10 word summary."
            )
        if not isinstance(message, str) and to == "*":
            raise ToolError(
                f"A structured message ({message.type}) cannot be broadcast (to: '*'): send "
                "it to one teammate by name."
            )
        teams = workers.teams
        try:
            if not isinstance(message, str):
                return str(teams.structured(caller, to, message))
            team = teams.context(caller)
            if to == "*":
                if team is not None:
                    return str(teams.broadcast(caller, team, message, args.summary))
                return str(workers.broadcast(message, sender=caller.id))
            address = teams.address(caller, to)
            if address == "main":
                return str(teams.send_lead(caller, message, args.summary))
            if to == TEAM_LEAD:
                raise UsageError(
                    f"{TEAM_LEAD!r} is a teammate's name for its lead, and you are in no team."
                )
            sender = teams.sender(caller)
            return str(
                await workers.send(address or to, message, sender=sender, summary=args.summary)
            )
        except UsageError as exc:
            raise ToolError(str(exc)) from None


class TaskStopInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str | None = Field(
        default=None, description="The id (or name) of the agent or background shell to stop."
    )
    shell_id: str | None = Field(
        default=None, description="The id of a background shell (Bash run_in_background)."
    )


class TaskStopTool(Tool[TaskStopInput]):
    name = "TaskStop"
    description = (
        "Stop a running background agent (its partial result is reported back) or a "
        "background shell command (shell_id)."
    )
    input_model = TaskStopInput
    concurrency_safe = False  # it ends a worker that other calls of the reply may read
    needs_approval = False  # the caller stops its own workers
    allowed_in_plan = False  # it changes what runs: not while planning

    async def run(self, args: TaskStopInput, ctx: ToolContext) -> str:
        workers, _ = _workers(ctx)
        key = args.shell_id or args.task_id
        if not key:
            raise ToolError("Missing required parameter: task_id (or shell_id).")
        shell = _shells(ctx).get(key)
        if shell is not None:
            if shell.status != "running":
                raise ToolError(f"Shell {shell.id} is not running (status: {shell.status}).")
            shell.stop()
            await shell.ended.wait()
            return f"Stopped background shell {shell.id} ({shell.command})."
        if args.shell_id:
            raise ToolError(f"No background shell with id {args.shell_id}.")
        try:
            task = await workers.stop(key)
        except UsageError as exc:
            raise ToolError(str(exc)) from None
        return f"Stopped task {task.id} ({task.description})."


def _shells(ctx: ToolContext) -> ShellRegistry:
    shells = ctx.services.shells
    return shells if isinstance(shells, ShellRegistry) else ShellRegistry()


class TaskOutputInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(description="The id (or name) of the task.")
    block: bool = Field(default=True, description="Wait for the task to finish.")
    timeout: float = Field(
        default=30.0, ge=0, le=600, description="Seconds to wait at most when block is true."
    )


class TaskOutputTool(Tool[TaskOutputInput]):
    name = "TaskOutput"
    description = (
        "Read a background task's status and result, optionally waiting for it to finish. "
        "Prefer waiting for its notification; use this only when you cannot go on without it."
    )
    input_model = TaskOutputInput
    concurrency_safe = True
    needs_approval = False
    allowed_in_plan = True

    async def run(self, args: TaskOutputInput, ctx: ToolContext) -> str:
        workers, _ = _workers(ctx)
        shell = _shells(ctx).get(args.task_id)
        if shell is not None:  # a background shell: its output so far, or at its end
            retrieval = "success"
            if shell.status == "running":
                if not args.block:
                    retrieval = "not_ready"
                else:
                    try:
                        await asyncio.wait_for(shell.ended.wait(), args.timeout)
                    except asyncio.TimeoutError:
                        retrieval = "timeout"
            _shells(ctx).read(shell)  # its end read here: no notification any more
            return shell.report(retrieval)
        try:
            task: Task = workers.registry.get(args.task_id)
        except UsageError as exc:
            raise ToolError(str(exc)) from None
        retrieval = "success"
        if not task.done:
            if not args.block:
                retrieval = "not_ready"
            else:
                try:  # until its status is final, not until its clean-up (git) is done
                    await asyncio.wait_for(task.ended(), args.timeout)
                except asyncio.TimeoutError:
                    retrieval = "timeout"
        if task.done:
            workers.registry.suppress(task)  # read here: no notification needed any more
        parts = [
            f"<retrieval_status>{retrieval}</retrieval_status>",
            f"<task_id>{task.id}</task_id>",
            f"<task_type>{task.kind}</task_type>",
            f"<status>{task.status}</status>",
        ]
        if task.result:
            parts.append(f"<output>\n{task.result}\n</output>")
        elif not task.done and task.preview:
            parts.append(f"<output>\n{task.preview}\n</output>")
        if task.error:
            parts.append(f"<error>{task.error}</error>")
        return "\n\n".join(parts)


def agent_tools(forking: bool = True) -> list[Tool[Any]]:
    return [agent_tool(forking), SendMessageTool(), TaskStopTool(), TaskOutputTool()]
