"""Teams: teammates in a flat roster under the parent conversation, talking through mailboxes.

The parent conversation leads (it is "team-lead" to its teammates). It spawns a teammate with
the Agent tool's `name` and `team_name`, or with `name` alone once it leads a team (the team
it spawned into last is its current one). A teammate is a named agent (its type's prompt and
tools, with SendMessage always, and all the agent tools when its file names none) that does
not end when its turn does: it waits, idle, for the next message in its mailbox. The person
stops it (`%stop`, its card's Stop button, `%stop team:NAME` for the whole team); its lead may
ask it to leave (a `shutdown_request` it approves).

The rules, as in the reference design:

* The roster is flat: a teammate starts no teammate and no background agent (refused with
  the reason, nothing started); only the parent conversation leads a team.
* SendMessage to a member's name puts the message in its mailbox as a `<teammate-message>`
  whose `teammate_id` names the sender ("team-lead", a teammate's name, or "user" for the
  person); `to: "*"` puts it in every other running member's mailbox (the lead's too, when a
  teammate broadcasts). A plain-text message needs a `summary`; a structured message (a
  shutdown request or answer, a plan approval) goes to one recipient, never to "*".
* A teammate that ends a turn without having messaged its lead tells the lead it is idle,
  with its last reply, so nothing it found is lost; one that did message the lead says
  nothing more (one message to the lead per turn of a teammate, not two).

`Teams` is held by the session's `Workers`; what it changes of a run is the run's own state
(`AgentRun.team`, `mailbox`, `reported`, `leaving`) and its task's `team` and `idle`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal
from xml.sax.saxutils import escape

from pydantic import BaseModel, ConfigDict

from ...messages_api.shapes import JSON
from ..config.agent_definitions import AgentDefinition
from ..errors import UsageError
from ..loop.config import AgentConfig
from ..mcp.servers import covers
from ..tasks.registry import Task, task_snapshot
from ..tools.base import Tool, ToolError, ToolSet
from ..transcripts.store import TeamRecord
from .agent_run import AgentRun, open_transcript, team_record, text_since
from .new_runs import named_run
from .worktree import Worktree

if TYPE_CHECKING:
    from .workers import Workers

__all__ = [
    "FROM_USER",
    "IDLE_ACTIVITY",
    "TEAM_LEAD",
    "PlanApprovalResponse",
    "ShutdownRequest",
    "ShutdownResponse",
    "Structured",
    "Team",
    "Teams",
    "name_problem",
    "teammate_message",
]

TEAM_LEAD = "team-lead"
"""What teammates call their lead (the parent conversation)."""
FROM_USER = "user"
"""The sender of what the person sends to a teammate (`%send`)."""
MESSAGE_TAG = "teammate-message"
IDLE_ACTIVITY = "idle: waiting for a message"
REPORT_CHARS = 4000  # of a teammate's last reply, carried in its idle notice
_RESERVED = frozenset({TEAM_LEAD, "main", FROM_USER, "*"})
AGENT_TOOLS = ("Agent", "SendMessage", "TaskStop", "TaskOutput")

FLAT_ROSTER = (
    "A teammate cannot spawn teammates: the team's roster is flat. To have an agent help you, "
    "ask your lead (SendMessage to 'team-lead'), or leave out `name` for a sub-agent that "
    "answers in this call."
)
NO_BACKGROUND = (
    "A teammate cannot start background agents{why}: they would outlive its turn. Do the "
    "work yourself with your tools, or ask your lead (SendMessage to 'team-lead')."
)


class ShutdownRequest(BaseModel):
    """The lead asks a teammate to end; the teammate answers with a shutdown_response."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["shutdown_request"]
    reason: str | None = None


class ShutdownResponse(BaseModel):
    """A teammate's answer to a shutdown request (to "team-lead"): approved, it ends with its
    turn; rejected, it says why and works on."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["shutdown_response"]
    request_id: str
    approve: bool
    reason: str | None = None


class PlanApprovalResponse(BaseModel):
    """The lead's answer to a teammate working in plan mode: approved, it may carry the plan
    out (it leaves plan mode); rejected, it gets the feedback."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["plan_approval_response"]
    request_id: str
    approve: bool
    feedback: str | None = None


Structured = ShutdownRequest | ShutdownResponse | PlanApprovalResponse


