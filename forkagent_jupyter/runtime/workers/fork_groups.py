"""Cache-aware fan-out: forks started from the same point of a parent's history form a group.

The first one to reach the model leads; the others wait until the leader's response has
started (only then is its cache write readable), so N siblings cost one write and N-1 reads
even when the parent's cache has expired. A leader that ends before its response started
hands the lead on at once; one that waits for rate-limit room keeps its siblings waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from ..history import Message
from .agent_run import AgentRun

__all__ = ["LEADER_WAIT_SECONDS", "ForkGroup", "ForkGroups"]

LEADER_WAIT_SECONDS = 60.0


@dataclass(eq=False)
class ForkGroup:
    anchor: object = None
    leader: str | None = None
    started: asyncio.Event = field(default_factory=asyncio.Event)
    handoff: asyncio.Event = field(default_factory=asyncio.Event)  # the leader left, unstarted


class ForkGroups:
    """The fork groups of one session, by the point of history they start from."""

    def __init__(self, rate_waiting: Callable[[str | None], bool]) -> None:
        self._groups: dict[tuple[int, int], ForkGroup] = {}
        self._rate_waiting = rate_waiting  # whether that agent waits for rate-limit room

    def group_for(self, source: list[Message]) -> ForkGroup:
        """The group of forks that start from the end of `source`."""
        anchor = source[-1] if source else None
        key = (id(anchor) if source else 0, len(source))
        group = self._groups.get(key)
        if group is None or group.anchor is not anchor:
            group = self._groups[key] = ForkGroup(anchor=anchor)
        return group

    def schedule(self, run: AgentRun, group: ForkGroup) -> None:
        """Hold every sibling but the first until the first one's response has started."""

        def leader_ended(_runner: object) -> None:
            """A leader that ends (fails, is stopped) before its response started hands the
            lead to a waiting sibling at once, instead of holding them all until the wait
            runs out."""
            if group.leader == run.id and not group.started.is_set():
                group.leader = None
                left, group.handoff = group.handoff, asyncio.Event()
                left.set()

        async def hold() -> bool:
            """Wait for the lead's response to start (or lead); whether it waited."""
            loop = asyncio.get_running_loop()
            deadline = loop.time() + LEADER_WAIT_SECONDS
            waited = False
            while not group.started.is_set():
                if group.leader is None:  # first, or the leader ended without a response
                    group.leader = run.id
                    run.state.on_first_response_start = group.started.set
                    current = asyncio.current_task()
                    if current is not None:
                        current.add_done_callback(leader_ended)
                    return waited
                remaining = deadline - loop.time()
                if remaining <= 0 and self._rate_waiting(group.leader):
                    deadline, remaining = loop.time() + 1.0, 1.0  # its wait is not a failure
                if remaining <= 0:
                    return waited
                waited = True
                # not wait_for: on Python < 3.12 it can swallow a cancel (a stop) that arrives
                # as the leader's response starts
                started = asyncio.ensure_future(group.started.wait())
                handoff = asyncio.ensure_future(group.handoff.wait())
                try:
                    await asyncio.wait(
                        {started, handoff}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    started.cancel()
                    handoff.cancel()
            return waited

        run.state.before_first_request = hold
