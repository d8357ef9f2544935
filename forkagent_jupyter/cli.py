"""The `forkagent` command: `forkagent demo` (the fan-out notebook, headless; offline, no key
needed), `forkagent demo --quick` (a two-turn conversation in the terminal), `forkagent emulator`,
`forkagent bench` (from a source checkout) and `forkagent --version`. `python -m
forkagent_jupyter` is the same command."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .messages_api.usage import Usage

__all__ = ["main"]

DEMO_TURNS = (
    "Load a small sample and summarise it.\n\n"
    "```python\n"
    "import statistics\n"
    "sample = [3.1, 4.1, 5.9, 2.6, 5.3, 5.8, 9.7, 9.3]\n"
    "{'n': len(sample), 'mean': statistics.mean(sample), "
    "'stdev': round(statistics.stdev(sample), 3)}\n"
    "```",
    "Now flag the values more than one standard deviation from the mean.\n\n"
    "```python\n"
    "m, s = statistics.mean(sample), statistics.stdev(sample)\n"
    "[x for x in sample if abs(x - m) > s]\n"
    "```",
)


def _usage_line(usage: Usage, cost: float) -> str:
    return (
        f"usage: {usage.total_input_tokens} input ({usage.cache_read_input_tokens} cache read, "
        f"{usage.cache_creation_input_tokens} cache write, {usage.input_tokens} uncached), "
        f"{usage.output_tokens} output tokens "
        f"({usage.cache_hit_ratio:.0%} of the prompt from cache), ${cost:.5f}"
    )


async def _demo(backend: str | None) -> int:
    from .runtime import AllowAll, Session, TextDelta, ToolResult, ToolUse, UsageReport

    with tempfile.TemporaryDirectory(prefix="forkagent-demo-") as workdir:
        session = Session(backend=backend, workdir=workdir, permission_policy=AllowAll())
        print(f"forkagent demo: model {session.model}, {session.backend} backend\n")
        for i, prompt in enumerate(DEMO_TURNS, 1):
            print(f"== turn {i} ==\n> " + prompt.replace("\n", "\n> ") + "\n")
            usage, cost = Usage(), 0.0
            async for event in session.parent.stream(prompt):
                if isinstance(event, TextDelta):
                    print(event.text, end="", flush=True)
                elif isinstance(event, ToolUse):
                    print(f"\n  -> {event.description or event.name}", flush=True)
                elif isinstance(event, ToolResult):
                    mark = "error" if event.is_error else "ok"
                    print(f"  <- {event.name} result ({mark}): {event.content.strip()[:200]}\n")
                elif isinstance(event, UsageReport):
                    usage, cost = usage + event.usage, cost + event.cost_usd
            print(f"\n\n{_usage_line(usage, cost)}\n")
        print(f"session total {_usage_line(session.usage, session.cost_usd)}")
        await session.aclose()
    return 0


def _backend_ready(backend: str) -> bool:
    """The anthropic backend needs a credential: without one, say so in one line at once
    (not after starting a kernel and failing in every cell)."""
    if backend != "anthropic":
        return True
    from .runtime import ConfigError, anthropic_client

    try:
        found = anthropic_client() is not None
    except ConfigError as exc:
        print(f"forkagent demo: {exc}", file=sys.stderr)
        return False
    if not found:
        print(
            "forkagent demo: --backend anthropic needs a key: set ANTHROPIC_API_KEY (or "
            "ANTHROPIC_AUTH_TOKEN, or an SDK profile: ANTHROPIC_PROFILE), or leave out --backend "
            "to run offline.",
            file=sys.stderr,
        )
    return found


def _bench(args: list[str]) -> int:
    """The benchmarks live in the source tree (`benchmarks/`), not in the installed package."""
    root = Path(__file__).resolve().parents[1]
    if not (root / "benchmarks" / "__main__.py").is_file():
        print(
            "forkagent bench: the benchmarks are not installed with the package; run it from a "
            "source checkout of forkagent-jupyter (pip install -e '.[dev]' there).",
            file=sys.stderr,
        )
        return 2
    return subprocess.call([sys.executable, "-m", "benchmarks", *args], cwd=root)


def _notebook_demo(out: Path, backend: str) -> int:
    from .kernel.headless import format_report, run_demo

    print(f"forkagent demo: executing the fan-out notebook ({backend} backend)...", flush=True)
    try:
        report = run_demo(out, backend=backend)
    except (RuntimeError, FileNotFoundError) as exc:
        print(f"forkagent demo: {exc}", file=sys.stderr)
        return 2
    print(format_report(report, out))
    print(f"open it: jupyter lab {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from ._version import DIST_NAME, package_version

    parser = argparse.ArgumentParser(prog="forkagent", description=__doc__)
    parser.add_argument("--version", action="version", version=f"{DIST_NAME} {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="run the fan-out example notebook headless and report its tasks, tokens and cost",
    )
    demo.add_argument("--backend", choices=["offline", "anthropic"], default="offline")
    demo.add_argument(
        "--out",
        type=Path,
        default=Path("forkagent-demo.ipynb"),
        help="where to write the executed notebook (default: ./forkagent-demo.ipynb)",
    )
    demo.add_argument(
        "--quick",
        action="store_true",
        help="instead: a two-turn conversation with a tool call, in the terminal",
    )
    emu = sub.add_parser("emulator", help="serve the Anthropic-compatible emulator")
    emu.add_argument("args", nargs=argparse.REMAINDER)
    bench = sub.add_parser(
        "bench", help="run the benchmarks against the emulator (python -m benchmarks)"
    )
    bench.add_argument("args", nargs=argparse.REMAINDER)
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["bench"]:  # every option goes to `python -m benchmarks`
        return _bench(args[1:])
    ns = parser.parse_args(args)
    if ns.command == "demo" and not _backend_ready(ns.backend):
        return 2
    if ns.command == "demo" and ns.quick:
        return asyncio.run(_demo(ns.backend))
    if ns.command == "demo":
        return _notebook_demo(ns.out, ns.backend)
    from .emulator.__main__ import main as emulator_main

    return emulator_main(ns.args)


if __name__ == "__main__":
    sys.exit(main())
