"""Keeping a worker process away from the kernel's secrets and sockets (Linux).

A worker runs code the model wrote, in a copy-on-write copy of the kernel. Two measures:

* `seal` (in the snapshot process, once, before any worker is forked from it): every credential
  the kernel knows (the API key variables, the SDK client's key, the kernel's message-signing
  key) is removed from the environment and the objects that hold it, and every verbatim copy
  left anywhere in the process's memory (freed buffers included) is overwritten. What a worker
  copies from the snapshot then holds none of them.
* `enter` (in each worker, right after its fork): the worker moves into its own user, PID and
  mount namespaces. Its /proc is a fresh one that shows only its own processes, so the
  kernel's and the Jupyter server's /proc entries (environ, mem, cmdline) are not there to
  read; the kernel's connection file and Jupyter's runtime folder (connection files, the
  server's token) are covered; then it gives up every capability, so it cannot uncover them.
  It keeps the file system and your user's files as they are, and the network but the ports
  the kernel's own servers listen on (a Dask scheduler the kernel made runs any code for
  whoever connects: listeners.py); a Dask child does not keep the network at all
  (`enter(network=False)`).

And in the kernel itself, `guard_kernel` (once, when the extension loads): the kernel makes
itself non-dumpable, so its /proc entries (mem, environ, maps, ...) belong to root and no
other process of the user can read them or ptrace it (the tools' processes, `Bash`, hooks,
run as the user: before this, a `python -c` reading /proc/<kernel>/maps and mem found the
key in the kernel's heap). Running as root, the capabilities that pass that check
(CAP_SYS_PTRACE, and those that read memory some other way: CAP_SYS_RAWIO, CAP_SYS_ADMIN,
CAP_BPF, CAP_PERFMON, CAP_SYS_MODULE) are dropped from the set every program the kernel
starts may have; the kernel keeps its own. A fork inherits non-dumpable (a program it runs
does not); a worker, sealed, makes itself dumpable again (`readable`) so that the kernel can
read its memory use (/proc/<worker>/smaps_rollup) without privileges.

`enter` forks once more: the process the kernel knows (and kills) waits for the worker, which
is the first process of its PID namespace (when it ends, everything it started ends too), and
ends the way the worker ended. Where the namespaces cannot be made (no unprivileged user
namespaces, a seccomp filter), the worker runs without them and `STATE.error` says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from array import array
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from ...secrets import known_secrets, secret_names
from .confine import (
    CLONE_NEWNET,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    PREFIX,
    close_ports,
    cover,
    loopback_up,
    mount,
    write,
)
from .confine import drop_capabilities as _drop_capabilities

__all__ = [
    "STATE",
    "confined",
    "confinement_gap",
    "enter",
    "guard_kernel",
    "kernel_files",
    "readable",
    "scrub_memory",
    "seal",
]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_PR_SET_PDEATHSIG, _PR_GET_DUMPABLE, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP = 1, 3, 4, 24
_MEMORY_CAPS = {
    16: "CAP_SYS_MODULE",
    17: "CAP_SYS_RAWIO",
    19: "CAP_SYS_PTRACE",
    21: "CAP_SYS_ADMIN",
    38: "CAP_PERFMON",
    39: "CAP_BPF",
}
"""Capabilities with which a program reads another process's memory despite non-dumpable."""
_LARGE_REGION = 64 << 20
"""A private anonymous mapping larger than this (not the heap) holds one large buffer (an
array's data): the scrub does not read it."""
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass
class SandboxState:
    hidden: list[str] = field(default_factory=list)
    error: str | None = None
    """Why the namespaces could not be made in this worker (None: they were)."""
    scrubbed: int = 0
    """Copies of secrets overwritten in the snapshot's memory."""


STATE = SandboxState()


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


# -- in the kernel ------------------------------------------------------------------------------