def teammate_message(sender: str, text: str, summary: str | None = None) -> str:
    """`text` as a member reads it in its mailbox, from `sender`. Everything is escaped, so a
    message cannot close its envelope early and pass for another sender's."""
    about = f' summary="{escape(summary, {chr(34): "&quot;"})}"' if summary else ""
    sender_attr = escape(sender, {'"': "&quot;"})
    return f'<{MESSAGE_TAG} teammate_id="{sender_attr}"{about}>\n{escape(text)}\n</{MESSAGE_TAG}>'


def name_problem(name: str, what: str = "a teammate's name") -> str | None:
    """Why `name` cannot name a teammate or a team (None: it can)."""
    if (
        not name
        or len(name) > 64
        or any(c.isspace() or c in "'\"`:@" for c in name)
        or name in _RESERVED
    ):
        shown = name if len(name) <= 40 else name[:37] + "..."
        return (
            f"{what} is one word of at most 64 characters, without quotes, ':' or '@', and not "
            f"one of {', '.join(sorted(_RESERVED))}; not {shown!r}."
        )
    return None


def teammate_prompt(name: str, team: str) -> str:
    """What a teammate's system prompt adds to its type's."""
    return (
        f"# Working in a team\n"
        f'You are "{name}", a teammate in the team "{team}". Your lead (the main '
        "conversation) and your teammates reach you through your mailbox: their messages "
        'arrive as <teammate-message teammate_id="..."> blocks naming the sender ("user" is '
        "the person at the notebook).\n"
        "- Only what you send is seen: use SendMessage (to: a teammate's name, "
        '"team-lead" for your lead, or "*" for the whole team), always with a short summary.\n'
        "- When you have done what was asked, report to your lead with SendMessage and end "
        "your turn. Ending a turn does not end you: you wait for the next message.\n"
        "- You cannot start teammates or background agents: do the work with your own tools.\n"
        '- A shutdown_request from your lead is answered with SendMessage to "team-lead" and '
        'the message {"type": "shutdown_response", "request_id": "<its id>", "approve": true} '
        "(or approve false, with a reason, to keep working)."
    )


@dataclass
class Team:
    """A team: its name and its members by name (agent ids), in the order the lead asked for
    them (calls side by side in one reply start in any order; the roster keeps the reply's)."""

    name: str
    members: dict[str, str] = field(default_factory=dict)


