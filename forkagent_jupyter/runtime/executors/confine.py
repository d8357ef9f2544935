"""Run a program where the kernel's connection file and Jupyter's runtime folder are covered
(Linux): `python -I -S confine.py PATH... -- PROGRAM ARGS...`.

The kernel's connection file holds the key that signs its messages, and the runtime folder the
connection files of every kernel and the server's token: a process that reads one can have a
kernel run any code (the API key is in the kernel's environment). The programs the kernel
starts for the model and for hooks (`Bash`, command hooks, stdio MCP servers) run as the user
and would read them, so they start through this script: it enters a user and mount namespace
of its own, mounts an empty folder over each folder PATH and /dev/null over each file PATH,
gives up every capability (the mounts cannot be undone) and becomes PROGRAM. Where namespaces
cannot be made, PROGRAM runs as it would have, and the first line on stderr says so. Standard
library only: it starts for every call, before the package could be imported."""

import ctypes
import os
import sys
from pathlib import Path

_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 0x4000, 1 << 18
_PR_CAPBSET_DROP = 24


def write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)


def mount(libc: ctypes.CDLL, source: str, target: str, kind: str | None, flags: int) -> None:
    if libc.mount(source.encode(), target.encode(), kind.encode() if kind else None, flags, None):
        raise OSError(ctypes.get_errno(), f"mount {target}: {os.strerror(ctypes.get_errno())}")


def cover(libc: ctypes.CDLL, paths: list[str]) -> None:
    """An empty folder over each folder of `paths`, /dev/null over each file (in this
    process's own mount namespace); OSError when a mount fails."""
    for path in sorted(paths, key=lambda p: Path(p).is_dir()):  # files, then folders
        if Path(path).is_dir():
            mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        elif Path(path).is_file():
            mount(libc, "/dev/null", path, None, MS_BIND)


def drop_capabilities(libc: ctypes.CDLL) -> None:
    """No capability left (nor any to regain by running a program): mounts made before
    cannot be undone."""
    for number in range(64):
        libc.prctl(_PR_CAPBSET_DROP, number, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

    header, data = Header(0x20080522, 0), (Data * 2)()
    libc.capset(ctypes.byref(header), data)


def confine(paths: list[str]) -> str | None:
    """Cover `paths` in a namespace of this process's own; None when done, else why not."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS) == 0:
        try:
            write("/proc/self/setgroups", "deny")
            write("/proc/self/uid_map", f"{uid} {uid} 1")
            write("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as exc:
            return f"the user namespace could not be set up ({exc})"
    elif libc.unshare(_CLONE_NEWNS) != 0:
        return f"namespaces are not available here ({os.strerror(ctypes.get_errno())})"
    try:
        mount(libc, "none", "/", None, MS_REC | MS_PRIVATE)
        cover(libc, paths)
    except OSError as exc:
        return str(exc)
    finally:
        drop_capabilities(libc)
    return None


def main(argv: list[str]) -> None:
    split = argv.index("--")
    paths, program = argv[:split], argv[split + 1 :]
    why = confine(paths)
    if why is not None:
        print(f"forkagent: the kernel's connection file is not covered: {why}", file=sys.stderr)
    try:
        os.execvp(program[0], program)
    except OSError as exc:
        print(f"{program[0]}: {exc.strerror or exc}", file=sys.stderr)
        sys.exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