def guard_kernel() -> str | None:
    """In the kernel: its memory and /proc entries out of reach of the processes it starts
    (see the module doc). None when done; otherwise why not, in a few words."""
    if not sys.platform.startswith("linux"):
        return "not on Linux: other processes of your user can read the kernel's memory"
    libc = _libc()
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return f"the kernel could not make itself non-dumpable ({os.strerror(ctypes.get_errno())})"
    for number in _MEMORY_CAPS:
        libc.prctl(_PR_CAPBSET_DROP, number, 0, 0, 0)  # EPERM: not ours to give (not root)
    kept = [name for number, name in _MEMORY_CAPS.items() if _bounding_has(number)]
    if kept and _effective_has(19):
        return (
            "the kernel runs with capabilities it could not take from the programs it starts "
            f"({', '.join(kept)}): they can read its memory"
        )
    return None


def _capabilities(field_name: str) -> int:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


def _bounding_has(number: int) -> bool:
    return bool(_capabilities("CapBnd") >> number & 1)


def _effective_has(number: int) -> bool:
    return bool(_capabilities("CapEff") >> number & 1)


# -- in the snapshot ----------------------------------------------------------------------------


def kernel_secrets() -> list[bytes]:
    """Every credential value this process knows, and the kernel's signing key (call before
    `forget_secrets`, which forgets the list)."""
    values = {s.encode() for s in known_secrets()}
    for name in secret_names():
        value = os.environ.get(name)
        if value:
            values.add(value.encode())
    session = _kernel_session()
    key = getattr(session, "key", None)
    if isinstance(key, bytes) and len(key) >= 8:
        values.add(key)
    return sorted((v for v in values if len(v) >= 8), key=len, reverse=True)


def _kernel_session() -> object | None:
    app_module = sys.modules.get("ipykernel.kernelapp")
    app_class = getattr(app_module, "IPKernelApp", None)
    if app_class is None or not app_class.initialized():
        return None
    return getattr(app_class.instance(), "session", None)


def _kernel_paths() -> list[str]:
    """The kernel's connection file, Jupyter's runtime folder (connection files of every
    kernel, the server's token files) and the file the server read its token from
    (`JUPYTER_TOKEN_FILE`)."""
    paths: list[str] = []
    token_file = os.environ.get("JUPYTER_TOKEN_FILE")
    if token_file and Path(token_file).is_file():
        paths.append(token_file)
    app_module = sys.modules.get("ipykernel.kernelapp")
    app_class = getattr(app_module, "IPKernelApp", None)
    if app_class is not None and app_class.initialized():
        found = getattr(app_class.instance(), "abs_connection_file", None)
        if isinstance(found, str) and Path(found).is_file():
            paths.append(found)
    jupyter_paths = sys.modules.get("jupyter_core.paths")
    runtime = getattr(jupyter_paths, "jupyter_runtime_dir", None)
    if runtime is not None:
        with contextlib.suppress(Exception):
            folder = Path(runtime()).resolve()
            here = Path.cwd().resolve()
            # never the folder the notebook works in (or one above it)
            if folder.is_dir() and folder != here and folder not in here.parents:
                paths.append(str(folder))
    return paths


def kernel_files() -> list[Path]:
    """The kernel's connection file and Jupyter's runtime folder, real paths: whoever reads
    one can have a kernel run any code (its signing key), so the file tools refuse them in
    every mode (permissions/gate.py) as `confined` covers them for the programs it starts."""
    return [Path(p).resolve() for p in _kernel_paths()]


_CONFINE = Path(__file__).with_name("confine.py")


def confined(argv: list[str], *, task: bool = False, closed: Collection[int] = ()) -> list[str]:
    """The command line that runs `argv` in namespaces of its own (confine.py: its own
    processes only in /proc, the kernel's connection file and Jupyter's runtime folder
    covered), when this process is a kernel on Linux; else `argv` itself. For the programs
    the kernel starts for the model (Bash), hooks and stdio MCP servers. `task`: a background
    shell, whose processes live until every one has ended (else they end with `argv`).
    `closed`: TCP ports it must not connect to (`listeners.aclosed_ports()`: the kernel's
    servers)."""
    if not sys.platform.startswith("linux"):
        return argv
    paths = _kernel_paths()
    if not paths:
        return argv
    options = ["--task"] if task else []
    if closed:
        options.append("--closed-ports=" + ",".join(str(p) for p in sorted(closed)))
    return [sys.executable, "-I", "-S", str(_CONFINE), *options, *paths, "--", *argv]


