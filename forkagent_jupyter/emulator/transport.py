"""The HTTP/1.1 transport of the emulator: a threaded server with keep-alive and bounded stop.

`EmulatorHTTPServer` runs one thread per connection (keep-alive, TCP_NODELAY) and hands every
request to a dispatch callback with a `Handler`, which offers what the API needs: read the
body, answer with bytes/JSON in one write, stream a chunked body, or drop the connection.
`close_all` shuts every open connection and joins its thread within a deadline.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from email.utils import formatdate
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ClientGoneError", "EmulatorHTTPServer", "Handler", "reason_phrase"]

_EXTRA_REASONS = {529: "Overloaded"}


def reason_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return _EXTRA_REASONS.get(status, "Error")


class ClientGoneError(Exception):
    """The client closed the connection while we were writing."""


class Handler(BaseHTTPRequestHandler):
    """One connection; each request goes to the server's dispatch callback."""

    protocol_version = "HTTP/1.1"
    server_version = "forkagent-emulator/0.1"
    sys_version = ""
    timeout = 300  # idle keep-alive connections are closed after this many seconds
    server: EmulatorHTTPServer

    def setup(self) -> None:
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        self.answered = False
        self.path_only = ""
        self.query = ""

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _dispatch(self) -> None:
        self.answered = False
        self.path_only, _, self.query = self.path.partition("?")
        self.server.dispatch(self)

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    # -- reading -------------------------------------------------------------------------

    def lower_headers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in self.headers.items():
            k = key.lower()
            out[k] = f"{out[k]}, {value}" if k in out else value
        return out

    def read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        if len(body) < length:  # the client went away mid-request: there is no request
            raise ConnectionAbortedError(f"body ended after {len(body)} of {length} bytes")
        return body

    # -- writing -------------------------------------------------------------------------

    def _head(self, status: int, headers: Mapping[str, str]) -> bytes:
        lines = [
            f"HTTP/1.1 {status} {reason_phrase(status)}",
            f"Server: {self.server_version}",
            f"Date: {formatdate(usegmt=True)}",
        ]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _write(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
        except OSError as exc:  # BrokenPipe, ConnectionReset, shut down by stop()
            self.close_connection = True
            raise ClientGoneError(str(exc)) from exc

    def send_bytes(
        self, status: int, headers: Mapping[str, str], body: bytes, *, partial: bool = False
    ) -> None:
        """The whole response in one write; `partial` sends half the body, then drops."""
        self.answered = True
        head = {**headers, "Content-Length": str(len(body))}
        if partial:
            self._write(self._head(status, head) + body[: len(body) // 2])
            self.drop()
            return
        self._write(self._head(status, head) + body)

    def send_json(self, status: int, obj: Any, headers: Mapping[str, str] | None = None) -> None:
        body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
        self.send_bytes(status, {"Content-Type": "application/json", **(headers or {})}, body)

    def start_chunked(self, status: int, headers: Mapping[str, str]) -> None:
        self.answered = True
        self._write(self._head(status, {**headers, "Transfer-Encoding": "chunked"}))

    def write_chunk(self, data: bytes) -> None:
        if data:
            self._write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_chunked(self) -> None:
        self._write(b"0\r\n\r\n")

    def drop(self) -> None:
        """Close the connection now, whatever was sent."""
        self.answered = True
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class EmulatorHTTPServer(ThreadingHTTPServer):
    """Threaded HTTP/1.1 server that tracks its connections for a bounded stop."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 512

    def __init__(self, address: tuple[str, int], dispatch: Callable[[Handler], None]) -> None:
        self.dispatch = dispatch
        self._open: dict[socket.socket, threading.Thread] = {}
        self._open_lock = threading.Lock()
        super().__init__(address, Handler)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open[request] = threading.current_thread()
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open.pop(request, None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        return None  # a client that vanished is not an error of ours

    @property
    def open_connections(self) -> int:
        with self._open_lock:
            return len(self._open)

    def close_all(self, timeout: float) -> None:
        """Shut every open connection down and wait (at most `timeout`) for its thread."""
        deadline = time.monotonic() + timeout
        with self._open_lock:
            items = list(self._open.items())
        for sock, _ in items:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for _, thread in items:
            thread.join(max(0.0, deadline - time.monotonic()))
