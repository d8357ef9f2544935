"""The answers to a permission request (`Allow`, `Deny`), what a policy is asked
(`PermissionRequest`), and the policies that answer it: a notebook UI is one, these are the
plain ones (allow all, deny all, scripted, a callback).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = [
    "Allow",
    "AllowAll",
    "CallbackPolicy",
    "Decision",
    "Deny",
    "DenyAll",
    "PermissionPolicy",
    "PermissionRequest",
    "ScriptedPolicy",
]


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
    them through); `suggested_rule` is what "allow for session" would add (None: no rule can
    say exactly this call, or no rule would ever let it through); `reason` why the call is
    asked even where the mode or a rule would allow it (a file that runs later, a settings
    file, an ask rule), or None."""

    tool_name: str
    input: dict[str, Any]
    agent_id: str
    task_id: str | None
    summary: str
    preview: str = ""
    subject: str = ""
    outside_paths: tuple[str, ...] = ()
    suggested_rule: str | None = None
    reason: str | None = None


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
