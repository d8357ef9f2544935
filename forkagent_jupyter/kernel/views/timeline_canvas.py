"""The timeline as an ipympl canvas (zoom, pan, a bar's details under the pointer).

Shown by `%tasks --timeline` where the frontend renders widgets and ipympl is importable
(`interactive`): `%matplotlib widget` is active, or the JupyterLab extension is connected to
this kernel. Elsewhere (nbclient, papermill, VS Code, a console) the PNG stays.

Nothing of it runs on the kernel's event loop: the canvas is made and its first image
rendered (`canvas_bundle`), and every message its frontend sends (resize, redraw, zoom, pan,
the pointer) is handled, on one worker thread shared by these canvases, in that order, since
each may render the figure (fonts, Agg) - the frontend's first messages arrive while the
first image is still being rendered. Replies go out from that thread, as ipykernel allows.
"""

from __future__ import annotations

import importlib.util
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["canvas_bundle", "interactive"]

log = logging.getLogger(__name__)

T = TypeVar("T")

CANVAS_WIDTH = 9.0
"""Inches (at 100 dpi): a canvas keeps its pixel size, where a PNG shrinks to the output's
width; this fits JupyterLab's output area beside a file browser."""

WIDGET_BACKENDS = ("widget", "ipympl", "module://ipympl.backend_nbagg")


def interactive(frontend_connected: bool) -> bool:
    """Whether `%tasks --timeline` shows a canvas: ipympl importable, and `%matplotlib
    widget` active or the JupyterLab extension connected (a frontend that renders widgets)."""
    if importlib.util.find_spec("ipympl") is None:
        return False
    return frontend_connected or _widget_backend()


def _widget_backend() -> bool:
    """`%matplotlib widget` (or `ipympl`) is pyplot's backend. Read without resolving it:
    asking matplotlib for its backend may choose and import one."""
    import sys

    if "matplotlib" not in sys.modules:
        return False
    import matplotlib

    params: Any = matplotlib.rcParams
    try:  # matplotlib >= 3.8 names this; older ones keep it in the mapping itself
        backend = params._get_backend_or_none()
    except AttributeError:
        backend = dict.get(params, "backend")
    return isinstance(backend, str) and backend.lower() in WIDGET_BACKENDS


class _Worker:
    """One daemon thread running callables in the order they were put (started on first use,
    from a thread: starting a thread waits for it)."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def ensure_started(self) -> None:
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(
                    target=self._run, name="forkagent-timeline-canvas", daemon=True
                )
                self.thread.start()

    def put(self, job: Callable[[], None]) -> None:
        self.jobs.put(job)  # SimpleQueue: never waits

    def call(self, function: Callable[[], T]) -> T:
        """Blocking: `function()` run on the worker thread, after what was put before."""
        self.ensure_started()
        done: Future[T] = Future()

        def job() -> None:
            try:
                done.set_result(function())
            except BaseException as exc:
                done.set_exception(exc)

        self.put(job)
        return done.result()

    def _run(self) -> None:
        while True:
            job = self.jobs.get()
            try:
                job()
            except Exception:  # a canvas message that failed: to the kernel's log
                _log().exception("timeline canvas: handling a frontend message failed")


def _log() -> logging.Logger:
    """The kernel's own log (the process's stderr, not a cell's), else this module's."""
    from IPython.core.getipython import get_ipython

    found = getattr(getattr(get_ipython(), "kernel", None), "log", None)
    return found if isinstance(found, logging.Logger) else log


_worker = _Worker()


def _canvas_class() -> type:
    from ipympl.backend_nbagg import Canvas  # type: ignore[import-untyped]
    from traitlets import default

    class TimelineCanvas(Canvas):  # type: ignore[misc]
        """ipympl's Canvas, its frontend's messages handled on the worker thread; the toolbar
        (zoom, pan) always shown; no header (the title is in the figure)."""

        @default("toolbar_visible")
        def _toolbar_visible(self) -> str:
            return "visible"

        @default("toolbar_position")
        def _toolbar_position(self) -> str:
            return "top"  # over the plot's top right corner: the plot keeps its width

        @default("header_visible")
        def _header_visible(self) -> bool:
            return False

        def _handle_message(self, object: object, content: object, buffers: object) -> None:
            handle = super()._handle_message
            _worker.put(lambda: handle(object, content, buffers))

    return TimelineCanvas


def canvas_bundle(figure: Figure, text: str) -> dict[str, object]:
    """Blocking (run it on a thread): an ipympl canvas for `figure` and the bundle that shows
    it - the widget view, with the PNG and `text` for frontends without widgets. Made on the
    worker thread, before any message of its frontend is handled there."""
    return _worker.call(lambda: _made(figure, text))


def _made(figure: Figure, text: str) -> dict[str, object]:
    from ipympl.backend_nbagg import FigureManager

    width, height = figure.get_size_inches()
    figure.set_size_inches(min(width, CANVAS_WIDTH), height)  # a canvas is not scaled to fit
    canvas = _canvas_class()(figure)
    FigureManager(canvas, 0)  # the manager ipympl's canvas answers its frontend through
    bundle = dict(canvas._repr_mimebundle_())
    bundle.pop("text/html", None)  # the same PNG again
    bundle["text/plain"] = text
    return bundle
