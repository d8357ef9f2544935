"""A worker's process tree: what its code starts ends with it.

A worker process leads its own session and process group (`lead_group`, right after its
fork); the processes its code starts (`subprocess`, `os.fork`, multiprocessing, joblib's
loky workers) join that group. Stopping the worker kills the whole group (`kill_tree`); so
does the worker process ending any other way (its snapshot kills the group when it reaps
it); and when the agent finishes, the processes its code left running are killed while the
worker itself stays for pulls (`prune_group`). A process that leaves the group on purpose
(`setsid`, a daemon) is not followed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

__all__ = ["group_members", "kill_tree", "lead_group", "prune_group", "release_transactions"]


def lead_group() -> None:
    """In a new worker process: it leads a session, and so a process group, of its own.

    A session of its own also puts the worker, and what its code starts, in a scheduling
    group of its own where Linux groups processes by session (autogroup, the default of
    desktop distributions): CPU time is shared between the groups first, so computing
    workers take their share and the kernel keeps its own. In the kernel's group, two
    computing workers took the kernel's share too: its round trip was 2-3x idle while
    they computed (1.1-1.3x in a session of their own, on 2 cores)."""
    try:
        os.setsid()
    except OSError:  # a group leader already: a group of its own is what matters most
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)


def kill_tree(pid: int) -> None:
    """Kill worker `pid` and every process of its group."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def group_members(pgid: int) -> list[int]:
    """The processes of group `pgid` now (from /proc; Linux)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members


def prune_group(_namespace: object = None) -> int:
    """In a worker: kill the other processes of its group (its code's leftovers); how many.
    (Called through the runner's `call`, which passes the namespace.)"""
    me = os.getpid()
    if os.getpgid(0) != me:
        return 0
    killed = 0
    for pid in group_members(me):
        if pid != me:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed


def release_transactions(namespace: dict[str, object]) -> int:
    """In a finished worker: roll back the open transactions of the sqlite connections its
    namespace names, so the locks they hold do not block the kernel's commits while the
    worker is kept for pulls; how many. (Connections held elsewhere are not looked for: that
    would touch every object, and copy the kernel's memory.)"""
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is None:
        return 0
    released = 0
    for value in list(namespace.values()):
        if isinstance(value, sqlite3.Connection):
            with contextlib.suppress(Exception):
                if value.in_transaction:
                    value.rollback()
                    released += 1
    return released
