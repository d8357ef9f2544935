"""Run a program in namespaces of its own (Linux), where it sees only its own processes and the
kernel's connection file and Jupyter's runtime folder are covered:
`python -I -S confine.py [--task] PATH... -- PROGRAM ARGS...` (`--check`: only try).

The programs the kernel starts for the model and for hooks (`Bash`, command hooks, stdio MCP
servers) run as the user. As such they would read the kernel's connection file (the key that
signs its messages: a process that has it can have a kernel run any code, and the API key is in
the kernel's environment), Jupyter's runtime folder (connection files of every kernel, the
server's token) and every process of the user in /proc (the Jupyter server's command line and
environment: its token). So they start through this script. It enters a user, PID and mount
namespace of its own and forks; the child is the first process (pid 1) of the new PID
namespace: it mounts a /proc of that namespace (only the program's own processes are in it),
an empty folder over each folder PATH and /dev/null over each file PATH, gives up every
capability (the mounts cannot be undone), then starts PROGRAM and reaps every process of the
namespace, passing on the signals it is sent. The process that started it (the one the kernel
knows) waits, passes signals on too, and ends as PROGRAM ended.

When the first process of a PID namespace ends, every process left in it is killed: a plain
call's `cmd &` children end when PROGRAM ends. With `--task` (a background shell) the first
process waits until every process of the namespace has ended, so they live as long as the
task; killing the process the kernel knows ends them all.

With `--closed-ports=P,Q,...` PROGRAM cannot connect to those TCP ports (the servers the
kernel runs, which run code for whoever connects: listeners.py) and keeps the rest of the
network; where the system's Landlock has no network rules, it gets no network at all (a network
namespace of its own, with only its own loopback).

Where the namespaces cannot be made, PROGRAM runs as it would have (the connection file still
covered where a mount namespace alone can be made), and the first line on stderr says so; the
kernel asks before running a `Bash` call there (`sandbox.confinement_gap`). Standard library
only: it starts for every call, before the package could be imported.
"""

import ctypes
import os
import select
import signal
import sys
from pathlib import Path

_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_SYS_LANDLOCK = {"x86_64": 444, "aarch64": 444}  # create_ruleset; add_rule +1, restrict +2
_LANDLOCK_CREATE_RULESET_VERSION, _LANDLOCK_RULE_NET_PORT = 1, 2
_LANDLOCK_ACCESS_NET_CONNECT_TCP = 1 << 1
_PR_SET_NO_NEW_PRIVS = 38
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 0x4000, 1 << 18
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP = 1, 24
_PASSED_ON = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGWINCH")
"""Signals the waiting processes pass on to the program (the first process of a PID namespace
ignores a signal it has no handler for)."""
_PORTS = "--closed-ports="
"""`--closed-ports=P,Q,...` (after `--task`, before the paths): ports it must not connect to."""
PREFIX = "forkagent: this command is not confined"
"""How the line on stderr begins where the namespaces cannot be made."""


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


def close_ports(libc: ctypes.CDLL, ports: set[int]) -> str | None:
    """This process (and whatever it starts from now on) can no longer connect to the TCP
    `ports`, on any host, and keeps every other port (Landlock, Linux 6.7 and newer; the
    process also gains no privilege from a set-uid program any more). None when done, else
    why not (the caller then takes the network away instead)."""
    import platform

    number = _SYS_LANDLOCK.get(platform.machine())
    if number is None:
        return f"Landlock is not known on {platform.machine()}"
    version = libc.syscall(number, None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
    if version < 4:  # the network rules came with version 4
        return "this system's Landlock has no network rules" if version > 0 else "no Landlock"

    class Ruleset(ctypes.Structure):
        _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64)]

    class PortRule(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]

    ruleset = Ruleset(0, _LANDLOCK_ACCESS_NET_CONNECT_TCP)
    fd = libc.syscall(number, ctypes.byref(ruleset), ctypes.sizeof(ruleset), 0)
    if fd < 0:
        return f"a Landlock ruleset could not be made ({os.strerror(ctypes.get_errno())})"
    try:
        rule = PortRule(_LANDLOCK_ACCESS_NET_CONNECT_TCP, 0)
        where = ctypes.byref(rule)
        for port in range(65536):  # every port is allowed but those
            if port not in ports:
                rule.port = port
                if libc.syscall(number + 1, fd, _LANDLOCK_RULE_NET_PORT, where, 0) != 0:
                    return f"a Landlock rule was refused ({os.strerror(ctypes.get_errno())})"
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return "no_new_privs could not be set"
        if libc.syscall(number + 2, fd, 0) != 0:
            return f"Landlock could not be applied ({os.strerror(ctypes.get_errno())})"
        return None
    finally:
        os.close(fd)


