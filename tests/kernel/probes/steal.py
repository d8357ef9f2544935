"""Run inside a worker process (as the model's code would): every route to the kernel's API
key and to its code tried, each outcome recorded in `found` (route -> what happened).
`KERNEL_PID` and `KEY_SHA` are bound by the test before this runs; the key itself is not in
this text (its prefix and a hash are)."""

import gc
import hashlib
import os
import re
import sys
from pathlib import Path

KERNEL_PID = globals()["KERNEL_PID"]
KEY_SHA = globals()["KEY_SHA"]
SHAPE = re.compile(rb"sk-ant-api03-[A-Za-z0-9]{30,}")
found = {}


def has_key(data):
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    for match in SHAPE.finditer(data):
        for end in range(len(match.group()), 12, -1):
            if hashlib.sha256(match.group()[:end]).hexdigest() == KEY_SHA:
                return True
    return False


def attempt(route, fn):
    try:
        found[route] = "KEY" if fn() else "no key"
    except Exception as exc:
        found[route] = f"blocked: {type(exc).__name__}"


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def kernel_mem():
    data = []
    with open(f"/proc/{KERNEL_PID}/mem", "rb") as mem:
        for line in read(f"/proc/{KERNEL_PID}/maps", "r").splitlines():
            span, perms = line.split()[:2]
            if "r" in perms:
                start, end = (int(x, 16) for x in span.split("-"))
                try:
                    mem.seek(start)
                    data.append(mem.read(min(end - start, 1 << 26)))
                except OSError:
                    pass
    return any(has_key(d) for d in data)


def every_process():
    hits = False
    for entry in [p for p in Path("/proc").iterdir() if p.name.isdigit()]:
        for part in ("environ", "cmdline"):
            try:
                hits = hits or has_key(read(f"{entry}/{part}"))
            except OSError:
                pass
    return hits


def inherited_objects():
    for obj in gc.get_objects():
        try:
            values = list(obj.values()) if isinstance(obj, dict) else list(vars(obj).values())
        except Exception:
            continue
        for value in values:
            if isinstance(value, (str, bytes)) and has_key(value):
                return True
    return False


def own_memory():
    hits = False
    with open("/proc/self/mem", "rb") as mem:
        for line in read("/proc/self/maps", "r").splitlines():
            span, perms = line.split()[:2]
            if "r" not in perms or line.endswith(("[vvar]", "[vsyscall]")):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(start)
                hits = hits or has_key(mem.read(end - start))
            except OSError:
                pass
    return hits


attempt("kernel environ", lambda: has_key(read(f"/proc/{KERNEL_PID}/environ")))
attempt("kernel mem", kernel_mem)
attempt("any process's environ or cmdline", every_process)
attempt("own environment", lambda: has_key("\0".join(os.environ.values())))
attempt("own environ block", lambda: has_key(read("/proc/self/environ")))
attempt("inherited objects", inherited_objects)
attempt("own memory", own_memory)

# the kernel's connection file (its path is in sys.argv) and signing key
connection = next((a for a in sys.argv if a.endswith(".json")), None)
try:
    found["connection file"] = "READ" if read(connection) else "empty"
except Exception as exc:
    found["connection file"] = f"blocked: {type(exc).__name__}"
shell = get_ipython()  # noqa: F821 - the worker's copy of the kernel's shell
session_key = shell.kernel.session.key
found["signing key"] = "KEY" if session_key else "empty"
try:
    from jupyter_client import BlockingKernelClient

    client = BlockingKernelClient(connection_file=connection)
    client.load_connection_file()
    if not client.session.key:
        client.session.key = session_key
    client.start_channels()
    client.execute("x = 666")  # runs once the kernel's current cell ends, if it is accepted
    found["drive the kernel"] = "sent" if client.session.key else "sent unsigned"
except Exception as exc:
    found["drive the kernel"] = f"blocked: {type(exc).__name__}"
