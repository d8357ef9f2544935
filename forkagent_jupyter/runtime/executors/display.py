"""Where displays and figures of agent code go.

IPython's `display()` (and matplotlib's inline `plt.show()`, which calls it) publishes through
the shell's display publisher. Agent code must not publish into whatever cell runs now: the
parent's displays stay in its own cell, a worker's go to its card. This module hooks the
publisher without importing IPython (it uses the shell only when one is loaded), and turns
figures left open by a call into PNG displays, so a figure shows without `plt.show()`.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import io
import os
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Protocol

from .base import Display

__all__ = [
    "DisplayRouter",
    "Shell",
    "flush_figures",
    "ipython_shell",
    "open_figures",
    "worker_backend",
]

Route = Callable[[Display], bool]
"""Takes a display of the routed thread; True if it consumed it (else it is shown as usual)."""


class Publisher(Protocol):
    """What is used of IPython's display publisher: its methods, hooked or replaced."""

    publish: Callable[..., None]
    clear_output: Callable[..., None]


class Formatter(Protocol):
    """IPython's display formatter: a value's MIME bundle and its metadata."""

    def format(self, obj: object) -> tuple[Mapping[str, object], Mapping[str, object]]: ...


class Shell(Protocol):
    """What is used of IPython's running shell (IPython is never imported here)."""

    display_pub: Publisher
    display_formatter: Formatter
    _showtraceback: Callable[..., None]


def ipython_shell() -> Shell | None:
    """The running IPython shell, or None (IPython not loaded or no shell made)."""
    module = sys.modules.get("IPython.core.interactiveshell")
    if module is None:
        return None
    cls = module.InteractiveShell
    shell: Shell | None = cls.instance() if cls.initialized() else None
    return shell


def open_figures() -> set[int]:
    """Numbers of the matplotlib figures open now (none if pyplot is not in use)."""
    plt = sys.modules.get("matplotlib.pyplot")
    return set(plt.get_fignums()) if plt is not None else set()


def flush_figures(
    publish: Callable[[Display], None], before: set[int], limit: int | None = None
) -> int:
    """Publish every figure opened since `before` as a PNG display (at most `limit`; the
    others are closed undrawn), and close it. Returns how many were left out."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return 0
    left_out = 0
    for number in plt.get_fignums():
        if number in before:
            continue
        figure = plt.figure(number)
        if limit is not None and limit <= 0:
            left_out += 1
            plt.close(figure)
            continue
        if limit is not None:
            limit -= 1
        buffer = io.BytesIO()
        try:
            figure.savefig(buffer, format="png", bbox_inches="tight")
        except Exception as exc:  # a figure that cannot draw: say so, keep the others
            publish(Display({"text/plain": f"<figure {number}: could not be drawn: {exc}>"}))
        else:
            data = base64.b64encode(buffer.getvalue()).decode("ascii")
            publish(Display({"image/png": data, "text/plain": repr(figure)}))
        plt.close(figure)
    return left_out


def worker_backend() -> None:
    """In a process forked from the kernel: figures are drawn with a non-interactive backend
    whatever the kernel uses (ipympl's and Qt's figures need the kernel's frontend), and
    the figures the kernel had open are not the worker's (they stay the kernel's)."""
    backend = "agg"
    with contextlib.suppress(ImportError, ValueError):  # found, not imported: that is slow
        if importlib.util.find_spec("matplotlib_inline") is not None:
            backend = "module://matplotlib_inline.backend_inline"  # plt.show() displays
    os.environ["MPLBACKEND"] = backend
    helpers = sys.modules.get("matplotlib._pylab_helpers")
    if helpers is not None:
        helpers.Gcf.figs.clear()  # forgotten here, without closing the kernel's widgets
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.switch_backend(backend)
    elif (matplotlib := sys.modules.get("matplotlib")) is not None:
        matplotlib.rcParams["backend"] = backend


class DisplayRouter:
    """Hooks the shell's display publisher: displays made by a routed thread go to that
    thread's route; all others are published as before. One per shell."""

    def __init__(self, shell: Shell) -> None:
        self.publisher = shell.display_pub
        self.original = self.publisher.publish
        self.routes: dict[int, Route] = {}
        self.publisher.publish = self.publish

    @classmethod
    def of(cls, shell: Shell) -> DisplayRouter:
        existing = getattr(shell.display_pub, "_forkagent_router", None)
        if isinstance(existing, DisplayRouter):
            return existing
        router = cls(shell)
        setattr(shell.display_pub, "_forkagent_router", router)  # noqa: B010
        return router

    def publish(
        self,
        data: Mapping[str, object] | None,
        metadata: Mapping[str, object] | None = None,
        *args: object,
        **kwargs: object,
    ) -> None:
        route = self.routes.get(threading.get_ident())
        if route is not None and route(Display(dict(data or {}), dict(metadata or {}))):
            return
        self.original(data, metadata, *args, **kwargs)
