"""The door of the `forkagent` comm: a message the kernel would drop is dropped before the
kernel spends anything on it.

Every shell message costs the kernel's main thread about half a millisecond before a handler
sees it (ipykernel verifies and decodes it, publishes "busy" and "idle" for it, flushes the
streams): 10,000 junk messages on the comm in 0.7 s left the kernel deaf for 13 s, its cells
waiting behind them. ipykernel (7.4 and later) receives every shell message on a thread of
its own first, then hands it to the main thread; the door is a filter there, on the shell
socket. A `comm_msg` on an open `forkagent` comm whose data is not a message of the protocol
(`protocol.inbound_or_none`), or one past the rate a person clicks at (`BURST` at once,
`RATE` a second, per comm), stops at the door and is counted (`tally.Tally`). Everything else
passes on untouched, in order. The door only ever drops; what it lets pass is verified by
ipykernel as before (so it need not check a signature itself).

Without ipykernel's shell thread and socket (another kernel, a test's bridge) there is no
door: the bridge drops the same messages in its handler, counted the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .protocol import inbound_or_none, parse_inbound
from .tally import Tally

if TYPE_CHECKING:
    from zmq.eventloop.zmqstream import ZMQStream

__all__ = ["BURST", "RATE", "Door"]

RATE = 20.0
"""Messages a second one comm may send, on average (a person clicks a few a second)."""
BURST = 100
"""Messages one comm may send at once."""


class _Bucket:
    """A token bucket: `take` says whether one more message fits the rate."""

    def __init__(self) -> None:
        self.tokens = float(BURST)
        self.at = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(float(BURST), self.tokens + (now - self.at) * RATE)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


def _raw(part: Any) -> bytes:
    """A frame's bytes (a zmq.Frame, or bytes already)."""
    found = getattr(part, "bytes", part)
    return found if isinstance(found, bytes) else bytes(found)


def malformed_line(data: object) -> str:
    """The log line of a message dropped for not being one of the protocol."""
    try:
        parse_inbound(data)
        why = "it is not a message of the protocol"
    except ValueError as exc:
        why = str(exc)
    return f"forkagent comm: dropped a malformed message from the frontend: {why}"


class Door:
    """The filter on the kernel's shell socket (see the module doc). `comm_ids()` are the open
    `forkagent` comms (read on the shell thread: an immutable set)."""

    def __init__(self, kernel: Any, comm_ids: Callable[[], frozenset[str]], tally: Tally) -> None:
        self._kernel = kernel
        self._comm_ids = comm_ids
        self._tally = tally
        self._buckets: dict[str, _Bucket] = {}
        self._stream: ZMQStream | None = None
        self._inner: Callable[[list[object]], object] | None = None
        self._copy = False
        self._removed = False

    def install(self) -> bool:
        """Put the door in front of ipykernel's handler of the shell socket, on the thread that
        reads it; False (nothing done) where this kernel has no such socket."""
        stream = getattr(self._kernel, "shell_stream", None)
        inner = getattr(stream, "_recv_callback", None)
        loop = getattr(stream, "io_loop", None)
        if getattr(self._kernel, "session", None) is None or not callable(inner) or loop is None:
            return False
        earlier = getattr(inner, "__self__", None)
        if isinstance(earlier, Door) and earlier._inner is not None:  # %reload_ext: not twice
            inner = earlier._inner
        assert stream is not None
        self._stream, self._inner = stream, inner
        self._copy = bool(getattr(stream, "_recv_copy", False))
        loop.add_callback(stream.on_recv, self._on_recv, self._copy)
        return True

    def remove(self) -> None:
        """Give the shell socket back to ipykernel's handler."""
        self._removed = True  # a message already on its way passes
        stream, inner = self._stream, self._inner
        if stream is not None and inner is not None and not stream.closed():
            stream.io_loop.add_callback(stream.on_recv, inner, self._copy)

    def _on_recv(self, msg: list[object]) -> object:
        assert self._inner is not None
        if self._removed or self._admits(msg):
            return self._inner(msg)
        return None

    def _admits(self, msg: list[object]) -> bool:
        """Whether `msg` passes: anything but a comm message to one of our comms does (a
        message the door cannot read too: ipykernel says what is wrong with it)."""
        ours = self._comm_ids()
        if not ours:
            return True
        try:
            session = self._kernel.session
            _idents, parts = session.feed_identities(msg, copy=self._copy)
            header = session.unpack(_raw(parts[1]))
            if not isinstance(header, dict) or header.get("msg_type") != "comm_msg":
                return True
            raw = _raw(parts[4])
            if not any(comm_id.encode() in raw for comm_id in ours):
                return True  # a widget's message, say: not read any further
            content = session.unpack(raw)
        except Exception:
            return True
        comm_id = content.get("comm_id") if isinstance(content, dict) else None
        if comm_id not in ours:
            return True
        data = content.get("data")
        message = inbound_or_none(data)
        if message is None:
            self._tally.drop("malformed", lambda: malformed_line(data))
            return False
        if not self._bucket(comm_id).take():
            kind = message["type"]
            self._tally.drop(
                "over the rate",
                lambda: (
                    f"forkagent comm: dropped a {kind!r} message from the frontend: more "
                    f"than {BURST} at once or {RATE:.0f} a second on one comm"
                ),
            )
            return False
        return True

    def _bucket(self, comm_id: str) -> _Bucket:
        found = self._buckets.get(comm_id)
        if found is None:
            ours = self._comm_ids()
            self._buckets = {k: v for k, v in self._buckets.items() if k in ours}
            found = self._buckets[comm_id] = _Bucket()
        return found
