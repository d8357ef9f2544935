"""The magics that show tasks and what the session holds: `%tasks` (the table, `--wait`,
`--pull`, `--memory`, `--timeline`), `%notifications`, `%permissions`, `%mcp`, `%hooks`,
`%commands`, `%trust` (on `AgentCore`)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from IPython.core.error import UsageError
from IPython.display import display

from ..core import AgentCore, interruptible
from ..said import said_as
from .agent_magics import (
    commands_options,
    hooks_options,
    mcp_options,
    notifications_options,
    permissions_options,
    tasks_options,
    trust_options,
)

if TYPE_CHECKING:
    from ..views.timeline_view import TimelineView

__all__ = ["TaskViews"]


class TaskViews(AgentCore):
    """`%tasks` and its options, `%notifications`, `%permissions`, `%mcp`: each awaited, or
    started in the background where no await is possible (`start_*`)."""

    async def tasks_line(self, line: str) -> None:
        """An awaited `%tasks` line (any of its forms)."""
        await self.run_tasks(line)

    async def run_tasks(self, line: str) -> None:
        """An awaited `%tasks [IDS]`, `%tasks --wait [IDS]` or `%tasks --pull ID NAME...`
        line."""
        args = tasks_options(line)
        if args.timeline:
            await self.show_timeline(args.ids)
            return
        if args.memory:
            await self.show_memory(args.ids)
            return
        if args.pull:
            await self.pull(args.ids, args.trust)
        elif args.wait:
            await self.wait_tasks(args.ids)
        else:
            await self.show_tasks(args.ids)

    async def show_tasks(self, ids: list[str]) -> None:
        """`%tasks [IDS]`: the table; without ids, the last session's workers that a restart
        cut off are listed too, as interrupted (read on a thread, once)."""
        if not ids:
            await self.session.interrupted()
        self.tasks_table(ids)

    async def wait_tasks(self, ids: list[str]) -> None:
        try:
            async with interruptible():
                with said_as("%tasks"):
                    await self.session.wait(*ids)
                await self.session.idle() if not ids else None
                await self.ui.hub.drained()  # the cards' final states belong to this cell
        except asyncio.CancelledError:
            print("%tasks --wait: interrupted; the tasks keep running.")
            return
        display(self.ui.tasks_bundle(ids), raw=True)

    async def pull(self, args: list[str], trust: bool = False) -> None:
        """`%tasks --pull [--trust] ID NAME...`: copies of a worker's values, bound to the
        same names in the notebook's namespace."""
        from ...runtime import value_summary

        key, *names = args or [""]
        if not names:
            raise UsageError("%tasks --pull: usage: %tasks --pull <task id or name> NAME...")
        wrong = next((n for n in names if not n.isidentifier()), None)
        if wrong is not None:  # `'bad name'`: names are words, not quoted strings
            shown = wrong if len(wrong) <= 40 else wrong[:37] + "..."
            raise UsageError(f"%tasks --pull: {shown!r} is not a variable name")
        names = list(dict.fromkeys(names))  # each once
        with said_as("%tasks --pull"):
            task = self.session.task(key)
            values = await self.session.pull(task.id, *names, trust=trust)
        self.shell.user_ns.update(values)
        shown = ", ".join(f"{name} ({value_summary(values[name])})" for name in names)
        print(f"pulled from {task.name or task.id}: {shown}")

    def start_pull(self, args: list[str], trust: bool = False) -> asyncio.Task[None]:
        return self._start(self.pull(args, trust))

    async def show_memory(self, ids: list[str]) -> None:
        """`%tasks --memory [IDS]`: each live worker process's memory and what it holds."""
        from ...runtime import rollups_supported
        from ..views.memory_view import NOT_AVAILABLE, memory_bundle

        session = self.session
        with said_as("%tasks --memory"):
            asked = [session.task(key) for key in ids]
        if not await asyncio.to_thread(rollups_supported):
            print(NOT_AVAILABLE)
            return
        kernel, processes = await session.compute.process_memory()
        wanted = {t.id for t in asked}
        rows = []
        for process in processes:
            if wanted and process.agent_id not in wanted:
                continue
            task = session.registry.find(process.agent_id)
            label = (task.name or task.id) if task is not None else process.agent_id
            rows.append((label, task.status if task is not None else "?", process))
        shown = {p.agent_id for _, _, p in rows}
        missing = [
            f"{t.name or t.id}: no live process ({session.compute.no_process(t.id)})"
            for t in asked
            if t.id not in shown
        ]
        display(memory_bundle(kernel, rows, missing), raw=True)

    def start_memory(self, ids: list[str]) -> asyncio.Task[None]:
        return self._start(self.show_memory(ids))

    def start_wait(self, ids: list[str]) -> asyncio.Task[None]:
        return self._start(self.wait_tasks(ids))

    async def timeline(self, ids: list[str]) -> TimelineView:
        """The fan-out of `ids` (default: this session's, else the last one run) read from
        the transcripts and drawn, both on threads (views/timeline_view.py)."""
        from ..views.timeline_view import timeline_view

        return await timeline_view(self.session, ids)

    async def show_timeline(self, ids: list[str]) -> None:
        """`%tasks --timeline [IDS]`: the figure as a PNG (any frontend shows it), or as an
        interactive canvas where widgets render (views/timeline_canvas.py)."""
        from ..views.timeline_view import shown

        view = await self.timeline(ids)
        display(await shown(view, self.bridge.connected), raw=True)

    def start_timeline(self, ids: list[str]) -> asyncio.Task[None]:
        return self._start(self.show_timeline(ids))

    async def notifications_line(self, line: str) -> None:
        """An awaited `%notifications` line."""
        await self.replay(notifications_options(line).ids)

    async def replay(self, keys: list[str]) -> None:
        await self.ui.replay(keys)

    def start_replay(self, keys: list[str]) -> asyncio.Task[None]:
        return self._start(self.replay(keys))

    async def permissions_line(self, line: str) -> None:
        """An awaited `%permissions` line."""
        permissions_options(line)
        await self.show_permissions()

    async def show_permissions(self) -> None:
        from ...runtime import describe_settings

        print(describe_settings(await self.session.parent.load_settings()))

    def start_permissions(self) -> asyncio.Task[None]:
        return self._start(self.show_permissions())

    async def mcp_line(self, line: str) -> None:
        """An awaited `%mcp` line."""
        await self.show_mcp(mcp_options(line).name)

    async def show_mcp(self, approve: str | None = None) -> None:
        from ...runtime import describe_mcp_servers

        if approve is not None:
            with said_as("%mcp"):
                said = await self.session.mcp.approve(approve)
            print(said)
            return
        await self.session.mcp.start()
        print(describe_mcp_servers(self.session.mcp))

    def start_mcp(self, approve: str | None = None) -> asyncio.Task[None]:
        return self._start(self.show_mcp(approve))

    async def hooks_line(self, line: str) -> None:
        """An awaited `%hooks` line."""
        await self.show_hooks(hooks_options(line).approve is not None)

    async def show_hooks(self, approve: bool = False) -> None:
        from ...runtime import approve_hooks, describe_hooks, hooks_waiting

        session = self.session
        in_force, pending, trusted = await asyncio.to_thread(
            hooks_waiting, session.workdir, session.home, session.trusted
        )
        if not approve:
            print(describe_hooks(in_force, pending, trusted))
            return
        with said_as("%hooks"):
            said = await asyncio.to_thread(
                approve_hooks, session.workdir, [e.command for e in pending if e.runnable], trusted
            )
        print(said)

    def start_hooks(self, approve: bool) -> asyncio.Task[None]:
        return self._start(self.show_hooks(approve))

    async def commands_line(self, line: str) -> None:
        """An awaited `%commands` line."""
        commands_options(line)
        await self.show_commands()

    async def show_commands(self) -> None:
        """The commands and skills `/name` can run, read now (on a thread)."""
        from ...runtime import describe_commands

        print(describe_commands(await self.session.commands()))

    def start_commands(self) -> asyncio.Task[None]:
        return self._start(self.show_commands())

    async def trust_line(self, line: str) -> None:
        """An awaited `%trust` line."""
        await self.show_trust(trust_options(line).yes is not None)

    async def show_trust(self, record: bool = False) -> None:
        with said_as("%trust"):
            said = await (self.session.trust() if record else self.session.trust_report())
        print(said)

    def start_trust(self, record: bool) -> asyncio.Task[None]:
        return self._start(self.show_trust(record))

    def tasks_table(self, ids: list[str]) -> None:
        """The table (where no await is possible, with the interrupted workers only once
        `%tasks` has read them)."""
        with said_as("%tasks"):
            table = self.ui.tasks_bundle(ids)
        display(table, raw=True)