class Teams:
    """The session's teams and what passes between their members (see the module doc)."""

    def __init__(self, workers: Workers) -> None:
        self.workers = workers
        self.teams: dict[str, Team] = {}
        self.current: str | None = None  # the team the parent spawned into last
        self._requests = 0
        self._asked: dict[str, int] = {}  # a teammate's place in its lead's calls, by name
        self._calls = 0

    # -- who is where ------------------------------------------------------------------------

    def context(self, caller: AgentRun | None) -> Team | None:
        """The team `caller` acts in: a teammate's own; the parent's current team; else None."""
        if caller is None:
            return None
        if caller.team is not None:
            return self.teams.get(caller.team)
        if caller.id == "main" and self.current is not None:
            return self.teams.get(self.current)
        return None

    def resolve(self, key: str) -> Team:
        """The team named `key` ("" or "*": the current team); a UsageError naming them."""
        return self.teams[self.team_name(key)]

    def members(self, team: Team) -> list[Task]:
        """The team's members' tasks, in the order they joined."""
        found = (self.workers.registry.find(agent_id) for agent_id in team.members.values())
        return [t for t in found if t is not None]

    def sender(self, caller: AgentRun | None) -> str:
        """How a message from `caller` is signed (None: the person)."""
        if caller is None:
            return FROM_USER
        if caller.id == "main":
            return TEAM_LEAD
        task = caller.task
        return (task.name if task is not None else None) or caller.id

    def address(self, caller: AgentRun, to: str) -> str | None:
        """The agent id `to` names in `caller`'s team ("main" for the lead); None: `to` is
        no member's name there."""
        team = self.context(caller)
        if team is None:
            return None
        if caller.team is not None and to in (TEAM_LEAD, "main"):
            return "main"
        return team.members.get(to)

    # -- spawning ------------------------------------------------------------------------------

    def joining(self, caller: AgentRun, name: str | None, team_name: str | None) -> str | None:
        """The team an Agent call with `name` and `team_name` spawns a teammate into (None:
        it starts an ordinary agent); a ToolError when the call is refused."""
        if caller.team is not None:
            if name or team_name:
                raise ToolError(FLAT_ROSTER)
            return None
        if team_name is not None and not name:
            raise ToolError(
                "team_name goes with name: a teammate is addressed by its name. Give both, or "
                "neither for an agent outside the team."
            )
        if not name:
            return None
        self._calls += 1  # counted before any await: the order of the lead's reply
        self._asked[name] = self._calls
        if team_name is None:
            return self.current if caller.id == "main" else None
        if caller.id != "main":
            raise ToolError(
                "Only the main conversation leads a team: an agent it started spawns no "
                "teammates. Leave out team_name (and name, or give a name to message it by)."
            )
        problem = name_problem(team_name, "a team's name")
        if problem is not None:
            raise ToolError(problem)
        # current from now: a call beside this one in the same reply with `name` alone joins
        # it too (the calls run side by side, this one's teammate not yet started)
        self.current = team_name
        return team_name

    def refuse_background(self, caller: AgentRun, why: str = "") -> None:
        """A teammate starts no background agent: a ToolError saying so (`why`: what made
        the agent a background one)."""
        if caller.team is not None:
            raise ToolError(NO_BACKGROUND.format(why=why))

    def spawn(
        self,
        lead: AgentRun,
        definition: AgentDefinition,
        prompt: str,
        *,
        name: str,
        team: str,
        description: str,
        plan: bool = False,
        model: str | None = None,
        tool_use_id: str | None = None,
        agent_id: str,
        worktree: Worktree | None = None,
    ) -> Task:
        """Start `definition` as teammate `name` of `team` (made if new, and the lead's
        current team); `plan`: it starts in plan mode. A UsageError when the name cannot be
        used (nothing started)."""
        problem = name_problem(name)
        if problem is not None:
            raise UsageError(problem)
        registry = self.workers.registry
        holder = registry.holder(name)
        if holder is not None and not holder.done:
            where = f"a running member of team {holder.team!r}" if holder.team else "in use"
            raise UsageError(
                f"The name {name!r} is {where} (task {holder.id}): message it with "
                "SendMessage, or give this teammate another name."
            )
        taken = registry.name_problem(name)  # another task's id
        if taken is not None:
            raise UsageError(f"{taken[0].upper()}{taken[1:]}: give this teammate another name.")
        workers = self.workers
        task = Task(
            id=agent_id,
            kind=definition.name,
            description=description,
            owner=lead.id,
            name=name,
            tool_use_id=tool_use_id,
            team=team,
        )
        config = self._config(lead, definition, agent_id, model, name=name, team=team, plan=plan)
        wrapped = teammate_message(TEAM_LEAD, prompt, description)
        run = named_run(lead, definition, wrapped, config, task, worktree=worktree)
        run.team = team
        run.planning = plan
        open_transcript(workers.store, run, None, 0)  # it records its team (`team_record`)
        self._enrol(team, name, agent_id)
        self.current = team
        return workers.start(run)

    def _enrol(self, team: str, name: str, agent_id: str) -> None:
        """`name` (agent `agent_id`) on `team`'s roster (the team made if new), the roster
        in the order the lead asked for its members."""
        members = self.teams.setdefault(team, Team(team)).members
        members[name] = agent_id
        asked = self._asked
        ordered = sorted(members.items(), key=lambda m: asked.get(m[0], 0))
        members.clear()
        members.update(ordered)

    # -- after a restart -----------------------------------------------------------------------

    def restored_config(
        self,
        definition: AgentDefinition,
        agent_id: str,
        model: str | None,
        record: TeamRecord,
        source: str,
    ) -> AgentConfig:
        """The config of a teammate brought back from its transcript (`record`: its team as
        the transcript's meta file `source` has it): a teammate's, as `spawn` made it, its
        lead the parent. A name there that `spawn` would have refused (the file was edited)
        is a UsageError naming the file and the field."""
        for field_name, value, what in (
            ("team.name", record.name, "a team's name"),
            ("team.member", record.member, "a teammate's name"),
        ):
            problem = name_problem(value, what)
            if problem is not None:
                raise UsageError(f"{source}: {field_name}: {problem}")
        lead = self.workers.main
        assert lead is not None
        return self._config(
            lead,
            definition,
            agent_id,
            model,
            name=record.member,
            team=record.name,
            plan=record.plan,
        )

    def rejoin(self, run: AgentRun, record: TeamRecord) -> None:
        """A teammate brought back from its transcript takes its place in its team again (the
        team made again when none of it is here): a teammate from now on, waiting for mail
        after each turn. A UsageError, before anything starts, when a running task here
        already has its name (it would not be reached by it)."""
        task = run.task
        assert task is not None
        holder = self.workers.registry.holder(record.member)
        if holder is not None and holder.id != run.id and not holder.done:
            where = f"a running member of team {holder.team!r}" if holder.team else "in use"
            raise UsageError(
                f"The name {record.member!r} is {where} (task {holder.id}): stop it first to "
                f"resume the earlier teammate {record.member} of team {record.name!r} "
                f"({run.id})."
            )
        run.team = task.team = record.name
        run.planning = record.plan
        self._enrol(record.name, record.member, run.id)
        if self.current is None:  # the lead's current team, unless it leads another now
            self.current = record.name

    def team_name(self, key: str, earlier: Sequence[str] = ()) -> str:
        """The name of the team `key` names ("" or "*": the current team), among the teams
        here and `earlier` (the teams of teammates a restart cut off, oldest first: with no
        current team, "*" is the newest of them); a UsageError naming them."""
        name = self.current if key in ("", "*") else key
        if name is None and earlier:
            name = earlier[-1]
        if name is not None and (name in self.teams or name in earlier):
            return name
        known = ", ".join(dict.fromkeys([*self.teams, *earlier])) or "none yet"
        what = "No team is current" if name is None else f"No team {key!r}"
        raise UsageError(f"{what}. Teams: {known}.")

    def _config(
        self,
        lead: AgentRun,
        definition: AgentDefinition,
        agent_id: str,
        model: str | None,
        *,
        name: str,
        team: str,
        plan: bool,
    ) -> AgentConfig:
        """A named agent's config with what a teammate needs: the agent tools (SendMessage
        always; all four when its file names no tools and denies none of them), the team's
        part of its prompt, and approvals asked of the person (`bubble`) or plan mode."""
        config: AgentConfig = self.workers.configs.named_config(lead, definition, agent_id, model)
        wanted = AGENT_TOOLS if definition.tools is None else ("SendMessage",)
        have = set(config.tools.names())
        extra: list[Tool[Any]] = [
            tool
            for tool in lead.config.tools
            if tool.name in wanted
            and tool.name not in have
            and not any(covers(rule, tool.name) for rule in definition.disallowedTools)
        ]
        text = "\n\n".join(b["text"] for b in config.system if b.get("type") == "text")
        gate = lead.config.gate.for_worker(
            agent_id, mode="plan" if plan else definition.permissionMode, unset="bubble"
        )
        return replace(
            config,
            tools=ToolSet([*config.tools, *extra]),
            system=[{"type": "text", "text": f"{text}\n\n{teammate_prompt(name, team)}"}],
            gate=gate,
        )

    # -- mail ----------------------------------------------------------------------------------

    def wake(self, run: AgentRun) -> None:
        """Mail came for a teammate: it is no longer idle (from now, not from when it reads
        it, so nobody waiting for the team to be quiet misses it)."""
        task = run.task
        if task is not None and task.idle:
            task.idle = False
            if task.activity == IDLE_ACTIVITY:
                task.activity = ""
            self.workers.registry.changed(task)
        run.wakeup.set()

    def post(self, run: AgentRun, text: str) -> None:
        """A formatted message into a running teammate's mailbox."""
        run.mailbox.append(text)
        self.wake(run)

    def to_lead(self, caller: AgentRun, text: str) -> None:
        """A formatted message from teammate `caller` for the parent conversation: queued for
        it like a notification (the parent answers it as it answers those)."""
        task = caller.task
        assert task is not None
        caller.reported = True
        self.workers.queue.enqueue(
            text,
            owner="main",
            mode="message",
            task_id=task.id,
            snapshot=task_snapshot(task, notification=text),
        )

    def send_lead(self, caller: AgentRun, message: str, summary: str | None) -> str:
        self.to_lead(caller, teammate_message(self.sender(caller), message, summary))
        return f"Message sent to {TEAM_LEAD}'s mailbox."

    def broadcast(
        self, caller: AgentRun | None, team: Team, message: str, summary: str | None
    ) -> str:
        """`message` into the mailbox of every running member of `team` but the sender (and
        the lead's, when a teammate sends it). Nobody to reach is said, not an error."""
        if not message.strip():
            raise UsageError("The message is empty.")
        text = teammate_message(self.sender(caller), message, summary)
        reached = []
        for name, agent_id in team.members.items():
            run = self.workers.runs.get(agent_id)
            if run is None or run is caller or run.task is None or run.task.done or run.stopping:
                continue
            self.post(run, text)
            reached.append(name)
        if caller is not None and caller.team is not None:
            self.to_lead(caller, text)
            reached.append(TEAM_LEAD)
        if not reached:
            return f"No teammates to broadcast to: nobody else in team {team.name!r} is running."
        return f"Message broadcast to {len(reached)} teammate(s): {', '.join(reached)}."

    def structured(self, caller: AgentRun, to: str, message: Structured) -> str:
        """A shutdown request, a shutdown answer or a plan approval, to one recipient."""
        team = self.context(caller)
        if team is None:
            raise UsageError(
                f"A {message.type} is a message between team members, and you are in no team."
            )
        if isinstance(message, ShutdownResponse):
            return self._shutdown_answer(caller, to, message)
        if caller.team is not None:
            raise UsageError(f"Only the team lead sends a {message.type}.")
        agent_id = team.members.get(to)
        run = self.workers.runs.get(agent_id or "")
        if run is None or run.task is None:
            known = ", ".join(team.members) or "none yet"
            raise UsageError(f"{to!r} is no member of team {team.name!r}. Members: {known}.")
        if run.task.done or run.stopping:
            raise UsageError(f"Teammate {to!r} is not running (status: {run.task.status}).")
        if isinstance(message, ShutdownRequest):
            self._requests += 1
            request_id = f"shutdown-{self._requests}@{to}"
            body: dict[str, JSON] = {"type": "shutdown_request", "request_id": request_id}
            body["from"] = TEAM_LEAD
            if message.reason:
                body["reason"] = message.reason
            self.post(run, teammate_message(TEAM_LEAD, json.dumps(body)))
            return f"Shutdown request sent to {to}. Request ID: {request_id}"
        body = {
            "type": "plan_approval_response",
            "request_id": message.request_id,
            "approved": message.approve,
        }
        if message.approve:
            definition = run.definition
            run.config.gate.ask_for(definition.permissionMode if definition else None)
            run.planning = False
            if run.transcript is not None:  # resumed after a restart, it stays out of plan
                run.transcript.update_meta(team=team_record(run))
        elif message.feedback:
            body["feedback"] = message.feedback
        self.post(run, teammate_message(TEAM_LEAD, json.dumps(body)))
        if message.approve:
            return f"Plan approved for {to}: it leaves plan mode and can carry the plan out."
        return f"Plan rejected for {to} with your feedback."

    def _shutdown_answer(self, caller: AgentRun, to: str, answer: ShutdownResponse) -> str:
        if caller.team is None:
            raise UsageError("Only a teammate answers a shutdown request.")
        if to not in (TEAM_LEAD, "main"):
            raise UsageError(f"A shutdown_response goes to {TEAM_LEAD!r}, not to {to!r}.")
        if answer.approve:
            caller.leaving = True
            return (
                "Shutdown approved: end your turn now, without further tool calls. Your run "
                "then ends and your lead is told."
            )
        reason = (answer.reason or "").strip()
        if not reason:
            raise UsageError("A rejected shutdown request needs a reason: say why you go on.")
        name = self.sender(caller)
        body = {
            "type": "shutdown_rejected",
            "request_id": answer.request_id,
            "from": name,
            "reason": reason,
        }
        self.to_lead(caller, teammate_message(name, json.dumps(body)))
        return f'Shutdown rejected ("{reason}"): you keep working.'

    # -- between turns -------------------------------------------------------------------------

    async def idle(self, run: AgentRun) -> list[str]:
        """A teammate ended a turn with nothing to read: tell the lead (unless it messaged the
        lead this turn), then wait, idle, for mail; what it reads next (empty when it is to
        leave). A stop cancels the wait."""
        task = run.task
        assert task is not None
        if not run.reported:
            self._idle_notice(run)
        run.reported = False
        task.idle = True
        task.activity = IDLE_ACTIVITY
        self.workers.registry.changed(task)
        try:
            while True:
                await run.wakeup.wait()
                pending = self.workers.take_inbox(run)
                if pending or run.leaving:
                    return pending
        finally:
            if task.idle or task.activity == IDLE_ACTIVITY:
                task.idle = False
                task.activity = ""
                self.workers.registry.changed(task)
            run.turn_start = len(run.history)

    def _idle_notice(self, run: AgentRun) -> None:
        name = self.sender(run)
        body: dict[str, JSON] = {"type": "idle_notification", "from": name}
        body["idleReason"] = "available"
        reply = text_since(run, run.turn_start)
        if reply:  # it did not send it to anyone: the lead reads it here
            cut = len(reply) > REPORT_CHARS
            body["lastReply"] = reply[: REPORT_CHARS - 1] + "…" if cut else reply
        self.to_lead(run, teammate_message(name, json.dumps(body, ensure_ascii=False)))
