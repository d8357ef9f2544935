"""Frames between the kernel and its worker processes: a 4-byte length, then the body.

The kernel's requests to a worker are pickles (the kernel is trusted: it sends the functions
a worker runs). Everything a worker sends back is data (`datacodec`), never a pickle: the
worker runs code the model wrote, and unpickling a frame it wrote would run that code in the
kernel. The kernel reads with asyncio (never blocking its loop); the worker side blocks, as a
worker process has nothing else to do.

A frame from a worker has a size limit, checked against its length before anything is set
aside for it: `MESSAGE_LIMIT` for every message but a pull's reply, `pull_limit()` (half the
machine's memory) for that. A worker whose frame says more is ended at once
(`FrameTooLargeError`): a 4 GB length written by its code left the kernel waiting for ever for
a body that never came (and holding 4 GB had it come). A worker that is not hostile never
sends one (`FrameSocket.send` refuses first, and the worker leaves out what did not fit). A
frame within its limit whose body never comes is like code that never returns: its task runs
until it is stopped.
"""

from __future__ import annotations

import array
import asyncio
import mmap
import os
import pickle
import socket
import struct
import threading
from collections.abc import Callable
from typing import Literal, TypeAlias

from . import datacodec

__all__ = [
    "MESSAGE_LIMIT",
    "READ_LIMIT",
    "FrameSocket",
    "FrameTooLargeError",
    "MessageError",
    "Request",
    "call_result",
    "encode",
    "frame_limit",
    "pull_limit",
    "read_frame",
    "read_message",
    "send_with_fd",
]

Request: TypeAlias = (
    tuple[Literal["run"], int, str]
    | tuple[Literal["call"], int, Callable[..., object], tuple[object, ...]]
    | tuple[Literal["pull"], int, list[str], bool]
    | tuple[Literal["exit"]]
    | tuple[Literal["spawn"], int, int, list[int]]
)
"""A request from the kernel to a worker (pickled: the kernel is trusted): run code, call a
function with the namespace, pull values, or exit. The number after the kind is the call's id,
which its reply repeats. To a snapshot process: spawn a worker (token, nice, the TCP ports it
must not reach), its socket sent with the request (`send_with_fd`)."""

_HEADER = struct.Struct("!I")
_MAX_FRAME = (1 << 32) - 1  # what a frame's 4-byte length can say

MESSAGE_LIMIT = 256 << 20
"""The largest frame a worker may send but a pull's reply: its outputs (at most 1 M characters
of text a call, a figure, a table's HTML), results and reports are far smaller."""


def _encode(message: object) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(body)) + body


class MessageError(Exception):
    """A worker sent a frame that is not a message of the protocol (it is not trusted)."""


