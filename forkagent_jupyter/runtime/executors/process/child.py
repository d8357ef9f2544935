"""The worker-process side: what runs in a process forked from the kernel.

`become_snapshot` turns a fresh fork of the kernel into a snapshot process: it lets go of
everything of the kernel's it must not touch (its sockets and publishers, its signal handling,
the credentials), then serves `spawn` requests: each forks a worker process, which serves one
agent's calls (`serve_worker`) over its own socket until it is told to exit or killed. The
snapshot reports its workers' exit statuses, so the kernel can say how a worker died.

A worker's stdout/stderr, displays and figures go to the kernel as messages on its socket;
the kernel publishes them (the worker never writes to the kernel's ZMQ sockets).
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import dataclasses
import gc
import io
import os
import re
import select
import signal
import socket
import stat
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NoReturn, TextIO

from ...secrets import forget_secrets
from ..base import ClearOutput, Display, ExecResult, Output, StreamText, png_of
from ..confinement import sandbox
from ..display import flush_figures, ipython_shell, open_figures, worker_backend
from ..memory import baseline, held_values
from ..progress import text_progress
from ..pulled import encode_pulled
from ..source import NotInWorkerError, run_source, safe_repr
from ..wire import FrameSocket, FrameTooLargeError, pull_limit
from .forksafety import HAZARD_EXIT, watch
from .tree import kill_tree, lead_group

__all__ = ["SERVE_FAILED", "SETUP_FAILED", "become_snapshot", "describe_status", "serve_worker"]

STREAM_FLUSH_SECONDS = 0.1
BROKE_LIMIT = 4_000  # characters of a snapshot's traceback sent to the kernel
STREAM_LIMIT = 1_000_000  # characters of output one call may send to its card
CAPTURE_LIMIT = 2_000_000  # characters of output one call keeps for its result
MAX_CARD_FIGURES = 20  # figures of one call shown on its card (and kept for the model)
_PR_SET_PDEATHSIG = 1
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
"""A terminal colour or cursor code (IPython colours its tracebacks)."""
SETUP_FAILED = 70
"""A snapshot process's exit code when its set-up raised (a worker's, when its own did)."""
SERVE_FAILED = 72
"""A snapshot process's exit code when serving spawn requests raised; it sent the kernel the
traceback first ("broke", text)."""


def _die_with_parent() -> None:
    """Linux: this process is killed when the process that forked it ends."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _refusal(what: str, instead: str) -> Callable[..., NoReturn]:
    def refuse(*_args: object, **_kwargs: object) -> NoReturn:
        raise NotInWorkerError(
            f"{what} not available in a worker process: it has no connection to the "
            f"notebook's frontend; {instead}"
        )

    return refuse


_refuse_widget = _refusal(
    "widgets are",
    "use --shared to run this worker's code in the kernel, or make the widget in a cell",
)
_refuse_input = _refusal("input() is", "put the value in the code instead")
_refuse_message = _refusal("kernel messages are", "use --shared to run this code in the kernel")


