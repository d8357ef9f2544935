"""What a session spends against its budget: the web tools' requests charged to the agent that
made them, and the cost budget (`model/budget.py`) enforced on the running workers. The
totals themselves are the session's (`Session.usage`, `Session.cost_usd`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ...messages_api.usage import Usage
from ..model.budget import CostBudget
from ..workers.workers import Workers

__all__ = ["Spending"]


class Spending:
    """Charges the web tools' requests and enforces the session's budget."""

    def __init__(
        self,
        *,
        budget: CostBudget,
        workers: Workers,
        charge_parent: Callable[[Usage, float], None],
        budget_raised: Callable[[], None],
        changed: asyncio.Event,
    ) -> None:
        self.budget = budget
        self.workers = workers
        """Whose running tasks the budget stops (and whose registry holds their costs)."""
        self.charge_parent = charge_parent
        """Where a request made for the parent is charged (`ParentTurns.charge`)."""
        self.budget_raised = budget_raised
        """Called once a new budget is in force (`Responder.budget_raised`)."""
        self.changed = changed
        """Set when the budget stops the workers (the session may become idle)."""

    def web_usage(self, agent_id: str, usage: Usage, cost: float) -> None:
        """A WebSearch or WebFetch request's usage and cost, charged to the agent that made
        it (`agent_setup.WebUsage`)."""
        registry = self.workers.registry
        task = None if agent_id == "main" else registry.find(agent_id)
        if task is None:
            self.charge_parent(usage, cost)
        else:
            task.usage = task.usage + usage
            task.cost_usd += cost
            registry.changed(task)
        self.enforce()

    def budget_changed(self, limit: float | None) -> None:
        """A new budget: workers stop if it is reached; if it was raised, notifications that
        waited are answered."""
        self.budget.limit = limit
        self.enforce()
        self.budget_raised()

    def enforce(self) -> None:
        """Once the budget is reached, stop every running worker, the reason in its
        notification."""
        budget = self.budget
        if not budget.reached():
            return
        reason = budget.message()
        for task in self.workers.registry.running():
            self.workers.kill(task.id, reason)
        self.changed.set()
