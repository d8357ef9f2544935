"""The comm channel to the JupyterLab extension, and the fallback without it.

The extension opens a comm to the kernel target `forkagent` on every kernel (re)connect; the
kernel keeps every open comm of that target and broadcasts on all of them. Messages from the
extension (approval answers, stop requests) go to the handlers registered here. Without the
extension nothing is open, `connected` is False and callers use their display-id fallback.

The messages and their keys are typed in `protocol.py` (mirroring the extension's
`protocol.ts`): `broadcast` takes an `Outbound`, and a message from the frontend reaches its
handler (`on_approve`, `on_stop`) only as its validated type; anything else (not an object, an
unknown type, a missing or mistyped field) is dropped, said in the kernel's log (the Jupyter
server's terminal; a line each for a few, a count for a flood: `tally`), never a traceback in
a cell. Under ipykernel the dropping happens at the `door`, on the thread that receives the
kernel's shell messages, before the kernel spends anything on them: a flood of junk on the
comm does not keep the kernel from answering.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .door import Door, malformed_line
from .protocol import (
    TARGET,
    VERSION,
    Approve,
    Hello,
    Inbound,
    Outbound,
    State,
    Stop,
    Welcome,
    inbound_or_none,
    jsonable,
    parse_hello,
)
from .tally import Tally

if TYPE_CHECKING:
    from comm.base_comm import BaseComm, CommManager

__all__ = ["TARGET", "VERSION", "Bridge"]

log = logging.getLogger(__name__)


def _data(msg: object) -> object:
    """The `data` of a comm message (None if the message has no such shape)."""
    content = msg.get("content") if isinstance(msg, dict) else None
    return content.get("data") if isinstance(content, dict) else None


class Bridge:
    """Kernel side of the `forkagent` comm target."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.comms: dict[str, BaseComm] = {}
        self.on_approve: Callable[[Approve], None] | None = None
        self.on_stop: Callable[[Stop], None] | None = None
        self.hello: Hello | None = None
        """The latest frontend's comm_open data (None: none, or not a valid `Hello`)."""
        self.loop: asyncio.AbstractEventLoop | None = None
        self.snapshot: Callable[[], State] | None = None
        """What a newly connected frontend is told at once (tasks, pending approvals)."""
        self.tally = Tally(lambda: self.log)
        """Messages dropped (at the door, or here without one), as the log says them."""
        self.door: Door | None = None
        self._ids: frozenset[str] = frozenset()  # the open comms, for the door's thread

    @property
    def log(self) -> logging.Logger:
        """The kernel's own log (the process's stderr, not a cell's), else this module's."""
        found = getattr(self.kernel, "log", None)
        return found if isinstance(found, logging.Logger) else log

    @property
    def manager(self) -> CommManager | None:
        return getattr(self.kernel, "comm_manager", None)

    def register(self) -> None:
        try:
            self.loop = asyncio.get_event_loop()
        except RuntimeError:
            self.loop = None
        if self.manager is not None:
            self.manager.register_target(TARGET, self._on_open)
        door = Door(self.kernel, lambda: self._ids, self.tally)
        self.door = door if door.install() else None

    def unregister(self) -> None:
        if self.door is not None:
            self.door.remove()
            self.door = None
        self.tally.flush()
        if self.manager is not None:
            try:
                self.manager.unregister_target(TARGET, self._on_open)
            except Exception:  # already gone
                log.debug("forkagent comm target was not registered")
        for comm in list(self.comms.values()):
            comm.close()
        self.comms.clear()
        self._ids = frozenset()

    @property
    def connected(self) -> bool:
        return bool(self.comms)

    def _on_open(self, comm: BaseComm, open_msg: dict[str, object]) -> None:
        self.comms[comm.comm_id] = comm
        self._ids = frozenset(self.comms)
        # Trust the frontend's subshell for replies on this comm, so an approval sent during
        # a busy main shell is handled at once (ipykernel 7.4 routing; see DESIGN.md).
        if hasattr(comm, "_reply_subshell_for"):
            comm._reply_subshell_for = lambda _data, default: default

        def closed(_msg: dict[str, object]) -> None:
            self.comms.pop(comm.comm_id, None)
            self._ids = frozenset(self.comms)

        comm.on_msg(self._on_msg)
        comm.on_close(closed)
        try:
            self.hello = parse_hello(_data(open_msg))
        except ValueError as exc:
            self.hello = None
            self.log.warning("forkagent comm: the frontend's hello is not valid (%s)", exc)
        state: State = (
            self.snapshot()
            if self.snapshot is not None
            else {"tasks": [], "approvals": [], "budget": None}
        )
        welcome: Welcome = {
            "type": "welcome",
            "version": VERSION,
            "tasks": state["tasks"],
            "approvals": state["approvals"],
            "budget": state["budget"],
        }
        comm.send(jsonable(welcome))

    def _on_msg(self, msg: dict[str, object]) -> None:
        data = _data(msg)
        message = inbound_or_none(data)
        if message is None:  # without a door, or sent before its comm was open there
            self.tally.drop("malformed", lambda: malformed_line(data))
            return
        # The message may be handled in a subshell thread: run the handler on the main loop.
        if self.loop is not None and self.loop.is_running():
            self.loop.call_soon_threadsafe(self._dispatch, message)
        else:
            self._dispatch(message)

    def _dispatch(self, message: Inbound) -> None:
        try:
            if message["type"] == "approve" and self.on_approve is not None:
                self.on_approve(message)
            elif message["type"] == "stop" and self.on_stop is not None:
                self.on_stop(message)
        except Exception:  # a bug on our side: to the kernel's log, not into a cell
            self.log.exception("forkagent comm handler for %r failed", message["type"])

    def broadcast(self, message: Outbound) -> int:
        """Send `message` on every open comm; returns how many received it."""
        data = jsonable(message)
        sent = 0
        for comm in list(self.comms.values()):
            try:
                comm.send(data)
                sent += 1
            except Exception:
                log.debug("dropping a closed forkagent comm", exc_info=True)
                self.comms.pop(comm.comm_id, None)
                self._ids = frozenset(self.comms)
        return sent
