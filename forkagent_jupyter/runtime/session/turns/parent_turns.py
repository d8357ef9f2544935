"""The parent conversation's turns as a host asks for them: a prompt's turn (pending
notifications read with it; a `/name` prompt runs that command, `commands.py`), the turn that
answers notifications (`responder.py`), compaction, resuming an earlier session's
conversation and starting a new one, one at a time (`lock`).

A turn itself runs in `turn_runner.py`; what it starts with (the settings files, the MCP
servers, the agent listing) is `turn_setup.py`."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

from ....messages_api.usage import Usage
from ...errors import UsageError
from ...events import Compacted, LoopEvent
from ...model.budget import CostBudget
from ...tasks.notifications import Priority
from ...transcripts.store import TranscriptStore
from .commands import Prepared, PromptCommands
from .responder import Responder
from .turn_lock import TurnLock
from .turn_result import fold_turn, replay
from .turn_runner import TurnRunner

__all__ = ["ParentTurns"]


class ParentTurns:
    """Runs the parent's turns one at a time (`lock`); their usage and cost are the
    runner's."""

    def __init__(
        self,
        *,
        runner: TurnRunner,
        commands: PromptCommands,
        responder: Responder,
        budget: CostBudget,
        lock: TurnLock,
        check_prompt: Callable[[str], str | None],
    ) -> None:
        self.runner = runner
        """Runs one turn to its end (the caller holds the lock) and keeps what turns cost."""
        self.commands = commands
        """The slash commands a prompt may invoke."""
        self.responder = responder
        """The answers to notifications: a prompt's turn reads those that wait."""
        self.budget = budget
        self.lock = lock
        self.check_prompt = check_prompt
        """A prompt's size: refused when it cannot fit; its line when it is large."""

    @property
    def usage(self) -> Usage:
        """The tokens of the parent's own requests (its turns, its web tools')."""
        return self.runner.usage

    @property
    def cost(self) -> float:
        """What the parent's own requests cost, in USD."""
        return self.runner.cost

    async def stream(self, prompt: str, *, size_said: bool = False) -> AsyncIterator[LoopEvent]:
        """Run one parent turn, yielding its events (`Session.ask` folds them). It goes
        before an automatic answer to notifications that waits (`Session.hold_answers`).
        Pending notifications are delivered with the prompt (before it), so none is lost or
        read twice; with `auto_respond` on, a task's end is left to the automatic answer
        that follows the turn. A prompt that cannot fit the context window is refused (a
        UsageError, nothing sent), a large one said first (`Session.check_prompt`);
        `size_said`: the caller has said its line already (the notebook does, above the
        answer)."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise UsageError("The prompt is empty: write what the agent should do.")
        self.budget.check("The turn was")
        line = self.check_prompt(prompt)  # one that cannot fit is refused all the same
        if line is not None and not size_said:
            print(line, file=sys.stderr)
        invocation = await self.commands.find(prompt)
        try:
            async with self.lock.turn("next"):  # before an automatic answer that waits
                prepared: Prepared | None = None
                if invocation is not None:
                    events: list[LoopEvent] = []  # its shell lines' calls, as they ran
                    try:
                        prepared = await self.commands.prepare(invocation, events)
                    except UsageError:
                        for event in events:
                            yield event
                        raise
                    for event in events:
                        yield event
                    if invocation.command.fork:
                        async for event in self.commands.run_fork(prepared):
                            yield event
                        return
                # what waits to be read at the next opportunity goes with the prompt; a task's
                # end too, unless the parent answers it by itself after this turn
                # (auto_respond): none waits unread
                upto: Priority = "next" if self.responder.will_answer() else "later"
                commands = self.responder.read_waiting(upto)
                texts = [c.text for c in commands]
                seen: list[LoopEvent] = []
                try:
                    said = prepared.texts() if prepared is not None else [prompt]
                    adjust = prepared.adjust if prepared is not None else None
                    async for event in self.runner.turn([*texts, *said], prompt, adjust):
                        if commands:
                            seen.append(event)
                        yield event
                finally:
                    if commands:  # delivered like the parent's own answers to notifications
                        self.responder.answered(commands, await fold_turn(replay(seen)))
        finally:
            self.responder.kick()  # the notifications it left: answered now

    async def load_settings(self) -> dict[str, Any]:
        """Read the settings files again and apply them (`TurnSetup.load_settings`): the
        rules in force. Done at the start of every parent turn."""
        return await self.runner.setup.load_settings()

    def reset(self) -> None:
        """Start a new parent conversation (workers keep running and report to it)."""
        self.runner.reset()

    async def compact(self, keep_turns: int | None = None) -> Compacted:
        """The parent conversation compacted now (`Session.compact` checked `keep_turns` and
        the budget)."""
        async with self.lock:
            return await self.runner.compact(keep_turns)

    async def resume(self, store: TranscriptStore, session_id: str) -> int:
        """An earlier session's parent conversation continued (`Session.resume`), read from
        `store`."""
        folder = store.root / session_id
        loaded = await store.aload("main", folder)
        async with self.lock:  # not in the middle of a turn
            self.runner.resumed(session_id, loaded.messages)
        return len(self.runner.main.history)
