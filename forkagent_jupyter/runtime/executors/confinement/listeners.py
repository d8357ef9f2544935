"""The TCP ports the kernel and the processes it started listen on: what the model's code must
not connect to (Linux).

A server in the kernel runs code for whoever connects, with no key asked: a Dask scheduler
(`LocalCluster` runs it in the kernel; `run_on_scheduler` runs any function there, where the
API key is), its workers and nannies (`client.run`: they hold the environment the kernel had
when it made them), a notebook's own web app. A worker process, `Bash`, a hook and a stdio
MCP server keep the network (data to fetch, packages to install, the person's own database),
but not these ports: `confine.close_ports` forbids connecting to them (Landlock), and where
the kernel of the system has no Landlock for the network, the program gets no network at all
(a network namespace with only its own loopback), never the ports.

The kernel's own ZMQ ports are left out: a message to them is refused unless it is signed
with the kernel's key, which no such program holds (sandbox.py).

The ports are read when the program starts: a server the kernel starts later is not closed
to a worker or a background shell that was already running.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys

__all__ = ["aclosed_ports", "closed_ports"]

_LISTEN = "0A"
_ZMQ_PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


def closed_ports(root: int | None = None) -> frozenset[int]:
    """The TCP ports that process `root` (default: this one) and its descendants listen on,
    but the kernel's ZMQ ports; empty off Linux."""
    if not sys.platform.startswith("linux"):
        return frozenset()
    inodes = _listening_inodes()
    if not inodes:
        return frozenset()
    ports: set[int] = set()
    for pid in _descendants(os.getpid() if root is None else root):
        with contextlib.suppress(OSError), os.scandir(f"/proc/{pid}/fd") as fds:
            for fd in fds:
                try:
                    target = os.readlink(fd.path)  # noqa: PTH115 (a DirEntry of /proc, many)
                except OSError:
                    continue
                if target.startswith("socket:["):
                    port = inodes.get(target[8:-1])
                    if port is not None:
                        ports.add(port)
    return frozenset(ports - _kernel_zmq_ports())


async def aclosed_ports() -> frozenset[int]:
    """`closed_ports()`, read off the event loop."""
    return await asyncio.to_thread(closed_ports)


def _listening_inodes() -> dict[str, int]:
    """Socket inode -> port, of every TCP socket listening in this network namespace."""
    found: dict[str, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as lines:
                next(lines, None)
                for line in lines:
                    fields = line.split()
                    if len(fields) > 9 and fields[3] == _LISTEN:
                        found[fields[9]] = int(fields[1].rsplit(":", 1)[1], 16)
        except OSError:
            continue
    return found


def _descendants(root: int) -> list[int]:
    """`root` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as file:
                stat = file.read()
        except OSError:
            continue
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) > 1 and fields[1].isdigit():
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [root], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kernel_zmq_ports() -> set[int]:
    app_module = sys.modules.get("ipykernel.kernelapp")
    app_class = getattr(app_module, "IPKernelApp", None)
    if app_class is None or not app_class.initialized():
        return set()
    app = app_class.instance()
    return {port for name in _ZMQ_PORTS if isinstance(port := getattr(app, name, 0), int)}
