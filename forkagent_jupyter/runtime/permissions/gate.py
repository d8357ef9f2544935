"""Permissions: modes, allow/ask/deny rules, and the policy that answers everything else.

The loop asks `PermissionGate.check` once per tool call, after validating the input. In
order (Claude Code's order: deny, then ask, then allow, in every mode):

1. a matching **deny rule** denies, in every mode (`bypassPermissions` too); so does a file
   tool's call that names the kernel's connection file or a file in Jupyter's runtime folder
   (`sandbox.kernel_files`: their key has a kernel run any code), and searches never show
   them; and so does a call outside the gate's `limits` (a command's `allowed-tools`, see
   `limits.py`), which holds for every gate made from this one (`for_worker`, `limited`);
2. **containment**: a path outside the work directory and the additional directories
   (symlinks and `..` resolved) is denied unless an allow rule *with a spec* for that tool
   matches it (`Read(//data/**)`); this holds in every mode and for tools that need no
   approval too;
3. mode `plan` denies every tool not `allowed_in_plan`, telling the model it is planning;
4. a matching **ask rule** puts the call to the policy whatever the mode and the allow rules
   say (so does a Bash line whose program name is computed when it runs, `$CMD x`, while a
   Bash deny rule with a spec is in force: the deny rule could not be checked against it;
   and one that runs code through git, or a git subcommand that may be an alias, while a
   Bash or git rule it could not be checked against is: `matching.unfollowed`; a write to a
   settings or agent file, or to a file that some program runs later on its own,
   `runs_later`: `.git/`, `ipykernel_launcher.py`, IPython's startup folder..., by a file
   tool or by a Bash line; and a call its tool cannot run with the protection it should have
   on this system, `Tool.unconfined`: Bash in a kernel where no namespace can be made); mode
   `dontAsk` and a session without a policy deny it;
5. mode `bypassPermissions` allows;
6. tools that do not `needs_approval` (Read, Glob, Grep, TaskOutput...) are allowed;
7. a matching **allow rule** allows (a Bash rule allows a line that writes files only if
   a Write of each would be allowed, step 8 included, or if it names the exact line);
8. mode `acceptEdits` allows the tools that edit files (their paths are inside by step 2);
9. mode `dontAsk` denies (what no rule allows is refused, without asking);
10. otherwise the `PermissionPolicy` decides - in `bubble` (the mode of forked workers) the
   same, and the request carries the worker's task id so a UI can show it on the worker's
   card. Without a policy the call is denied with a message saying how to allow it. The
   request carries the tool's own presentation of the call (`Tool.describe`, `Tool.preview`:
   for a file change the exact diff `run` would write, in the calling agent's work
   directory); a call whose preview says it would fail (an Edit whose old_string is missing
   or not unique) is refused with that error before anyone is asked, and an approved call
   whose preview changed meanwhile (the file was edited while the person looked) is refused
   too.

An `Allow` may carry `updated_input` (validated against the tool's input model and checked
again by steps 1-2) and `remember_rule` / `remember` ("allow for session": the gate adds the
rule, shared by the session and all its workers). The rule "allow for session" adds
(`PermissionRequest.suggested_rule`) is exactly as wide as the call the person saw: the exact
command (none for a line with an unquoted `*`, which a rule reads as a wildcard, or several
lines), the exact file with glob characters escaped, the exact agent type; never a prefix,
and a remembered rule that would widen a wrapper, shell or interpreter (`Bash(sh:*)`) is
refused. A bare deny rule removes its tools from what the model is offered (`offered`).
A Bash call that writes files (a redirection, `sort -o`, `git log --output=`, `cp`...) is
decided like a Write of each too (`matching`): an Edit deny or ask rule for one denies or asks
it (steps 1 and 4), as does a settings or agent file (always asked, like a Write of it), and
the Bash allow rule alone does not allow the writes (step 7).
Every decision is logged (`gate.log`). Rule syntax and matching: `permission_rules`; one call
against the rules in force: `rule_matching`; the answers and policies: `permission_policies`;
the modes: `permission_modes`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ...messages_api.shapes import JSON
from ..config.settings import SettingsRead
from ..executors.confinement.sandbox import kernel_files
from ..secrets import redact
from ..tools.base import Tool, ToolContext, ToolError, describe_call, format_validation_error
from ..tools.files.paths import shown_path
from .limits import ToolLimit
from .matching import (
    CallFacts,
    allowed_by,
    bash_allowed_by,
    call_facts,
    kernel_secret,
    matching,
    names_its_writes,
    outside_denial,
    read_guard,
    suggest_rule,
    touches_settings,
    unfollowed,
    widens_a_runner,
    write_asks,
    writes_allowed,
)
from .modes import MODES, PermissionMode, worker_mode
from .policies import (
    Allow,
    AllowAll,
    CallbackPolicy,
    Decision,
    Deny,
    DenyAll,
    PermissionPolicy,
    PermissionRequest,
    ScriptedPolicy,
)
from .rulebook import RefusedRule, RuleBook, RuleKind
from .rules import EDITING_TOOLS, READING_TOOLS, Rule
from .runs_later import runs_later

__all__ = [
    "Allow",
    "AllowAll",
    "CallbackPolicy",
    "Decision",
    "Deny",
    "DenyAll",
    "PermissionGate",
    "PermissionMode",
    "PermissionPolicy",
    "PermissionRequest",
    "RefusedRule",
    "Rule",
    "RuleBook",
    "ScriptedPolicy",
    "ToolLimit",
]

log = logging.getLogger(__name__)

EDIT_TOOLS = EDITING_TOOLS
READ_TOOLS = READING_TOOLS
MAX_LOG = 10_000

Verdict = tuple[Allow | Deny, str, str | None]
"""A decision, what made it (rule/limit/workdir/mode/no-approval/preview/policy/no-policy/
input), and the rule that did (or the rule "allow for session" added)."""


@dataclass(frozen=True)
class _Ask:
    """The rules and the mode leave the call to the policy; `why` it must be asked even
    where an allow rule or the mode would let it through (None: nothing forces asking);
    `always`: no rule can ever let it through (a settings file, a file that runs later), so
    "allow for session" has nothing to add."""

    why: str | None
    always: bool = False


class PermissionGate:
    """Decides each tool call (see the module doc). `mode` may be changed at any time;
    `for_worker` makes the gate of a background agent, sharing this gate's rules and log."""

    def __init__(
        self,
        *,
        mode: PermissionMode = "default",
        policy: PermissionPolicy | None = None,
        allow: Sequence[str] = (),
        deny: Sequence[str] = (),
        ask: Sequence[str] = (),
        task_id: str | None = None,
        rules: RuleBook | None = None,
        approval_timeout: float | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"Unknown permission mode {mode!r}; use one of {', '.join(MODES)}.")
        self._mode: PermissionMode = mode
        self.mode_source = "the session" if mode != "default" else "the default"
        self._settings_may_set_mode = mode == "default"
        self.policy = policy
        self.task_id = task_id
        self._approval_timeout = approval_timeout
        self._parent: PermissionGate | None = None  # a worker's gate follows its session's
        self._asked_mode: PermissionMode | None = None
        self._unset_mode: PermissionMode = "bubble"
        self.recorder: Callable[[dict[str, JSON]], None] | None = None
        """Called with each decision (the runtime writes them to the agent's transcript)."""
        self.limits: tuple[ToolLimit, ...] = ()
        """The calls this gate's agent may make at all: each limit must cover a call (none:
        any call; see `limited`)."""
        self.rules = rules if rules is not None else RuleBook()
        self.rules.add_all(list(allow), "allow", "Session(allow=...)")
        self.rules.add_all(list(ask), "ask", "Session(ask=...)")
        self.rules.add_all(list(deny), "deny", "Session(deny=...)")

    @property
    def mode(self) -> PermissionMode:
        """The mode in force. A worker's gate derives it from its session's gate at every
        call, so a change there (`plan`, to stop all writing) reaches running workers."""
        if self._parent is None:
            return self._mode
        return worker_mode(self._parent.mode, self._asked_mode, self._unset_mode)

    @mode.setter
    def mode(self, value: PermissionMode) -> None:
        if value not in MODES:
            raise ValueError(f"Unknown permission mode {value!r}; use one of {', '.join(MODES)}.")
        self._mode = value
        self._parent = None  # set on a worker's gate: it no longer follows the session
        self.mode_source = "set in this session"
        self._settings_may_set_mode = False  # a mode set by hand wins over the files

    def apply_settings(self, read: SettingsRead) -> None:
        """Rules, additional directories and the default mode from the settings files (read
        by `settings.read_settings`, on a thread). The files' `defaultMode` applies while the
        session's mode is the default one nobody set."""
        self.rules.apply_settings(read)
        if not self._settings_may_set_mode or self._parent is not None:
            return
        if read.mode is not None:
            self._mode, self.mode_source = read.mode[0], read.mode[1]  # type: ignore[assignment]
        else:
            self._mode, self.mode_source = "default", "the default"

    def summary(self) -> dict[str, Any]:
        """The rules in force with where each came from, the refused ones with why, the
        mode and the additional directories (`%permissions`, `api.permissions()`)."""
        book = self.rules
        return {
            "mode": self.mode,
            "mode_source": self.mode_source,
            **{
                kind: [{"rule": str(r), "source": r.source or "?"} for r in book.of(kind)]
                for kind in ("allow", "ask", "deny")
            },
            "directories": [
                {"path": str(p), "source": book.directory_sources.get(p, "?")}
                for p in book.directories
            ],
            "refused": [
                {"kind": r.kind, "rule": r.text, "source": r.source, "reason": r.reason}
                for r in book.refused
            ],
            "files": list(book.settings_files),
            "folder_trust": book.folder_trust,
            "withheld": [{"what": w, "source": src} for w, src in book.withheld],
        }

    @property
    def approval_timeout(self) -> float | None:
        if self._parent is not None:
            return self._parent.approval_timeout
        return self._approval_timeout

    @approval_timeout.setter
    def approval_timeout(self, value: float | None) -> None:
        self._approval_timeout = value

    @property
    def log(self) -> list[dict[str, JSON]]:
        """Every decision: tool, summary, decision, by (rule/limit/workdir/mode/no-approval/
        preview/policy/no-policy/input/error), rule, message, agent_id, task_id."""
        return self.rules.log

    def add_rule(
        self, rule: str, *, deny: bool = False, kind: RuleKind | None = None, source: str = ""
    ) -> Rule:
        """Add an allow (or `deny`, or `kind`) rule for the rest of the session; raises
        ValueError (one line) if the text is not a rule a user can mean."""
        return self.rules.add(rule, kind or ("deny" if deny else "allow"), source)

    def hides(self, tool: str) -> bool:
        """Whether a bare deny rule takes `tool` away from the model."""
        return any(r.spec is None and r.covers(tool) for r in self.rules.deny)

    def offered(self, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The tool definitions the model is offered: those no bare deny rule covers."""
        if not any(r.spec is None for r in self.rules.deny):
            return specs
        return [s for s in specs if not self.hides(str(s.get("name")))]

    def for_worker(
        self, task_id: str, mode: PermissionMode | None = None, unset: PermissionMode = "bubble"
    ) -> PermissionGate:
        """A worker's gate, sharing this gate's rules and log; its mode and approval timeout
        follow this gate's as they change (see `permission_modes.worker_mode`; `unset`: the
        mode of a worker that asks for none while the session is in `default`)."""
        gate = PermissionGate(
            mode=worker_mode(self.mode, mode, unset),
            policy=self.policy,
            task_id=task_id,
            rules=self.rules,
        )
        gate._parent = self
        gate._asked_mode = mode
        gate._unset_mode = unset
        gate.limits = self.limits  # what a limited agent starts is limited alike
        return gate

    def ask_for(self, mode: PermissionMode | None) -> None:
        """A worker's gate asks for `mode` from now on, as `for_worker` would have made it (a
        teammate whose plan its lead approved leaves `plan`); never wider than the session
        allows (`worker_mode`)."""
        self._asked_mode = mode

    def limited(self, limit: ToolLimit) -> PermissionGate:
        """This gate for an agent that may make only the calls `limit` covers (a command's
        `allowed-tools`): the same rules, log, policy and recorder, its mode following this
        gate's. A gate already limited keeps its limits too (each must cover a call)."""
        gate = PermissionGate(
            mode=self.mode, policy=self.policy, task_id=self.task_id, rules=self.rules
        )
        gate._parent = self
        gate._asked_mode = None
        gate._unset_mode = "default"  # follows this gate's mode exactly
        gate.recorder = self.recorder
        gate.limits = (*self.limits, limit)
        return gate

    def _outside_limit(self, facts: CallFacts) -> ToolLimit | None:
        """The first limit that does not cover the call (None: every one does)."""
        return next((lim for lim in self.limits if not lim.covers(facts)), None)

    # -- deciding ------------------------------------------------------------------------

    async def check(
        self,
        tool: Tool[Any],
        args: BaseModel,
        ctx: ToolContext,
        raw_input: dict[str, Any],
        *,
        hook_asks: bool = False,
    ) -> Allow | Deny:
        """The decision for one validated call (never raises, except cancellation).
        `hook_asks`: a PreToolUse hook answered "ask": the call is asked like an ask rule's
        (deny rules and plan mode still win; `dontAsk` refuses it)."""
        waited: list[float] = []  # when the policy was asked and when it answered
        try:
            facts = self._facts(tool, args, ctx)
            hidden = kernel_files() if facts.paths else []
            if facts.paths and tool.name in READ_TOOLS:
                ctx.services.read_guard = read_guard(self.rules, ctx.workdir, hidden)
            secret = next(
                (s for p in facts.paths if (s := kernel_secret(p, hidden)) is not None), None
            )
            decision: Allow | Deny
            if secret is not None:
                decision = _kernel_secret_denial(tool.name, facts.root, secret)
                by, rule = "kernel", None
            else:
                decision, by, rule = await self._decide(
                    tool, args, ctx, raw_input, facts, waited, hook_asks
                )
        except Exception as exc:  # a bad path (NUL byte...) or a bug: refuse, never crash
            log.warning("permission check of %s failed: %s", tool.name, redact(repr(exc)))
            decision = Deny(f"{tool.name} refused: its input could not be checked ({exc}).")
            by, rule = "error", None
        entry: dict[str, JSON] = {
            "tool": tool.name,
            "summary": describe_call(tool, args),
            "decision": decision.behavior,
            "by": by,
            "rule": rule,
            "agent_id": ctx.agent_id,
            "task_id": self.task_id,
        }
        if isinstance(decision, Deny):
            entry["message"] = redact(decision.message)
        if len(waited) == 2:  # the policy (the person, on a card) was asked: the wait
            entry["asked_at"], entry["answered_at"] = (round(t, 3) for t in waited)
        self.rules.log.append(entry)
        if self.recorder is not None:
            self.recorder(entry)
        if len(self.rules.log) > MAX_LOG:
            del self.rules.log[: MAX_LOG // 10]
        return decision

    def _facts(self, tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> CallFacts:
        return call_facts(self.rules, tool, args, ctx)

    async def _decide(
        self,
        tool: Tool[Any],
        args: BaseModel,
        ctx: ToolContext,
        raw_input: dict[str, Any],
        facts: CallFacts,
        waited: list[float],
        hook_asks: bool = False,
    ) -> Verdict:
        unconfined = await tool.unconfined(args, ctx)
        ruled = self._by_rules(tool, facts, ctx, hook_asks, unconfined)
        if isinstance(ruled, _Ask):
            return await self._by_policy(
                tool, args, ctx, raw_input, facts, waited, ruled.why, ruled.always
            )
        return ruled

    def _by_rules(
        self,
        tool: Tool[Any],
        facts: CallFacts,
        ctx: ToolContext,
        hook_asks: bool,
        unconfined: str | None = None,
    ) -> Verdict | _Ask:
        """Steps 1-9 of the module doc: what the rules and the mode decide, or that the
        policy must be asked."""
        name = tool.name
        denied = matching(self.rules.deny, facts)
        if denied is not None:
            return Deny(f"{name} call denied by the rule {denied}."), "rule", str(denied)
        outside_limit = self._outside_limit(facts)
        if outside_limit is not None:
            return Deny(outside_limit.refusal(name)), "limit", None
        outside = outside_denial(self.rules, facts, ctx.workdir)
        if outside is not None:
            return outside, "workdir", None
        mode = self.mode
        if mode == "plan" and not tool.allowed_in_plan:
            return (
                Deny(
                    f"{name} is not available in plan mode. Investigate with read-only tools "
                    "(Read, Glob, Grep) and present your plan; changes come after the user "
                    "approves it and leaves plan mode."
                ),
                "mode",
                None,
            )
        asked = matching(self.rules.ask, facts)
        why: str | None = None  # why it must be asked, whatever the mode and allow rules say
        always = False  # asked in every mode, and no remembered rule could let it through
        writes = name in EDIT_TOOLS or (bool(facts.paths) and name not in READ_TOOLS)
        if asked is not None:
            why = f"the rule {asked} asks for the user's approval"
        elif writes and touches_settings(facts, self.rules.home):
            why = (
                "a change to a settings or agent file (they hold the permission rules and "
                "hooks, which run commands) is always approved by the user"
            )
            always = True
        elif writes and (later := self._runs_later(facts)) is not None:
            why, always = later, True
        elif name == "Bash":
            why = unfollowed(self.rules, facts) or write_asks(self.rules, facts)
        if why is None and hook_asks:
            why = "a PreToolUse hook asks for the user's approval"
        if why is None and unconfined is not None:
            why = f"{unconfined}, so it is approved by the user"
        if why is None:
            if mode == "bypassPermissions":
                return Allow(), "mode", None
            if not tool.needs_approval:
                return Allow(), "no-approval", None
            allowed = self._allowed(facts, mode)
            if allowed is not None:
                return Allow(), "rule", str(allowed)
            if mode == "acceptEdits" and name in EDIT_TOOLS:
                return Allow(), "mode", None
        if mode == "dontAsk":
            if why is not None:
                return Deny(f"{name} refused: {why}, and this session does not ask."), "mode", None
            return (
                Deny(
                    f"{name} refused: no rule allows this call and this session does not ask "
                    "(permission mode dontAsk). Tell the user what you wanted to do."
                ),
                "mode",
                None,
            )
        return _Ask(why, always)

    def _allowed(self, facts: CallFacts, mode: PermissionMode) -> Rule | None:
        """The allow rule that allows the call (step 7); for a Bash line that writes files,
        only if those writes are allowed too (`writes_allowed`)."""
        if facts.tool != "Bash":
            return allowed_by(self.rules, facts)
        used = bash_allowed_by(self.rules, facts)
        if not used:
            return None
        if (facts.writes or facts.unread) and not writes_allowed(
            self.rules, facts, accept_edits=mode == "acceptEdits", named=names_its_writes(used)
        ):
            return None
        return used[0]

    def _runs_later(self, facts: CallFacts) -> str | None:
        """Why the call writes a file that runs later without anyone choosing to run it
        (`runs_later`), in one line, or None."""
        for path in facts.paths:
            reason = runs_later(path, [self.rules.home])
            if reason is not None:
                shown = shown_path(facts.root, path)
                shown = shown if shown.isprintable() else repr(shown)  # one line, whatever the name
                return (
                    f"{shown} runs later without being asked ({reason}), so a change to it "
                    "is always approved by the user"
                )
        return None

    async def _by_policy(
        self,
        tool: Tool[Any],
        args: BaseModel,
        ctx: ToolContext,
        raw_input: dict[str, Any],
        facts: CallFacts,
        waited: list[float],
        why: str | None,
        always: bool = False,
    ) -> Verdict:
        """Step 10: the policy decides, on the call as the tool presents it; what it allowed
        must still hold when it answers."""
        name = tool.name
        suggestion = None if always else suggest_rule(facts, ctx.workdir)
        if self.policy is None and why is not None:
            return Deny(f"{name} refused: {why}, and no one can answer."), "no-policy", None
        if self.policy is None:
            return (
                Deny(
                    f"{name} needs the user's approval, and no one can give it in this "
                    "session (no permission policy). Tell the user what you wanted to do; they "
                    "can allow it with permission_mode='acceptEdits' (file edits in the work "
                    "directory) or 'bypassPermissions', or with a rule such as "
                    f"{suggestion or name}."
                ),
                "no-policy",
                None,
            )
        try:
            preview = await tool.preview(args, ctx)
        except ToolError as exc:  # the call would fail: the model hears why, nobody is asked
            return Deny(str(exc) or f"{name} would fail."), "preview", None
        request = PermissionRequest(
            tool_name=name,
            input=dict(raw_input),
            agent_id=ctx.agent_id,
            task_id=self.task_id,
            summary=describe_call(tool, args),
            preview=preview,
            subject=facts.subject,
            outside_paths=tuple(str(p) for p in facts.outside),
            suggested_rule=suggestion,
            reason=why,
        )
        waited.append(time.time())
        try:
            decision = await self._ask(request)
        finally:
            waited.append(time.time())
        if isinstance(decision, Deny):
            return decision, "policy", None
        if decision.updated_input is not None:
            problem = self._recheck(tool, decision.updated_input, ctx)
            if problem is not None:
                return problem, "input", None
        else:
            changed = await self._changed_since(tool, args, ctx, preview)
            if changed is not None:
                return changed, "preview", None
        return decision, "policy", self._remember(decision, suggestion)

    def _remember(self, decision: Allow, suggestion: str | None) -> str | None:
        """Add the rule an approval asks to remember (none that widens a wrapper, shell or
        interpreter); the rule added, or None."""
        remembered = decision.remember_rule or (suggestion if decision.remember else None)
        if remembered:
            try:
                rule = Rule.parse(remembered, "allow for session")
                if widens_a_runner(rule):
                    raise ValueError(f"{rule} would allow whatever a wrapper or shell runs")
                self.add_rule(remembered, source="allow for session")
            except ValueError as exc:
                log.warning("not remembered: %s", exc)
                remembered = None
        return remembered

    async def _ask(self, request: PermissionRequest) -> Allow | Deny:
        assert self.policy is not None
        try:
            decision = await asyncio.wait_for(self.policy.decide(request), self.approval_timeout)
        except asyncio.TimeoutError:
            return Deny(
                f"{request.tool_name} was not approved: nobody answered within "
                f"{self.approval_timeout:g} seconds. Do without it, or ask the user."
            )
        except Exception as exc:
            log.warning("permission policy failed: %s", redact(repr(exc)))
            return Deny(f"{request.tool_name} was not approved: the approval step failed ({exc}).")
        if not isinstance(decision, (Allow, Deny)):
            return Deny(f"{request.tool_name} was not approved (the policy gave no decision).")
        return decision

    async def _changed_since(
        self, tool: Tool[Any], args: BaseModel, ctx: ToolContext, approved: str
    ) -> Deny | None:
        """What was approved must still be what the call does: a file that changed while the
        person looked (another agent wrote it) makes the call refused, not applied to text
        nobody saw."""
        try:
            now = await tool.preview(args, ctx)
        except ToolError as exc:
            return Deny(str(exc) or f"{tool.name} would fail.")
        if now == approved:
            return None
        return Deny(
            f"{tool.name} was not run: what it would change changed while the call waited for "
            "approval (another agent or the user edited it), so the approved preview no longer "
            "holds. Look at the current state and make the call again."
        )

    def _recheck(self, tool: Tool[Any], data: dict[str, Any], ctx: ToolContext) -> Deny | None:
        """A policy's replacement input must be valid and pass the deny rules and
        containment like the original."""
        try:
            args = tool.parse(data)
        except ValidationError as exc:
            return Deny("The approved input is invalid. " + format_validation_error(tool.name, exc))
        facts = self._facts(tool, args, ctx)
        denied = matching(self.rules.deny, facts)
        if denied is not None:
            return Deny(f"{tool.name} call denied by the rule {denied}.")
        outside_limit = self._outside_limit(facts)
        if outside_limit is not None:
            return Deny(outside_limit.refusal(tool.name))
        return outside_denial(self.rules, facts, ctx.workdir)


def _kernel_secret_denial(name: str, root: Path, secret: Path) -> Deny:
    """The one line a file tool's call gets for a path in the kernel's secrets."""
    what = "the kernel's connection file" if secret.is_file() else "Jupyter's runtime folder"
    return Deny(
        f"{name} refused: {shown_path(root, secret)} is {what}; it holds the key that has a "
        "kernel run any code, so no tool reads or writes it, in any mode."
    )
