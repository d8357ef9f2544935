"""Hooks: Claude Code's hook contract, from settings files and agent files.

Configuration (the `hooks` key of a settings file, or an agent file's front matter):

    {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "...",
                                                  "timeout": 60}]}]}

Events: `PreToolUse`, `PostToolUse` (the matcher is a tool-name pattern: a regular expression
matched against the whole name, `*` or empty for all), `SubagentStart`, `SubagentStop` (the
matcher is the agent type), `UserPromptSubmit`, `Stop`, `Notification` (no matcher). A hook
of an agent file applies to that agent's run only; its `Stop` hooks run as `SubagentStop`.

A command runs with `sh -c` in the project folder (`CLAUDE_PROJECT_DIR` set, the API key and
other credential variables removed from its environment, as for every tool), gets one JSON
object on stdin (`session_id`, `cwd`, `hook_event_name`, `agent_id`, and per event
`tool_name`/`tool_input`/`tool_response`, `prompt`, `agent_type`/`result`, `message`) and is
killed after its timeout (60 s unless it says). Matching hooks of one event run together,
off the event loop (asyncio subprocesses). What a hook answers:

* exit 2: a block; stderr is the reason (PreToolUse: the call is not run and the model reads
  the reason; PostToolUse: the reason is added to the tool result; UserPromptSubmit: the
  prompt is refused; Stop, SubagentStop: the agent is not let end, see below; Notification:
  the reason is one line in `Hooks.lines`);
* exit 0 with a JSON object on stdout: `decision: "block"` + `reason`, or for PreToolUse
  `hookSpecificOutput.permissionDecision` `allow` / `deny` / `ask` with
  `permissionDecisionReason`; `hookSpecificOutput.additionalContext` (UserPromptSubmit,
  PostToolUse) is added for the model; exit 0 with plain text adds that text as context for
  UserPromptSubmit;
* any other exit code, a timeout, a command that cannot start or output that is not the
  contract: one line (`Hooks.lines`, and the log); the session goes on as if the hook said
  nothing.

`Stop` (the parent's turn ends) and `SubagentStop` (an agent's run ends) hooks are given
`stop_hook_active` and `last_assistant_message` as well. A block (exit 2, or `decision:
"block"`) gives the agent another turn, whose message is `Stop hook feedback:` and the
reason, as the reference does; the hooks run again at its end with `stop_hook_active: true`.
After `STOP_BLOCK_LIMIT` blocks in a row the agent ends anyway, with one line in
`Hooks.lines`. `continue: false` lets it end. Only an agent that ended by itself (the
model's `end_turn` or `max_tokens`) is sent back; after an error, a refusal or its turn limit
a block is one line.

Someone else's hooks run only once the person approved them: a command hook of the project's
committed settings (`.claude/settings.json`, `.forkagent/settings.json`) or of a project agent
file (`.claude/agents/`, `.forkagent/agents/` in the work dir) runs when the person's own
settings (`~/.claude/settings.json`, `.claude/settings.local.json`, their `.forkagent` twins)
say `enableAllProjectHooks: true` or list its exact command in `enabledProjectHooks`
(`HookTrust`), and only in a folder the person trusts (`trust.py`); otherwise it is said once,
with why and what to do, in `Hooks.lines`. A changed command is a new command: it needs
approving again. The person's own files and agent files in `~/.claude/agents` need neither.
`disableAllHooks: true` in the person's own settings turns every hook off; in a (trusted)
project file, the project's hooks only (`HookTrust.project_off_by`).

A `PreToolUse` hook of another type (`prompt`, `agent`) is not run; the calls it matches are
asked (as for an `ask` answer), never let through unchecked. A decision value that is not one
of the contract's (`permissionDecision: "maybe"`) is read as
a deny. A hook's `allow` never overrides the permission rules: the call still goes through
the gate (a deny rule denies, an ask rule asks); its `ask` makes the gate ask as for an ask
rule (`PermissionGate.check(hook_asks=True)`); a block or deny is never turned into an allow.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..executors.confinement.listeners import aclosed_ports
from ..executors.confinement.sandbox import confined
from ..secrets import scrubbed_env

__all__ = [
    "APPROVE_HINT",
    "EVENTS",
    "NOT_TRUSTED_HINT",
    "STOP_BLOCK_LIMIT",
    "HookEntry",
    "HookOutcome",
    "HookTrust",
    "Hooks",
    "parse_hooks",
]

log = logging.getLogger(__name__)

EVENTS = (
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "SubagentStart",
    "SubagentStop",
    "Stop",
    "Notification",
)
NOT_RUN = frozenset(
    {"PreCompact", "SessionStart", "SessionEnd", "PermissionRequest", "PostToolUseFailure"}
)
"""Claude Code events that exist but are not run here (refused with that reason)."""
MATCHED = frozenset({"PreToolUse", "PostToolUse", "SubagentStart", "SubagentStop"})
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse"})
OLDER_TOOL_NAMES = {"Agent": ("Task",)}
"""Claude Code's earlier names of a tool, which a hook's matcher may still use."""
DEFAULT_TIMEOUT = 60.0
MAX_OUTPUT = 100_000
MAX_LINES = 200
STOP_BLOCK_LIMIT = 8
"""How many times in a row Stop (or SubagentStop) hooks may send an agent back to work
before it ends anyway: the reference's cap, so that a check that can never pass does not
spend turns forever."""
STOP_FEEDBACK = "Stop hook feedback:\n"
"""What heads the message that gives an agent another turn (the hooks' reason follows)."""


@dataclass(frozen=True)
class HookEntry:
    """One command hook: its event, matcher, command, timeout and where it was written."""

    event: str
    matcher: str
    command: str
    timeout: float
    source: str
    runnable: bool = True  # False: a PreToolUse check of a type not run here (asks instead)

    def matches(self, subject: str | None) -> bool:
        """Whether the matcher takes `subject` (a tool name, or an agent type); a tool is
        matched by its older name too (`Task` for `Agent`, as settings files still say)."""
        if self.event not in MATCHED or self.matcher in ("", "*"):
            return True
        names = [subject or ""]
        if self.event in TOOL_EVENTS:
            names += OLDER_TOOL_NAMES.get(subject or "", ())
        try:
            return any(re.fullmatch(self.matcher, name) is not None for name in names)
        except re.error:
            return False


APPROVE_HINT = (
    "to run it, run %hooks approve, or add its command to enabledProjectHooks (or set "
    "enableAllProjectHooks: true) in .claude/settings.local.json or ~/.claude/settings.json; "
    "it runs from the next turn"
)


NOT_TRUSTED_HINT = "this folder is not trusted (%trust shows it; %trust yes trusts it)"


@dataclass(frozen=True)
class HookTrust:
    """The project's hooks the person approved in their own settings, and whether the
    folder is trusted (see the module doc)."""

    enable_all: bool = False
    commands: frozenset[str] = frozenset()
    disabled_by: str | None = None
    """The person's settings file that says `disableAllHooks: true`: then no hook runs."""
    folder_trusted: bool = False
    """Whether the person trusts the folder (`trust.py`): until then no hook of its files
    runs, approved or not."""
    project_off_by: str | None = None
    """The project's (trusted) file that says `disableAllHooks: true`: the project's hooks
    (its files' and its agent files') are off; the person's own still run."""

    def allows(self, entry: HookEntry) -> bool:
        """Whether `entry`, from someone else's file, may be used. A check of a type not run
        here executes nothing and only makes calls asked: it needs neither trust nor
        approval."""
        return self.why_not(entry) is None

    def why_not(self, entry: HookEntry) -> str | None:
        """Why `entry`, from someone else's file, may not run (None: it may)."""
        if not entry.runnable:
            return None
        if not self.folder_trusted:
            return NOT_TRUSTED_HINT
        if self.enable_all is True or entry.command in self.commands:
            return None
        return f"it is not approved (a project's file); {APPROVE_HINT}"


@dataclass
class HookOutcome:
    """What the hooks of one event said together."""

    blocked: bool = False
    reason: str = ""
    decision: Literal["allow", "deny", "ask"] | None = None
    context: list[str] = field(default_factory=list)
    ran: int = 0
    stopped: bool = False
    """A hook answered `continue: false`: the agent stops (it is not kept going)."""


def parse_hooks(data: object, source: str) -> tuple[list[HookEntry], list[str]]:
    """The hook entries of one `hooks` value, and a line per part that cannot be used."""
    entries: list[HookEntry] = []
    refused: list[str] = []
    if not isinstance(data, dict):
        return [], [f"hooks in {source}: is not an object of events"]
    for event, groups in data.items():
        where = f"hooks.{event} in {source}"
        if event in NOT_RUN:
            refused.append(f"{where}: a Claude Code event this runtime does not run")
            continue
        if event not in EVENTS:
            refused.append(f"{where}: unknown event (known: {', '.join(EVENTS)})")
            continue
        if not isinstance(groups, list):
            refused.append(f"{where}: is not a list of matchers")
            continue
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                refused.append(f"{where}: an entry is not {{'matcher': ..., 'hooks': [...]}}")
                continue
            matcher = group.get("matcher", "")
            if not isinstance(matcher, str):
                refused.append(f"{where}: matcher {matcher!r} is not a string")
                continue
            try:
                re.compile(matcher if matcher not in ("", "*") else "")
            except re.error as exc:
                refused.append(f"{where}: matcher {matcher!r} is not a pattern ({exc})")
                continue
            for hook in group["hooks"]:
                entry = _entry(hook, event, matcher, source, where, refused)
                if entry is not None:
                    entries.append(entry)
    return entries, refused


def _entry(
    hook: object, event: str, matcher: str, source: str, where: str, refused: list[str]
) -> HookEntry | None:
    if not isinstance(hook, dict):
        refused.append(f"{where}: a hook is an object like {{'type': 'command', ...}}")
        return None
    kind = hook.get("type", "command")
    if kind != "command":
        shown = repr(kind) if len(repr(kind)) <= 40 else repr(kind)[:37] + "..."
        line = f"{where}: only hooks of type 'command' run here (this one is {shown})"
        if event == "PreToolUse":  # a check that cannot run: what it guards is asked instead
            refused.append(line + "; the calls it matches are asked instead")
            return HookEntry(event, matcher, "", DEFAULT_TIMEOUT, source, runnable=False)
        refused.append(line)
        return None
    command = hook.get("command")
    if not isinstance(command, str) or not command.strip():
        refused.append(f"{where}: a hook without a 'command'")
        return None
    timeout = hook.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        refused.append(f"{where}: timeout {timeout!r} is not a positive number of seconds")
        return None
    return HookEntry(event, matcher, command, float(timeout), source)


class Hooks:
    """The hooks in force for one agent: the settings files' and its agent file's."""

    def __init__(
        self,
        entries: list[HookEntry],
        *,
        workdir: Path,
        session_id: str = "",
        env: Mapping[str, str] | None = None,
        lines: list[str] | None = None,
        trust: HookTrust | None = None,
        said: set[tuple[str, str, str]] | None = None,
    ) -> None:
        self.entries = list(entries)
        self.workdir = workdir
        self.session_id = session_id
        self.env = env
        self.lines: list[str] = lines if lines is not None else []
        """One line per hook that failed (shared by a session and its agents)."""
        self.trust = trust if trust is not None else HookTrust()
        """What the person approved of the project's hooks (from the last settings read)."""
        self.said: set[tuple[str, str, str]] = said if said is not None else set()
        """The hooks not approved already said (source, event, command): each said once."""

    def not_approved(self, entry: HookEntry) -> None:
        """Say once that `entry` (someone else's) does not run, why, and what to do."""
        key = (entry.source, entry.event, entry.command)
        if key in self.said:
            return
        self.said.add(key)
        shown = entry.command if len(entry.command) <= 200 else entry.command[:197] + "..."
        why = self.trust.why_not(entry) or "it is not approved"
        if why.startswith("it is not approved"):
            why = why.removeprefix("it is ")
            self.note(f"hook of {entry.source} not run: {entry.event} command {shown!r} is {why}")
            return
        self.note(f"hook of {entry.source} not run: {entry.event} command {shown!r}: {why}")

    def scoped(self, extra: list[HookEntry], *, trusted: bool) -> Hooks:
        """These hooks plus an agent file's (its `Stop` hooks run when it ends:
        `SubagentStop`). Unless the file is `trusted` (the person's own), only its hooks the
        person approved in a folder they trust are added; each other one is said once."""
        if self.trust.disabled_by is not None:
            extra = []  # the person's disableAllHooks: an agent file's hooks are off too
        elif trusted is not True and self.trust.project_off_by is not None:
            extra = []  # the project's disableAllHooks: its agent files' hooks are off
        elif trusted is not True:
            for entry in extra:
                if not self.trust.allows(entry):
                    self.not_approved(entry)
            extra = [e for e in extra if self.trust.allows(e)]
        own = [
            HookEntry("SubagentStop", e.matcher, e.command, e.timeout, e.source, e.runnable)
            if e.event == "Stop"
            else e
            for e in extra
        ]
        return Hooks(
            [*self.entries, *own],
            workdir=self.workdir,
            session_id=self.session_id,
            env=self.env,
            lines=self.lines,
            trust=self.trust,
            said=self.said,
        )

    def has(self, event: str) -> bool:
        return any(e.event == event for e in self.entries)

    def note(self, line: str) -> None:
        log.warning("%s", line)
        self.lines.append(line)
        if len(self.lines) > MAX_LINES:
            del self.lines[: MAX_LINES // 10]

    async def run(
        self, event: str, payload: Mapping[str, object], subject: str | None = None
    ) -> HookOutcome:
        """Run the hooks of `event` that match `subject` (tool name or agent type)."""
        chosen = [e for e in self.entries if e.event == event and e.matches(subject)]
        outcome = HookOutcome()
        if any(not e.runnable for e in chosen):
            outcome.decision = "ask"  # raised to a deny below if a hook that ran denies
            chosen = [e for e in chosen if e.runnable]
        if not chosen:
            return outcome
        data = {
            "session_id": self.session_id,
            "transcript_path": "",
            "cwd": str(self.workdir),
            "hook_event_name": event,
            **payload,
        }
        stdin = json.dumps(data, default=str).encode("utf-8")
        results = await asyncio.gather(*(self._one(e, stdin) for e in chosen))
        reasons: list[str] = []
        for entry, (code, out, err) in zip(chosen, results, strict=True):
            if code is None:
                continue  # did not run (its line is noted)
            outcome.ran += 1
            if code == 2:
                outcome.blocked = True
                reasons.append(err.strip() or f"blocked by the hook {entry.command!r}")
                continue
            if code != 0:
                self.note(
                    f"{event} hook {entry.command!r} ({entry.source}) exited with {code}: "
                    f"{_one_line(err) or 'no message'}"
                )
                continue
            self._read_output(event, entry, out, outcome, reasons)
        if outcome.blocked:
            outcome.decision = "deny"  # a block is never turned into an allow
        outcome.reason = "\n".join(reasons)
        return outcome

    def _read_output(
        self, event: str, entry: HookEntry, out: str, outcome: HookOutcome, reasons: list[str]
    ) -> None:
        text = out.strip()
        if not text.startswith("{"):
            if text and event == "UserPromptSubmit":
                outcome.context.append(text)
            return
        try:
            answer = json.loads(text)
        except ValueError:
            self.note(f"{event} hook {entry.command!r}: its output is not JSON; ignored")
            return
        if not isinstance(answer, dict):
            return
        specific = answer.get("hookSpecificOutput")
        specific = specific if isinstance(specific, dict) else {}
        extra = specific.get("additionalContext")
        if isinstance(extra, str) and extra.strip():
            outcome.context.append(extra)
        reason = answer.get("reason") or specific.get("permissionDecisionReason") or ""
        reason = reason if isinstance(reason, str) else json.dumps(reason)
        decision = answer.get("decision")
        if decision is not None:
            if decision in ("block", "deny"):
                outcome.blocked = True
                reasons.append(reason or f"blocked by the hook {entry.command!r}")
            elif decision not in ("approve", "allow", "undefined"):
                outcome.blocked = True  # an unexpected value: deny
                reasons.append(f"the hook {entry.command!r} answered decision {decision!r}")
            elif event == "PreToolUse":
                self._decide(outcome, "allow")
        if answer.get("continue") is False:
            outcome.blocked = outcome.stopped = True
            stop = answer.get("stopReason")
            reasons.append(stop if isinstance(stop, str) and stop else reason or "stopped")
        permission = specific.get("permissionDecision")
        if event == "PreToolUse" and permission is not None:
            if permission in ("allow", "ask", "deny"):
                self._decide(outcome, permission)
                if permission == "deny":
                    outcome.blocked = True
                    reasons.append(reason or f"denied by the hook {entry.command!r}")
            else:
                outcome.blocked = True
                reasons.append(
                    f"the hook {entry.command!r} answered permissionDecision {permission!r}"
                )

    async def stop_check(
        self,
        event: Literal["Stop", "SubagentStop"],
        payload: Mapping[str, object],
        subject: str | None,
        *,
        blocked: int,
        may_go_on: bool,
    ) -> str | None:
        """Run the `event` hooks as an agent's turn ends (`blocked`: how many times in a row
        they already sent it back; `may_go_on`: it ended by itself). The message of its next
        turn when they block and the limit allows (see the module doc); None: it ends."""
        if not self.has(event):
            return None
        said = await self.run(event, {**payload, "stop_hook_active": blocked > 0}, subject)
        if not said.blocked or said.stopped:
            return None
        who = payload.get("agent_id", "main")
        if not may_go_on:
            self.note(f"{event} hook of {who}: {_one_line(said.reason)} (its run had ended)")
            return None
        if blocked >= STOP_BLOCK_LIMIT:
            self.note(
                f"{event} hooks sent {who} back {blocked} times in a row; it ended anyway "
                f"(the limit is {STOP_BLOCK_LIMIT}): {_one_line(said.reason)}"
            )
            return None
        return STOP_FEEDBACK + said.reason

    @staticmethod
    def _decide(outcome: HookOutcome, value: Literal["allow", "deny", "ask"]) -> None:
        rank = {None: 0, "allow": 1, "ask": 2, "deny": 3}
        if rank[value] > rank[outcome.decision]:
            outcome.decision = value

    async def _one(self, entry: HookEntry, stdin: bytes) -> tuple[int | None, str, str]:
        env = scrubbed_env(self.env)  # no credential reaches a hook
        env["CLAUDE_PROJECT_DIR"] = str(self.workdir)
        try:
            proc = await asyncio.create_subprocess_exec(
                *confined(["/bin/sh", "-c", entry.command], closed=await aclosed_ports()),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=str(self.workdir),
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            self.note(f"{entry.event} hook {entry.command!r} could not start: {exc}")
            return None, "", ""
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin), entry.timeout)
        except asyncio.TimeoutError:
            _kill(proc)
            await proc.wait()
            self.note(
                f"{entry.event} hook {entry.command!r} ({entry.source}) was stopped after "
                f"its timeout of {entry.timeout:g} s"
            )
            return None, "", ""
        except asyncio.CancelledError:
            _kill(proc)
            with contextlib.suppress(Exception):  # reap it: nothing of it outlives the loop
                await asyncio.wait_for(proc.wait(), 5)
            raise
        code = proc.returncode if proc.returncode is not None else -1
        return code, _text(out), _text(err)


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _text(raw: bytes) -> str:
    return raw[:MAX_OUTPUT].decode("utf-8", errors="replace")


def _one_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1][:300] if lines else ""
