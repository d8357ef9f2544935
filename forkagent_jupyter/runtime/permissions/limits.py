"""A limit on the calls an agent may make, from a command's `allowed-tools`.

In Claude Code a command's `allowed-tools` approves the calls it names in advance. Here a
command's file is someone else's words (it may have come with the project), so it grants
nothing: its entries, read as allow rules (`Read`, `Bash(git diff:*)`, `mcp__tracker`), say
which calls the command's agent may make at all. A call they do not cover is refused with a
tool result that says so; a call they cover is still decided by the gate as any other (the
session's deny rules, mode and approvals). The tools the model is offered stay the same (a
fork's request keeps its parent's cached prefix); the model is told the limit in the
command's text.

An entry that names no tool (`Bash Tool`, `TodoRead(x)`) is left out, which only narrows
further; `refused` keeps them to be said once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .matching import CallFacts, allowed_by
from .rulebook import RuleBook
from .rules import Rule

__all__ = ["ToolLimit"]


@dataclass(frozen=True)
class ToolLimit:
    """The calls an agent may make, as allow rules; `source` names where they come from
    ("/review's allowed-tools")."""

    rules: tuple[Rule, ...]
    source: str
    refused: tuple[str, ...] = ()

    @classmethod
    def of(cls, entries: Sequence[str], source: str, tools: Sequence[str] = ()) -> ToolLimit:
        """The limit `entries` give (`tools`: the session's own tool names besides the known
        ones)."""
        rules: list[Rule] = []
        refused: list[str] = []
        for entry in entries:
            try:
                rules.append(Rule.parse(entry, source, frozenset(tools)))
            except ValueError as exc:
                refused.append(f"{entry!r} ({exc})")
        return cls(tuple(rules), source, tuple(refused))

    def covers(self, facts: CallFacts) -> bool:
        """Whether the call is one the entries name (every path, every command of a line)."""
        return allowed_by(RuleBook(allow=list(self.rules)), facts) is not None

    def listed(self) -> str:
        return ", ".join(str(r) for r in self.rules) or "none"

    def refusal(self, tool: str) -> str:
        """What the model is told of a call the limit does not cover."""
        return (
            f"{tool} call refused: {self.source} allows only {self.listed()}. Do the task with "
            "those tools, or say what else it needs."
        )

    def told(self) -> str:
        """What the model is told of the limit before it starts."""
        return (
            f"(This command may use only these tools: {self.listed()}. Calls to any other tool, "
            "or other uses of these, are refused.)"
        )
