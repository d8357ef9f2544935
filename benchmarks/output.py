"""How a benchmark starts and ends: its command line (`--quick`, `--check`, `--out`), then its
JSON on stdout and in `--out`, and `--check` failures on stderr."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["finish", "options"]


def options(doc: str | None, *, out: Path | None = None, quick: str = "the CI size") -> Any:
    """The parser of a benchmark's command line: `--quick` (`quick` says what it is),
    `--check` and `--out` (default `out`); a benchmark adds its own options to it."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--check", action="store_true", help="fail when a bound does not hold")
    parser.add_argument("--out", type=Path, default=out, help="also write the JSON here")
    return parser


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
