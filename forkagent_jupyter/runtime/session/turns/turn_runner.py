"""One turn of the parent conversation, run to its end: the turn's setup (`turn_setup.py`),
the UserPromptSubmit and Stop hooks, the agent listing told again whenever it changed or
left the conversation, and what the parent's own requests cost (charged, the budget
enforced after each). Also what changes the conversation between turns: compaction, a new
conversation, an earlier one continued. The caller holds the parent's turn lock
(`parent_turns.py`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

from ....messages_api.shapes import JSON
from ....messages_api.usage import Usage
from ...errors import UsageError
from ...events import Compacted, LoopEvent, Stop, UsageReport
from ...history import Block, Message, last_assistant_text
from ...loop.compaction import compact
from ...loop.config import AgentConfig, LoopState
from ...loop.loop import run_turn
from ...model.timing import record_timing
from ...workers.workers import AgentRun
from ..agent_setup import AgentContexts
from ..spending import Spending
from .turn_setup import TurnSetup

__all__ = ["TurnRunner"]


class TurnRunner:
    """Runs the parent's turns (`main`: its run) and keeps their usage and cost."""

    def __init__(
        self,
        *,
        main: AgentRun,
        setup: TurnSetup,
        contexts: AgentContexts,
        spending: Spending,
        changed: asyncio.Event,
    ) -> None:
        self.main = main
        """The parent's own run: its history, config and transcript."""
        self.setup = setup
        """What each turn starts with (the settings files, the MCP servers)."""
        self.contexts = contexts
        """The parent's config and the settings files' hooks."""
        self.spending = spending
        """The budget: enforced after each of the parent's requests is charged."""
        self.changed = changed
        """Set when a turn ends (the session may have become idle)."""
        self.usage = Usage()
        self.cost = 0.0
        self.listed: str | None = None  # the agent listing the parent was last told

    def charge(self, usage: Usage, cost_usd: float) -> None:
        """A request made for the parent (its own, or its web tools')."""
        self.usage = self.usage + usage
        self.cost += cost_usd

    async def turn(
        self,
        texts: list[str],
        prompt: str | None = None,
        adjust: Callable[[AgentConfig], AgentConfig] | None = None,
    ) -> AsyncIterator[LoopEvent]:
        """One parent turn whose user message is `texts` (the caller holds the lock);
        `adjust` changes the parent's config for this turn only (an inline command's)."""
        main = self.main
        await self.setup.prepare()
        main.config = self.contexts.parent_config(main)
        if adjust is not None:
            main.config = adjust(main.config)
        hooks = self.contexts.hooks
        if prompt is not None and hooks.has("UserPromptSubmit"):
            said = await hooks.run("UserPromptSubmit", {"agent_id": "main", "prompt": prompt})
            if said.blocked:
                raise UsageError(f"A UserPromptSubmit hook blocked the prompt: {said.reason}")
            texts = [*texts, *said.context]
        blocks: list[Block] = [{"type": "text", "text": t} for t in texts]
        listing = await asyncio.to_thread(self.setup.agent_listing)  # reads the agent files
        if listing is not None and listing != self.listed:
            blocks.insert(0, {"type": "text", "text": listing})
            self.listed = listing
        main.state.append(main.history, {"role": "user", "content": blocks})
        blocked = requests = 0
        try:
            while True:  # again while a Stop hook sends the parent back to work
                stop: Stop | None = None
                async for event in run_turn(main.config, main.history, main.state):
                    record_timing(main.transcript, event)
                    if isinstance(event, UsageReport):
                        self.charge(event.usage, event.cost_usd)
                        self.spending.enforce()
                    if isinstance(event, Stop):
                        stop = event  # told once the Stop hooks let the turn end
                    else:
                        yield event
                assert stop is not None
                requests += stop.turns
                about = {
                    "agent_id": "main",
                    "stop_reason": stop.reason,
                    "last_assistant_message": last_assistant_text(main.history),
                }
                ended = stop.reason == "end_turn" and not self.spending.budget.reached()
                feedback = await self.contexts.hooks.stop_check(
                    "Stop", about, None, blocked=blocked, may_go_on=ended
                )
                if feedback is None:
                    yield replace(stop, turns=requests)
                    return
                blocked += 1
                message: Message = {"role": "user", "content": [{"type": "text", "text": feedback}]}
                main.state.append(main.history, message)
        finally:
            if adjust is not None:  # the command's limit and model end with its turn
                main.config = self.contexts.parent_config(main)
            self.changed.set()

    def history_replaced(self, messages: list[Message], data: dict[str, JSON]) -> None:
        """The parent's history was compacted: on disk, and the agent listing told again if
        its message was dropped."""
        transcript = self.main.transcript
        if transcript is not None:
            transcript.append_event("compacted", {**data, "messages": messages})
        if self.listed is not None and not any(
            self.listed in str(m.get("content")) for m in messages
        ):
            self.listed = None

    def reset(self) -> None:
        """Start a new parent conversation (workers keep running and report to it)."""
        main = self.main
        main.history.clear()
        self.listed = None
        on_message = main.state.on_message
        main.state = LoopState(
            on_message=on_message, on_history_replaced=main.state.on_history_replaced
        )
        if main.transcript is not None:
            main.transcript.append_event("reset")

    async def compact(self, keep_turns: int | None) -> Compacted:
        """The parent conversation compacted now (the caller holds the lock)."""
        main = self.main
        main.config = self.contexts.parent_config(main)
        result: Compacted | None = None
        async for event in compact(main.config, main.history, main.state, keep_turns=keep_turns):
            if isinstance(event, UsageReport):
                self.charge(event.usage, event.cost_usd)
            elif isinstance(event, Compacted):
                result = event
        self.changed.set()
        assert result is not None
        return result

    def resumed(self, session_id: str, messages: list[Message]) -> None:
        """The conversation is now an earlier session's (`session_id`), as `messages` (the
        caller holds the lock)."""
        main = self.main
        main.history[:] = messages
        ends = [i for i, m in enumerate(main.history) if m["role"] == "user"]
        main.state.previous_end = ends[-1] if ends else None
        self.listed = None
        if main.transcript is not None:
            main.transcript.append_event(
                "resumed", {"from": session_id, "messages": list(main.history)}
            )