_gap: list[str | None] = []
"""The answer of `confinement_gap`, once known."""


async def confinement_gap() -> str | None:
    """Why `confined` cannot confine a program here (None: it can, or this process is not a
    kernel and there is nothing of a kernel's to hide). Tried once per process, off the
    event loop: a `Bash` call is asked where this is not None."""
    if not _gap:
        found = await asyncio.to_thread(_try_confining)
        if not _gap:
            _gap.append(found)
    return _gap[0]


def _try_confining() -> str | None:
    if not _kernel_paths():
        return None
    if not sys.platform.startswith("linux"):
        return "not on Linux, where a program of its own sees every process of your user"
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", str(_CONFINE), "--check"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the namespaces could not be tried ({exc})"
    if done.returncode == 0:
        return None
    said = done.stderr.decode(errors="replace").strip().splitlines()
    line = said[0] if said else f"exit code {done.returncode}"
    return line.removeprefix(f"{PREFIX}: ")


def seal(secrets: list[bytes]) -> None:
    """In the snapshot: the kernel's signing key goes, and every copy of `secrets` in this
    process's memory is overwritten (see the module doc)."""
    STATE.hidden = _kernel_paths()
    session = _kernel_session()
    if session is not None:
        with contextlib.suppress(Exception):
            session.auth = None  # type: ignore[attr-defined]
        with contextlib.suppress(Exception):
            session.key = b""  # type: ignore[attr-defined]
    STATE.scrubbed = scrub_memory(secrets)
    secrets.clear()


def scrub_memory(secrets: list[bytes]) -> int:
    """Overwrite every verbatim copy of these values in this process's writable memory (its
    resident pages; see _LARGE_REGION); returns how many were found."""
    if not secrets:
        return 0
    libc = _libc()
    memmem = libc.memmem
    memmem.restype = ctypes.c_void_p
    memmem.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
    needles = [ctypes.create_string_buffer(s, len(s)) for s in secrets]
    found = 0
    try:
        with open("/proc/self/maps") as maps:
            regions = maps.read().splitlines()
        with open("/proc/self/pagemap", "rb", buffering=0) as pagemap:
            for start, end in _writable(regions):
                for run_start, run_end in _resident(pagemap, start, end):
                    for needle in needles:
                        found += _overwrite(memmem, run_start, run_end, needle)
    except OSError:
        pass
    finally:
        for needle in needles:
            ctypes.memset(ctypes.addressof(needle), 0, len(needle))
    return found


def _writable(regions: list[str]) -> list[tuple[int, int]]:
    out = []
    for line in regions:
        parts = line.split()
        if len(parts) < 5 or not parts[1].startswith("rw"):
            continue
        name = parts[5] if len(parts) > 5 else ""
        if name.startswith("[v"):  # [vvar], [vsyscall]: the kernel's, not ours
            continue
        start, end = (int(x, 16) for x in parts[0].split("-"))
        if end - start > _LARGE_REGION and name != "[heap]" and not name.startswith("[stack"):
            continue
        out.append((start, end))
    return out