def loopback_up() -> None:
    """The loopback of this process's own network namespace up (its code may serve itself on
    127.0.0.1); nothing else is in that namespace."""
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        asked = fcntl.ioctl(sock, _SIOCGIFFLAGS, struct.pack("16sH14x", b"lo", 0))
        flags = struct.unpack_from("16sH", asked)[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def unshare(libc: ctypes.CDLL, flags: int) -> str | None:
    """This process in new namespaces of `flags`, inside a user namespace of its own where
    one can be made (where not, as root, without one); None when done, else why not."""
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWUSER | flags) == 0:
        try:
            write("/proc/self/setgroups", "deny")
            write("/proc/self/uid_map", f"{uid} {uid} 1")
            write("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as exc:
            return f"the user namespace could not be set up ({exc})"
        return None
    if libc.unshare(flags) != 0:
        return f"namespaces are not available here ({os.strerror(ctypes.get_errno())})"
    return None


def _cover_only(libc: ctypes.CDLL, paths: list[str]) -> None:
    """Where no PID namespace can be made: the files covered in a mount namespace alone, if
    that can be made."""
    if unshare(libc, _CLONE_NEWNS) is None:
        try:
            mount(libc, "none", "/", None, MS_REC | MS_PRIVATE)
            cover(libc, paths)
        except OSError:
            pass
        finally:
            drop_capabilities(libc)


def confine(paths: list[str], ports: set[int] | None = None) -> tuple[str | None, int]:
    """Enter the namespaces and fork (see the module doc). Returns in the first process of
    the new PID namespace, its /proc and `paths` done: (None, the descriptor on which to
    report how PROGRAM ended) - or, where that failed, (why, -1) in this process itself. The
    process that started never returns when the namespaces were made. `ports`: TCP ports it
    must not connect to (the kernel's servers, listeners.py); where they cannot be closed
    alone, it gets no network."""
    libc = ctypes.CDLL(None, use_errno=True)
    network = not ports or close_ports(libc, ports) is None
    why = unshare(libc, _CLONE_NEWNS | _CLONE_NEWPID | (0 if network else CLONE_NEWNET))
    if why is not None:
        _cover_only(libc, paths)
        return why, -1
    report_read, report = os.pipe()
    alive, alive_write = os.pipe()
    first = os.fork()
    if first:
        os.close(report)
        os.close(alive)
        _wait_and_mirror(first, report_read)
    os.close(report_read)
    os.close(alive_write)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    gone = select.poll()  # poll, not select: a descriptor may be past select's 1,024
    gone.register(alive, select.POLLIN)
    if gone.poll(0):  # the process that started us is gone
        os._exit(1)
    os.close(alive)
    try:
        mount(libc, "none", "/", None, MS_REC | MS_PRIVATE)  # nothing leaks to the host
        mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        cover(libc, paths)
        if not network:
            loopback_up()
    except OSError as exc:
        why = str(exc)
    finally:
        drop_capabilities(libc)
    return why, report


def _pass_on(to: int, then_all: bool = False) -> None:
    """Signals of `_PASSED_ON` this process is sent go to process `to`; once it has ended,
    with `then_all` (only in the first process of the namespace: every process there is its
    own), to every process left."""

    def handler(number: int, _frame: object) -> None:
        try:
            os.kill(to, number)
        except ProcessLookupError:
            if then_all:
                _kill_all(number)
        except OSError:
            pass

    for name in _PASSED_ON:
        signal.signal(getattr(signal, name), handler)


def _kill_all(number: int) -> None:
    """From pid 1 of the namespace: `number` to every other process there."""
    try:
        os.kill(-1, number)
    except OSError:
        pass


def _wait_for(pid: int) -> int:
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except ChildProcessError:
            return 0


def _wait_and_mirror(first: int, report: int) -> None:
    """The process the kernel knows: it waits for the first process of the namespace and ends
    as the program ended (as reported on `report`; else as that process ended)."""
    _pass_on(first)
    status = _wait_for(first)
    told = b""
    try:
        while chunk := os.read(report, 32):
            told += chunk
    except OSError:
        pass
    if told.strip().isdigit():
        status = int(told)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            signal.signal(number, signal.SIG_DFL)  # SIGKILL and SIGSTOP have no handler
        except (OSError, ValueError):
            pass
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [number])
        os.kill(os.getpid(), number)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _run(program: list[str]) -> None:
    try:
        os.execvp(program[0], program)
    except OSError as exc:
        print(f"{program[0]}: {exc.strerror or exc}", file=sys.stderr)
        os._exit(127)


def _first_process(program: list[str], task: bool, report: int) -> None:
    """pid 1 of the namespace: start the program, reap every process (orphans come here),
    pass signals on; end when the program ends (with `task`: when every process has)."""
    child = os.fork()
    if child == 0:
        os.close(report)
        _run(program)
    _pass_on(child, then_all=True)
    status = 0
    while True:
        try:
            pid, got = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if pid == child:
            status = got
            if not task:
                break
    os.write(report, str(status).encode())
    os._exit(0)


def main(argv: list[str]) -> None:
    check = argv[:1] == ["--check"]
    task = argv[:1] == ["--task"]
    split = argv.index("--") if "--" in argv else len(argv)
    paths, program = argv[int(check or task) : split], argv[split + 1 :]
    ports: set[int] = set()
    if paths and paths[0].startswith(_PORTS):
        ports = {int(p) for p in paths.pop(0).removeprefix(_PORTS).split(",") if p}
    why, report = confine(paths, ports)
    if why is not None:
        print(f"{PREFIX}: {why}", file=sys.stderr, flush=True)
    if check:
        os._exit(0 if why is None else 1)
    if report >= 0:
        _first_process(program, task, report)
    _run(program)


if __name__ == "__main__":
    main(sys.argv[1:])
