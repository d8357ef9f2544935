"""Loading the extension into a kernel and binding the runtime to it.

`%load_ext forkagent_jupyter` is cheap: it registers the magics, the input transformer and the
`forkagent` comm target. The Session (and the anthropic SDK, ipywidgets) are created on first
use, on the kernel's own event loop. `%unload_ext` stops the workers.

Settings are the traitlets Configurable `ForkAgent` (`%config ForkAgent.model = "..."`, or
`c.ForkAgent.model` in ipython_config.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from argparse import Namespace
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.display import display

from .bridge import Bridge
from .interpolation import interpolate
from .magics import (
    AgentMagics,
    agent_options,
    compact_options,
    notifications_options,
    send_options,
    tasks_options,
    transform_cell,
)
from .protocol import State
from .settings import BACKEND_CHOICES, ForkAgent, fixed_settings, forwarded
from .terminal import TerminalAsk

if TYPE_CHECKING:
    from ..runtime.session import Session
    from .ui import KernelUI

__all__ = ["BACKEND_CHOICES", "ForkAgent", "KernelAgent", "load", "unload"]

WAKE_INTERVAL = 0.1


@contextlib.asynccontextmanager
async def interruptible() -> AsyncIterator[None]:
    """Keep the event loop waking up while a cell awaits, so an interrupt ends it at once.

    ipykernel turns SIGINT during an async cell into a callback that cancels the cell, but
    queues it without waking the loop: with nothing else to do (a slow first token, workers
    waiting for approval) the cell would only end at the loop's next event."""

    loop = asyncio.get_running_loop()
    timer: asyncio.TimerHandle | None = None

    def wake() -> None:
        nonlocal timer
        timer = loop.call_later(WAKE_INTERVAL, wake)

    wake()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()


