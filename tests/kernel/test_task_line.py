"""The task-line formatter: the context percent rule shared with the Tasks panel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forkagent_jupyter.kernel.render.task_line import context_percent, context_text

CASES = Path(__file__).parents[2] / "labextension" / "test" / "context-percent.json"


def _cases() -> list[dict[str, object]]:
    cases: list[dict[str, object]] = json.loads(CASES.read_text(encoding="utf-8"))["cases"]
    return cases


@pytest.mark.parametrize("case", _cases(), ids=lambda c: f"{c['tokens']}/{c['window']}")
def test_context_percent_follows_the_shared_table(case: dict[str, object]) -> None:
    tokens, window = int(str(case["tokens"])), int(str(case["window"]))
    assert context_percent(tokens, window) == case["percent"]
    assert context_text(tokens, window) == f"context {tokens:,} / {window:,} ({case['percent']})"
