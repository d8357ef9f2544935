"""Reading a process's memory from /proc/<pid>/smaps_rollup, and what a worker reports it
holds: computed in the worker, checked in the kernel (the worker's code is untrusted)."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import numpy as np
import pandas as pd
import pytest

from forkagent_jupyter.runtime.executors.memory import (
    Held,
    approx_size,
    baseline,
    held_values,
    parse_held,
    read_rollup,
    rollups_supported,
)

linux = pytest.mark.skipif(not rollups_supported(), reason="no /proc/<pid>/smaps_rollup")


@linux
def test_rollup_of_a_process_and_of_one_that_is_gone() -> None:
    own = read_rollup(os.getpid())
    assert own is not None and own.pid == os.getpid()
    assert own.rss == own.shared_clean + own.shared_dirty + own.private_clean + own.private_dirty
    assert 0 < own.pss <= own.rss
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    assert read_rollup(int(ended.stdout)) is None


@linux
def test_a_page_written_after_a_fork_becomes_the_childs_own() -> None:
    block = np.ones(64 * 2**20 // 8)  # 64 MB, written here
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: waits until told, then writes half of the block
        os.close(writer)
        os.read(reader, 1)
        block[: block.size // 2] = 2.0
        os.read(reader, 1)
        os._exit(0)
    try:
        os.close(reader)
        before = read_rollup(pid)
        os.write(writer, b"x")
        after = read_rollup(pid)
        for _ in range(100):
            if after is not None and after.own_mb > (before.own_mb if before else 0) + 30:
                break
            after = read_rollup(pid)
        assert before is not None and after is not None
        assert before.shared_mb > 60 and before.own_mb < before.shared_mb
        assert after.own_mb > before.own_mb + 30  # 32 MB of the block copied on write
    finally:
        os.write(writer, b"x")
        os.waitpid(pid, 0)


def test_what_a_worker_bound_since_it_started() -> None:
    frame = pd.DataFrame(np.ones((1000, 4)))
    namespace = {"frame": frame, "kept": [1, 2], "In": [], "np": np}
    before = baseline(namespace)
    namespace["frame"] = frame * 2  # rebound
    namespace["total"] = 8.0  # new
    namespace["_hidden"] = "x" * 1000
    namespace["pd"] = pd  # a module is not a result
    namespace["kept"].append(3)  # changed in place: the same object, not listed
    held, count = held_values(namespace, before)
    assert held == [("frame", "DataFrame", approx_size(namespace["frame"])), ("total", "float", 24)]
    assert count == 2


def test_approximate_sizes() -> None:
    frame = pd.DataFrame(np.ones((1000, 4)))
    assert approx_size(frame) == int(frame.memory_usage(index=True).sum())
    assert approx_size(np.zeros(1000)) == 8000
    assert approx_size(frame[0]) == int(frame[0].memory_usage(index=True))
    assert approx_size(b"x" * 100) == sys.getsizeof(b"x" * 100)
    assert approx_size([b"x" * 100]) == sys.getsizeof([b""]) + sys.getsizeof(b"x" * 100)
    assert approx_size(types) == sys.getsizeof(types)


@pytest.mark.parametrize(
    "junk",
    [None, "frame", ([], "2"), [[("a", "int", 1)], 1], ((("a", "int", 1),), 1), ([1, 2, 3],)],
)
def test_a_malformed_report_counts_as_nothing(junk: object) -> None:
    held, count = parse_held(junk)
    assert (held == () and count == 0) or (held == () and count == 0)


def test_malformed_entries_of_a_report_are_dropped() -> None:
    entries = [
        ("ok", "int", 28),
        ("negative", "int", -5),
        ("huge-name" * 50, "str", None),
        (b"bytes", "int", 1),
        ("four", "int", 1, 1),
        ("flag", "bool", True),  # a bool is not a size
        ["list", "int", 1],
    ]
    held, count = parse_held((entries, 1))
    assert held == (Held("ok", "int", 28), Held(("huge-name" * 50)[:100], "str", None))
    assert count == 2  # a count below what is listed is not believed
    assert parse_held(([("a", "int", 1)], 10**6)) == ((Held("a", "int", 1),), 10**6)


def test_a_report_with_numbers_too_large_to_show_is_not_believed() -> None:
    """A worker's code can send any integer: one past 2**63 (which %tasks --memory could not
    format: a float overflow, or past Python's digits limit for str) counts as no size, and a
    count that large as the entries listed."""
    held, count = parse_held(([("big", "int", 10**5000), ("ok", "int", 3)], 10**5000))
    assert held == (Held("ok", "int", 3),)
    assert count == 1
