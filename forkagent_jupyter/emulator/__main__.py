"""Serve the emulator: ``python -m forkagent_jupyter.emulator --port 8765 [--strict]``.

Prints the base URL, then serves until Ctrl-C. Point the SDK at it with
``ANTHROPIC_BASE_URL=<url> ANTHROPIC_API_KEY=anything``.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Sequence

from ..messages_api.cache import WallClock
from ..messages_api.ratelimits import RateLimit
from .brains import Brain, EchoBrain, OfflineBrain, Reply, StaticBrain
from .server import Emulator

__all__ = ["build_emulator", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m forkagent_jupyter.emulator",
        description="Serve the Anthropic-compatible emulator on 127.0.0.1.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--strict", action="store_true", help="record protocol violations")
    parser.add_argument("--seed", type=int, default=None, help="deterministic ids")
    parser.add_argument("--ttft", type=float, default=0.0, help="seconds before the first token")
    parser.add_argument(
        "--token-latency", type=float, default=0.0, help="seconds per streamed delta"
    )
    parser.add_argument("--ping-interval", type=int, default=None, help="a ping every N events")
    parser.add_argument(
        "--brain",
        choices=["offline", "ok", "echo"],
        default="offline",
        help="who answers: the offline model (default), always 'ok', or an echo",
    )
    parser.add_argument("--reply", default=None, help="answer every request with this text")
    parser.add_argument(
        "--rate-limit",
        type=RateLimit.parse,
        default=None,
        metavar="RPM,ITPM,OTPM",
        help="rate limits for every model (e.g. 50,30000,8000); off by default",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="run the emulator's clock this many times faster than real time",
    )
    return parser


def _brain(ns: argparse.Namespace) -> Brain:
    if ns.reply is not None:
        return StaticBrain(Reply.text(ns.reply))
    if ns.brain == "ok":
        return StaticBrain()
    if ns.brain == "echo":
        return EchoBrain()
    return OfflineBrain()


def build_emulator(ns: argparse.Namespace) -> Emulator:
    """The emulator the command line asks for (not started)."""
    return Emulator(
        host=ns.host,
        port=ns.port,
        strict=ns.strict,
        seed=ns.seed,
        ttft=ns.ttft,
        token_latency=ns.token_latency,
        ping_interval=ns.ping_interval,
        brain=_brain(ns),
        rate_limits=ns.rate_limit,
        clock=WallClock(scale=ns.time_scale),
    )


def main(argv: Sequence[str] | None = None, *, ready: threading.Event | None = None) -> int:
    ns = build_parser().parse_args(argv)
    emulator = build_emulator(ns)
    with emulator:
        print(emulator.base_url, flush=True)
        if ready is not None:
            ready.set()
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
