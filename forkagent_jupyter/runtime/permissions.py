"""Permissions: modes, allow/ask/deny rules, and the policy that answers everything else.

The loop asks `PermissionGate.check` once per tool call, after validating the input. In
order (Claude Code's order: deny, then ask, then allow, in every mode):

1. a matching **deny rule** denies, in every mode (`bypassPermissions` too);
2. **containment**: a path outside the work directory and the additional directories
   (symlinks and `..` resolved) is denied unless an allow rule *with a spec* for that tool
   matches it (`Read(//data/**)`); this holds in every mode and for tools that need no
   approval too;
3. mode `plan` denies every tool not `allowed_in_plan`, telling the model it is planning;
4. a matching **ask rule** puts the call to the policy whatever the mode and the allow rules
   say (so does a Bash line whose program name is computed when it runs, `$CMD x`, while a
   Bash deny rule with a spec is in force: the deny rule could not be checked against it);
   mode `dontAsk` and a session without a policy deny it;
5. mode `bypassPermissions` allows;
6. tools that do not `needs_approval` (Read, Glob, Grep, TaskOutput...) are allowed;
7. a matching **allow rule** allows;
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
Every decision is logged (`gate.log`). Rule syntax and matching: `permission_rules`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from pydantic import BaseModel, ValidationError

from .permission_rules import EDITING_TOOLS, PATH_TOOLS, READING_TOOLS, Rule, escape_glob
from .rulebook import RefusedRule, RuleBook, RuleKind
from .secrets import redact
from .settings import SettingsRead
from .shell_programs import program_name, programs, runs_code
from .shell_syntax import parse_script
from .tools.base import Tool, ToolContext, ToolError, describe_call, format_validation_error
from .tools.paths import is_inside, real, shown_path

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
]

log = logging.getLogger(__name__)

PermissionMode = Literal["default", "acceptEdits", "bypassPermissions", "plan", "dontAsk", "bubble"]
MODES: tuple[str, ...] = get_args(PermissionMode)
EDIT_TOOLS = EDITING_TOOLS
READ_TOOLS = READING_TOOLS
MAX_LOG = 10_000


@dataclass(frozen=True)
class Allow:
    """Run the call - with `updated_input` instead of the model's input, if given.
    `remember_rule` (e.g. "Bash(git status:*)") is added to the allow rules for the rest of
    the session; `remember=True` adds the request's `suggested_rule` instead."""

    updated_input: dict[str, Any] | None = None
    remember_rule: str | None = None
    remember: bool = False
    behavior: Literal["allow"] = "allow"


@dataclass(frozen=True)
class Deny:
    """Do not run the call; the model reads `message` as the tool's error result."""

    message: str
    behavior: Literal["deny"] = "deny"


Decision = Allow | Deny


@dataclass(frozen=True)
class PermissionRequest:
    """What a policy is asked about. `summary` is the call's one line (`Tool.describe`) and
    `preview` what a person approves (`Tool.preview`: the diff a file change would make);
    `outside_paths` lists real paths outside the work directory (only present when a rule let
    them through); `suggested_rule` is what "allow for session" would add."""

    tool_name: str
    input: dict[str, Any]
    agent_id: str
    task_id: str | None
    summary: str
    preview: str = ""
    subject: str = ""
    outside_paths: tuple[str, ...] = ()
    suggested_rule: str | None = None


@runtime_checkable
class PermissionPolicy(Protocol):
    """Answers the calls that modes and rules leave open (a notebook UI is one policy)."""

    async def decide(self, request: PermissionRequest) -> Allow | Deny: ...


@dataclass
class AllowAll:
    """Approve every call that reaches the policy (a user who trusts the model, or a test)."""

    async def decide(self, request: PermissionRequest) -> Allow | Deny:
        return Allow()


@dataclass
class DenyAll:
    """Refuse every call that reaches the policy, with `message` for the model."""

    message: str = "Denied: this session approves no tool that changes files or runs code."

    async def decide(self, request: PermissionRequest) -> Allow | Deny:
        return Deny(self.message)


@dataclass
class ScriptedPolicy:
    """Answers from `answers` in order, then `default`; records every request (tests, demos,
    and a model for UI policies)."""

    answers: list[Allow | Deny] = field(default_factory=list)
    default: Allow | Deny = field(default_factory=lambda: Deny("No more scripted answers."))
    requests: list[PermissionRequest] = field(default_factory=list)

    async def decide(self, request: PermissionRequest) -> Allow | Deny:
        self.requests.append(request)
        return self.answers.pop(0) if self.answers else self.default


