"""Variables and DescribeData over a real namespace with a real DataFrame."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from forkagent_jupyter.runtime.tools.base import ToolContext, ToolSet
from forkagent_jupyter.runtime.tools.namespace import DescribeDataTool, VariablesTool

pytestmark = pytest.mark.anyio


async def test_variables_lists_data_not_modules(tmp_path: Path) -> None:
    df = pd.DataFrame({"a": range(100), "b": ["x"] * 100})
    ns = {"df": df, "n": 3, "pd": pd, "_hidden": 1, "name": "penguins", "f": lambda: 1}
    out = await ToolSet([VariablesTool()]).call("Variables", {}, ToolContext(tmp_path, ns))
    assert not out.is_error
    lines = out.content.splitlines()
    assert "df: DataFrame shape=(100, 2) columns=[a, b]" in lines
    assert "n: int = 3" in lines
    assert not any(line.startswith(("pd:", "_hidden:", "f:")) for line in lines)


async def test_describe_data_summarizes_without_dumping(tmp_path: Path) -> None:
    df = pd.DataFrame({"x": [1.0, 2.0, None, 4.0] * 500, "label": ["a", "b", "c", "d"] * 500})
    ctx = ToolContext(tmp_path, {"df": df, "s": "text"})
    tools = ToolSet([DescribeDataTool()])
    out = await tools.call("DescribeData", {"name": "df", "rows": 3}, ctx)
    assert not out.is_error
    assert "shape (2000, 2)" in out.content and "float64" in out.content
    assert "x        500" in out.content  # missing values per column
    assert "first 3 rows" in out.content and "mean" in out.content
    assert len(out.content) < 4000  # 2000 rows are not printed
    missing = await tools.call("DescribeData", {"name": "nope"}, ctx)
    assert missing.is_error and "DataFrames here: df" in missing.content
    wrong = await tools.call("DescribeData", {"name": "s"}, ctx)
    assert wrong.is_error and "not a DataFrame" in wrong.content
