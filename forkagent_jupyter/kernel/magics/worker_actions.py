"""The workers' magics: `%fork` (one worker or a batch), `%send`, `%bg` (on `AgentCore`;
`%stop` is the core's, the cards' button uses it too)."""

from __future__ import annotations

import asyncio
import math

from IPython.core.error import UsageError

from ..core import AgentCore, team_key
from ..interpolation import interpolate
from ..said import said_as
from .agent_magics import send_options

__all__ = ["WorkerActions"]


class WorkerActions(AgentCore):
    """`%fork`, `%fork --batch`, `%send` (awaited or not) and `%bg`."""

    def fork(
        self,
        directive: str,
        name: str | None = None,
        shared: bool = False,
        turns: int | None = None,
    ) -> None:
        directive = interpolate(directive, self.shell.user_ns)
        self._within_budget("%fork", "The fork was")
        with said_as("%fork"):
            self.session.fork_now(
                directive, name=name, namespace="shared" if shared else None, turns=turns
            )
        # its card is shown by the session's task event (ui.KernelUI._on_task), once

    def fork_batch(self, template: str, opts: dict[str, str | int | bool]) -> None:
        """`%fork --batch --over NAME "... {item} ..."` (see views/batch_view.py); `opts`: the
        options given on the line, as argparse read them."""
        from ..views.batch_view import start_batch

        if not (opts.get("batch") and opts.get("over")):
            raise UsageError("%fork: --batch and --over NAME go together")
        try:
            poll = float(opts.get("poll", 30.0))
        except ValueError:
            raise UsageError(
                f"%fork: --poll needs a number of seconds, not {opts['poll']!r}"
            ) from None
        if not (math.isfinite(poll) and poll > 0):
            raise UsageError("%fork: --poll needs a positive number of seconds")
        start_batch(
            self.session,
            self.shell.user_ns,
            template,
            str(opts["over"]),
            name if isinstance(name := opts.get("name"), str) else None,
            poll,
            check_budget=lambda: self._within_budget("%fork", "The fan-out was"),
            spawn=self._spawn,
        )

    async def send_line(self, line: str) -> None:
        """An awaited `%send` line."""
        args = send_options(line)
        await self.asend(args.to, interpolate(args.message, self.shell.user_ns))

    async def asend(self, to: str, text: str) -> None:
        """`%send`: the message to a running agent, or resuming a finished one (one of an
        earlier session is read from its transcript on a thread)."""
        if team_key(to) is not None:
            await self._asend_team(to, text)
            return
        with said_as("%send"):
            reply = await self.session.send(to, text)
        self.ui.show_card(self.session.task(to), note=reply)

    def send(self, to: str, message: str) -> asyncio.Task[None] | None:
        """`%send` where no await is possible: at once to an agent this session holds; one to
        resume from disk is resumed in the background (its handle returned)."""
        text = interpolate(message, self.shell.user_ns)
        if team_key(to) is not None:
            if any(a.team is not None for a in self.session.interrupted_known() or []):
                return self._start(self._asend_team(to, text))  # members to resume from disk
            self._send_team(to, text)
            return None
        with said_as("%send"):
            reply = self.session.send_now(to, text)
        if reply is None:
            return self._start(self.asend(to, text))
        self.ui.show_card(self.session.task(to), note=reply)
        return None

    def _send_team(self, target: str, text: str) -> None:
        """`%send team:NAME msg` (or `NAME:*`, `team:*` for the current team): into the
        mailbox of every running member, from "user"."""
        with said_as("%send"):
            reply = self.session.send_team(team_key(target) or "", text)
        print(f"%send: {reply}")

    async def _asend_team(self, target: str, text: str) -> None:
        """`_send_team`, and the team's members that a kernel restart cut off resumed from
        their transcripts with the message, each back in the team (their cards shown here)."""
        with said_as("%send"):
            reply = await self.session.asend_team(team_key(target) or "", text)
        for line in reply.splitlines():
            print(f"%send: {line}")

    def background(self, key: str) -> None:
        """`%bg ID`, the card's "Run in background" button, `api.background`."""
        with said_as("%bg"):
            task = self.session.background(key)
        print(
            f"%bg: {task.name or task.id} runs in the background; its result comes back as "
            "a notification."
        )