@dataclass
class CallbackPolicy:
    """Delegates to a function of the request, sync or async."""

    fn: Callable[[PermissionRequest], Allow | Deny | Awaitable[Allow | Deny]]

    async def decide(self, request: PermissionRequest) -> Allow | Deny:
        answer = self.fn(request)
        if isinstance(answer, (Allow, Deny)):
            return answer
        return await answer


@dataclass(frozen=True)
class _Facts:
    """One call as the rules see it."""

    tool: str
    subject: str
    paths: list[Path]
    forms: list[list[str]]  # per path: the forms rules match against
    outside: list[Path]
    root: Path  # the work directory (real): where `/path` rules start


def _worker_mode(
    session: PermissionMode, asked: PermissionMode | None, unset: PermissionMode = "bubble"
) -> PermissionMode:
    """A worker's mode, from its session's and the one its definition (an agent file, which
    the model may have written) asks for. A definition may narrow what the session allows and
    may use `acceptEdits`; it never widens past the session:

    - `plan` in either wins;
    - `default` asks (`bubble`: the session's policy decides), whatever the session's mode
      (but `dontAsk`: a session that asks nobody stays so);
    - `acceptEdits` is honoured, and `dontAsk` (it only refuses);
    - `bypassPermissions` holds only while the session itself bypasses; otherwise, as every
      value not named here, the worker takes the session's mode (`unset` for `default`:
      `bubble` for a fork, `acceptEdits` for a named agent whose definition names no mode).
    """
    if "plan" in (session, asked):
        return "plan"
    inherited: PermissionMode = unset if session == "default" else session
    if session == "dontAsk" and asked in (None, "default", "bubble"):
        return "dontAsk"  # nobody is asked in this session
    if asked in ("default", "bubble"):
        return "bubble"
    if asked in ("acceptEdits", "dontAsk"):
        return asked
    return inherited


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
        self.recorder: Callable[[dict[str, Any]], None] | None = None
        """Called with each decision (the runtime writes them to the agent's transcript)."""
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
        return _worker_mode(self._parent.mode, self._asked_mode, self._unset_mode)

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
    def log(self) -> list[dict[str, Any]]:
        """Every decision: tool, summary, decision, by (rule/workdir/mode/no-approval/preview/
        policy/no-policy/input/error), rule, message, agent_id, task_id."""
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
        follow this gate's as they change (see `_worker_mode`; `unset`: the mode of a worker
        that asks for none while the session is in `default`)."""
        gate = PermissionGate(
            mode=_worker_mode(self.mode, mode, unset),
            policy=self.policy,
            task_id=task_id,
            rules=self.rules,
        )
        gate._parent = self
        gate._asked_mode = mode
        gate._unset_mode = unset
        return gate

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
            if facts.paths and tool.name in READ_TOOLS:
                ctx.services["read_guard"] = self._read_guard(ctx.workdir)
            decision, by, rule = await self._decide(
                tool, args, ctx, raw_input, facts, waited, hook_asks
            )
        except Exception as exc:  # a bad path (NUL byte...) or a bug: refuse, never crash
            log.warning("permission check of %s failed: %s", tool.name, redact(repr(exc)))
            decision = Deny(f"{tool.name} refused: its input could not be checked ({exc}).")
            by, rule = "error", None
        entry: dict[str, Any] = {
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

    def _facts(self, tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> _Facts:
        root = real(ctx.workdir)
        paths = [real(p) for p in tool.paths(args, ctx)]
        forms: list[list[str]] = []
        for p in paths:
            shown = shown_path(root, p)
            forms.append([shown, str(p)] if shown != str(p) else [str(p)])
        outside = [p for p in paths if not self._inside(root, p)]
        return _Facts(tool.name, tool.permission_subject(args), paths, forms, outside, root)

    def _inside(self, root: Path, path: Path) -> bool:
        return is_inside(root, path) or any(is_inside(d, path) for d in self.rules.directories)

    def _read_guard(self, workdir: Path) -> Callable[[Path], bool]:
        """For Glob and Grep: hide files that a deny or ask rule for any reading tool matches
        (the same for every call, so parallel searches sharing `ctx.services` agree)."""
        root = real(workdir)

        def allowed(path: Path) -> bool:
            shown = shown_path(root, path)
            forms = [shown, str(path)] if shown != str(path) else [str(path)]
            return not any(
                r.spec is not None
                and any(r.covers(t) for t in READ_TOOLS)
                and r.matches_path(forms, root)
                for r in (*self.rules.deny, *self.rules.ask)  # a search cannot ask per file
            )

        return allowed

    def _matching(self, rules: list[Rule], facts: _Facts) -> Rule | None:
        """The first of `rules` (deny or ask) that matches the call."""
        for rule in rules:
            if not rule.covers(facts.tool):
                continue
            if rule.spec is None:
                return rule
            if facts.tool in PATH_TOOLS or (facts.paths and facts.tool != "Bash"):
                if any(rule.matches_path(forms, facts.root) for forms in facts.forms):
                    return rule
            elif facts.tool == "Bash":
                if rule.denies_command(facts.subject):
                    return rule
            elif rule.matches_text(facts.subject):
                return rule
        return None

    def _denied_by(self, facts: _Facts) -> Rule | None:
        return self._matching(self.rules.deny, facts)

    def _unfollowed(self, facts: _Facts) -> str | None:
        """A Bash line whose program name is computed when it runs, while a Bash deny rule
        with a spec is in force: the rules cannot tell what it runs."""
        if facts.tool != "Bash":
            return None
        if not any(r.spec is not None and r.covers("Bash") for r in self.rules.deny):
            return None
        return "computed program" if programs(facts.subject).computed else None

    def _allowed_by(self, facts: _Facts) -> Rule | None:
        rules = [r for r in self.rules.allow if r.covers(facts.tool)]
        for rule in rules:
            if rule.spec is None:
                return rule
        specific = [r for r in rules if r.spec is not None]
        if not specific:
            return None
        if facts.paths:
            chosen: list[Rule] = []
            for forms in facts.forms:
                hit = next((r for r in specific if r.matches_path(forms, facts.root)), None)
                if hit is None:
                    return None
                chosen.append(hit)
            return chosen[0]
        if facts.tool == "Bash":
            script = parse_script(facts.subject)
            if not script.judgeable:
                return None
            whole = next((r for r in specific if r.allows_command(script)), None)
            if whole is not None:
                return whole
            parts = script.commands
            if not parts:
                return None
            hits = [next((r for r in specific if r.allows_part(p.words)), None) for p in parts]
            return hits[0] if all(h is not None for h in hits) else None
        return next((r for r in specific if r.matches_text(facts.subject)), None)

    def _outside_denial(self, facts: _Facts, workdir: Path) -> Deny | None:
        for p in facts.outside:
            if not any(
                r.spec is not None and r.covers(facts.tool) and r.matches_path([str(p)], facts.root)
                for r in self.rules.allow
            ):
                family = "Read" if facts.tool in READ_TOOLS else facts.tool
                where = p if p.is_dir() else p.parent
                return Deny(
                    f"{facts.tool} refused: {p} is outside the work directory {real(workdir)}. "
                    "Work inside it. Files elsewhere can be allowed only by the user, with a "
                    f"rule such as {family}(/{escape_glob(str(where))}/**)."
                )
        return None

    async def _decide(
        self,
        tool: Tool[Any],
        args: BaseModel,
        ctx: ToolContext,
        raw_input: dict[str, Any],
        facts: _Facts,
        waited: list[float],
        hook_asks: bool = False,
    ) -> tuple[Allow | Deny, str, str | None]:
        name = tool.name
        denied = self._denied_by(facts)
        if denied is not None:
            return Deny(f"{name} call denied by the rule {denied}."), "rule", str(denied)
        outside = self._outside_denial(facts, ctx.workdir)
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
        asked = self._matching(self.rules.ask, facts)
        must_ask = str(asked) if asked is not None else self._unfollowed(facts)
        if must_ask is None and name in EDIT_TOOLS and _settings_file(facts):
            must_ask = "settings file"
        if must_ask is None and hook_asks:
            must_ask = "hook"
        if must_ask is None:
            if mode == "bypassPermissions":
                return Allow(), "mode", None
            if not tool.needs_approval:
                return Allow(), "no-approval", None
            allowed = self._allowed_by(facts)
            if allowed is not None:
                return Allow(), "rule", str(allowed)
            if mode == "acceptEdits" and name in EDIT_TOOLS:
                return Allow(), "mode", None
        why = (
            f"the rule {asked} asks for the user's approval"
            if asked is not None
            else "a change to a settings or agent file (they hold the permission rules and "
            "hooks, which run commands) is always "
            "approved by the user"
            if must_ask == "settings file"
            else "a PreToolUse hook asks for the user's approval"
            if must_ask == "hook"
            else "the command's program is computed when it runs, so the deny rules cannot "
            "be checked against it"
        )
        if mode == "dontAsk":
            if must_ask is not None:
                return Deny(f"{name} refused: {why}, and this session does not ask."), "mode", None
            return (
                Deny(
                    f"{name} refused: no rule allows this call and this session does not ask "
                    "(permission mode dontAsk). Tell the user what you wanted to do."
                ),
                "mode",
                None,
            )
        suggestion = _suggest_rule(facts, ctx.workdir)
        if self.policy is None and must_ask is not None:
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
        remembered = decision.remember_rule or (suggestion if decision.remember else None)
        if remembered:
            try:
                rule = Rule.parse(remembered, "allow for session")
                if _widens_a_runner(rule):
                    raise ValueError(f"{rule} would allow whatever a wrapper or shell runs")
                self.add_rule(remembered, source="allow for session")
            except ValueError as exc:
                log.warning("not remembered: %s", exc)
                remembered = None
        return decision, "policy", remembered

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
        denied = self._denied_by(facts)
        if denied is not None:
            return Deny(f"{tool.name} call denied by the rule {denied}.")
        return self._outside_denial(facts, ctx.workdir)


def _suggest_rule(facts: _Facts, workdir: Path) -> str | None:
    """What "allow for session" adds: a rule exactly as wide as this call (the exact command,
    the exact file, the exact agent type), or None when no rule can say exactly this call."""
    if facts.tool == "Bash":
        command = facts.subject
        script = parse_script(command)
        if "\n" in command or not script.judgeable or not script.commands:
            return None
        if any("\x02*" in w.key for c in script.commands for w in c.words):
            return None  # an unquoted `*` would be read as a wildcard
        text = f"Bash({command})"
        try:
            rule = Rule.parse(text)
        except ValueError:
            return None
        return text if rule.allows_command(script) else None
    if facts.paths:
        if len(facts.paths) != 1:
            return None
        root = real(workdir)
        shown = shown_path(root, facts.paths[0])
        spec = "/" + (escape_glob(shown) if shown != "." else "")
        if shown.startswith("/"):
            spec = "/" + escape_glob(shown)
        return f"{facts.tool}({spec.rstrip('/') or '/'})" if spec != "/" else None
    if facts.subject:
        if "\n" in facts.subject or facts.subject.endswith(":*"):
            return None
        text = f"{facts.tool}({facts.subject})"
        try:
            Rule.parse(text)
        except ValueError:
            return None
        return text
    return facts.tool


_SETTINGS_FILES = frozenset(
    [
        *(
            f"{folder}/{name}"
            for folder in (".claude", ".forkagent")
            for name in ("settings.json", "settings.local.json")
        ),
        ".mcp.json",  # its servers are commands the session runs
    ]
)


_AGENT_FOLDERS = (".claude/agents/", ".forkagent/agents/")


def _settings_file(facts: _Facts) -> bool:
    """Whether the call touches one of the project's settings files or agent files (an
    agent file's hooks run commands: writing one must not be a way around asking)."""
    return any(
        forms[0] in _SETTINGS_FILES or forms[0].startswith(_AGENT_FOLDERS) for forms in facts.forms
    )


def _widens_a_runner(rule: Rule) -> bool:
    """A Bash rule with a wildcard or prefix whose program is a wrapper, shell or interpreter
    (`Bash(sh:*)`, `Bash(env *)`): it would allow whatever they run."""
    if rule.tool != "Bash" or rule.spec is None:
        return False
    if not (rule.prefix or "*" in rule.spec):
        return False
    script = parse_script(rule.spec[:-2] if rule.prefix else rule.spec)
    return (
        any(
            c.words and (c.words[0].active or runs_code(program_name(c.words[0].text)))
            for c in script.commands
        )
        or not script.commands
    )
