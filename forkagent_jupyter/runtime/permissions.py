"""Permissions: modes, allow/deny rules, and the policy that answers everything else.

The loop asks `PermissionGate.check` once per tool call. In order:
1. a matching deny rule denies;
2. a path outside the work directory (symlinks and `..` resolved) is denied unless an allow
   rule for that tool matches it - this applies to read-only tools too;
3. `bypassPermissions` allows everything;
4. `plan` denies every tool that changes something (the model is told it is planning);
5. read-only tools are allowed;
6. a matching allow rule allows; `acceptEdits` allows Write and Edit (inside the work dir);
7. otherwise the `PermissionPolicy` decides (`bubble`, the mode of workers, is the same with
   the worker's task id in the request so a UI can show it on the worker's card); with no
   policy the call is denied with a message that says how to allow it.

Rules are `Tool` (every call) or `Tool(spec)`. For Bash the spec is the command: exact, or a
prefix when it ends in `:*` (`Bash(git status:*)` matches `git status` and `git status -s`,
not `git statusx`). For file tools the spec is a glob over the path (relative to the work dir
when inside it, absolute otherwise; `**` crosses directories, `*` does not, `~` is home).
An "allow for session" answer adds a rule, shared by the session and all its workers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from .tools.base import Tool, ToolContext

__all__ = [
    "Allow",
    "AllowAll",
    "Deny",
    "DenyAll",
    "PermissionGate",
    "PermissionMode",
    "PermissionPolicy",
    "PermissionRequest",
    "Rule",
    "ScriptedPolicy",
]

PermissionMode = Literal["default", "acceptEdits", "bypassPermissions", "plan", "bubble"]
EDIT_TOOLS = frozenset({"Write", "Edit"})
FILE_TOOLS = frozenset({"Read", "Write", "Edit", "Glob", "Grep"})


@dataclass(frozen=True)
class Allow:
    """Run the call (with `updated_input` instead, if given); `remember` allows similar calls
    for the rest of the session."""

    updated_input: dict[str, Any] | None = None
    remember: bool = False
    behavior: Literal["allow"] = "allow"


@dataclass(frozen=True)
class Deny:
    """Do not run the call; the model reads `message` as the tool's error result."""

    message: str
    behavior: Literal["deny"] = "deny"


@dataclass(frozen=True)
class PermissionRequest:
    """What a policy is asked about."""

    tool_name: str
    input: dict[str, Any]
    agent_id: str
    task_id: str | None
    read_only: bool
    subject: str
    summary: str


@runtime_checkable
class PermissionPolicy(Protocol):
    async def decide(self, request: PermissionRequest) -> Allow | Deny: ...


@dataclass
class AllowAll:
    """Approve every call (a user who trusts the model, or a test)."""

    async def decide(self, request: PermissionRequest) -> Allow | Deny:
        return Allow()


@dataclass
class DenyAll:
    message: str = "Denied: this session approves no tool that changes files or runs code."

    async def decide(self, request: PermissionRequest) -> Allow | Deny:
        return Deny(self.message)


@dataclass
class ScriptedPolicy:
    """Answers from a list in order (then `default`), recording every request."""

    answers: list[Allow | Deny] = field(default_factory=list)
    default: Allow | Deny = field(default_factory=lambda: Deny("No more scripted answers."))
    requests: list[PermissionRequest] = field(default_factory=list)

    async def decide(self, request: PermissionRequest) -> Allow | Deny:
        self.requests.append(request)
        return self.answers.pop(0) if self.answers else self.default


def _glob_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        out.append("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c))
        i += 1
    return re.compile("^" + "".join(out) + "$")


@dataclass(frozen=True)
class Rule:
    """`Tool` or `Tool(spec)`."""

    tool: str
    spec: str | None = None

    @classmethod
    def parse(cls, text: str) -> Rule:
        m = re.fullmatch(r"\s*([A-Za-z0-9_-]+)\s*(?:\((.*)\))?\s*", text)
        if not m:
            raise ValueError(f"bad permission rule {text!r}: use Tool or Tool(spec)")
        spec = m.group(2)
        return cls(m.group(1), spec.strip() if spec is not None and spec.strip() else None)

    def __str__(self) -> str:
        return self.tool if self.spec is None else f"{self.tool}({self.spec})"

    def matches(self, tool: str, subject: str, paths: Sequence[str] = ()) -> bool:
        if tool != self.tool:
            return False
        if self.spec is None:
            return True
        if tool in FILE_TOOLS:
            spec = str(Path(self.spec).expanduser()) if self.spec.startswith("~") else self.spec
            regex = _glob_regex(spec)
            return any(regex.match(p) for p in [subject, *paths] if p)
        if self.spec.endswith(":*"):
            prefix = self.spec[:-2].rstrip()
            return subject == prefix or subject.startswith(prefix + " ")
        return subject.strip() == self.spec


def _inside(workdir: Path, path: Path) -> bool:
    try:
        path.resolve().relative_to(workdir.resolve())
    except ValueError:
        return False
    return True


@dataclass
class _Rules:
    allow: list[Rule] = field(default_factory=list)
    deny: list[Rule] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)


