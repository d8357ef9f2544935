"""The parent conversation's turns: a prompt's turn (pending notifications read with it),
the turn that answers notifications, compaction, resuming an earlier session's
conversation and starting a new one; and what the parent's own requests cost.

Each turn first reads the settings files and starts the MCP servers, then takes the
session's settings as they stand (`agent_setup.py`); the agent listing is told again
whenever it changed or left the conversation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from ...messages_api.usage import Usage
from ..config.agent_definitions import AgentScan, agent_listing
from ..config.hooks import Hooks
from ..config.settings import hook_trust, read_settings
from ..errors import UsageError
from ..events import Compacted, LoopEvent, Stop, UsageReport
from ..history import last_assistant_text
from ..loop.compaction import compact
from ..loop.config import LoopState
from ..loop.loop import run_turn
from ..mcp.servers import McpServers
from ..model.budget import CostBudget
from ..model.timing import record_timing
from ..permissions.gate import PermissionGate
from ..tasks.notifications import CommandQueue, Priority
from ..tools.base import ToolSet
from ..transcripts.store import TranscriptStore
from ..workers.configs import with_mcp_tools
from ..workers.workers import AgentRun
from .agent_setup import AgentContexts
from .responder import Responder
from .turn_lock import TurnLock
from .turn_result import fold_turn, replay

__all__ = ["ParentHost", "ParentTurns"]


class ParentHost(Protocol):
    """What the parent's turns read of their session (`Session` is one), at the time of use;
    a turn sets its `hooks` (from the settings files) and `tools` (the MCP tools joined)."""

    workdir: Path
    home: Path
    session_id: str
    gate: PermissionGate
    hooks: Hooks
    mcp: McpServers
    tools: ToolSet
    named_tools: ToolSet
    main: AgentRun
    contexts: AgentContexts
    responder: Responder
    budget: CostBudget
    queue: CommandQueue
    store: TranscriptStore | None

    def agent_scan(self) -> AgentScan: ...
    def check_prompt(self, text: str) -> str | None: ...
    def say_prompt_size(self, text: str, **where: Any) -> None: ...


class ParentTurns:
    """Runs the parent's turns one at a time (`lock`) and keeps their usage and cost."""

    def __init__(
        self,
        host: ParentHost,
        *,
        lock: TurnLock,
        changed: asyncio.Event,
        on_cost: Callable[[], None],
    ) -> None:
        self.host = host
        self.lock = lock
        self.changed = changed
        """Set when a turn ends (the session may have become idle)."""
        self.on_cost = on_cost
        """Called after each of the parent's requests is charged (the budget is enforced)."""
        self.usage = Usage()
        self.cost = 0.0
        self.listed: str | None = None  # the agent listing the parent was last told

    def charge(self, usage: Usage, cost_usd: float) -> None:
        """A request made for the parent (its own, or its web tools')."""
        self.usage = self.usage + usage
        self.cost += cost_usd

    async def stream(self, prompt: str, *, size_said: bool = False) -> AsyncIterator[LoopEvent]:
        """A prompt's turn (`Session.stream`)."""
        host = self.host
        if not isinstance(prompt, str) or not prompt.strip():
            raise UsageError("The prompt is empty: write what the agent should do.")
        host.budget.check("The turn was")
        if size_said:  # the caller said its size; one that cannot fit is refused all the same
            host.check_prompt(prompt)
        else:
            host.say_prompt_size(prompt)
        try:
            async with self.lock.turn("next"):  # before an automatic answer that waits
                # what waits to be read at the next opportunity goes with the prompt; a task's
                # end too, unless the parent answers it by itself after this turn (auto_respond):
                # none waits unread
                upto: Priority = "next" if host.responder.will_answer() else "later"
                commands = host.queue.drain("main", upto)
                host.responder.note_read(commands)
                texts = [c.text for c in commands]
                seen: list[LoopEvent] = []
                try:
                    async for event in self.turn([*texts, prompt], prompt):
                        if commands:
                            seen.append(event)
                        yield event
                finally:
                    if commands:  # delivered like the parent's own answers to notifications
                        host.responder.answered(commands, await fold_turn(replay(seen)))
        finally:
            host.responder.kick()  # the notifications it left: answered now

    async def load_settings(self) -> dict[str, Any]:
        """The settings files read again and applied (`Session.load_settings`)."""
        host = self.host
        read = await asyncio.to_thread(read_settings, host.workdir, host.home)
        host.gate.apply_settings(read)
        host.hooks = Hooks(
            read.hooks,
            workdir=host.workdir,
            session_id=host.session_id,
            lines=host.hooks.lines,
            trust=hook_trust(read),
            said=host.hooks.said,
        )
        for entry in read.unapproved_hooks:  # the project's, not approved: said once each
            host.hooks.not_approved(entry)
        return host.gate.summary()

    async def turn(self, texts: list[str], prompt: str | None = None) -> AsyncIterator[LoopEvent]:
        """One parent turn whose user message is `texts` (the caller holds the lock)."""
        host = self.host
        main = host.main
        await self.load_settings()
        await host.mcp.start()
        self.sync_mcp_tools()
        main.config = host.contexts.parent_config()
        if prompt is not None and host.hooks.has("UserPromptSubmit"):
            said = await host.hooks.run("UserPromptSubmit", {"agent_id": "main", "prompt": prompt})
            if said.blocked:
                raise UsageError(f"A UserPromptSubmit hook blocked the prompt: {said.reason}")
            texts = [*texts, *said.context]
        blocks = [{"type": "text", "text": t} for t in texts]
        listing = await asyncio.to_thread(self.agent_listing)  # reads the agent files
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
                        self.on_cost()
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
                ended = stop.reason == "end_turn" and not host.budget.reached()
                feedback = await host.hooks.stop_check(
                    "Stop", about, None, blocked=blocked, may_go_on=ended
                )
                if feedback is None:
                    yield replace(stop, turns=requests)
                    return
                blocked += 1
                message = {"role": "user", "content": [{"type": "text", "text": feedback}]}
                main.state.append(main.history, message)
        finally:
            self.changed.set()

    def sync_mcp_tools(self) -> None:
        """The MCP tools connected now join the parent's tools (`with_mcp_tools`)."""
        tools = with_mcp_tools(self.host.tools, self.host.mcp.tools())
        if tools is not None:
            self.host.tools = tools

    def agent_listing(self) -> str | None:
        """The named agents as the model is told them (None without the Agent tool). Files
        that do not load are left out here (each said once); starting one reports its
        error. Tools an agent's file names that it does not get here are said."""
        host = self.host
        if host.tools.get("Agent") is None:
            return None
        available = [*host.tools.names(), *host.named_tools.names()]
        return agent_listing(host.agent_scan().agents, available)

    def history_replaced(self, messages: list[dict[str, Any]], data: dict[str, Any]) -> None:
        """The parent's history was compacted: on disk, and the agent listing told again if
        its message was dropped."""
        transcript = self.host.main.transcript
        if transcript is not None:
            transcript.append_event("compacted", {**data, "messages": messages})
        if self.listed is not None and not any(
            self.listed in str(m.get("content")) for m in messages
        ):
            self.listed = None

    def reset(self) -> None:
        """A new parent conversation (`Session.reset`)."""
        main = self.host.main
        main.history.clear()
        self.listed = None
        on_message = main.state.on_message
        main.state = LoopState(
            on_message=on_message, on_history_replaced=main.state.on_history_replaced
        )
        if main.transcript is not None:
            main.transcript.append_event("reset")

    async def compact(self, keep_turns: int | None = None) -> Compacted:
        """The parent conversation compacted now (`Session.compact`)."""
        host = self.host
        if keep_turns is not None and (isinstance(keep_turns, bool) or keep_turns < 1):
            raise UsageError(f"keep_turns must be 1 or more; got {keep_turns!r}.")
        host.budget.check("The compaction was")
        async with self.lock:
            main = host.main
            main.config = host.contexts.parent_config()
            result: Compacted | None = None
            async for event in compact(
                main.config, main.history, main.state, keep_turns=keep_turns
            ):
                if isinstance(event, UsageReport):
                    self.charge(event.usage, event.cost_usd)
                elif isinstance(event, Compacted):
                    result = event
            self.changed.set()
        assert result is not None
        return result

    async def resume(self, session_id: str) -> int:
        """An earlier session's parent conversation continued (`Session.resume`)."""
        host = self.host
        if host.store is None:
            raise UsageError("Resuming needs transcripts (Session(transcripts=...)).")
        folder = host.store.root / session_id
        loaded = await host.store.aload("main", folder)
        async with self.lock:  # not in the middle of a turn
            main = host.main
            main.history[:] = loaded.messages
            ends = [i for i, m in enumerate(main.history) if m["role"] == "user"]
            main.state.previous_end = ends[-1] if ends else None
            self.listed = None
            if main.transcript is not None:
                main.transcript.append_event(
                    "resumed", {"from": session_id, "messages": list(main.history)}
                )
        return len(main.history)
