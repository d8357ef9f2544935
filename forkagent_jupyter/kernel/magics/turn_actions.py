"""The parent conversation's magics: `%%agent` cells, `%agent` lines and `%compact` (on
`AgentCore`)."""

from __future__ import annotations

import asyncio
import sys
from argparse import Namespace

from IPython.core.error import UsageError

from ..core import AgentCore, interruptible
from ..interpolation import interpolate
from ..said import said_as
from .agent_magics import agent_line, compact_options, joined

__all__ = ["TurnActions"]


class TurnActions(AgentCore):
    """`%%agent` and `%agent` (awaited or in the background) and `%compact`."""

    async def run_cell(self, line: str, body: str) -> None:
        """An `%%agent` cell, awaited at top level: streams the answer into this cell. A
        `/command` on its line goes first, the body after it."""
        opts, command = agent_line(line)
        await self.run_turn(opts, joined(command, body))

    async def run_line(self, line: str) -> None:
        """An `%agent PROMPT` line, awaited at top level, as an `%%agent` cell of that
        prompt."""
        opts, prompt = agent_line(line, "%agent")
        if not prompt.strip():
            raise UsageError("%agent: say what the agent should do, e.g. %agent /review")
        await self.run_turn(opts, prompt, "%agent")

    async def run_turn(self, opts: Namespace, body: str, magic: str = "%%agent") -> None:
        """One `%%agent` turn with its parsed options. What the runtime refuses (an unknown
        `/command`, a command's shell line not allowed) is one line naming the magic."""
        prompt = interpolate(body, self.shell.user_ns)
        if not prompt.strip():
            raise UsageError("%%agent: the cell is empty; write what the agent should do.")
        self._within_budget(magic, "The turn was")
        model, thinking = self.session.model, self.session.thinking
        try:  # both for this cell only: a refused one leaves the other as it was
            if opts.think is not None:
                with said_as("%%agent --think"):
                    self.session.thinking = opts.think
            if opts.model:
                with said_as("%%agent --model"):
                    self.session.model = opts.model
            if opts.new:  # after the options were taken: a refused one loses no conversation
                self.session.parent.reset()
            with said_as(magic):  # one that cannot fit: refused before anything shows
                line = self.session.check_prompt(prompt)
            if line is not None:  # a large one: its size and cost above the answer
                print(line, file=sys.stderr)
            with said_as(magic):
                async with interruptible():
                    await self.ui.run_turn(prompt)  # the size said (`stream`'s size_said)
                    # a card that ended in the turn (a `context: fork` command's) shows its
                    # final state in this cell
                    await self.ui.hub.drained()
        finally:
            self.session.model = model
            self.session.thinking = thinking

    def start_cell(self, opts: Namespace, body: str) -> asyncio.Task[None]:
        """`%%agent` without an await (run_cell_magic from code): run in the background."""
        return self._spawn(self.run_turn(opts, body))

    async def compact(self, args: str) -> None:
        """`%compact [--keep N]`: compact the parent conversation now and show what changed."""
        keep: int | None = compact_options(args).keep
        if keep is not None and keep < 1:
            raise UsageError(f"%compact: --keep needs a number of turns >= 1, not {keep}")
        self._within_budget("%compact", "The compaction was")
        with said_as("%compact"):
            async with interruptible():
                event = await self.session.compact(keep)
        self.ui.show_compaction(event)

    def start_compact(self, args: str) -> asyncio.Task[None]:
        return self._start(self.compact(args))
