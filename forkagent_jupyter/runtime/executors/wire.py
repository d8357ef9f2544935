"""Frames between the kernel and its worker processes: a 4-byte length, then a pickle.

Both ends are this package's own code in processes forked from one kernel, so pickle is the
format (values pulled back are pickles too). The kernel reads with asyncio (never blocking its
loop); the worker side blocks, as a worker process has nothing else to do.
"""

from __future__ import annotations

import asyncio
import pickle
import socket
import struct
import threading
from typing import Any

__all__ = ["FrameSocket", "read_frame"]

_HEADER = struct.Struct("!I")


def _encode(message: Any) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(body)) + body


class FrameSocket:
    """The worker side of a connection: blocking, thread-safe sends."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._send_lock = threading.Lock()

    def send(self, message: Any) -> None:
        data = _encode(message)
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


def encode(message: Any) -> bytes:
    return _encode(message)
