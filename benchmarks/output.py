"""How a benchmark ends: its JSON on stdout and in `--out`, and `--check` failures on stderr."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["finish"]


def finish(name: str, result: dict[str, Any], out: Path | None, check: bool) -> int:
    """Write and print `result`; the exit code (1 when `check` and a bound failed)."""
    text = json.dumps(result, indent=2)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
    print(text)
    if check and result.get("failures"):
        print(f"{name}: " + "; ".join(result["failures"]), file=sys.stderr)
        return 1
    return 0
