"""What a session has spent and the budget it keeps to: the totals of the parent
conversation and every worker, the web tools' requests charged to the agent that made them,
and the cost budget (`model/budget.py`) enforced on the running workers."""

from __future__ import annotations

import asyncio
from typing import Protocol

from ...messages_api.usage import Usage
from ..model.budget import CostBudget
from ..tasks.registry import TaskRegistry
from ..workers.workers import Workers
from .options import SessionOptions
from .parent_turns import ParentTurns
from .responder import Responder

__all__ = ["Spending", "SpendingHost"]


class SpendingHost(Protocol):
    """What the spending reads of its session (`Session` is one), at the time of use."""

    options: SessionOptions
    budget: CostBudget
    registry: TaskRegistry
    workers: Workers
    parent: ParentTurns
    responder: Responder


class Spending:
    """The session's totals and its budget's enforcement."""

    def __init__(self, host: SpendingHost, *, changed: asyncio.Event) -> None:
        self.host = host
        self.changed = changed
        """Set when the budget stops the workers (the session may become idle)."""

    @property
    def usage(self) -> Usage:
        """Tokens of the parent conversation and of every worker."""
        total = self.host.parent.usage
        for task in self.host.registry:
            total = total + task.usage
        return total

    @property
    def cost_usd(self) -> float:
        return self.host.parent.cost + sum(t.cost_usd for t in self.host.registry)

    def web_usage(self, agent_id: str, usage: Usage, cost: float) -> None:
        """A WebSearch or WebFetch request's usage and cost, charged to the agent that made
        it (`agent_contexts.WebUsage`)."""
        registry = self.host.registry
        task = None if agent_id == "main" else registry.find(agent_id)
        if task is None:
            self.host.parent.charge(usage, cost)
        else:
            task.usage = task.usage + usage
            task.cost_usd += cost
            registry.changed(task)
        self.enforce()

    def budget_changed(self) -> None:
        """A new budget: workers stop if it is reached; if it was raised, notifications that
        waited are answered."""
        host = self.host
        host.budget.limit = host.options.max_cost_usd
        self.enforce()
        host.responder.budget_raised()

    def enforce(self) -> None:
        """Once the budget is reached, stop every running worker, the reason in its
        notification."""
        budget = self.host.budget
        if not budget.reached():
            return
        reason = budget.message()
        for task in self.host.registry.running():
            self.host.workers.kill(task.id, reason)
        self.changed.set()