class PermissionGate:
    """Decides each tool call (see the module doc). Workers' gates share the rules."""

    def __init__(
        self,
        *,
        mode: PermissionMode = "default",
        policy: PermissionPolicy | None = None,
        allow: Sequence[str] = (),
        deny: Sequence[str] = (),
        task_id: str | None = None,
        _rules: _Rules | None = None,
    ) -> None:
        if mode not in ("default", "acceptEdits", "bypassPermissions", "plan", "bubble"):
            raise ValueError(f"unknown permission mode {mode!r}")
        self.mode: PermissionMode = mode
        self.policy = policy
        self.task_id = task_id
        self.rules = _rules or _Rules([Rule.parse(r) for r in allow], [Rule.parse(r) for r in deny])

    @property
    def log(self) -> list[dict[str, Any]]:
        """Every decision: tool, subject, decision, by whom, task."""
        return self.rules.log

    def add_rule(self, rule: str) -> None:
        parsed = Rule.parse(rule)
        if parsed not in self.rules.allow:
            self.rules.allow.append(parsed)

    def for_worker(self, task_id: str, mode: PermissionMode | None = None) -> PermissionGate:
        """The gate of a worker: `bubble` (its questions reach this session's policy, tagged
        with its task id) unless this session allows more, or `mode` says otherwise."""
        chosen: PermissionMode = mode or (
            self.mode if self.mode in ("bypassPermissions", "acceptEdits", "plan") else "bubble"
        )
        return PermissionGate(mode=chosen, policy=self.policy, task_id=task_id, _rules=self.rules)

    def _record(self, tool: str, subject: str, decision: str, by: str, ctx: ToolContext) -> None:
        self.rules.log.append(
            {
                "tool": tool,
                "subject": subject[:200],
                "decision": decision,
                "by": by,
                "agent_id": ctx.agent_id,
                "task_id": self.task_id,
            }
        )

    async def check(
        self, tool: Tool[Any], args: BaseModel, ctx: ToolContext, raw: dict[str, Any]
    ) -> Allow | Deny:
        decision, by = await self._decide(tool, args, ctx, raw)
        subject = tool.permission_subject(args)
        self._record(tool.name, subject, decision.behavior, by, ctx)
        return decision

    async def _decide(
        self, tool: Tool[Any], args: BaseModel, ctx: ToolContext, raw: dict[str, Any]
    ) -> tuple[Allow | Deny, str]:
        name = tool.name
        subject = tool.permission_subject(args)
        paths = [p.resolve() for p in tool.paths(args, ctx)]
        path_texts = [str(p) for p in paths]
        for rule in self.rules.deny:
            if rule.matches(name, subject, path_texts):
                return Deny(f"{name} call denied by the rule {rule}."), "rule"
        outside = [p for p in paths if not _inside(ctx.workdir, p)]
        for p in outside:
            if not any(r.matches(name, str(p), [str(p)]) for r in self.rules.allow):
                return (
                    Deny(
                        f"{name} refused: {p} is outside the work directory {ctx.workdir}. "
                        f"Stay inside it, or ask the user to allow it with a rule such as "
                        f"{name}({p.parent}/**)."
                    ),
                    "workdir",
                )
        if self.mode == "bypassPermissions":
            return Allow(), "mode"
        if self.mode == "plan" and not tool.read_only:
            return (
                Deny(
                    f"{name} is not available in plan mode: investigate with read-only tools "
                    "and present a plan instead of making changes."
                ),
                "mode",
            )
        if tool.read_only:
            return Allow(), "read-only"
        if any(r.matches(name, subject, path_texts) for r in self.rules.allow):
            return Allow(), "rule"
        if self.mode == "acceptEdits" and name in EDIT_TOOLS:
            return Allow(), "mode"
        if self.policy is None:
            return (
                Deny(
                    f"{name} needs the user's approval and nobody can approve it here. The user "
                    f"can allow it with permission_mode='acceptEdits' (file edits), "
                    f"'bypassPermissions', or a rule such as {name}({subject or '...'})."
                ),
                "no-policy",
            )
        request = PermissionRequest(
            tool_name=name,
            input=dict(raw),
            agent_id=ctx.agent_id,
            task_id=self.task_id,
            read_only=tool.read_only,
            subject=subject,
            summary=f"{name}: {subject}" if subject else name,
        )
        decision = await self.policy.decide(request)
        if isinstance(decision, Allow) and decision.remember:
            self.add_rule(self._session_rule(name, subject))
        return decision, "policy"

    @staticmethod
    def _session_rule(name: str, subject: str) -> str:
        if name == "Bash" and subject:
            return f"Bash({subject}:*)"
        if name in FILE_TOOLS and subject:
            return f"{name}({subject})"
        return name
