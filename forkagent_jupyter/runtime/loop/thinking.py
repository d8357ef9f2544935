"""Extended thinking: the API's `thinking` parameter as the session, a cell or an agent
definition asks for it, and what it does to `max_tokens`.

* `thinking_param` turns what a person writes - a budget in tokens, "adaptive", off (None,
  False, 0, "off", "disabled"), or the API's own dict - into the parameter sent (None: the
  parameter is left out). A budget below the API's minimum (1024) is refused in one line.
* The budget is added to `max_tokens` (`with_budget`): thinking tokens count toward
  `max_tokens`, so the answer keeps the room it had without thinking, and the API's rule
  `budget_tokens < max_tokens` always holds.
* A fork sends its parent's exact parameter (and so the same `max_tokens`): a different one
  would change the request's prefix and miss the parent's prompt cache.
"""

from __future__ import annotations

from typing import Literal

from ...messages_api.shapes import JSON
from ..errors import UsageError

__all__ = ["EFFORTS", "MIN_BUDGET", "Effort", "check_effort", "thinking_param", "with_budget"]

MIN_BUDGET = 1024
Effort = Literal["low", "medium", "high", "xhigh", "max"]
EFFORTS: tuple[Effort, ...] = ("low", "medium", "high", "xhigh", "max")
_OFF = ("off", "disabled", "none", "false", "0", "")


def _budget(value: int) -> dict[str, JSON]:
    if value < MIN_BUDGET:
        raise UsageError(
            f"A thinking budget must be at least {MIN_BUDGET} tokens (the API's minimum); got "
            f"{value}. Use 0 or 'off' for no thinking."
        )
    return {"type": "enabled", "budget_tokens": value}


def thinking_param(value: object) -> dict[str, JSON] | None:
    """The API's `thinking` parameter for `value` (see the module doc); None: no thinking."""
    if value is None or value is False:
        return None
    if value is True:
        raise UsageError(
            "Say how many tokens thinking may use (a budget of 1024 or more), or 'adaptive'."
        )
    if isinstance(value, int):
        return None if value == 0 else _budget(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _OFF:
            return None
        if text == "adaptive":
            return {"type": "adaptive"}
        if text.isdigit():
            return thinking_param(int(text))
        raise UsageError(
            f"thinking {value!r} is not understood: a budget in tokens (1024 or more), "
            "'adaptive', or 'off'."
        )
    if isinstance(value, dict):
        kind = value.get("type")
        if kind == "disabled":
            return None
        if kind == "enabled":
            budget = value.get("budget_tokens")
            if isinstance(budget, bool) or not isinstance(budget, int):
                raise UsageError("thinking {'type': 'enabled'} needs an integer budget_tokens.")
            return {**value, **_budget(budget)}
        if kind in ("adaptive", "between_tools"):
            return dict(value)
        raise UsageError(
            f"thinking type {kind!r} is not one the API takes: 'enabled' (with "
            "budget_tokens), 'adaptive', 'between_tools' or 'disabled'."
        )
    raise UsageError(f"thinking {value!r} is not understood: a budget in tokens or 'adaptive'.")


def with_budget(max_tokens: int, thinking: dict[str, JSON] | None) -> int:
    """`max_tokens` for a request with `thinking`: the budget on top of the answer's room."""
    budget = thinking.get("budget_tokens") if thinking else None
    if thinking and thinking.get("type") == "enabled" and isinstance(budget, int):
        return max_tokens + budget
    return max_tokens


def check_effort(value: object) -> Effort | None:
    """An effort level the API takes, or None."""
    if value is None:
        return None
    for effort in EFFORTS:
        if value == effort:
            return effort
    raise UsageError(f"effort {value!r} is not one of {', '.join(EFFORTS)}.")