def _detach_from_kernel() -> None:
    """Nothing the kernel owns may be used here: its ZMQ session, comms, stdin, signals."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a kernel interrupt is for the kernel
    for name in ("SIGTERM", "SIGHUP", "SIGQUIT"):
        with contextlib.suppress(ValueError, OSError, AttributeError):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    builtins.input = _refuse_input
    shell = ipython_shell()
    kernel = getattr(shell, "kernel", None)
    session = getattr(kernel, "session", None)
    if session is not None:
        session.send = _refuse_message
    comm = sys.modules.get("comm")
    if comm is not None:
        setattr(comm, "create_comm", _refuse_widget)  # noqa: B010


_kernel_streams: list[tuple[str, TextIO]] = []
"""The kernel's sys.stdout/stderr at the fork: code keeps them (a logging handler made by
`logging.basicConfig` in the kernel writes to its stderr), so a worker points them at its own."""


def _child_stdio() -> None:
    """Streams that belong to no kernel thread (replaced again per worker). The kernel reads
    its own file descriptors 1 and 2 into the running cell, so here they lead nowhere: what
    C code writes to them would otherwise land in an unrelated cell."""
    _kernel_streams[:] = [("stdout", sys.stdout), ("stderr", sys.stderr)]
    null = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    sys.stdout = sys.stderr = null
    sys.stdin = open(os.devnull)  # noqa: SIM115
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            os.dup2(null.fileno(), fd)


def become_snapshot(control: socket.socket, namespace: dict[str, object]) -> NoReturn:
    """Run in the child right after the kernel forked it; never returns. Its exit code says
    how it ended: 0 when the kernel let it go, SETUP_FAILED when letting go of the kernel's
    things raised, SERVE_FAILED when serving a spawn request raised (it sends the kernel the
    traceback first); the kernel names the code when a worker cannot start."""
    try:
        _die_with_parent()
        _detach_from_kernel()
        _child_stdio()
        secrets = sandbox.kernel_secrets()
        forget_secrets()
        worker_backend()
        text_progress()
        sandbox.seal(secrets)
        gc.freeze()  # what the kernel had stays shared (copy-on-write) with the kernel
    except BaseException:
        os._exit(SETUP_FAILED)
    try:
        _serve_spawns(control, namespace)
    except BaseException:
        with contextlib.suppress(BaseException):
            FrameSocket(control).send(("broke", traceback.format_exc()[-BROKE_LIMIT:]))
        os._exit(SERVE_FAILED)
    os._exit(0)


def _serve_spawns(control: socket.socket, namespace: dict[str, object]) -> None:
    channel = FrameSocket(control)  # requests and their sockets in, reports out
    # the process it waits for -> the worker's pid (confinement/sandbox.py)
    children: dict[int, int] = {}
    # poll, not select: a kernel with many open files gives this socket a number past the
    # 1,024 that select can watch (it raised, and every worker of the snapshot was lost)
    requests = select.poll()
    requests.register(control, select.POLLIN)
    while True:
        _reap(children, channel)
        if not requests.poll(200):
            continue
        try:
            request, sock = channel.recv_with_fd()
        except EOFError:
            return  # the kernel is gone or retired this snapshot
        if request[0] == "exit":
            if sock is not None:
                os.close(sock)
            return
        if request[0] != "spawn" or sock is None:
            if sock is not None:
                os.close(sock)
            continue
        token = request[1]
        told, tell = os.pipe()
        pid = os.fork()
        if pid == 0:
            control.close()
            os.close(told)
            _become_worker(sock, tell, request, namespace)
        os.close(tell)
        os.close(sock)
        children[pid] = sandbox.worker_pid(told, pid)
        channel.send(("spawned", token, children[pid]))


def _become_worker(
    sock: int, tell: int, request: tuple[str, int, int, list[int]], namespace: dict[str, object]
) -> NoReturn:
    """In a process the snapshot just forked: enter the sandbox and serve one worker; never
    returns (SETUP_FAILED when its set-up raised: the snapshot reports that status)."""
    try:
        lead_group()  # what its code starts ends with it (tree.py)
        _die_with_parent()
        with contextlib.suppress(OSError):
            os.nice(request[2])
        sandbox.enter(sock, tell, closed=request[3])
        sandbox.readable()
    except BaseException:
        os._exit(SETUP_FAILED)
    serve_worker(socket.socket(fileno=sock), namespace)


def _reap(children: dict[int, int], reports: FrameSocket) -> None:
    for pid, worker in list(children.items()):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            children.pop(pid, None)
            continue
        if done:
            children.pop(pid, None)
            kill_tree(worker)  # what it started ends with it
            kill_tree(pid)
            reports.send(("exited", worker, status))


def describe_status(status: int) -> str:
    """How a process ended, in words ("killed by SIGSEGV", "exited with code 3")."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"was killed by {name}"
    code = os.WEXITSTATUS(status)
    if code == SETUP_FAILED:
        return f"exited with code {code} (its set-up in the forked process failed)"
    if code == SERVE_FAILED:
        return f"exited with code {code} (starting a worker raised)"
    if code == HAZARD_EXIT:
        return (
            f"exited with code {code} (it waited on a thread pool of the kernel that a fork "
            "does not copy; see its card; --shared runs it in the kernel)"
        )
    return f"exited with code {code}"


