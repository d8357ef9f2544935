"""What worker processes hold: their memory as Linux counts it, and the values they keep.

A worker process starts as a copy-on-write fork of the kernel (through a snapshot process):
it maps the kernel's pages until it writes one, which then becomes its own copy.
`/proc/<pid>/smaps_rollup` counts, for one process:

* shared (Shared_Clean + Shared_Dirty): pages it maps that at least one other process maps
  too. For a worker these are the pages of the kernel it has not written (also mapped by the
  snapshot it was forked from, and by its sibling workers) and shared libraries' pages. Linux
  does not say *which* other process shares a page, so "shared with the kernel" means: shared
  with the kernel or another copy of it.
* own (Private_Clean + Private_Dirty): pages only this process maps: what its code allocated
  or wrote (a copied frame, a rebound name's new value). Freed when it ends.
* Pss: its proportional share (each shared page divided among the processes that map it);
  Rss: all it maps (shared + own).

The kernel reads these files itself (`read_rollup`, blocking: on a thread), for running
workers as well as finished ones. A finished worker's process is kept for pulls;
`ForkAgent.worker_memory_mb` (default: a quarter of the machine's memory) bounds what finished
workers hold together, the least recently used one retired first.

What a worker keeps for pulls (`held_values`, in the worker after each call): the names its code
bound, new or rebound, with an approximate size (arrays and frames: their buffers; objects of
a frame's columns are not followed).
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MAX_HELD",
    "Held",
    "Rollup",
    "WorkerProcess",
    "approx_size",
    "baseline",
    "default_worker_memory_mb",
    "held_values",
    "own_memory_mb",
    "parse_held",
    "read_rollup",
    "read_rollups",
    "rollups_supported",
]

PROC = Path("/proc")
"""Where the processes' files are read from."""
MAX_HELD = 50
"""Names of one worker listed (the largest first)."""

_FIELDS = {
    "Rss": "rss",
    "Pss": "pss",
    "Shared_Clean": "shared_clean",
    "Shared_Dirty": "shared_dirty",
    "Private_Clean": "private_clean",
    "Private_Dirty": "private_dirty",
}


def default_worker_memory_mb() -> int:
    """A quarter of the machine's memory, in MB (1024 where it cannot be read)."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1024
    return max(1, total // 4 // 2**20)


def own_memory_mb(_namespace: object = None) -> float:
    """In a worker (through the runner's `call`): the memory this process alone holds."""
    kb = 0
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            kb += int(line.split()[1])
    return kb / 1024


@dataclass(frozen=True)
class Rollup:
    """One process's memory from its smaps_rollup, in kB (see the module doc)."""

    pid: int
    rss: int = 0
    pss: int = 0
    shared_clean: int = 0
    shared_dirty: int = 0
    private_clean: int = 0
    private_dirty: int = 0

    @property
    def shared_mb(self) -> float:
        return (self.shared_clean + self.shared_dirty) / 1024

    @property
    def own_mb(self) -> float:
        return (self.private_clean + self.private_dirty) / 1024

    @property
    def rss_mb(self) -> float:
        return self.rss / 1024

    @property
    def pss_mb(self) -> float:
        return self.pss / 1024

    @property
    def shown(self) -> tuple[int, int, int]:
        """What a card shows of it: the pid, own and shared in whole MB."""
        return self.pid, round(self.own_mb), round(self.shared_mb)


def rollups_supported() -> bool:
    """This system has /proc/<pid>/smaps_rollup (Linux 4.14 and later)."""
    return (PROC / "self" / "smaps_rollup").is_file()


def read_rollup(pid: int) -> Rollup | None:
    """Process `pid`'s memory (blocking: call it on a thread); None when it cannot be read
    (the process has ended, or it is not ours to read)."""
    try:
        text = (PROC / str(pid) / "smaps_rollup").read_text()
    except (OSError, ValueError):
        return None
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        field = _FIELDS.get(key)
        if field is not None:
            number = rest.split()[:1]
            if number and number[0].isdigit():
                values[field] = int(number[0])
    return Rollup(pid, **values) if "rss" in values else None


def read_rollups(pids: list[int]) -> list[Rollup | None]:
    """`read_rollup` of each pid, in order (blocking: call it on a thread)."""
    return [read_rollup(pid) for pid in pids]


@dataclass(frozen=True)
class Held:
    """A name a worker's code bound, the type of its value and its approximate size."""

    name: str
    kind: str
    size: int | None  # bytes; None when it cannot be told


def approx_size(value: object) -> int | None:
    """About how many bytes `value` holds: an array's or a frame's buffers (its index too),
    text and bytes; for a container, itself and its items' own sizes (not deeper); for
    anything else, the object itself."""
    try:
        usage = getattr(value, "memory_usage", None)
        if usage is not None and type(value).__module__.startswith("pandas"):
            used = usage(index=True, deep=False)
            return int(used.sum() if hasattr(used, "sum") else used)
        nbytes = getattr(value, "nbytes", None)
        if isinstance(nbytes, int) and not isinstance(value, type):
            return nbytes
        size = sys.getsizeof(value)
        if isinstance(value, (list, tuple, set, frozenset)):
            size += sum(sys.getsizeof(item) for item in list(value)[:100_000])
        elif isinstance(value, dict):
            items = list(value.items())[:100_000]
            size += sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in items)
        return int(size)
    except Exception:
        return None


def baseline(namespace: Mapping[str, object]) -> dict[str, int]:
    """In a worker when it starts: which object each name holds (by identity), so that what its
    code binds later can be told apart. Reads only: no page of the kernel's is written."""
    return {name: id(value) for name, value in namespace.items()}


def held_values(
    namespace: Mapping[str, object], before: Mapping[str, int]
) -> tuple[list[tuple[str, str, int | None]], int]:
    """In a worker: the names its code bound since `before` (new, or holding another object),
    largest first (at most MAX_HELD), as plain tuples for the wire; and how many there are.
    Names starting with "_" and modules are left out (they are not results)."""
    found: list[tuple[str, str, int | None]] = []
    for name, value in list(namespace.items()):
        if name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        if before.get(name) == id(value):
            continue
        found.append((name, type(value).__name__, approx_size(value)))
    found.sort(key=lambda h: (-(h[2] or 0), h[0]))
    return found[:MAX_HELD], len(found)


def parse_held(raw: object) -> tuple[tuple[Held, ...], int]:
    """In the kernel: a worker's report of what it holds (its code is untrusted: anything that
    is not a well-formed report counts as nothing)."""
    if type(raw) is not tuple or len(raw) != 2 or type(raw[0]) is not list:
        return (), 0
    entries, total = raw
    held: list[Held] = []
    for entry in entries[:MAX_HELD]:
        if (
            type(entry) is tuple
            and len(entry) == 3
            and type(entry[0]) is str
            and type(entry[1]) is str
            and (entry[2] is None or (type(entry[2]) is int and 0 <= entry[2] < 2**63))
        ):
            held.append(Held(entry[0][:100], entry[1][:60], entry[2]))
    count = total if type(total) is int and len(held) <= total < 2**63 else len(held)
    return tuple(held), count


@dataclass(frozen=True)
class WorkerProcess:
    """One live worker process as `%tasks --memory` shows it."""

    agent_id: str
    pid: int
    finished: bool  # its agent has ended; the process is kept for pulls
    memory: Rollup | None  # None: it could not be read (it ended meanwhile)
    held: tuple[Held, ...]
    held_count: int
