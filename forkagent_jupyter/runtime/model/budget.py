"""A session's cost budget.

When the session's spend (the parent's turns and every worker's, in USD at list prices)
reaches `limit`, the budget is *reached*: the session stops its running workers (`killed`,
the reason in their notification), refuses new turns, forks and messages with a `BudgetError`
error, and every agent's next model request fails before it is sent (the request in flight when
the limit was crossed completes: its tokens are spent already). Raising or clearing the limit
lets work go on; notifications that arrived meanwhile wait in the queue and are read then.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from ..errors import ModelError, UsageError
from ..events import ModelEvent
from .client import ModelClient, ModelRequest

__all__ = ["BudgetError", "BudgetedModel", "CostBudget"]


class BudgetError(UsageError):
    """A new turn, fork or message was refused: the session's cost budget is spent."""


class CostBudget:
    """`limit` in USD (None: no limit) against what `spent()` reports."""

    def __init__(self, spent: Callable[[], float], limit: float | None = None) -> None:
        self._spent = spent
        self.limit = limit

    @property
    def limit(self) -> float | None:
        return self._limit

    @limit.setter
    def limit(self, value: float | None) -> None:
        if value is not None and not value > 0:
            raise UsageError(f"max_cost_usd must be a positive number of dollars, not {value!r}.")
        self._limit = None if value is None else float(value)

    @property
    def spent(self) -> float:
        return self._spent()

    def reached(self) -> bool:
        return self._limit is not None and self.spent >= self._limit

    def message(self) -> str:
        return (
            f"cost budget reached: ${self.spent:.4f} spent of max_cost_usd=${self._limit or 0:.4f}"
        )

    def check(self, what: str) -> None:
        """Raise `BudgetError` naming `what` was refused, when the budget is reached."""
        if self.reached():
            raise BudgetError(
                f"{what} refused, {self.message()}. Raise the limit "
                "(%config ForkAgent.max_cost_usd = ..., or Session.max_cost_usd) to go on."
            )


class BudgetedModel:
    """A model client that refuses to send a request once the budget is reached."""

    def __init__(self, inner: ModelClient, budget: CostBudget) -> None:
        self.inner = inner
        self.budget = budget
        self.name = inner.name

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if self.budget.reached():
            raise ModelError(f"not sent, {self.budget.message()}")
        async for event in self.inner.stream(request):
            yield event

    async def aclose(self) -> None:
        await self.inner.aclose()