class _PipeStream(io.TextIOBase):
    """sys.stdout/stderr of a worker: kept for the call's result and sent to the kernel,
    coalesced (at most every STREAM_FLUSH_SECONDS, by a flusher thread)."""

    def __init__(self, name: str, worker: _Worker) -> None:
        self.name = name
        self.worker = worker

    def write(self, text: str) -> int:
        self.worker.write(self.name, text)
        return len(text)

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


class _Worker:
    def __init__(self, conn: FrameSocket, namespace: dict[str, object]) -> None:
        self.conn = conn
        self.namespace = namespace
        self.lock = threading.Lock()
        self.pending: list[Output] = []
        self.captured: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.captured_size = 0
        self.sent = 0
        self.images: list[bytes] = []
        self.left_out = 0  # figures of this call not shown (past MAX_CARD_FIGURES)
        self.clear_due = False  # clear_output(wait=True): what was kept goes at the next output
        self.clears = 0  # times this call's output was cleared
        self.before = baseline(namespace)  # what its code binds later is what it holds

    # -- output --------------------------------------------------------------------------

    def write(self, name: str, text: str) -> None:
        with self.lock:
            self._clear_if_due()
            if self.captured_size < CAPTURE_LIMIT:
                self.captured[name].append(text)
                self.captured_size += len(text)
            if self.sent < STREAM_LIMIT:
                self.pending.append(StreamText("stderr" if name == "stderr" else "stdout", text))
                self.sent += len(text)
                if self.sent >= STREAM_LIMIT:
                    self.pending.append(StreamText("stderr", "\n[output to the card stops here]\n"))

    def clear_output(self, wait: bool = False) -> None:
        """IPython's clear_output() in the worker's code: its card's output area is cleared
        (with `wait`, when the next output arrives), and so is what the call keeps for the
        model: the model reads the output as the card shows it, as it does for a line
        rewritten with carriage returns."""
        with self.lock:
            self.pending.append(ClearOutput(bool(wait)))
            self.clear_due = True
            if not wait:
                self._clear_if_due()

    def _clear_if_due(self) -> None:
        """Let go of what the call kept so far (under the lock), once a clear is due."""
        if not self.clear_due:
            return
        self.clear_due = False
        self.clears += 1
        self.captured = {"stdout": [], "stderr": []}
        self.captured_size = self.sent = 0
        self.images = []
        self.left_out = 0

    def flush(self) -> None:
        with self.lock:
            pending, self.pending = self.pending, []
        merged: list[Output] = []
        for item in pending:
            if isinstance(item, ClearOutput):
                if not item.wait:
                    merged = [item]  # what came before it is gone anyway
                elif not (merged and isinstance(merged[-1], ClearOutput)):
                    merged.append(item)
                continue
            if merged and isinstance(merged[-1], ClearOutput) and merged[-1].wait:
                merged = [ClearOutput()]  # the next output came: the clear happens now
            last = merged[-1] if merged else None
            if (
                isinstance(item, StreamText)
                and isinstance(last, StreamText)
                and last.name == item.name
            ):
                merged[-1] = StreamText(item.name, last.text + item.text)
                continue
            merged.append(item)
        for output in merged:
            self.conn.send(("output", output))

    def flusher(self) -> None:
        while True:
            time.sleep(STREAM_FLUSH_SECONDS)
            with contextlib.suppress(OSError):
                self.flush()

    def display(self, display: Display) -> None:
        png = png_of(display.data)
        with self.lock:
            self._clear_if_due()
            if png is not None:
                if len(self.images) >= MAX_CARD_FIGURES:
                    self.left_out += 1
                    return
                self.images.append(png)
        self.flush()  # keep the order of prints, clears and displays
        try:
            try:
                self.conn.send(("output", display))
            except TypeError:  # a value in the bundle is not data: its text forms still go
                data: dict[str, object] = {
                    k: v for k, v in display.data.items() if isinstance(v, (str, bytes))
                }
                self.conn.send(("output", Display(data, {})))
        except FrameTooLargeError as exc:  # the kernel would end this process for it
            self.write("stderr", f"[a display was left out: it was {exc}]\n")

    def publish(
        self,
        data: Mapping[str, object] | None,
        metadata: Mapping[str, object] | None = None,
        *_args: object,
        **_kwargs: object,
    ) -> None:
        self.display(Display(dict(data or {}), dict(metadata or {})))

    def show_traceback(self, _etype: object, _evalue: object, stb: list[str]) -> None:
        """The shell's traceback of an error it handles itself (a display whose formatter
        raises: a `_repr_html_` that fails, a figure that cannot be drawn), as a cell shows it
        and goes on: on the card's stderr and in the call's output, in plain text. (The
        kernel's own way sends it as a kernel message, which a worker has no connection
        for.)"""
        text = _ANSI.sub("", "\n".join(stb))
        self.write("stderr", text.rstrip("\n") + "\n")

    # -- requests ------------------------------------------------------------------------

    def run(self, code: str) -> ExecResult:
        with self.lock:
            self.captured = {"stdout": [], "stderr": []}
            self.captured_size = self.sent = 0
            self.clear_due = False
            self.clears = 0
            self.images = []
            self.left_out = 0
        before = open_figures()
        ran = run_source(code, self.namespace)
        with contextlib.suppress(Exception):
            room = MAX_CARD_FIGURES - len(self.images)
            self.left_out += flush_figures(self.display, before, room)
        if ran.has_value:
            self._show_value(ran.value)
        if self.left_out:
            self.write(
                "stderr",
                f"[{self.left_out} more figure(s) left out: at most {MAX_CARD_FIGURES} "
                "per call are shown]\n",
            )
        self.flush()
        cleared = (
            f"[clear_output() cleared this call's earlier output {self.clears} time(s); "
            "what follows came after the last clear]\n"
            if self.clears
            else ""
        )
        return ExecResult(
            cleared + "".join(self.captured["stdout"]),
            "".join(self.captured["stderr"]),
            ran.value_repr,
            ran.error,
            tuple(self.images),
        )

    def _show_value(self, value: object) -> None:
        """A rich final value (a DataFrame's table) goes to the card, as a cell's Out[] would."""
        shell = ipython_shell()
        if shell is None:
            return
        try:
            data, metadata = shell.display_formatter.format(value)
        except Exception:
            return
        if set(data) - {"text/plain"}:
            self.display(Display(dict(data), dict(metadata)))

    def serve(self) -> None:
        while True:
            try:
                request = self.conn.recv()
            except (EOFError, OSError):
                return
            call_id = request[1] if len(request) > 1 else None
            if request[0] == "exit":
                return
            if request[0] == "run":
                ran = self.run(request[2])
                try:
                    held = held_values(self.namespace, self.before)
                except Exception:
                    held = ([], 0)
                try:
                    self.conn.send(("done", call_id, ran, held))
                except FrameTooLargeError as exc:  # its figures: the card has shown them
                    note = f"[this call's figures were left out of its result: it was {exc}]\n"
                    ran = dataclasses.replace(ran, stderr=ran.stderr + note, images=())
                    self.conn.send(("done", call_id, ran, held))
            elif request[0] == "call":
                try:
                    result = ("ok", request[2](self.namespace, *request[3]))
                    reply = ("called", call_id, result)
                    self.conn.send(reply)
                except Exception as exc:
                    self.conn.send(("called", call_id, ("error", f"{type(exc).__name__}: {exc}")))
            elif request[0] == "pull":
                trust = bool(request[3]) if len(request) > 3 else False
                values, errors = encode_pulled(self.namespace, list(request[2]), trust)
                try:
                    self.conn.send(("pulled", call_id, values, errors), pull_limit())
                except FrameTooLargeError as exc:
                    why = f"cannot come back: the reply would be {exc}; pull fewer or smaller ones"
                    errors.update(dict.fromkeys(values, why))
                    self.conn.send(("pulled", call_id, {}, errors))


