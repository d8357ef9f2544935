"""Approvals asked in a terminal: `jupyter console`, qtconsole, any frontend without widgets.

Such a frontend draws no approval card and runs no JupyterLab extension, but it answers the
kernel's `input_request` on the stdin channel while one of its cells runs. So, when no
`forkagent` comm is open and the running execute request allows stdin and names no notebook
cell (JupyterLab and Notebook send `metadata.cellId`; a console does not), the kernel asks the
pending approvals there itself, one at a time, in the running cell:

    forkagent: worker w0 asks to run Write out.csv (3 lines)
      <the call's preview: the file it would write>
    (answer before this cell ends, or it is asked again in the next; %tasks --wait waits)
    Allow Write? [y]es / [a]lways (Write(/out.csv), this session) / [n]o:

ipykernel's own `input()` blocks the loop until the answer comes and cannot be cancelled.
This sends the same message on the same socket, then reads the socket without blocking, from
the loop (a short poll while a question is open), so workers and other approvals go on, and the
question is dropped when the approval is decided elsewhere or times out (the console still
shows it: its reply, which names no parent, is dropped and the next question is sent after
it). Only "y"/"yes" and "a"/"always" (any case) approve, as the card's "Allow once" and
"Allow for session" do; everything else denies. A console drops an answer typed after its
cell ended: an approval whose cell ends unanswered is asked again in the next cell that allows
stdin; one that arises when no cell runs waits for the next cell. Nothing is approved by
default, and `approval_timeout` holds.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import zmq

if TYPE_CHECKING:
    from ..cards.hub import ApprovalPrompt

__all__ = ["POLL_INTERVAL", "TerminalAsk", "printable", "terminal_answer"]

POLL_INTERVAL = 0.05
"""How often the stdin socket is read while a question is open (seconds)."""
GRACE = 2.0
"""How long the socket is still read after the asking cell ended: an answer sent while a
synchronous cell held the loop arrives then."""
PREVIEW_LINES = 40
LINE_CHARS = 300
HINT = "(answer before this cell ends, or it is asked again in the next; %tasks --wait waits)"

log = logging.getLogger("forkagent_jupyter.terminal")

YES = ("y", "yes")
ALWAYS = ("a", "always")


def terminal_answer(value: object, has_rule: bool) -> str:
    """The decision a typed answer stands for: "allow", "always" (only when a rule can name
    the call, as the card's button) or "deny" for everything else."""
    if not isinstance(value, str):
        return "deny"
    word = value.strip().lower()
    if word in YES:
        return "allow"
    if word in ALWAYS and has_rule:
        return "always"
    return "deny"


def printable(text: str) -> str:
    """`text` safe to print on a terminal: control and format characters (escape sequences,
    carriage returns, bidirectional overrides: what could redraw the line or hide part of the
    call from the person asked) are shown escaped, as Python writes them."""
    return "".join(
        c if c == " " or unicodedata.category(c)[0] not in "CZ" else repr(c)[1:-1] for c in text
    )


@dataclass
class _Cell:
    """The running execute request, when the kernel may ask on stdin in it."""

    parent: dict[str, Any]
    ident: list[bytes]


@dataclass
class _Question:
    prompt: ApprovalPrompt
    msg_id: str
    cell: _Cell


class TerminalAsk:
    """Asks pending approvals on the kernel's stdin channel (see the module's docstring)."""

    def __init__(self, kernel: Any, connected: Callable[[], bool]) -> None:
        self.kernel = kernel
        self.connected = connected  # the JupyterLab extension answers instead
        self.who: Callable[[ApprovalPrompt], str] = _who
        self.cell: _Cell | None = None
        self.queue: list[ApprovalPrompt] = []
        self.asking: _Question | None = None
        self.orphan: _Question | None = None
        """A question decided elsewhere whose prompt the console still shows: the next reply
        that names no parent is its answer, not the next question's."""
        self._ended_at = 0.0
        self._poller: asyncio.Task[None] | None = None

    # -- cells -------------------------------------------------------------------------------

    def cell_started(self) -> None:
        """A cell starts (pre_run_cell, in its request's context): remember whether the kernel
        may ask in it; read what answers arrived; ask what waits."""
        self.cell = self._running_cell()
        if self.asking is not None and self.asking.cell is not self.cell:
            self._read()  # an answer sent before this cell started belongs to the old question
            if self.asking is not None:
                self.asking = None  # its cell ended unanswered: asked again here
        if self.orphan is not None and self.orphan.cell is not self.cell:
            self.orphan = None  # the console dropped its prompt when its cell ended
        self._next()

    def cell_ended(self) -> None:
        self.cell = None
        self._ended_at = time.monotonic()

    def _running_cell(self) -> _Cell | None:
        kernel = self.kernel
        if kernel is None or not getattr(kernel, "_allow_stdin", False):
            return None
        if getattr(kernel, "stdin_socket", None) is None or kernel.session is None:
            return None
        try:
            parent = kernel.get_parent("shell")
            ident = kernel._parent_ident["shell"]
        except Exception:
            return None
        header = parent.get("header") or {}
        if header.get("msg_type") != "execute_request":
            return None
        if (parent.get("metadata") or {}).get("cellId"):
            return None  # a notebook frontend: the approval card is its way to answer
        return _Cell(parent=parent, ident=ident if isinstance(ident, list) else [ident])

    # -- approvals ---------------------------------------------------------------------------

    def add(self, prompt: ApprovalPrompt) -> None:
        """An approval is pending: ask it now if a cell can take it, else at the next cell."""
        self.queue.append(prompt)
        prompt.future.add_done_callback(lambda _f: self._decided(prompt))
        self._next()

    def waiting(self) -> list[ApprovalPrompt]:
        return [p for p in self.queue if not p.future.done()]

    def _decided(self, prompt: ApprovalPrompt) -> None:
        if prompt in self.queue:
            self.queue.remove(prompt)
        if self.asking is not None and self.asking.prompt is prompt:
            # decided elsewhere or timed out (an answer here cleared `asking` first): the
            # console still shows its prompt, so the next question waits for that reply
            self.orphan, self.asking = self.asking, None
        self._next()

    def _next(self) -> None:
        if self.asking is not None or self.cell is None or self.connected():
            return
        waiting = self.waiting()
        if not waiting:
            return
        prompt, cell = waiting[0], self.cell
        kernel = self.kernel
        if self.orphan is not None:
            self._read()
            if self.orphan is not None:
                return  # asked when the console's open prompt was answered
        for stream in (sys.stdout, sys.stderr):  # what the cell printed comes first
            if stream is not None:
                stream.flush()
        self._read()  # a stale answer (to no open question) is dropped
        try:
            sent = kernel.session.send(
                kernel.stdin_socket,
                "input_request",
                {"prompt": self.question(prompt), "password": False},
                cell.parent,
                ident=cell.ident,
            )
        except Exception as exc:  # the socket is gone (kernel shutting down): the card waits
            log.warning("forkagent: could not ask on stdin: %s", exc)
            return
        self.asking = _Question(prompt, str(sent["header"]["msg_id"]), cell)
        if self._poller is None or self._poller.done():
            try:
                self._poller = asyncio.get_running_loop().create_task(self._poll())
            except RuntimeError:  # no loop runs: the answer is read when the next cell starts
                pass

    def question(self, prompt: ApprovalPrompt) -> str:
        """What the terminal shows: who asks for what, the call's preview, the answers."""
        request = prompt.request
        lines = request.preview.removesuffix("\n").split("\n") if request.preview else []
        more = len(lines) - PREVIEW_LINES
        lines = [_clip(printable(line)) for line in lines[:PREVIEW_LINES]]
        if more > 0:
            lines.append(f"... ({more} more lines)")
        preview = "".join(f"  {line}\n" for line in lines)
        rule = request.suggested_rule
        always = f"[a]lways ({printable(rule)}, this session) / " if rule else ""
        who, summary = printable(self.who(prompt)), printable(request.summary)
        reason = f"  ({printable(request.reason)})\n" if request.reason else ""
        return (
            f"forkagent: {who} asks to run {summary}\n{reason}{preview}"
            f"{HINT}\nAllow {printable(request.tool_name)}? [y]es / {always}[n]o: "
        )

    # -- answers -----------------------------------------------------------------------------

    async def _poll(self) -> None:
        """Read the stdin socket while a question is open (and shortly after its cell ended)."""
        while self.asking is not None or self.orphan is not None:
            if self.cell is None and time.monotonic() - self._ended_at > GRACE:
                return  # read again when the next cell starts
            self._read()
            if self.orphan is None:
                self._next()
            await asyncio.sleep(POLL_INTERVAL)

    def _read(self) -> None:
        """Take every message waiting on the stdin socket (never waits)."""
        kernel = self.kernel
        while True:
            try:
                _idents, msg = kernel.session.recv(kernel.stdin_socket)
            except zmq.ZMQError as exc:  # the socket is closed (the kernel shuts down)
                log.warning("forkagent: cannot read stdin: %s", exc)
                return
            except Exception as exc:
                log.warning("forkagent: an unreadable message on stdin was dropped: %s", exc)
                continue
            if msg is None:
                return
            self._reply(msg)

    def _reply(self, msg: dict[str, Any]) -> None:
        if msg.get("msg_type") != "input_reply":
            return
        # a console's reply names no parent; one that names another request is not ours
        answered = (msg.get("parent_header") or {}).get("msg_id")
        orphan = self.orphan
        if orphan is not None and (not answered or answered == orphan.msg_id):
            self.orphan = None  # the answer to a question already decided: dropped
            return
        question = self.asking
        if question is None:
            return
        if answered and answered != question.msg_id:
            return
        content = msg.get("content")
        value = content.get("value") if isinstance(content, dict) else None
        choice = terminal_answer(value, question.prompt.request.suggested_rule is not None)
        shown = repr(value)[:80] if isinstance(value, str) else "no answer"
        reason = None if choice != "deny" else f"answered {shown} in the terminal"
        self.asking = None  # a second reply is not an answer to anything
        question.prompt.answer(choice, reason)


def _clip(line: str, limit: int = LINE_CHARS) -> str:
    return (
        line if len(line) <= limit else f"{line[:limit]}... ({len(line) - limit} more characters)"
    )


def _who(prompt: ApprovalPrompt) -> str:
    task = prompt.request.task_id
    return f"worker {task}" if task else "the parent"
