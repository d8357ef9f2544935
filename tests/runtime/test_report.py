"""The cost report: per agent, totals that match the session, and the no-cache baseline."""

from __future__ import annotations

from pathlib import Path

import pytest

from forkagent_jupyter.messages_api.usage import Usage, cost_usd, usage_counts
from forkagent_jupyter.runtime.permissions.gate import AllowAll
from forkagent_jupyter.runtime.session.report import cost_report
from forkagent_jupyter.runtime.session.session import Session

pytestmark = pytest.mark.anyio


async def test_report_splits_parent_and_forks_and_prices_the_uncached_baseline(
    tmp_path: Path,
) -> None:
    async with Session(backend="offline", workdir=tmp_path, permission_policy=AllowAll()) as s:
        await s.ask("Context. " * 400 + "\n\n```python\nx = 2\n```")
        for expr in ("x + 1", "x * 3"):
            await s.fork(f"compute `py: {expr}`")
        await s.idle()
        report = cost_report(s.tasks, s.usage, s.cost_usd, s.model)
        assert report.lines[0].name == "parent"
        assert len(report.lines) == 3
        assert report.usage == s.usage
        assert report.cost_usd == pytest.approx(s.cost_usd)
        for line in report.lines[1:]:
            assert line.status == "completed"
            assert line.usage.cache_read_input_tokens > 0  # the siblings shared the prefix
            flat = Usage(
                input_tokens=line.usage.total_input_tokens, output_tokens=line.usage.output_tokens
            )
            assert line.uncached_cost_usd == pytest.approx(cost_usd(flat, s.model))
            assert line.cost_usd < line.uncached_cost_usd
        assert 0 < report.saving < 1
        text = report.text()
        assert text.splitlines()[-2].startswith("total")
        assert f"({report.saving:.0%} saved)" in text
        # as data, the counts carry the names of the task rows and notifications
        data = report.to_dict()
        for row, line in zip(data["agents"], report.lines, strict=True):
            assert {k: row[k] for k in usage_counts(line.usage)} == usage_counts(line.usage)
            assert row["cache_hit_ratio"] == line.usage.cache_hit_ratio
        assert data["total"]["total_input_tokens"] == s.usage.total_input_tokens