class KernelAgent:
    """The kernel side: one Session per kernel, the cards, the bridge, the magics' actions."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.settings = ForkAgent(parent=shell)
        self.bridge = Bridge(getattr(shell, "kernel", None))
        self.terminal = TerminalAsk(getattr(shell, "kernel", None), lambda: self.bridge.connected)
        self._session: Session | None = None
        self._ui: KernelUI | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self.bridge.snapshot = self._snapshot
        self.settings.observe(self._setting_changed)

    def _setting_changed(self, change: Any) -> None:
        """`%config ForkAgent.X = ...` after the session started goes to
        `Session.configure`, which applies it at once (runtime/options.py says where each
        lands); a value the session refuses is said in one line and the old one stays."""
        from ..runtime.errors import AgentError

        name, session = change["name"], self._session
        if session is None or not forwarded(self.settings, name):
            return  # read when the session is made, or the kernel's own
        try:
            session.configure(**{name: change["new"]})
        except AgentError as exc:
            print(f"ForkAgent.{name}: {exc}", file=sys.stderr)
            self.set_quietly(name, change["old"])
        self.ui.tasks_changed()  # the Tasks panel shows the budget

    def set_quietly(self, name: str, value: Any) -> None:
        """Set a setting without passing it on to the session (it has it already)."""
        self.settings.unobserve(self._setting_changed)
        try:
            self.settings.set_trait(name, value)
        finally:
            self.settings.observe(self._setting_changed)

    def _snapshot(self) -> State:
        """What a connecting frontend is told: the tasks and pending approvals (none before
        the first use; the session is not created for this)."""
        if self._ui is None:
            return {"tasks": [], "approvals": [], "budget": None}
        return self._ui.snapshot()

    # -- lifecycle ---------------------------------------------------------------------------

    def install(self) -> None:
        self.shell.configurables.append(self.settings)
        self.shell.register_magics(AgentMagics(self.shell, self))
        if transform_cell not in self.shell.input_transformers_cleanup:
            self.shell.input_transformers_cleanup.append(transform_cell)
        self.shell.user_ns["__forkagent__"] = self
        self.shell.user_ns_hidden["__forkagent__"] = self
        self.bridge.register()
        self.shell.events.register("pre_run_cell", self._before_cell)
        self.shell.events.register("post_run_cell", self._after_cell)

    def _before_cell(self, _info: Any) -> None:
        self.terminal.cell_started()  # approvals waiting are asked on stdin (a console)
        if self._ui is not None:
            self._ui.hub.in_cell = True
            self._ui.repeat_headless_notices()
        if self._session is not None:  # the cell may change the namespace: new snapshots
            self._session.namespace_changed()

    def _after_cell(self, _result: Any) -> None:
        self.terminal.cell_ended()
        if self._ui is not None:
            self._ui.hub.settle()

    def uninstall(self) -> None:
        magics = self.shell.magics_manager.magics
        magics["cell"].pop("agent", None)
        for name in (
            "fork",
            "send",
            "tasks",
            "stop",
            "bg",
            "compact",
            "notifications",
            "permissions",
            "mcp",
        ):
            magics["line"].pop(name, None)
        if transform_cell in self.shell.input_transformers_cleanup:
            self.shell.input_transformers_cleanup.remove(transform_cell)
        self.shell.user_ns.pop("__forkagent__", None)
        self.shell.user_ns_hidden.pop("__forkagent__", None)
        self.bridge.unregister()
        with contextlib.suppress(ValueError):
            self.shell.events.unregister("pre_run_cell", self._before_cell)
            self.shell.events.unregister("post_run_cell", self._after_cell)
        if self._session is not None:
            session, self._session = self._session, None
            self._spawn(session.aclose())

    @property
    def session(self) -> Session:
        if self._session is None:
            from ..runtime.errors import ConfigError
            from .ui import KernelUI

            self._ui = KernelUI(self)
            try:
                self._session = self._ui.make_session()
            except ConfigError as exc:  # no key, a platform's extra missing: one line
                self._ui = None
                raise UsageError(f"forkagent: {exc}") from None
            for name in fixed_settings(self.settings):
                self.settings.freeze(
                    name,
                    f"the {name} cannot change once the session has started; %unload_ext "
                    "forkagent_jupyter then %load_ext forkagent_jupyter (or restart the "
                    "kernel) to use another",
                )
            self._resume_batches(self._session)
        return self._session

    def _resume_batches(self, session: Session) -> None:
        """Batches submitted before a restart are polled again (runtime/batch.py)."""
        from ..runtime.batch import resume_batches

        try:
            self._spawn(resume_batches(session))
        except RuntimeError:  # no event loop (a terminal IPython): nothing to resume into
            pass

    @property
    def ui(self) -> KernelUI:
        _ = self.session
        assert self._ui is not None
        return self._ui

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_event_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # -- %%agent -----------------------------------------------------------------------------

    async def run_cell(self, line: str, body: str) -> None:
        """An `%%agent` cell, awaited at top level: streams the answer into this cell."""
        await self.run_turn(agent_options(line), body)

    async def run_turn(self, opts: Namespace, body: str) -> None:
        """One `%%agent` turn with its parsed options."""
        prompt = interpolate(body, self.shell.user_ns)
        if not prompt.strip():
            raise UsageError("%%agent: the cell is empty; write what the agent should do.")
        self._within_budget("%%agent", "The turn was")
        if opts.new:
            self.session.reset()
        model, thinking = self.session.model, self.session.thinking
        if opts.think is not None:  # for this cell only
            from ..runtime.errors import UsageError as RuntimeUsageError

            try:
                self.session.thinking = opts.think
            except RuntimeUsageError as exc:
                raise UsageError(f"%%agent --think: {exc}") from None
        if opts.model:  # for this cell only
            self.session.model = opts.model
        try:
            async with interruptible():
                await self.ui.run_turn(prompt)
        finally:
            self.session.model = model
            self.session.thinking = thinking

    def start_cell(self, opts: Namespace, body: str) -> Any:
        """`%%agent` without an await (run_cell_magic from code): run in the background."""
        return self._spawn(self.run_turn(opts, body))

    def _within_budget(self, magic: str, what: str) -> None:
        from ..runtime.budget import BudgetError

        try:
            self.session.budget.check(what)
        except BudgetError as exc:
            raise UsageError(f"{magic}: {exc}") from None

    # -- workers -----------------------------------------------------------------------------

    def fork(
        self,
        directive: str,
        name: str | None = None,
        shared: bool = False,
        turns: int | None = None,
    ) -> Any:
        from ..runtime.errors import UsageError as RuntimeUsageError

        directive = interpolate(directive, self.shell.user_ns)
        self._within_budget("%fork", "The fork was")
        try:
            self.session.fork_now(
                directive, name=name, namespace="shared" if shared else None, turns=turns
            )
        except RuntimeUsageError as exc:
            raise UsageError(f"%fork: {exc}") from None
        # its card is shown by the session's task event (ui.KernelUI._on_task), once

    def fork_batch(self, template: str, opts: dict[str, Any]) -> None:
        """`%fork --batch --over NAME "... {item} ..."` (see batch_view.py)."""
        from .batch_view import start_batch

        if not (opts.get("batch") and opts.get("over")):
            raise UsageError("%fork: --batch and --over NAME go together")
        try:
            poll = float(opts.get("poll", 30.0))
        except ValueError:
            raise UsageError(
                f"%fork: --poll needs a number of seconds, not {opts['poll']!r}"
            ) from None
        if poll <= 0:
            raise UsageError("%fork: --poll needs a positive number of seconds")
        start_batch(
            self.session,
            self.shell.user_ns,
            template,
            str(opts["over"]),
            opts.get("name"),
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
        from ..runtime.errors import ConfigError
        from ..runtime.errors import UsageError as RuntimeUsageError

        try:
            reply = await self.session.send(to, text)
        except (RuntimeUsageError, ConfigError) as exc:  # one line, never a traceback
            raise UsageError(f"%send: {exc}") from None
        self.ui.show_card(self.session.task(to), note=reply)

    def send(self, to: str, message: str) -> Any:
        """`%send` where no await is possible: at once to an agent this session holds; one to
        resume from disk is resumed in the background (its handle returned)."""
        from ..runtime.errors import UsageError as RuntimeUsageError

        text = interpolate(message, self.shell.user_ns)
        try:
            reply = self.session.send_now(to, text)
        except RuntimeUsageError as exc:
            raise UsageError(f"%send: {exc}") from None
        if reply is None:
            return self._start(self.asend(to, text))
        self.ui.show_card(self.session.task(to), note=reply)
        return None

    def background(self, key: str) -> None:
        """`%bg ID`, the card's "Run in background" button, `api.background`."""
        from ..runtime.errors import UsageError as RuntimeUsageError

        try:
            task = self.session.background(key)
        except RuntimeUsageError as exc:
            raise UsageError(f"%bg: {exc}") from None
        print(
            f"%bg: {task.name or task.id} runs in the background; its result comes back as "
            "a notification."
        )

    def stop(self, key: str | None) -> None:
        from ..runtime.errors import UsageError as RuntimeUsageError

        if key is None:
            running = self.session.running()
            freed = [t for t in self.session.tasks if self.session.free_process(t.id)]
            if freed:
                print(f"%stop --all: freed the processes of {len(freed)} finished worker(s).")
            if not running:
                print("%stop --all: no task is running.")
                return
            print(
                f"%stop --all: stopping {len(running)} task(s); their notifications are shown "
                "here, not sent to the agent."
            )
            self._spawn(self.session.stop_all())
            return
        batch = self.session.batches.get(key)
        if batch is not None:  # a batched fan-out: cancel the batch, stop its forks
            self._spawn(batch.stop())
            return
        try:
            task = self.session.task(key)
        except RuntimeUsageError as exc:
            raise UsageError(f"%stop: {exc}") from None
        if task.done:
            if self.session.free_process(task.id):
                held = f" ({task.memory_mb:,.0f} MB)" if task.memory_mb is not None else ""
                print(f"%stop: {task.name or task.id} had finished; its process{held} was freed.")
                return
            raise UsageError(f"%stop: {task.name or task.id} is not running ({task.status}).")
        # at once, here: nothing is left to fail unseen in a background task
        self.session.stop_now(task.id)
        print(f"%stop: stopping {task.name or task.id}.")

    async def run_tasks(self, line: str) -> None:
        """An awaited `%tasks --wait [IDS]` or `%tasks --pull ID NAME...` line."""
        args = tasks_options(line)
        if args.timeline:
            await self.show_timeline(args.ids)
            return
        if args.memory:
            await self.show_memory(args.ids)
            return
        await (self.pull(args.ids, args.trust) if args.pull else self.wait_tasks(args.ids))

    async def wait_tasks(self, ids: list[str]) -> None:
        from ..runtime.errors import UsageError as RuntimeUsageError

        try:
            async with interruptible():
                try:
                    await self.session.wait(*ids)
                except RuntimeUsageError as exc:
                    raise UsageError(f"%tasks: {exc}") from None
                await self.session.idle() if not ids else None
                await self.ui.hub.drained()  # the cards' final states belong to this cell
        except asyncio.CancelledError:
            print("%tasks --wait: interrupted; the tasks keep running.")
            return
        display(self.ui.tasks_bundle(ids), raw=True)

    async def pull(self, args: list[str], trust: bool = False) -> None:
        """`%tasks --pull [--trust] ID NAME...`: copies of a worker's values, bound to the
        same names in the notebook's namespace."""
        from ..runtime.errors import UsageError as RuntimeUsageError
        from ..runtime.executors import PullError
        from ..runtime.executors.child import value_summary

        key, *names = args or [""]
        if not names:
            raise UsageError("%tasks --pull: usage: %tasks --pull <task id or name> NAME...")
        try:
            task = self.session.task(key)
            values = await self.session.pull(task.id, *names, trust=trust)
        except (RuntimeUsageError, PullError) as exc:
            raise UsageError(f"%tasks --pull: {exc}") from None
        self.shell.user_ns.update(values)
        shown = ", ".join(f"{name} ({value_summary(values[name])})" for name in names)
        print(f"pulled from {task.name or task.id}: {shown}")

    async def compact(self, args: str) -> None:
        """`%compact [--keep N]`: compact the parent conversation now and show what changed."""
        from ..runtime.errors import UsageError as RuntimeUsageError

        keep: int | None = compact_options(args).keep
        if keep is not None and keep < 1:
            raise UsageError(f"%compact: --keep needs a number of turns >= 1, not {keep}")
        self._within_budget("%compact", "The compaction was")
        try:
            async with interruptible():
                event = await self.session.compact(keep)
        except RuntimeUsageError as exc:
            raise UsageError(f"%compact: {exc}") from None
        self.ui.show_compaction(event)

    def start_compact(self, args: str) -> Any:
        return self._start(self.compact(args))

    def start_pull(self, args: list[str], trust: bool = False) -> Any:
        return self._start(self.pull(args, trust))

    async def show_memory(self, ids: list[str]) -> None:
        """`%tasks --memory [IDS]`: each live worker process's memory and what it holds."""
        from ..runtime.errors import UsageError as RuntimeUsageError
        from ..runtime.executors.memory import rollups_supported
        from .memory_view import NOT_AVAILABLE, memory_bundle

        session = self.session
        try:
            asked = [session.task(key) for key in ids]
        except RuntimeUsageError as exc:
            raise UsageError(f"%tasks --memory: {exc}") from None
        if not await asyncio.to_thread(rollups_supported):
            print(NOT_AVAILABLE)
            return
        kernel, processes = await session.process_memory()
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
            f"{t.name or t.id}: no live process ({session.no_process(t.id)})"
            for t in asked
            if t.id not in shown
        ]
        display(memory_bundle(kernel, rows, missing), raw=True)

    def start_memory(self, ids: list[str]) -> Any:
        return self._start(self.show_memory(ids))

    def start_wait(self, ids: list[str]) -> Any:
        return self._start(self.wait_tasks(ids))

    async def timeline(self, ids: list[str]) -> Any:
        """The fan-out of `ids` (default: this session's, else the last one run) read from
        the transcripts and drawn, both on threads (timeline_view.py)."""
        from .timeline_view import timeline_view

        return await timeline_view(self.session, ids)

    async def show_timeline(self, ids: list[str]) -> None:
        """`%tasks --timeline [IDS]`: the figure as a PNG (any frontend shows it), or as an
        interactive canvas where widgets render (timeline_canvas.py)."""
        from .timeline_view import shown

        view = await self.timeline(ids)
        display(await shown(view, self.bridge.connected), raw=True)

    def start_timeline(self, ids: list[str]) -> Any:
        return self._start(self.show_timeline(ids))

    async def notifications_line(self, line: str) -> None:
        """An awaited `%notifications` line."""
        await self.replay(notifications_options(line).ids)

    async def replay(self, keys: list[str]) -> None:
        await self.ui.replay(keys)

    def start_replay(self, keys: list[str]) -> Any:
        return self._start(self.replay(keys))

    async def permissions_line(self, line: str) -> None:
        """An awaited `%permissions` line."""
        from .magics import permissions_options

        permissions_options(line)
        await self.show_permissions()

    async def show_permissions(self) -> None:
        from ..runtime.settings import describe

        print(describe(await self.session.load_settings()))

    def start_permissions(self) -> Any:
        return self._start(self.show_permissions())

    async def mcp_line(self, line: str) -> None:
        """An awaited `%mcp` line."""
        from .magics import mcp_options

        mcp_options(line)
        await self.show_mcp()

    async def show_mcp(self) -> None:
        from ..runtime.mcp_servers import describe

        await self.session.mcp.start()
        print(describe(self.session.mcp))

    def start_mcp(self) -> Any:
        return self._start(self.show_mcp())

    def _start(self, work: Any) -> asyncio.Task[Any]:
        """A magic's awaitable work, where no await is possible: started in the background
        (its output goes to this cell); a UsageError it meets is printed there."""

        async def run() -> None:
            try:
                await work
            except UsageError as exc:
                print(f"UsageError: {exc}", file=sys.stderr)

        return self._spawn(run())

    def tasks_table(self, ids: list[str]) -> None:
        from ..runtime.errors import UsageError as RuntimeUsageError

        try:
            table = self.ui.tasks_bundle(ids)
        except RuntimeUsageError as exc:
            raise UsageError(f"%tasks: {exc}") from None
        display(table, raw=True)