def _forward_kernel_streams(out: _PipeStream, err: _PipeStream) -> None:
    """What is written to the kernel's streams (held since before the fork, by a logging
    handler say) goes to this worker's card: those objects would send it on the kernel's
    sockets, which a worker must not touch."""
    own = {"stdout": out, "stderr": err}
    for name, stream in _kernel_streams:
        if stream is sys.__stdout__ or stream is sys.__stderr__:
            continue  # a process without a kernel: its real files, left as they are
        target = own[name]
        with contextlib.suppress(AttributeError, TypeError):
            for attribute, replacement in (
                ("write", target.write),
                ("writelines", target.writelines),
                ("flush", lambda: None),
            ):
                setattr(stream, attribute, replacement)


def _own_file_offsets() -> None:
    """A regular file the kernel has open shares one position with the kernel across the fork
    (one open file description): a worker reading the kernel's file moved the kernel's
    position, and the kernel's next read found nothing. Each is opened again here, with its
    flags, at the position it had."""
    drop = os.O_CREAT | os.O_EXCL | os.O_TRUNC | os.O_NOCTTY
    for entry in list(Path("/proc/self/fd").iterdir()):
        with contextlib.suppress(OSError, ValueError, StopIteration):
            fd = int(entry.name)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            with open(f"/proc/self/fdinfo/{fd}") as info:
                flags = int(next(x for x in info if x.startswith("flags:")).split()[1], 8)
            position = os.lseek(fd, 0, os.SEEK_CUR)
            again = os.open(f"/proc/self/fd/{fd}", flags & ~drop)
            try:
                os.lseek(again, position, os.SEEK_SET)
                os.dup2(again, fd, inheritable=not flags & os.O_CLOEXEC)
            finally:
                os.close(again)


