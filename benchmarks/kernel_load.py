"""Kernel responsiveness with many workers streaming, through a real kernel.

For N workers (default 50, 200, 1000) forked at once in a real IPython kernel with the
extension loaded, all streaming from the emulator (latency on), it measures:
* the median round trip of an `execute_request` ("pass") while they run, as a ratio to the
  same kernel's idle median measured just before;
* the kernel's IOPub message rate (messages per second over the run, and the busiest second);
* that every card ends in its task's final state.
Prints JSON (`--out FILE` too); `--quick` runs N=50 only.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager

from forkagent_jupyter.emulator import Emulator, OfflineBrain, Reply

ROOT = Path(__file__).resolve().parents[1]
LONG = " ".join(f"observation {i} holds." for i in range(40))


class StreamingBrain:
    """Offline answers; workers' answers are long enough to stream for a few seconds."""

    def __init__(self) -> None:
        self.inner = OfflineBrain()

    def reply(self, request: Any) -> Reply:
        reply = self.inner.reply(request)
        if "<fork-directive>" in json.dumps(request.get("messages", [])[-1:]):
            return Reply.text("Scope: load test\nResult: " + LONG)
        return reply


class Client:
    def __init__(self, km: KernelManager) -> None:
        self.kc = km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.iopub_times: list[tuple[float, str]] = []

    def pump(self) -> None:
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=0)
            except queue.Empty:
                return
            self.iopub_times.append((time.monotonic(), msg["msg_type"]))

    def run(self, code: str, timeout: float = 600) -> tuple[float, dict[str, Any]]:
        start = time.monotonic()
        msg_id = self.kc.execute(code)
        while True:
            self.pump()
            try:
                reply = self.kc.get_shell_msg(timeout=0.005)
            except queue.Empty:
                if time.monotonic() - start > timeout:
                    raise TimeoutError(code) from None
                continue
            if reply["parent_header"].get("msg_id") == msg_id:
                return time.monotonic() - start, reply

    def value(self, expr: str) -> Any:
        _, reply = self.run(f"__bench__ = {expr}")
        assert reply["content"]["status"] == "ok", reply["content"]
        msg_id = self.kc.execute("print(repr(__bench__))")
        out = ""
        while True:
            msg = self.kc.get_iopub_msg(timeout=30)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out += msg["content"]["text"]
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                import ast

                return ast.literal_eval(out.strip())


def rtts(client: Client, seconds: float) -> list[float]:
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rtt, _ = client.run("pass")
        out.append(rtt)
        time.sleep(0.1)
    return out


def measure(n: int) -> dict[str, Any]:
    with Emulator(brain=StreamingBrain(), ttft=0.5, token_latency=0.05) as emu:
        env = dict(
            os.environ,
            ANTHROPIC_API_KEY="bench",
            ANTHROPIC_BASE_URL=emu.base_url,
            FORKAGENT_BACKEND="anthropic",
            PYTHONPATH=str(ROOT),
        )
        km = KernelManager(kernel_name="python3")
        km.start_kernel(env=env, cwd=tempfile.mkdtemp())
        client = Client(km)
        try:
            client.run("%load_ext forkagent_jupyter")
            client.run("%config ForkAgent.permission_mode = 'bypassPermissions'")
            client.run("%config ForkAgent.auto_respond = False")
            client.run("__forkagent__.session")  # create the session before timing
            idle = rtts(client, 3)
            client.iopub_times.clear()
            start = time.monotonic()
            client.run(f"for i in range({n}):\n    __forkagent__.fork(f'part {{i}}: report')\n")
            busy = []
            while True:
                busy += rtts(client, 1)
                if client.value("len(__forkagent__.session.registry.running())") == 0:
                    break
                if time.monotonic() - start > 600:
                    raise TimeoutError("workers did not finish")
            wall = time.monotonic() - start
            settle = time.monotonic()
            while (
                client.value("len(__forkagent__.ui.hub._dirty)") and time.monotonic() - settle < 120
            ):
                time.sleep(0.2)  # coalesced card updates still being flushed
            settled_s = time.monotonic() - settle
            time.sleep(1.5)  # the final re-send of card states
            client.pump()
            final = client.value(
                "sum(c.task.status in c.header.value for c in __forkagent__.ui.hub.cards.values())"
            )
            statuses = client.value("[t.status for t in __forkagent__.session.tasks]")
        finally:
            client.kc.stop_channels()
            km.shutdown_kernel(now=True)
    # what jupyter_server's IOPub rate limiter counts (it exempts these three types)
    exempt = ("status", "execute_input", "comm_open")
    times = [t for t, kind in client.iopub_times if kind not in exempt]
    per_second = Counter(int(t - start) for t in times if t >= start)
    return {
        "workers": n,
        "completed": statuses.count("completed"),
        "cards_in_final_state": final,
        "idle_rtt_ms_median": statistics.median(idle) * 1000,
        "busy_rtt_ms_median": statistics.median(busy) * 1000,
        "rtt_ratio": statistics.median(busy) / statistics.median(idle),
        "iopub_msgs": len(times),
        "iopub_rate_mean": len(times) / wall,
        "iopub_rate_peak_1s": max(per_second.values()) if per_second else 0,
        "wall_s": wall,
        "cards_settled_after_s": settled_s,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workers", type=int, nargs="*")
    parser.add_argument("--out", type=Path)
    ns = parser.parse_args(argv)
    sizes = ns.workers or ([50] if ns.quick else [50, 200, 1000])
    result = {"benchmark": "kernel_load", "rows": [measure(n) for n in sizes]}
    text = json.dumps(result, indent=2)
    if ns.out:
        ns.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