NEEDS_KERNEL = (
    "forkagent_jupyter: not loaded - it needs a Jupyter kernel (a notebook, JupyterLab or "
    "`jupyter console`), whose event loop keeps running between cells so that workers run in "
    "the background; terminal IPython runs its loop only inside a cell. In a plain Python "
    "program, use forkagent_jupyter.Session with asyncio."
)


def load(shell: Any) -> KernelAgent | None:
    existing = shell.user_ns.get("__forkagent__")
    if isinstance(existing, KernelAgent):
        return existing
    if getattr(shell, "kernel", None) is None:  # terminal IPython: refuse before anything
        print(NEEDS_KERNEL, file=sys.stderr)
        return None
    agent = KernelAgent(shell)
    agent.install()
    print(loaded_line(agent.settings), file=sys.stderr)
    return agent


def loaded_line(settings: ForkAgent) -> str:
    """What `%load_ext` says: the model and backend the first turn will use (as the settings
    and the environment say now; `%config ForkAgent.model = ...` can still change them)."""
    import os

    from ..runtime import backends
    from ..runtime.credentials import anthropic_client
    from ..runtime.errors import ConfigError
    from ..runtime.model import default_model_name

    model = settings.model or default_model_name()
    backend = settings.backend or os.environ.get("FORKAGENT_BACKEND") or ""
    if not backend:
        try:
            backend = "anthropic" if anthropic_client() is not None else ""
        except ConfigError:
            backend = "anthropic"  # a profile that does not load: the first turn says why
    if backend in ("", "offline"):
        backends.mark_offline_announced()  # said here: not again at the first turn
        why = "no Anthropic credentials found; " if not backend else ""
        return (
            f"forkagent: loaded; {why}the offline model (deterministic, no network): it runs "
            "the ```python blocks and `py: ...` snippets of a prompt or directive, forks each "
            "`fork: ...` line and reports the output; it does not reason. Set "
            f"ANTHROPIC_API_KEY for Claude ({model})."
        )
    return f"forkagent: loaded; model {model} on the {backend} backend."


def unload(shell: Any) -> None:
    existing = shell.user_ns.get("__forkagent__")
    if isinstance(existing, KernelAgent):
        existing.uninstall()
