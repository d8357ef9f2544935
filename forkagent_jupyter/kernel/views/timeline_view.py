"""What `%tasks --timeline` and `api.timeline()` show: the figure, its rows, a PNG.

The rows come from the transcripts (runtime/transcripts/timeline.py) and the figure from
runtime/transcripts/timeline_figure.py; reading, drawing and rendering run on threads, never on the
kernel's event loop. The PNG is what every frontend shows (JupyterLab, Notebook 7, VS Code,
nbclient, an HTML export); where widgets render and ipympl is there, `%tasks --timeline`
shows an interactive canvas instead, the PNG kept in its bundle (timeline_canvas.py).
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import TYPE_CHECKING, Any, NamedTuple

from IPython.core.error import UsageError

from ..said import said_as

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ...runtime import Session, Timeline

__all__ = ["TimelineView", "shown", "timeline_view"]

RENDERED = "_forkagent_png"


class TimelineView(NamedTuple):
    """`figure, rows = await api.timeline()`: the matplotlib Figure and a pandas DataFrame of
    its rows (one per bar; times in seconds since `rows.attrs["t0"]`)."""

    figure: Figure
    rows: Any  # a pandas DataFrame (pandas has no types)
    timeline: Timeline
    png: bytes

    def bundle(self) -> dict[str, object]:
        from ...runtime import describe_timeline

        return {"image/png": self.png, "text/plain": describe_timeline(self.timeline)}

    def _repr_png_(self) -> bytes:
        return self.png

    def __repr__(self) -> str:
        from ...runtime import describe_timeline

        return describe_timeline(self.timeline)


def _drawn(timeline: Timeline) -> tuple[Figure, Any, bytes]:
    from ...runtime import draw_timeline, timeline_png

    figure = draw_timeline(timeline)
    image = timeline_png(figure)
    setattr(figure, RENDERED, image)  # what a cell shows of it: rendered here, on a thread
    return figure, timeline.to_dataframe(), image


async def timeline_view(session: Session, ids: list[str]) -> TimelineView:
    """The timeline of `ids` in `session`'s transcripts folder (see `load_timeline`)."""
    from ...runtime import aload_timeline

    store = session.store
    if store is None:
        raise UsageError(
            "timeline: this session keeps no transcripts, which the timeline is read from"
        )
    missing = [name for name in ("matplotlib", "pandas") if importlib.util.find_spec(name) is None]
    if missing:
        raise UsageError(
            f"timeline: it needs {' and '.join(missing)}: pip install 'forkagent-jupyter[timeline]'"
        )
    await store.aflush()
    with said_as("timeline"):
        timeline = await aload_timeline(store.root, ids, current=store.dir)
    figure, rows, image = await asyncio.to_thread(_drawn, timeline)
    _show_figures_as_png()
    return TimelineView(figure, rows, timeline, image)


async def shown(view: TimelineView, frontend_connected: bool) -> dict[str, object]:
    """What `%tasks --timeline` displays: an ipympl canvas where one can be shown (see
    `timeline_canvas.interactive`), made on a thread; else the PNG."""
    from .timeline_canvas import canvas_bundle, interactive

    if not interactive(frontend_connected):
        return view.bundle()
    from ...runtime import describe_timeline

    return await asyncio.to_thread(canvas_bundle, view.figure, describe_timeline(view.timeline))


def _show_figures_as_png() -> None:
    """A bare Figure as a cell's value shows as a PNG, also where pyplot was never imported
    (its inline backend registers this only then)."""
    from IPython.core.getipython import get_ipython
    from matplotlib.figure import Figure

    shell = get_ipython()
    display_formatter = shell.display_formatter if shell is not None else None
    if display_formatter is None:
        return
    formatter = display_formatter.formatters["image/png"]
    try:
        formatter.lookup_by_type(Figure)
    except KeyError:
        formatter.for_type(Figure, _figure_png)


def _figure_png(figure: Figure) -> bytes:
    """A timeline figure's PNG as drawn (on a thread), or another figure rendered now."""
    from ...runtime import timeline_png

    image = getattr(figure, RENDERED, None)
    return image if isinstance(image, bytes) else timeline_png(figure)
