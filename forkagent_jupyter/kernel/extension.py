"""Loading the extension into a kernel and binding the runtime to it.

`%load_ext forkagent_jupyter` is cheap: it registers the magics, the input transformer and the
`forkagent` comm target. The Session (and the anthropic SDK, ipywidgets) are created on first
use, on the kernel's own event loop. `%unload_ext` stops the workers; `%reload_ext` keeps the
session as it is.

Settings are the traitlets Configurable `ForkAgent` (`%config ForkAgent.model = "..."`, or
`c.ForkAgent.model` in ipython_config.py).
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from IPython.core.error import UsageError

from ..runtime import guard_kernel
from .comm.protocol import State
from .magics.agent_magics import AgentMagics, transform_cell
from .magics.turn_actions import TurnActions
from .magics.view_actions import TaskViews
from .magics.worker_actions import WorkerActions
from .settings import BACKEND_CHOICES, ForkAgent, forwarded

if TYPE_CHECKING:
    from IPython.core.interactiveshell import ExecutionInfo, ExecutionResult, InteractiveShell
    from traitlets.config import Configurable
    from traitlets.utils.bunch import Bunch

__all__ = [
    "BACKEND_CHOICES",
    "ForkAgent",
    "KernelAgent",
    "load",
    "unload",
]


class KernelAgent(TurnActions, WorkerActions, TaskViews):
    """The kernel side: one Session per kernel (core.py), the magics' actions
    (magics/turn_actions.py, magics/worker_actions.py, magics/view_actions.py), and what ties
    them to the shell: the magics and the input transformer, the cell events, the settings'
    changes."""

    def __init__(self, shell: InteractiveShell) -> None:
        super().__init__(shell)
        self.reloading = False  # `%reload_ext` is under way: the next load keeps this agent
        self.bridge.snapshot = self._snapshot
        self.settings.observe(self._setting_changed)

    def _setting_changed(self, change: Bunch) -> None:
        """`%config ForkAgent.X = ...` after the session started goes to
        `Session.configure`, which applies it at once (runtime/session/options.py says where each
        lands), also when the value is the one the setting had (the person's permission mode
        wins over a settings file's); a value the session refuses is said in one line (the
        `%config` cell fails with it) and the old one stays."""
        from ..runtime import AgentError

        name, session = change["name"], self._session
        if session is None or not forwarded(self.settings, name):
            return  # read when the session is made, or the kernel's own
        try:
            session.configure(**{name: change["new"]})
        except AgentError as exc:
            self.settings.refuse(f"ForkAgent.{name}: {exc}", usage=False)
            self.set_quietly(name, change["old"])
        self.ui.tasks_changed()  # the Tasks panel shows the budget

    def set_quietly(self, name: str, value: object) -> None:
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
        if self.settings not in _configurables(self.shell):
            _configurables(self.shell).append(self.settings)
        self.shell.register_magics(AgentMagics(self.shell, self))
        self._wrap_config_magic()
        if transform_cell not in self.shell.input_transformers_cleanup:
            self.shell.input_transformers_cleanup.append(transform_cell)
        self.shell.user_ns["__forkagent__"] = self
        self.shell.user_ns_hidden["__forkagent__"] = self
        self.bridge.register()
        self.shell.events.register("pre_run_cell", self._before_cell)
        self.shell.events.register("post_run_cell", self._after_cell)

    def _wrap_config_magic(self) -> None:
        """IPython's `%config`, with a refusal of ours failing the cell: IPython's own catches
        every error of a configurable and only logs it, so "Run all" and papermill went on
        past a refused setting. The line said is the same; the cell now ends in error."""
        manager = self.shell.magics_manager
        line_magics = manager.magics["line"]
        find = getattr(manager, "find", None)  # IPython 9: the magic itself, not its stand-in
        original = _unwrapped(find("line", "config") if find else line_magics.get("config"))
        if original is None:
            return
        settings = self.settings

        @functools.wraps(original)
        def config(line: str = "") -> object:
            with settings.collecting() as refused:
                result = original(line)
            if refused:
                raise UsageError("\n".join(refused))
            return result

        config.__dict__[_ORIGINAL] = original
        line_magics["config"] = config

    def _unwrap_config_magic(self) -> None:
        line_magics = self.shell.magics_manager.magics["line"]
        original = _unwrapped(line_magics.get("config"))
        if original is not None:
            line_magics["config"] = original

    def _mode_in_force(self) -> None:
        """`%config ForkAgent.permission_mode` shows the mode in force: a settings file's
        `defaultMode` read at a turn included (a `%config` of the person's still wins)."""
        if self._session is not None and self._session.gate.mode != self.settings.permission_mode:
            self.set_quietly("permission_mode", self._session.gate.mode)

    def _before_cell(self, info: ExecutionInfo) -> None:
        self.cell_started(str(getattr(info, "raw_cell", "") or ""))
        self._mode_in_force()
        self.terminal.cell_started()  # approvals waiting are asked on stdin (a console)
        if self._ui is not None:
            self._ui.hub.in_cell = True
            self._ui.repeat_headless_notices()
        if self._session is not None:  # the cell may change the namespace: new snapshots
            self._session.compute.namespace_changed()

    def _after_cell(self, _result: ExecutionResult) -> None:
        self.cell_ended()
        self._mode_in_force()
        self.terminal.cell_ended()
        if self._ui is not None:
            self._ui.hub.settle()

    def uninstall(self) -> None:
        magics = self.shell.magics_manager.magics
        for name in ("agent", "fork", "send"):
            magics["cell"].pop(name, None)
        for name in (
            "agent",
            "commands",
            "fork",
            "send",
            "tasks",
            "stop",
            "bg",
            "compact",
            "notifications",
            "permissions",
            "mcp",
            "hooks",
            "trust",
        ):
            magics["line"].pop(name, None)
        if transform_cell in self.shell.input_transformers_cleanup:
            self.shell.input_transformers_cleanup.remove(transform_cell)
        self._unwrap_config_magic()
        while self.settings in _configurables(self.shell):  # a later load's would say it again
            _configurables(self.shell).remove(self.settings)
        self.shell.user_ns.pop("__forkagent__", None)
        self.shell.user_ns_hidden.pop("__forkagent__", None)
        self.bridge.unregister()
        with contextlib.suppress(ValueError):
            self.shell.events.unregister("pre_run_cell", self._before_cell)
            self.shell.events.unregister("post_run_cell", self._after_cell)
        if self._session is not None:
            session, self._session = self._session, None
            self._spawn(session.aclose())


_ORIGINAL = "_forkagent_wraps"


def _unwrapped(magic: Callable[..., object] | None) -> Callable[..., object] | None:
    """IPython's `%config` function under our wrapper (or as it is, when not wrapped)."""
    return getattr(magic, _ORIGINAL, magic)


def _configurables(shell: InteractiveShell) -> list[Configurable]:
    """The configurables `%config` lists and sets. IPython's annotation of the list is inferred
    from its first item, the shell; it holds any Configurable."""
    return shell.configurables  # type: ignore[return-value]


NEEDS_KERNEL = (
    "forkagent_jupyter: not loaded - it needs a Jupyter kernel (a notebook, JupyterLab or "
    "`jupyter console`), whose event loop keeps running between cells so that workers run in "
    "the background; terminal IPython runs its loop only inside a cell. In a plain Python "
    "program, use forkagent_jupyter.Session with asyncio."
)


def load(shell: InteractiveShell) -> KernelAgent | None:
    existing = shell.user_ns.get("__forkagent__")
    if isinstance(existing, KernelAgent):
        if existing.reloading:  # `%reload_ext`: the same session goes on (see `unload`)
            existing.reloading = False
            print(RELOADED, file=sys.stderr)
        return existing
    kernel = getattr(shell, "kernel", None)  # ipykernel's shell has one
    if kernel is None:  # terminal IPython: refuse before anything
        print(NEEDS_KERNEL, file=sys.stderr)
        return None
    why = guard_kernel()  # the kernel's memory out of reach of the programs it starts
    if why is not None:
        kernel.log.warning("forkagent: %s", why)
    agent = KernelAgent(shell)
    agent.install()
    print(loaded_line(agent.settings), file=sys.stderr)
    if not labextension_installed():
        print(NO_LABEXTENSION, file=sys.stderr)
    return agent


NO_LABEXTENSION = (
    "forkagent: the JupyterLab extension is not installed (an install from source without "
    "Node): notifications and answers show in the cell that started the work instead of as "
    "new cells. A wheel carries the extension; from source it needs Node 20."
)


def labextension_installed(places: list[Path] | None = None) -> bool:
    """Whether JupyterLab can find this package's extension: in one of Jupyter's
    `labextensions` folders (`places`; default: Jupyter's search path), as a wheel or an
    editable install puts it."""
    if places is None:
        from jupyter_core.paths import jupyter_path

        places = [Path(p) for p in jupyter_path("labextensions")]
    return any((place / "forkagent-jupyter" / "package.json").is_file() for place in places)


def loaded_line(settings: ForkAgent) -> str:
    """What `%load_ext` says: the model and backend the first turn will use (as the settings
    and the environment say now; `%config ForkAgent.model = ...` can still change them)."""
    import os

    from ..runtime import ConfigError, anthropic_client, default_model_name, mark_offline_announced

    model = settings.model or default_model_name()
    backend = settings.backend or os.environ.get("FORKAGENT_BACKEND") or ""
    if not backend:
        try:
            backend = "anthropic" if anthropic_client() is not None else ""
        except ConfigError:
            backend = "anthropic"  # a profile that does not load: the first turn says why
    if backend in ("", "offline"):
        mark_offline_announced()  # said here: not again at the first turn
        why = "no Anthropic credentials found; " if not backend else ""
        return (
            f"forkagent: loaded; {why}the offline model (deterministic, no network): it runs "
            "the ```python blocks and `py: ...` snippets of a prompt or directive, forks each "
            "`fork: ...` line and reports the output; it does not reason. Set "
            f"ANTHROPIC_API_KEY for Claude ({model})."
        )
    return f"forkagent: loaded; model {model} on the {backend} backend."


RELOADED = (
    "forkagent: reloaded; the session goes on: its workers, cards, rules and settings are "
    "kept (%unload_ext forkagent_jupyter then %load_ext forkagent_jupyter starts a new one)."
)


def unload(shell: InteractiveShell) -> None:
    """`%unload_ext`: the workers are stopped (one line says how many) and the magics go.
    Within `%reload_ext`, nothing: the `load` that follows keeps the same agent, so the session
    with its running workers, their cards, the rules given by `api.allow` and the settings
    stay as they were (a reload replaces only the package's top module, whose
    `load_ipython_extension` hands over to this one)."""
    existing = shell.user_ns.get("__forkagent__")
    if not isinstance(existing, KernelAgent):
        return
    if _reloading():
        existing.reloading = True
        return
    session = existing._session
    running = len(session.running()) if session is not None else 0
    existing.uninstall()
    if running:
        print(
            f"forkagent: unloaded; {running} running worker(s) stopped (their partial results "
            "are on their cards).",
            file=sys.stderr,
        )


def _reloading() -> bool:
    """Whether IPython's `%reload_ext` (`ExtensionManager.reload_extension`) is unloading: it
    calls the unload and then the load, in one go."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "reload_extension" and frame.f_globals.get("__name__", "").startswith(
            "IPython.core.extensions"
        ):
            return True
        frame = frame.f_back
    return False
