"""How soon the kernel answers a cell after a flood of junk on the `forkagent` comm.

A real kernel with the extension loaded (offline); a client opens the comm as the JupyterLab
extension does, sends N junk messages (full: 10,000; --quick: 5,000) at the issue's pace
(10,000 in 0.7 s; slower where the client cannot keep it), then an `execute_request` ("pass"),
and times its reply from the flood's last message. Twice:

* `door`: as the kernel runs, junk dropped at the comm's door on ipykernel's shell thread
  (`kernel/comm/door.py`);
* `handler`: the door removed, junk dropped by the bridge's handler after ipykernel's own
  handling of each message on the main thread (as before the door; without the log line each
  message had then).

Reported per mode: the flood's send time, the answer's wait after it, their ratio, and the
drops counted. Bounds (--check), ratios and counts within the run: with the door the wait
after the flood is at most `answer_vs_send_max` of the time the flood took (the issue's "a
second" after 0.7 s of it), and at most 1/`handler_vs_door_min` of the wait without the door;
every junk message is counted as dropped in both modes.

Prints JSON and writes it to `--out` (benchmarks/results/comm_flood.json).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.kernel import Client, kernel, rtts
from benchmarks.output import finish, options

ROOT = Path(__file__).resolve().parents[1]
SIZES = {"full": 10_000, "quick": 5_000}
BOUNDS = {"answer_vs_send_max": 1.5, "handler_vs_door_min": 5.0}
COMM = "bench-flood"
PACE = 10_000 / 0.7  # messages a second: the flood
BATCH = 50  # messages sent between two looks at the clock


def open_comm(client: Client) -> None:
    """Open the `forkagent` comm as the extension does, and wait until the kernel has it."""
    kc = client.kc
    data = {"comm_id": COMM, "target_name": "forkagent", "data": {"type": "hello"}}
    kc.shell_channel.send(kc.session.msg("comm_open", data, metadata={}))
    client.run("pass")  # handled after the open: the comm is the bridge's now


def flood(client: Client, n: int) -> dict[str, Any]:
    """Send `n` junk messages, then a cell; the times, and the drops the kernel counted."""
    before = client.value("__forkagent__.bridge.tally.total")
    kc = client.kc
    messages = [
        kc.session.msg("comm_msg", {"comm_id": COMM, "data": {"type": "junk", "n": i}})
        for i in range(n)
    ]
    start = time.monotonic()
    for at in range(0, n, BATCH):
        while time.monotonic() < start + at / PACE:
            time.sleep(0.0005)
        for message in messages[at : at + BATCH]:
            kc.shell_channel.send(message)
    sent = time.monotonic()
    rtt, reply = client.run("pass", timeout=300)
    assert reply["content"]["status"] == "ok", reply["content"]
    answered = sent + rtt
    return {
        "messages": n,
        "send_s": sent - start,
        "answer_after_flood_s": answered - sent,
        "answer_vs_send": (answered - sent) / (sent - start),
        "dropped": client.value("__forkagent__.bridge.tally.total") - before,
    }


def measure(n: int) -> dict[str, Any]:
    with kernel({}) as client:
        open_comm(client)
        idle = rtts(client, 2.0)
        door = flood(client, n)
        _, reply = client.run("__forkagent__.bridge.door.remove()")
        assert reply["content"]["status"] == "ok", reply["content"]
        client.run("pass")  # the shell thread has the handler back
        handler = flood(client, n)
    return {
        "idle_rtt_ms_median": statistics.median(idle) * 1000,
        "door": door,
        "handler": handler,
        "handler_vs_door": handler["answer_after_flood_s"] / door["answer_after_flood_s"],
    }


def check(result: dict[str, Any]) -> list[str]:
    failures = []
    door = result["door"]
    if door["answer_vs_send"] > BOUNDS["answer_vs_send_max"]:
        failures.append(
            f"with the door the answer came {door['answer_after_flood_s']:.2f} s after a flood "
            f"sent in {door['send_s']:.2f} s (ratio {door['answer_vs_send']:.2f} > "
            f"{BOUNDS['answer_vs_send_max']})"
        )
    if result["handler_vs_door"] < BOUNDS["handler_vs_door_min"]:
        failures.append(
            f"without the door the answer waited {result['handler_vs_door']:.1f}x as long "
            f"(< {BOUNDS['handler_vs_door_min']})"
        )
    for mode in ("door", "handler"):
        row = result[mode]
        if row["dropped"] != row["messages"]:
            failures.append(f"{mode}: {row['dropped']} of {row['messages']} junk messages counted")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = options(
        __doc__, out=ROOT / "benchmarks/results/comm_flood.json", quick="5,000 messages"
    )
    ns = parser.parse_args(argv)
    result: dict[str, Any] = {
        "benchmark": "comm_flood",
        "quick": ns.quick,
        "bounds": BOUNDS,
        **measure(SIZES["quick" if ns.quick else "full"]),
    }
    result["failures"] = check(result)
    return finish("comm_flood", result, ns.out, ns.check)


if __name__ == "__main__":
    sys.exit(main())
