"""A real kernel with the extension loaded, for the benchmarks that time one.

`kernel(...)` starts it (offline, or on an emulator served by another process, see
`emulator_process`), loads the extension, applies the `ForkAgent` settings, creates the
session and runs the benchmark's own setup cells, each checked; it stops the kernel when the
block ends. `Client` runs cells and reads values, keeping every IOPub message's send time;
`rtts` samples execute round trips.
"""

from __future__ import annotations

import ast
import os
import queue
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager

__all__ = ["Client", "emulator_process", "kernel", "rtts"]

ROOT = Path(__file__).resolve().parents[1]


class Client:
    def __init__(self, km: KernelManager) -> None:
        self.kc = km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        # (when the kernel sent it, wall clock from the message header; its type): the client
        # reads in bursts between round trips, so its own receive times would bunch them up
        self.iopub_times: list[tuple[float, str]] = []
        self.values: dict[str, str] = {}  # the last `value` each widget model sent

    def pump(self) -> None:
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=0)
            except queue.Empty:
                return
            self.record(msg)

    def record(self, msg: dict[str, Any]) -> None:
        sent = msg["header"].get("date")
        when = sent.timestamp() if hasattr(sent, "timestamp") else time.time()
        self.iopub_times.append((when, msg["msg_type"]))
        if msg["msg_type"] in ("comm_open", "comm_msg"):
            state = msg["content"].get("data", {}).get("state", {})
            if "value" in state:
                self.values[msg["content"]["comm_id"]] = str(state["value"])

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
            self.record(msg)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out += msg["content"]["text"]
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return ast.literal_eval(out.strip())


def rtts(client: Client, seconds: float) -> list[float]:
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rtt, _ = client.run("pass")
        out.append(rtt)
        time.sleep(0.05)
    return out


@contextmanager
def emulator_process(module: str, *args: str) -> Iterator[str]:
    """Run `python -m <module> --serve-emulator <args>` (it prints its base URL, then serves
    until its stdin closes) and yield the URL: the emulator's work never holds the GIL of the
    process that times round trips."""
    server = subprocess.Popen(
        [sys.executable, "-m", module, "--serve-emulator", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert server.stdout is not None and server.stdin is not None
    try:
        yield server.stdout.readline().strip()
    finally:
        server.stdin.close()
        server.wait(timeout=30)


@contextmanager
def kernel(
    settings: Mapping[str, Any], *, base_url: str | None = None, setup: Sequence[str] = ()
) -> Iterator[Client]:
    """A kernel with the extension loaded, `ForkAgent.<name> = value` for each setting, its
    session created and `setup` run: on the emulator at `base_url` (the anthropic backend),
    else offline with no credentials in its environment. Stopped when the block ends."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if base_url is None:
        env["FORKAGENT_BACKEND"] = "offline"
        for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
            env.pop(name, None)
    else:
        env.update(
            ANTHROPIC_API_KEY="bench", ANTHROPIC_BASE_URL=base_url, FORKAGENT_BACKEND="anthropic"
        )
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=env, cwd=tempfile.mkdtemp())
    try:
        client = Client(km)
        try:
            config = [f"%config ForkAgent.{name} = {value!r}" for name, value in settings.items()]
            for code in ("%load_ext forkagent_jupyter", *config, "__forkagent__.session", *setup):
                _, reply = client.run(code)
                assert reply["content"]["status"] == "ok", (code, reply["content"])
            yield client
        finally:
            client.kc.stop_channels()
    finally:
        km.shutdown_kernel(now=True)