def _resident(pagemap: object, start: int, end: int) -> list[tuple[int, int]]:
    """Runs of pages of [start, end) that are in memory or swapped out (others read as zero)."""
    pages = (end - start) // _PAGE
    entries = array("Q")
    try:
        pagemap.seek(start // _PAGE * 8)  # type: ignore[attr-defined]
        entries.frombytes(pagemap.read(pages * 8))  # type: ignore[attr-defined]
    except (OSError, ValueError):
        return [(start, end)]
    runs: list[tuple[int, int]] = []
    run = None
    for i, entry in enumerate(entries):
        if entry >> 62:  # present or swapped
            if run is None:
                run = i
        elif run is not None:
            runs.append((start + run * _PAGE, start + i * _PAGE))
            run = None
    if run is not None:
        runs.append((start + run * _PAGE, start + len(entries) * _PAGE))
    return runs


def _overwrite(memmem: object, start: int, end: int, needle: ctypes.Array[ctypes.c_char]) -> int:
    size, own = len(needle), ctypes.addressof(needle)
    found, at = 0, start
    while end - at >= size:
        hit = memmem(at, end - at, own, size)  # type: ignore[operator]
        if not hit:
            break
        if hit != own:
            ctypes.memset(hit, ord("x"), size)
            found += 1
        at = hit + 1
    return found


# -- in each worker -----------------------------------------------------------------------------


def enter(inherited: int, tell: int, *, network: bool = True, closed: Collection[int] = ()) -> None:
    """In a worker right after its fork (see the module doc). Returns in the sandboxed worker;
    the process that forked it never returns from here. `inherited` is the worker's socket,
    closed in the waiting process so that the kernel sees it close when the worker ends; the
    worker's pid (as the kernel sees it) is written to `tell` (nothing: this process is the
    worker), then `tell` is closed. Without `network` the worker also gets a network
    namespace of its own, with only a loopback of its own in it (a Dask child: the cluster's
    scheduler and workers, which run code for whoever connects, are out of its reach). With
    it, the worker cannot connect to the TCP ports `closed` (the servers the kernel runs,
    listeners.py); where they cannot be closed alone, it gets no network."""
    if network and closed and close_ports(_libc(), set(closed)) is not None:
        network = False
    try:
        _enter(inherited, tell, network)
    finally:
        with contextlib.suppress(OSError):
            os.close(tell)


def readable() -> None:
    """In a worker, sealed and sandboxed: dumpable again (it inherited non-dumpable from the
    kernel), so that the kernel reads its memory use without privileges. Its memory holds no
    secret (`seal`), and its own processes could read it as its code can."""
    _libc().prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)


def worker_pid(told: int, forked: int) -> int:
    """In the snapshot: the pid of the worker `enter` started in process `forked` (`forked`
    itself when it runs the worker); closes `told`."""
    data = b""
    try:
        while chunk := os.read(told, 16):
            data += chunk
    except OSError:
        pass
    finally:
        os.close(told)
    return int(data) if data.strip().isdigit() else forked


def _enter(inherited: int, tell: int, network: bool) -> None:
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    flags = _CLONE_NEWPID | _CLONE_NEWNS | (0 if network else CLONE_NEWNET)
    mapped = libc.unshare(_CLONE_NEWUSER | flags) == 0
    if mapped:
        try:
            write("/proc/self/setgroups", "deny")
            write("/proc/self/uid_map", f"{uid} {uid} 1")
            write("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as exc:
            STATE.error = f"the user namespace could not be set up ({exc})"
            return
    elif libc.unshare(flags) != 0:
        STATE.error = f"namespaces are not available here ({os.strerror(ctypes.get_errno())})"
        return
    worker = os.fork()
    if worker:
        with contextlib.suppress(OSError):
            os.write(tell, str(worker).encode())
            os.close(tell)
        _wait_and_mirror(worker, inherited)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # the group its code's processes join (process/tree.py), seen from inside
    try:
        _mount_views(libc)
    except OSError as exc:
        STATE.error = f"the worker's /proc could not be replaced ({exc})"
    if not network:
        with contextlib.suppress(OSError):
            loopback_up()
    _drop_capabilities(libc)


def _wait_and_mirror(worker: int, inherited: int) -> None:
    """The process the kernel knows: it waits for the worker and ends as the worker ended."""
    with contextlib.suppress(OSError):
        os.close(inherited)
    status = 0
    while True:
        try:
            _pid, status = os.waitpid(worker, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            break
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(Exception):
            signal.signal(number, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [number])
        os.kill(os.getpid(), number)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _mount_views(libc: ctypes.CDLL) -> None:
    mount(libc, "none", "/", None, MS_REC | MS_PRIVATE)  # nothing leaks to the host
    mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    cover(libc, STATE.hidden)
