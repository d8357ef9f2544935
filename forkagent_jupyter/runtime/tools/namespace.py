"""Read-only tools over the notebook's namespace: list variables, describe a DataFrame.

They let the model look at the data a person works with without printing it whole: types,
shapes, dtypes, a few rows and summary statistics.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field

from ..executors import CallFailedError
from ..output import cap_output
from .base import Tool, ToolContext, ToolError

__all__ = ["DescribeDataTool", "VariablesTool", "summarize_value"]

R = TypeVar("R")

_HIDDEN = {"In", "Out", "exit", "quit", "get_ipython"}
MAX_VARIABLES = 200


def summarize_value(value: object) -> str:
    """Type and size of a value, in one short line."""
    kind = type(value).__name__
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple):
        extra = f" shape={shape}"
        columns = getattr(value, "columns", None)
        if columns is not None:
            names = [str(c) for c in list(columns)[:8]]
            more = "…" if len(columns) > 8 else ""
            extra += f" columns=[{', '.join(names)}{more}]"
        return kind + extra
    if isinstance(value, (str, bytes)):
        return f"{kind} len={len(value)}: {value[:40]!r}"
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        return f"{kind} len={len(value)}"
    if isinstance(value, (int, float, complex, bool)):
        return f"{kind} = {value!r}"
    return kind


class VariablesInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    include_private: bool = Field(default=False, description="Also list names starting with _.")


class VariablesTool(Tool[VariablesInput]):
    name = "Variables"
    description = (
        "List the notebook's variables with their types and sizes (DataFrames with shape and "
        "columns). Modules, functions and classes are left out."
    )
    input_model = VariablesInput
    concurrency_safe = True
    needs_approval = False
    allowed_in_plan = True

    async def run(self, args: VariablesInput, ctx: ToolContext) -> str:
        return str(await _where_code_runs(ctx, list_variables, args.include_private))


class DescribeInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The variable holding a DataFrame or Series.")
    rows: int = Field(default=5, ge=0, le=50, description="How many first rows to show.")


class DescribeDataTool(Tool[DescribeInput]):
    name = "DescribeData"
    description = (
        "Describe a DataFrame (or Series) held in a notebook variable: shape, dtypes, missing "
        "values, the first rows and summary statistics, without dumping it whole."
    )
    input_model = DescribeInput
    concurrency_safe = True
    needs_approval = False
    allowed_in_plan = True

    async def run(self, args: DescribeInput, ctx: ToolContext) -> str:
        text = await _where_code_runs(ctx, describe_variable, args.name, args.rows)
        return cap_output(str(text))


async def _where_code_runs(ctx: ToolContext, fn: Callable[..., R], *args: object) -> R:
    """`fn(namespace, *args)` in the agent's own namespace (a worker's is in its process)."""
    from .python import runner_of

    try:
        # fn's own result, pickled back from the process the namespace lives in
        return cast("R", await runner_of(ctx).call(fn, *args))
    except (ValueError, CallFailedError) as exc:
        raise ToolError(str(exc)) from None


def list_variables(namespace: Mapping[str, object], include_private: bool) -> str:
    rows = []
    for name, value in list(namespace.items()):
        if name in _HIDDEN or (name.startswith("_") and not include_private):
            continue
        if isinstance(value, (types.ModuleType, types.FunctionType, type)):
            continue
        rows.append(f"{name}: {summarize_value(value)}")
    if not rows:
        return "The namespace has no variables yet."
    more = len(rows) - MAX_VARIABLES
    shown = "\n".join(sorted(rows)[:MAX_VARIABLES])
    return shown + (f"\n... {more} more" if more > 0 else "")


def describe_variable(namespace: Mapping[str, object], name: str, rows: int) -> str:
    if name not in namespace:
        known = [n for n, v in namespace.items() if hasattr(v, "describe") and n[:1] != "_"]
        hint = f" DataFrames here: {', '.join(sorted(known))}." if known else ""
        raise ValueError(f"No variable named {name!r}.{hint}")
    value = namespace[name]
    if not (hasattr(value, "describe") and hasattr(value, "head") and hasattr(value, "shape")):
        raise ValueError(f"{name} is a {type(value).__name__}, not a DataFrame or Series.")
    return _describe(name, value, rows)


def _describe(name: str, value: Any, rows: int) -> str:
    parts = [f"{name}: {type(value).__name__}, shape {value.shape}"]
    dtypes = getattr(value, "dtypes", None)
    if dtypes is not None:
        parts.append("dtypes:\n" + dtypes.to_string())
    isna = getattr(value, "isna", None)
    if isna is not None:
        missing = isna().sum()
        parts.append("missing values:\n" + missing.to_string())
    if rows:
        parts.append(f"first {rows} rows:\n" + value.head(rows).to_string())
    try:
        parts.append("summary:\n" + value.describe(include="all").to_string())
    except (TypeError, ValueError):
        parts.append("summary:\n" + value.describe().to_string())
    return "\n\n".join(parts)
