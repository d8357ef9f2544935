"""`%tasks --memory` in a real kernel: each live worker process's pid, its memory shared with
the kernel and its own (read from /proc/<pid>/smaps_rollup), what it holds for pulls; and the
running worker's process line on its card."""

from __future__ import annotations

import time
from typing import Any

import pytest

from .conftest import Kernel
from .test_compute import SESSION, setup, status, wait_until, worker_pid

pytestmark = pytest.mark.kernel

FRAME = (
    "import numpy as np, pandas as pd\n"
    "frame = pd.DataFrame(np.ones((100 * 2**20 // 80, 10)))  # 100 MB of float64\n"
    "frame.shape"
)


def _rows(text: str) -> dict[str, list[str]]:
    """The memory view's rows by task label: [status, pid, own, shared, Pss, Rss, holds...]."""
    rows: dict[str, list[str]] = {}
    lines = text.split("Worker processes\n", 1)[1].splitlines()
    for line in lines[1:]:
        parts = line.split()
        if len(parts) >= 7 and parts[0] in ("reader", "writer", "sleeper"):
            rows[parts[0]] = parts[1:]
        elif parts and parts[0] == "(kernel)":
            rows["(kernel)"] = ["", *parts[1:]]
    return rows


def _mb(row: list[str], column: str) -> float:
    at = {"own": 2, "shared": 3, "pss": 4, "rss": 5}[column]
    return float(row[at].replace(",", ""))


def _memory(kernel: Kernel, line: str = "%tasks --memory") -> tuple[str, dict[str, list[str]]]:
    shown = kernel.execute(line)
    assert shown.status == "ok", shown.texts()
    text = next(
        m["content"]["data"]["text/plain"]
        for m in shown.messages
        if m["msg_type"] == "display_data" and "Worker processes" in str(m["content"]["data"])
    )
    return text, _rows(text)


def test_memory_view_shows_shared_and_own_memory_of_two_workers(kernel: Kernel) -> None:
    setup(kernel)
    assert kernel.execute(FRAME).status == "ok"
    kernel.execute("%fork --name reader read it `py: means = frame.mean(); float(means.sum())`")
    kernel.execute("%fork --name writer read it too `py: first = float(frame.iloc[0, 0])`")
    pids = {name: worker_pid(kernel, name) for name in ("reader", "writer")}
    kernel.run_approving("%tasks --wait reader writer", timeout=120)
    assert status(kernel, "reader") == status(kernel, "writer") == "completed"
    text, rows = _memory(kernel)
    assert "shared = Shared_Clean + Shared_Dirty" in text  # the header says what is counted
    for name in ("reader", "writer"):
        row = rows[name]
        assert row[0] == "completed" and int(row[1]) == pids[name], row
        # the 100 MB frame was not written: the worker maps the kernel's pages
        assert _mb(row, "shared") > 90, row
        assert _mb(row, "own") < _mb(row, "shared") / 2, row
    assert "means (Series," in " ".join(rows["reader"][6:])
    assert " ".join(rows["writer"][6:]) == "first (float, 24 B)"
    own_before = _mb(rows["writer"], "own")
    # the writer rebinds the name to a new frame: its own memory grows by the copy's 100 MB,
    # it holds the new frame for pulls, and the kernel's name is unchanged
    resumed = kernel.execute(
        "%send writer double it `py: frame = frame * 2; float(frame.iloc[0, 0])`"
    )
    assert resumed.status == "ok", resumed.texts()
    wait_until(kernel, f"{SESSION}.registry.get('writer').run == 2")
    kernel.run_approving("%tasks --wait writer", timeout=120)
    assert status(kernel, "writer") == "completed"
    assert worker_pid(kernel, "writer") == pids["writer"]  # the same process, resumed
    text, rows = _memory(kernel)
    writer, reader = rows["writer"], rows["reader"]
    assert _mb(writer, "own") > own_before + 90, (own_before, writer)
    assert " ".join(writer[6:]).startswith("frame (DataFrame, 100.0 MB), first (float, 24 B)")
    assert _mb(reader, "own") < _mb(reader, "shared") / 2, reader
    assert kernel.value("(float(frame.iloc[0, 0]), frame.shape)") == (1.0, (100 * 2**20 // 80, 10))
    # the kernel's own row, for comparison: it holds the frame it made
    assert _mb(rows["(kernel)"], "rss") > 100
    # asking for one task, and for one that has no process
    kernel.execute("%fork --shared --name inside no code")
    kernel.run_approving("%tasks --wait inside", timeout=60)
    one, only = _memory(kernel, "%tasks --memory reader inside")
    assert set(only) == {"reader", "(kernel)"}
    assert "inside: no live process (it runs in the kernel's own namespace (--shared))" in one
    bad = kernel.execute("%tasks --memory --wait")
    assert bad.reply["content"]["evalue"] == "%tasks: --memory goes alone (%tasks --memory [IDS])"


def _card_headers(kernel: Kernel) -> list[str]:
    """Every header value the cards were given (their opening state and every update)."""
    values: list[str] = []
    for m in kernel.iopub:
        data: Any = m["content"].get("data", {})
        if m["msg_type"] in ("comm_open", "comm_msg"):
            state = data.get("state", {})
            if isinstance(state.get("value"), str):
                values.append(state["value"])
    return values


def test_a_running_workers_card_shows_its_process_memory(kernel: Kernel) -> None:
    setup(kernel)
    assert kernel.execute(FRAME).status == "ok"
    kernel.execute("%fork --name sleeper wait `py: import time; time.sleep(120)`")
    pid = worker_pid(kernel, "sleeper")
    wait_until(kernel, f"{SESSION}.registry.get('sleeper').process is not None", 60)
    line = f"process {pid}: own "
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(line in v for v in _card_headers(kernel)):
        kernel.drain()
    header = next(v for v in _card_headers(kernel) if line in v)
    assert "class='forkagent-process'" in header
    shared = kernel.value(f"{SESSION}.registry.get('sleeper').process.shared_mb")
    assert shared > 90  # the kernel's frame, mapped by the running worker
    assert line in kernel.execute("%tasks sleeper").texts()
    _text, rows = _memory(kernel)
    assert rows["sleeper"][0] == "running" and int(rows["sleeper"][1]) == pid
    assert " ".join(rows["sleeper"][6:]) == "nothing yet"  # its first call has not ended
    kernel.execute("%stop sleeper")
    wait_until(kernel, f"{SESSION}.registry.get('sleeper').status == 'killed'", 30)
    assert line not in kernel.execute("%tasks sleeper").texts()


def test_memory_view_elsewhere_is_one_line(kernel: Kernel) -> None:
    """Where /proc/<pid>/smaps_rollup does not exist (not Linux), one line says so."""
    ok = kernel.execute(
        "import pathlib, tempfile\n"
        "from forkagent_jupyter.runtime.executors import memory as _memory\n"
        "_proc, _memory.PROC = _memory.PROC, pathlib.Path(tempfile.mkdtemp())"
    )
    assert ok.status == "ok", ok.texts()
    shown = kernel.execute("%tasks --memory")
    assert shown.status == "ok"
    assert shown.texts().strip() == (
        "%tasks --memory: not available on this platform (it reads /proc/<pid>/smaps_rollup, "
        "which only Linux has)"
    )
    kernel.execute("_memory.PROC = _proc")
