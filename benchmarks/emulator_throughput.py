"""Emulator throughput: requests/s through the real SDK, JSON and streaming, 1/4/16 clients.

Each client is its own `anthropic.Anthropic` (own keep-alive connection) in its own thread.
Each request carries a ~2 KB system prompt with automatic caching (so validation, the token
count and the cache plan/commit all run) and gets a ~400-byte scripted text reply (about 25
SSE text deltas when streamed). Only successful requests are counted; the emulator's ledger
is checked against the count afterwards.

By default the emulator runs in a child process (`python -m forkagent_jupyter.emulator`), so
clients and server do not share one GIL; `--in-process` runs it in this process instead.

Prints JSON (`--out FILE` writes it too). `--quick` is the CI size. Run from the repository
root: `python -m benchmarks.emulator_throughput --quick`.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anthropic

from benchmarks.output import finish, options
from forkagent_jupyter.emulator import Emulator, Reply, StaticBrain

MODEL = "claude-sonnet-5-5"
SYSTEM = "You are a benchmark. " * 100  # ~2 KB
REPLY_TEXT = "The emulator answers with this fixed paragraph of text. " * 7


def _body(i: int) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 256,
        "system": SYSTEM,
        "cache_control": {"type": "ephemeral"},
        "messages": [{"role": "user", "content": f"request {i}"}],
    }


@contextmanager
def _subprocess_emulator() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "forkagent_jupyter.emulator", "--port", "0", "--reply", REPLY_TEXT],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the emulator did not start: {url!r}")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


@contextmanager
def _inprocess_emulator() -> Iterator[str]:
    with Emulator(brain=StaticBrain(Reply.text(REPLY_TEXT))) as emu:
        yield emu.base_url


def _control(url: str, method: str, name: str) -> Any:
    req = urllib.request.Request(f"{url}/_emulator/{name}", method=method, data=b"{}")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def _one(client: anthropic.Anthropic, stream: bool, i: int) -> None:
    if stream:
        with client.messages.stream(**_body(i)) as s:
            message = s.get_final_message()
    else:
        message = client.messages.create(**_body(i))
    if message.content[0].type != "text":
        raise RuntimeError("unexpected reply")


def run_case(url: str, *, stream: bool, clients: int, per_client: int) -> dict[str, Any]:
    _control(url, "POST", "reset")
    sdk = [anthropic.Anthropic(base_url=url, api_key=f"bench-{n}") for n in range(clients)]
    for n, client in enumerate(sdk):  # warm-up: open the connections
        _one(client, stream, -1 - n)
    latencies: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)

    def worker(client: anthropic.Anthropic) -> None:
        barrier.wait()
        mine = []
        for i in range(per_client):
            t0 = time.perf_counter()
            _one(client, stream, i)
            mine.append(time.perf_counter() - t0)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(c,)) for c in sdk]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    for client in sdk:
        client.close()
    total = clients * per_client
    billed = len(_control(url, "GET", "ledger")["entries"])
    if billed != total + clients:
        raise RuntimeError(f"ledger has {billed} entries, expected {total + clients}")
    latencies.sort()
    return {
        "stream": stream,
        "clients": clients,
        "requests": total,
        "seconds": round(elapsed, 4),
        "requests_per_s": round(total / elapsed, 1),
        "latency_p50_ms": round(statistics.median(latencies) * 1000, 2),
        "latency_p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))] * 1000, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = options(__doc__.split("\n")[0], quick="CI size (fewer requests)")
    parser.add_argument("--requests", type=int, default=None, help="requests per case")
    parser.add_argument("--clients", default="1,4,16", help="comma-separated client counts")
    parser.add_argument("--in-process", action="store_true", help="emulator in this process")
    ns = parser.parse_args(argv)
    per_case = ns.requests or (48 if ns.quick else 480)
    counts = [int(c) for c in ns.clients.split(",") if c.strip()]
    factory: Callable[[], Any] = _inprocess_emulator if ns.in_process else _subprocess_emulator
    results = []
    with factory() as url:
        for stream in (False, True):
            for clients in counts:
                per_client = max(1, per_case // clients)
                results.append(run_case(url, stream=stream, clients=clients, per_client=per_client))
    report = {
        "benchmark": "emulator_throughput",
        "quick": ns.quick,
        "emulator": "in-process" if ns.in_process else "subprocess",
        "python": platform.python_version(),
        "anthropic": anthropic.__version__,
        "cpus": os.cpu_count(),
        "reply_bytes": len(REPLY_TEXT),
        "results": results,
        "failures": [],  # reported, no bounds
    }
    return finish("emulator_throughput", report, ns.out, ns.check)


if __name__ == "__main__":
    sys.exit(main())
