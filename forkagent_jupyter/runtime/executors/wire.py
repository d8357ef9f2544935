"""Frames between the kernel and its worker processes: a 4-byte length, then the body.

The kernel's requests to a worker are pickles (the kernel is trusted: it sends the functions
a worker runs). Everything a worker sends back is data (`datacodec`), never a pickle: the
worker runs code the model wrote, and unpickling a frame it wrote would run that code in the
kernel. The kernel reads with asyncio (never blocking its loop); the worker side blocks, as a
worker process has nothing else to do.
"""

from __future__ import annotations

import asyncio
import pickle
import socket
import struct
import threading
from typing import Any

from . import datacodec

__all__ = ["FrameSocket", "MessageError", "encode", "read_frame", "read_message"]

_HEADER = struct.Struct("!I")


def _encode(message: Any) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(body)) + body


class MessageError(Exception):
    """A worker sent a frame that is not a message of the protocol (it is not trusted)."""


class FrameSocket:
    """The worker side of a connection: blocking, thread-safe sends (of data) and receives
    (of the kernel's pickled requests)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._send_lock = threading.Lock()

    def send(self, message: Any) -> None:
        body = datacodec.dumps(message)
        data = _HEADER.pack(len(body)) + body
        with self._send_lock:
            self.sock.sendall(data)

    def recv(self) -> Any:
        """The next message; EOFError when the other side has gone."""
        head = self._exactly(_HEADER.size)
        return pickle.loads(self._exactly(_HEADER.unpack(head)[0]))

    def _exactly(self, size: int) -> bytes:
        chunks = []
        while size:
            chunk = self.sock.recv(min(size, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    """The next frame's pickle bytes (asyncio.IncompleteReadError at EOF)."""
    head = await reader.readexactly(_HEADER.size)
    return await reader.readexactly(_HEADER.unpack(head)[0])


async def read_message(reader: asyncio.StreamReader) -> tuple[Any, ...]:
    """The next message from a worker: a tuple headed by its kind, decoded as data
    (MessageError for anything else; asyncio.IncompleteReadError at EOF)."""
    body = await read_frame(reader)
    try:
        message = datacodec.loads(body)
    except datacodec.BadDataError as exc:
        raise MessageError(str(exc)) from None
    if type(message) is not tuple or not message or type(message[0]) is not str:
        raise MessageError(f"a {type(message).__name__} is not a message")
    return message


def encode(message: Any) -> bytes:
    """A request from the kernel to a worker, framed."""
    return _encode(message)