class FrameTooLargeError(MessageError):
    """A frame longer than its limit: refused from its length, before its body is read."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a message of {_mb(size)}, more than the {_mb(limit)} one may have")
        self.size = size
        self.limit = limit


def _mb(size: int) -> str:
    return f"{size / 2**20:,.0f} MB" if size >= 2**20 else f"{size:,} bytes"


def pull_limit() -> int:
    """The largest reply to a pull: half this machine's memory (the kernel holds the frame and
    the values decoded from it at once), at most what a frame's length can say, at least
    `MESSAGE_LIMIT`."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return _MAX_FRAME
    return max(MESSAGE_LIMIT, min(_MAX_FRAME, memory // 2))


def frame_limit(reply: str) -> int:
    """The limit of each frame read while waiting for the reply `reply`."""
    return pull_limit() if reply == "pulled" else MESSAGE_LIMIT


class FrameSocket:
    """The worker side of a connection: blocking, thread-safe sends (of data) and receives
    (of the kernel's pickled requests)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._send_lock = threading.Lock()

    def send(self, message: object, limit: int | None = None) -> None:
        """Send `message` as data; FrameTooLargeError (nothing sent) when it is longer than
        `limit` (default `MESSAGE_LIMIT`), which the kernel would end this process for."""
        body = datacodec.dumps(message)
        limit = MESSAGE_LIMIT if limit is None else limit
        if len(body) > limit:
            raise FrameTooLargeError(len(body), limit)
        with self._send_lock:  # header and body apart: a pulled 1 GB frame is not copied again
            self.sock.sendall(_HEADER.pack(len(body)))
            self.sock.sendall(body)

    def recv(self) -> Request:
        """The next request; EOFError when the other side has gone."""
        head = self._exactly(_HEADER.size)
        request: Request = pickle.loads(self._exactly(_HEADER.unpack(head)[0]))
        return request

    def recv_with_fd(self) -> tuple[Request, int | None]:
        """The next request and the file descriptor sent with its first bytes (`send_with_fd`;
        None if none came); EOFError when the other side has gone."""
        fds = array.array("i")
        head, ancdata, _flags, _addr = self.sock.recvmsg(
            _HEADER.size, socket.CMSG_LEN(fds.itemsize)
        )
        if not head:
            raise EOFError
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        head += self._exactly(_HEADER.size - len(head))
        request: Request = pickle.loads(self._exactly(_HEADER.unpack(head)[0]))
        return request, (fds[0] if fds else None)

    def _exactly(self, size: int) -> bytes:
        chunks = []
        while size:
            chunk = self.sock.recv(min(size, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)


READ_LIMIT = 1 << 22
"""The buffer of a kernel-side reader of a worker's socket (`open_unix_connection(limit=)`):
a large frame (a pulled array) arrives in few loop steps rather than 64 KB at a time."""
_CHUNK = 1 << 22
_BIG = 1 << 20  # a frame this large is decoded off the loop


async def read_frame(reader: asyncio.StreamReader, limit: int | None = None) -> bytes | memoryview:
    """The next frame's bytes (asyncio.IncompleteReadError at EOF; FrameTooLargeError, its
    body left unread, when its length is over `limit`, default `MESSAGE_LIMIT`). A large
    frame is read in chunks into one anonymous mapping (its pages are zeroed by the OS as they
    are first written), so no step of the loop copies or clears all of it."""
    head = await reader.readexactly(_HEADER.size)
    size = _HEADER.unpack(head)[0]
    limit = MESSAGE_LIMIT if limit is None else limit
    if size > limit:
        raise FrameTooLargeError(size, limit)
    if size <= _CHUNK:
        return await reader.readexactly(size)
    body = memoryview(mmap.mmap(-1, size))
    at = 0
    while at < size:
        chunk = await reader.readexactly(min(_CHUNK, size - at))
        body[at : at + len(chunk)] = chunk
        at += len(chunk)
    return body


async def read_message(
    reader: asyncio.StreamReader, limit: int | None = None
) -> tuple[object, ...]:
    """The next message from a worker: a tuple headed by its kind, decoded as data
    (MessageError for anything else, FrameTooLargeError for a frame over `limit`;
    asyncio.IncompleteReadError at EOF). A large one is decoded on a thread: the kernel's loop
    goes on meanwhile."""
    body = await read_frame(reader, limit)
    try:
        if len(body) < _BIG:
            message = datacodec.loads(body)
        else:  # a pulled value's blob stays a view of the frame: it is decoded next
            message = await asyncio.to_thread(datacodec.loads, body, True)
            if type(message) is tuple and message[:1] != ("pulled",):
                message = await asyncio.to_thread(datacodec.loads, body)
    except datacodec.BadDataError as exc:
        raise MessageError(str(exc)) from None
    if type(message) is not tuple or not message or type(message[0]) is not str:
        raise MessageError(f"a {type(message).__name__} is not a message")
    return message


async def send_with_fd(sock: socket.socket, message: Request, fd: int) -> None:
    """Send `message`, framed, on the non-blocking stream socket `sock`, with `fd` on its first
    bytes (`FrameSocket.recv_with_fd` reads both). The caller keeps two sends on one socket
    from interleaving."""
    data = memoryview(_encode(message))
    while True:
        try:
            sent = socket.send_fds(sock, [data], [fd])
            break
        except BlockingIOError:  # the other side's buffer is full: it reads soon
            await asyncio.sleep(0.01)
    while sent < len(data):  # not loop.sock_sendall: a transport reads this socket
        try:
            sent += sock.send(data[sent:])
        except BlockingIOError:
            await asyncio.sleep(0.01)


def encode(message: Request) -> bytes:
    """A request from the kernel to a worker, framed."""
    return _encode(message)


def call_result(result: object) -> tuple[object, object]:
    """The (status, value) a worker sent for a call: ("ok", its result) or ("error", why);
    ("", "?") for what is not one (the worker is not trusted)."""
    if isinstance(result, (tuple, list)) and len(result) == 2:
        return result[0], result[1]
    return "", "?"