def serve_worker(sock: socket.socket, namespace: dict[str, object]) -> NoReturn:
    """A worker process: serve one agent's calls on `sock`; never returns."""
    try:
        _own_file_offsets()
        worker = _Worker(FrameSocket(sock), namespace)
        sys.stdout = _PipeStream("stdout", worker)
        sys.stderr = _PipeStream("stderr", worker)
        _forward_kernel_streams(sys.stdout, sys.stderr)
        shell = ipython_shell()
        if shell is not None:
            shell.display_pub.publish = worker.publish
            shell.display_pub.clear_output = worker.clear_output
            shell._showtraceback = worker.show_traceback
        flusher = threading.Thread(target=worker.flusher, name="forkagent-output", daemon=True)
        flusher.start()
        watch(lambda line: worker.write("stderr", line + "\n"), own=[flusher])
        worker.serve()
    finally:
        os._exit(0)


def value_summary(value: object) -> str:
    """A short description of a pulled value, for the line that says what came back."""
    shape = getattr(value, "shape", None)
    kind = type(value).__name__
    if isinstance(shape, tuple):
        return f"{kind} {'x'.join(str(n) for n in shape)}"
    text = safe_repr(value)
    return f"{kind} {text[:40]}" + ("…" if len(text) > 40 else "")


def encode_png(png: bytes) -> str:
    return base64.b64encode(png).decode("ascii")
