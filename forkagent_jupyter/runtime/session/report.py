"""A session's cost report: per task and in total, and what it would cost without the cache.

"Without sharing" prices every prompt token of every request at the base input price, as if
no request could read another's cache entry (and none wrote one): the cost of running the
same requests with no prompt caching at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from typing_extensions import TypedDict

from ...messages_api.usage import Usage, UsageCounts, cost_usd, usage_counts
from ..tasks.registry import Task

__all__ = ["CostLine", "CostReport", "CostRow", "CostSummary", "cost_report"]


class CostRow(UsageCounts):
    """One agent's line of `CostReport.to_dict` (or the total's): its token counts and costs."""

    name: str
    status: str
    cache_hit_ratio: float
    cost_usd: float
    uncached_cost_usd: float


class CostSummary(TypedDict):
    """`CostReport.to_dict`: per agent and the totals."""

    model: str
    agents: list[CostRow]
    total: CostRow
    saving: float


@dataclass(frozen=True)
class CostLine:
    """One agent's share: the parent conversation or one task."""

    name: str
    status: str
    usage: Usage
    cost_usd: float
    uncached_cost_usd: float

    @property
    def cache_hit_ratio(self) -> float:
        return self.usage.cache_hit_ratio


@dataclass(frozen=True)
class CostReport:
    lines: tuple[CostLine, ...]
    model: str

    @property
    def usage(self) -> Usage:
        total = Usage()
        for line in self.lines:
            total = total + line.usage
        return total

    @property
    def cost_usd(self) -> float:
        return sum(line.cost_usd for line in self.lines)

    @property
    def uncached_cost_usd(self) -> float:
        return sum(line.uncached_cost_usd for line in self.lines)

    @property
    def saving(self) -> float:
        """Share of the no-cache cost that the cache saved (negative if it cost more)."""
        base = self.uncached_cost_usd
        return 1 - self.cost_usd / base if base else 0.0

    def to_dict(self) -> CostSummary:
        """Plain data (JSON-ready): per agent and the totals; token counts named as in
        `usage_counts` (`total_input_tokens` is the whole prompt)."""

        def row(name: str, status: str, u: Usage, cost: float, base: float) -> CostRow:
            return {
                "name": name,
                "status": status,
                **usage_counts(u),
                "cache_hit_ratio": u.cache_hit_ratio,
                "cost_usd": cost,
                "uncached_cost_usd": base,
            }

        return {
            "model": self.model,
            "agents": [
                row(x.name, x.status, x.usage, x.cost_usd, x.uncached_cost_usd) for x in self.lines
            ],
            "total": row("total", "", self.usage, self.cost_usd, self.uncached_cost_usd),
            "saving": self.saving,
        }

    def __repr__(self) -> str:  # what a text frontend (a terminal, a saved notebook) shows
        return self.text()

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(self.text())}</pre>"

    def to_dataframe(self) -> Any:
        """Per agent and the total as a pandas DataFrame (pandas needed)."""
        import pandas as pd  # type: ignore[import-untyped]

        data = self.to_dict()
        return pd.DataFrame([*data["agents"], data["total"]]).set_index("name")

    def text(self) -> str:
        rows = [
            f"{'agent':<14} {'status':<10} {'prompt tok':>10} {'cache read':>10} "
            f"{'cache write':>11} {'out':>6} {'hit':>5} {'cost $':>9} {'no cache $':>10}"
        ]
        for line in (*self.lines, None):
            name, status, u, cost, base = (
                (line.name, line.status, line.usage, line.cost_usd, line.uncached_cost_usd)
                if line is not None
                else ("total", "", self.usage, self.cost_usd, self.uncached_cost_usd)
            )
            rows.append(
                f"{name[:14]:<14} {status:<10} {u.total_input_tokens:>10,} "
                f"{u.cache_read_input_tokens:>10,} {u.cache_creation_input_tokens:>11,} "
                f"{u.output_tokens:>6,} {u.cache_hit_ratio:>5.0%} {cost:>9.5f} {base:>10.5f}"
            )
        rows.append(
            f"model {self.model}: ${self.cost_usd:.5f} with the prompt cache, "
            f"${self.uncached_cost_usd:.5f} without it ({self.saving:.0%} saved)"
        )
        return "\n".join(rows)


def _uncached(usage: Usage, model: str) -> float:
    return cost_usd(
        Usage(input_tokens=usage.total_input_tokens, output_tokens=usage.output_tokens), model
    )


def cost_report(tasks: Sequence[Task], usage: Usage, cost: float, model: str) -> CostReport:
    """The report of a session whose `tasks` are these and whose totals are `usage` and
    `cost` (`Session.usage`, `Session.cost_usd`): its parent conversation first, then each
    task."""
    parent_usage = usage
    parent_cost = cost
    for task in tasks:
        parent_usage = _minus(parent_usage, task.usage)
        parent_cost -= task.cost_usd
    lines = [CostLine("parent", "", parent_usage, parent_cost, _uncached(parent_usage, model))]
    lines += [
        CostLine(str(t.name or t.id), str(t.status), t.usage, t.cost_usd, _uncached(t.usage, model))
        for t in tasks
    ]
    return CostReport(tuple(lines), model)


def _minus(a: Usage, b: Usage) -> Usage:
    return Usage(
        input_tokens=a.input_tokens - b.input_tokens,
        output_tokens=a.output_tokens - b.output_tokens,
        cache_creation_input_tokens=a.cache_creation_input_tokens - b.cache_creation_input_tokens,
        cache_read_input_tokens=a.cache_read_input_tokens - b.cache_read_input_tokens,
        ephemeral_5m_input_tokens=a.ephemeral_5m_input_tokens - b.ephemeral_5m_input_tokens,
        ephemeral_1h_input_tokens=a.ephemeral_1h_input_tokens - b.ephemeral_1h_input_tokens,
    )
