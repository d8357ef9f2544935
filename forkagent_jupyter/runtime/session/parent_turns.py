"""The parent conversation's turns: a prompt's turn (pending notifications read with it; a
`/name` prompt runs that command, `commands.py`), the turn that answers notifications,
compaction, resuming an earlier session's conversation and starting a new one; and what the
parent's own requests cost.

Each turn first reads the settings files and starts the MCP servers, then takes the
session's settings as they stand (`agent_setup.py`); the agent listing is told again
whenever it changed or left the conversation."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...messages_api.shapes import JSON
from ...messages_api.usage import Usage
from ..config.agent_definitions import agent_listing, scan_agents
from ..config.hooks import Hooks
from ..config.settings import SettingsRead, hook_trust, read_settings
from ..config.trust import notice
from ..config.trust_asks import folder_asks
from ..errors import UsageError
from ..events import Compacted, LoopEvent, Stop, UsageReport
from ..history import Block, Message, last_assistant_text
from ..loop.compaction import compact
from ..loop.config import AgentConfig, LoopState
from ..loop.loop import run_turn
from ..mcp.servers import McpServers
from ..model.budget import CostBudget
from ..model.timing import record_timing
from ..tasks.notifications import CommandQueue, Priority
from ..transcripts.store import TranscriptStore
from ..workers.configs import with_mcp_tools
from ..workers.workers import AgentRun, Workers
from .agent_setup import AgentContexts
from .commands import Prepared, find_invocation, prepare_command, run_fork_command
from .responder import Responder
from .turn_lock import TurnLock
from .turn_result import fold_turn, replay

__all__ = ["ParentTurns"]

log = logging.getLogger(__name__)


class ParentTurns:
    """Runs the parent's turns one at a time (`lock`) and keeps their usage and cost."""

    def __init__(
        self,
        *,
        main: AgentRun,
        contexts: AgentContexts,
        responder: Responder,
        queue: CommandQueue,
        budget: CostBudget,
        mcp: McpServers,
        workers: Workers,
        workdir: Path,
        home: Path,
        session_id: str,
        lock: TurnLock,
        changed: asyncio.Event,
        on_cost: Callable[[], None],
        trusted: Callable[[], bool | None],
        check_prompt: Callable[[str], str | None],
        say_prompt_size: Callable[[str], None],
    ) -> None:
        self.main = main
        """The parent's own run: its history, config and transcript."""
        self.contexts = contexts
        """The parent's config, tools, gate and hooks (a turn replaces tools and hooks)."""
        self.responder = responder
        """The answers to notifications: a prompt's turn reads those that wait."""
        self.queue = queue
        self.budget = budget
        self.mcp = mcp
        self.workers = workers
        """Where a `context: fork` command's agent starts (`commands.py`)."""
        self.workdir = workdir
        self.home = home
        self.session_id = session_id
        self.lock = lock
        self.changed = changed
        """Set when a turn ends (the session may have become idle)."""
        self.on_cost = on_cost
        """Called after each of the parent's requests is charged (the budget is enforced)."""
        self.trusted = trusted
        self.check_prompt = check_prompt
        """A prompt's size: refused when it cannot fit; its line when it is large."""
        self.say_prompt_size = say_prompt_size
        """Whether the session was told the folder is trusted (`SessionOptions.trusted`; None:
        as `~/.claude.json` says), read at each use: `configure` may change it."""
        self.usage = Usage()
        self.cost = 0.0
        self.listed: str | None = None  # the agent listing the parent was last told
        self.read: SettingsRead | None = None  # the settings files as the last turn read them
        self.trust_said: str | None = None  # the last line said of a folder not trusted

    def charge(self, usage: Usage, cost_usd: float) -> None:
        """A request made for the parent (its own, or its web tools')."""
        self.usage = self.usage + usage
        self.cost += cost_usd

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
        if size_said:  # the caller said its size; one that cannot fit is refused all the same
            self.check_prompt(prompt)
        else:
            self.say_prompt_size(prompt)
        invocation = await asyncio.to_thread(find_invocation, prompt, self.workdir, self.home)
        try:
            async with self.lock.turn("next"):  # before an automatic answer that waits
                prepared: Prepared | None = None
                if invocation is not None:
                    events: list[LoopEvent] = []  # its shell lines' calls, as they ran
                    try:
                        prepared = await prepare_command(self, invocation, events)
                    except UsageError:
                        for event in events:
                            yield event
                        raise
                    for event in events:
                        yield event
                    if invocation.command.fork:
                        async for event in run_fork_command(self, prepared):
                            yield event
                        return
                # what waits to be read at the next opportunity goes with the prompt; a task's
                # end too, unless the parent answers it by itself after this turn
                # (auto_respond): none waits unread
                upto: Priority = "next" if self.responder.will_answer() else "later"
                commands = self.queue.drain("main", upto)
                self.responder.note_read(commands)
                texts = [c.text for c in commands]
                seen: list[LoopEvent] = []
                try:
                    said = prepared.texts() if prepared is not None else [prompt]
                    adjust = prepared.adjust if prepared is not None else None
                    async for event in self.turn([*texts, *said], prompt, adjust):
                        if commands:
                            seen.append(event)
                        yield event
                finally:
                    if commands:  # delivered like the parent's own answers to notifications
                        self.responder.answered(commands, await fold_turn(replay(seen)))
        finally:
            self.responder.kick()  # the notifications it left: answered now

    async def load_settings(self) -> dict[str, Any]:
        """Read the settings files again (on a thread) and apply their rules, default mode
        and additional directories (`config/settings.py`), as far as the folder's trust lets
        them; the rules in force, as `PermissionGate.summary` gives them. Done at the start of
        every parent turn."""
        contexts = self.contexts
        read = await asyncio.to_thread(read_settings, self.workdir, self.home, self.trusted())
        if read.trusted and self.read is not None and not self.read.trusted:
            await self.mcp.reconsider()  # trusted since: its approved servers start now
        self.read = read
        contexts.gate.apply_settings(read)
        contexts.hooks = Hooks(
            read.hooks,
            workdir=self.workdir,
            session_id=self.session_id,
            lines=contexts.hooks.lines,
            trust=hook_trust(read),
            said=contexts.hooks.said,
        )
        for entry in read.unapproved_hooks:  # the project's, not approved: said once each
            contexts.hooks.not_approved(entry)
        return contexts.gate.summary()

    async def say_trust(self) -> None:
        """In a folder the person does not trust whose files ask for something: one line
        saying what and how to trust it (a logged warning: in a kernel, a line in the cell),
        said again only when it changes."""
        read = self.read
        if read is None or read.trusted or read.trust is None:
            return
        asks = await asyncio.to_thread(folder_asks, self.workdir, self.home, read)
        line = notice(read.trust, asks)
        if line is not None and line != self.trust_said:
            log.warning("%s", line)
        self.trust_said = line

    async def turn(
        self,
        texts: list[str],
        prompt: str | None = None,
        adjust: Callable[[AgentConfig], AgentConfig] | None = None,
    ) -> AsyncIterator[LoopEvent]:
        """One parent turn whose user message is `texts` (the caller holds the lock);
        `adjust` changes the parent's config for this turn only (an inline command's)."""
        main = self.main
        await self.load_settings()
        await self.mcp.start()
        await self.say_trust()
        self.sync_mcp_tools()
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
                ended = stop.reason == "end_turn" and not self.budget.reached()
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

    def sync_mcp_tools(self) -> None:
        """The MCP tools connected now join the parent's tools (`with_mcp_tools`)."""
        tools = with_mcp_tools(self.contexts.tools, self.mcp.tools())
        if tools is not None:
            self.contexts.tools = tools

    def agent_listing(self) -> str | None:
        """The named agents as the model is told them (None without the Agent tool). Files
        that do not load are left out here (each said once); starting one reports its
        error. Tools an agent's file names that it does not get here are said."""
        contexts = self.contexts
        if contexts.tools.get("Agent") is None:
            return None
        available = [*contexts.tools.names(), *contexts.named_tools.names()]
        return agent_listing(scan_agents(self.workdir, self.home).agents, available)

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

    async def compact(self, keep_turns: int | None = None) -> Compacted:
        """The parent conversation compacted now (`Session.compact` checked `keep_turns` and
        the budget)."""
        async with self.lock:
            main = self.main
            main.config = self.contexts.parent_config(main)
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

    async def resume(self, store: TranscriptStore, session_id: str) -> int:
        """An earlier session's parent conversation continued (`Session.resume`), read from
        `store`."""
        folder = store.root / session_id
        loaded = await store.aload("main", folder)
        async with self.lock:  # not in the middle of a turn
            main = self.main
            main.history[:] = loaded.messages
            ends = [i for i, m in enumerate(main.history) if m["role"] == "user"]
            main.state.previous_end = ends[-1] if ends else None
            self.listed = None
            if main.transcript is not None:
                main.transcript.append_event(
                    "resumed", {"from": session_id, "messages": list(main.history)}
                )
        return len(main.history)
