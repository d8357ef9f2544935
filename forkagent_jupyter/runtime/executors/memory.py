"""What finished workers hold: each worker process's own memory, and the bound on the total.

A worker process shares the kernel's pages (copy-on-write) until it writes them: its own
memory is what it alone holds (private pages, freed when it ends), read from
/proc/self/smaps_rollup in the worker itself. A finished worker's process is kept for pulls;
`ForkAgent.worker_memory_mb` (default: a quarter of the machine's memory) bounds what finished
workers hold together, the least recently used one retired first.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["default_worker_memory_mb", "own_memory_mb"]


def default_worker_memory_mb() -> int:
    """A quarter of the machine's memory, in MB (1024 where it cannot be read)."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1024
    return max(1, total // 4 // 2**20)


def own_memory_mb(_namespace: Any = None) -> float:
    """In a worker (through the runner's `call`): the memory this process alone holds."""
    kb = 0
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            kb += int(line.split()[1])
    return kb / 1024
