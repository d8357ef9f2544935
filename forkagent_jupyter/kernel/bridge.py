"""The comm channel to the JupyterLab extension, and the fallback without it.

The extension opens a comm to the kernel target `forkagent` on every kernel (re)connect; the
kernel keeps every open comm of that target and broadcasts on all of them. Messages from the
extension (approval answers, stop requests) go to the handlers registered here. Without the
extension nothing is open, `connected` is False and callers use their display-id fallback.

The messages and their keys are typed in `protocol.py` (mirroring the extension's
`protocol.ts`). A message from the frontend reaches a handler only as its validated type;
anything else (not an object, an unknown type, a missing or mistyped field) is dropped with one
line in the kernel's log (the Jupyter server's terminal), never a traceback in a cell.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .protocol import TARGET, VERSION, Hello, Inbound, parse_hello, parse_inbound

__all__ = ["TARGET", "VERSION", "Bridge"]

log = logging.getLogger(__name__)

Handler = Callable[[Any], None]
"""Called with one validated message (`protocol.Inbound`) of the type it was registered for."""


def _data(msg: object) -> object:
    """The `data` of a comm message (None if the message has no such shape)."""
    content = msg.get("content") if isinstance(msg, dict) else None
    return content.get("data") if isinstance(content, dict) else None


class Bridge:
    """Kernel side of the `forkagent` comm target."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.comms: dict[str, Any] = {}
        self.handlers: dict[str, Handler] = {}
        self.hello: Hello | None = None
        """The latest frontend's comm_open data (None: none, or not a valid `Hello`)."""
        self.loop: Any = None
        self.snapshot: Callable[[], dict[str, Any]] | None = None
        """What a newly connected frontend is told at once (tasks, pending approvals)."""

    @property
    def log(self) -> logging.Logger:
        """The kernel's own log (the process's stderr, not a cell's), else this module's."""
        found = getattr(self.kernel, "log", None)
        return found if isinstance(found, logging.Logger) else log

    @property
    def manager(self) -> Any:
        return getattr(self.kernel, "comm_manager", None)

    def register(self) -> None:
        import asyncio

        try:
            self.loop = asyncio.get_event_loop()
        except RuntimeError:
            self.loop = None
        if self.manager is not None:
            self.manager.register_target(TARGET, self._on_open)

    def unregister(self) -> None:
        if self.manager is not None:
            try:
                self.manager.unregister_target(TARGET, self._on_open)
            except Exception:  # already gone
                log.debug("forkagent comm target was not registered")
        for comm in list(self.comms.values()):
            comm.close()
        self.comms.clear()

    @property
    def connected(self) -> bool:
        return bool(self.comms)

    def on(self, kind: str, handler: Handler) -> None:
        self.handlers[kind] = handler

    def _on_open(self, comm: Any, open_msg: dict[str, Any]) -> None:
        self.comms[comm.comm_id] = comm
        # Trust the frontend's subshell for replies on this comm, so an approval sent during
        # a busy main shell is handled at once (ipykernel 7.4 routing; see DESIGN.md).
        if hasattr(comm, "_reply_subshell_for"):
            comm._reply_subshell_for = lambda _data, default: default

        def closed(_msg: dict[str, Any]) -> None:
            self.comms.pop(comm.comm_id, None)

        comm.on_msg(self._on_msg)
        comm.on_close(closed)
        try:
            self.hello = parse_hello(_data(open_msg))
        except ValueError as exc:
            self.hello = None
            self.log.warning("forkagent comm: the frontend's hello is not valid (%s)", exc)
        state = self.snapshot() if self.snapshot is not None else {}
        comm.send({"type": "welcome", "version": VERSION, **state})
        if "connected" in self.handlers:
            self.handlers["connected"]({"comm_id": comm.comm_id})

    def _on_msg(self, msg: dict[str, Any]) -> None:
        try:
            message = parse_inbound(_data(msg))
        except ValueError as exc:
            self.log.warning(
                "forkagent comm: dropped a malformed message from the frontend: %s", exc
            )
            return
        handler = self.handlers.get(message["type"])
        if handler is None:
            self.log.debug("forkagent comm: no handler for %r", message["type"])
            return
        # The message may be handled in a subshell thread: run the handler on the main loop.
        if self.loop is not None and self.loop.is_running():
            self.loop.call_soon_threadsafe(self._call, handler, message)
        else:
            self._call(handler, message)

    def _call(self, handler: Handler, message: Inbound) -> None:
        try:
            handler(message)
        except Exception:  # a bug on our side: to the kernel's log, not into a cell
            self.log.exception("forkagent comm handler for %r failed", message["type"])

    def broadcast(self, data: dict[str, Any]) -> int:
        """Send `data` on every open comm; returns how many received it."""
        sent = 0
        for comm in list(self.comms.values()):
            try:
                comm.send(data)
                sent += 1
            except Exception:
                log.debug("dropping a closed forkagent comm", exc_info=True)
                self.comms.pop(comm.comm_id, None)
        return sent
