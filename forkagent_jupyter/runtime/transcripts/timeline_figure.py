"""Drawing a `Timeline` with matplotlib (imported here, when a figure is drawn).

One lane per agent, the parent on top. In a lane, the upper band holds the model requests -
light from send to the first token, dark from there to the last token, a black tick at the
first token, the cache tokens read (r) and written (w) above the bar - preceded by what kept
them back: a wait for rate-limit room (grey, hatched), the hold until the lead fork's response
started (yellow), a broken attempt that was sent again (red, hatched). The lower band holds the
tool calls (green) and, over them, the approvals waited on (orange). A dashed line marks when
the lead's cache write became readable, with a line to each sibling that read it; an arrow
goes from each worker's report to the moment it reached the parent.

Every artist of a row carries a `gid` ("request:<agent>:<message id>", "tool:<agent>:<n>",
...), so the figure can be checked against the rows it was drawn from. The figure is built
with `matplotlib.figure.Figure` (no pyplot state): `png()` renders it with Agg.

On an interactive canvas (ipympl, Qt...) the bar under the pointer is described where the
canvas shows the pointer's position (`row_at`, `details`: the request, its cache tokens read
and written, what it waited for), and a click on a bar pins that description in a box over
the plot (a click elsewhere removes it).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from .timeline import Timeline, TimelineRow

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["COLORS", "details", "draw", "png", "row_at"]

COLORS = {
    "waiting": "#9ecae1",
    "streaming": "#2171b5",
    "rate_wait": "#bdbdbd",
    "held": "#fed976",
    "retry": "#de2d26",
    "tool": "#41ab5d",
    "approval": "#fd8d3c",
    "notification": "#6a51a3",
    "lead": "#08306b",
}
UPPER = (0.02, 0.36)  # (offset from the lane's centre, height) of the request band
LOWER = (-0.36, 0.3)  # of the tool band


def _k(tokens: int) -> str:
    return f"{tokens / 1000:.1f}k" if tokens >= 1000 else str(tokens)


def _lane_y(timeline: Timeline) -> dict[str, float]:
    """Each lane's centre on the y axis: the parent on top."""
    lanes = timeline.lanes
    return {lane.agent_id: float(len(lanes) - 1 - i) for i, lane in enumerate(lanes)}


_BAND = {  # kind: (offset from the lane's centre, height) of its bar, as drawn
    "request": UPPER,
    "rate_wait": UPPER,
    "held": UPPER,
    "retry": UPPER,
    "tool": LOWER,
    "approval": (LOWER[0] + 0.05, LOWER[1] - 0.1),
    "notification": (-0.25, 0.25),  # around the arrow's head, at the lane's centre - 0.1
}
_PRECEDENCE = ("approval", "request", "retry", "held", "rate_wait", "tool", "notification")


def row_at(timeline: Timeline, x: float, y: float) -> TimelineRow | None:
    """The row whose bar is drawn at (x, y) in data coordinates (None: no bar there). Where
    bars overlap, the one drawn on top (an approval over its tool call)."""
    y_of = _lane_y(timeline)
    span = max(timeline.span, 1e-3)
    least = span / 400
    best: tuple[int, float, TimelineRow] | None = None
    for row in timeline.rows:
        offset, height = _BAND[row.kind]
        low = y_of.get(row.agent_id, 0.0) + offset
        if not low <= y <= low + height:
            continue
        if row.kind == "notification":  # its mark at the arrow's head
            hit = abs(x - row.end) <= span / 100
        else:
            hit = row.start <= x <= row.start + max(row.end - row.start, least)
        if hit:
            key = (-_PRECEDENCE.index(row.kind), row.start, row)
            if best is None or key[:2] > best[:2]:
                best = key
    return best[2] if best is not None else None


def _waits(timeline: Timeline, request: TimelineRow) -> list[TimelineRow]:
    """What held `request` back: the waits and broken attempts of its agent since the
    agent's previous request ended."""
    earlier = [
        r.end
        for r in timeline.rows
        if r.kind == "request" and r.agent_id == request.agent_id and r.end <= request.start
    ]
    since = max(earlier, default=float("-inf"))
    return [
        r
        for r in timeline.rows
        if r.kind in ("rate_wait", "held", "retry")
        and r.agent_id == request.agent_id
        and r.start >= since
        and r.end <= request.start + 1e-3
    ]


def details(timeline: Timeline, row: TimelineRow) -> str:
    """One row in words: what a bar under the pointer or clicked shows."""
    when = f"{row.start:.2f}-{row.end:.2f} s"
    if row.kind == "request":
        first = f", first token at {row.first_token:.2f} s" if row.first_token is not None else ""
        waits = _waits(timeline, row)
        waited = (
            "waited " + ", ".join(f"{w.duration:.2f} s ({w.label})" for w in waits) + " before it"
            if waits
            else "no wait before it"
        )
        return (
            f"{row.lane}: request {row.message_id or '?'} {when}{first}; "
            f"cache read {row.cache_read:,}, written {row.cache_write:,} tokens; {waited}"
        )
    if row.kind == "approval":
        return f"{row.lane}: approval {row.label}, waited {row.duration:.2f} s ({when})"
    if row.kind == "notification":
        return (
            f"parent: {row.label}, queued at {row.start:.2f} s, reached the parent at "
            f"{row.end:.2f} s (waited {row.duration:.2f} s)"
        )
    what = {"tool": "tool", "rate_wait": "rate-limit wait", "held": "held", "retry": "retried"}
    return f"{row.lane}: {what[row.kind]} {row.label}, {row.duration:.2f} s ({when})"


def _interactive(timeline: Timeline, fig: Figure, ax: Any) -> None:
    """The pointer's position names the bar under it; a click pins its details (module doc)."""

    def where(x: float, y: float) -> str:
        row = row_at(timeline, x, y)
        return details(timeline, row) if row is not None else f"t={x:.2f} s"

    ax.format_coord = where
    box = ax.annotate(
        "",
        xy=(0.0, 0.0),
        xytext=(8, 8),
        textcoords="offset points",
        fontsize=7.5,
        wrap=True,
        bbox={"boxstyle": "round", "fc": "#ffffe0", "ec": "#888888", "alpha": 0.95},
        visible=False,
        zorder=10,
        gid="details",
    )
    span = max(timeline.span, 1e-3)

    def clicked(event: Any) -> None:
        toolbar: Any = getattr(event.canvas, "toolbar", None)
        if event.inaxes is not ax or (toolbar is not None and toolbar.mode):  # zooming, panning
            return
        row = row_at(timeline, event.xdata, event.ydata)
        if row is None:
            if not box.get_visible():
                return
            box.set_visible(False)
        else:
            box.set_text(details(timeline, row).replace("; ", "\n"))
            box.xy = (event.xdata, event.ydata)
            right = event.xdata > span / 2  # the box opens away from the nearer edge
            box.set_horizontalalignment("right" if right else "left")
            box.set_position((-8 if right else 8, 8))
            box.set_visible(True)
        event.canvas.draw_idle()

    fig.canvas.mpl_connect("button_press_event", clicked)


def draw(timeline: Timeline, *, width: float = 11.0) -> Figure:
    """The timeline as a matplotlib Figure (see the module doc)."""
    from matplotlib.figure import Figure

    lanes = timeline.lanes
    y_of = _lane_y(timeline)
    span = max(timeline.span, 1e-3)
    fig = Figure(figsize=(width, 1.6 + 0.62 * len(lanes)), layout="constrained")
    ax = fig.add_subplot()
    _draw_rows(ax, timeline, y_of, span, width)
    _draw_leads(ax, timeline, y_of)
    _frame(fig, ax, timeline, y_of, span)
    _interactive(timeline, fig, ax)
    return fig


def _draw_rows(
    ax: Axes, timeline: Timeline, y_of: dict[str, float], span: float, width: float
) -> None:
    """Each row as its bar, tick, label or arrow, named (`gid`) for the interactive canvas."""
    from matplotlib.patches import Rectangle

    least = span / 400  # a bar never thinner than this, so a fast one still shows
    counts: dict[str, int] = {}
    label_end: dict[str, float] = {}  # where each lane's last token label ends (data units)
    per_char = span * 6.5 * 0.62 / 72 / max(width - 2.0, 1.0)  # a 6.5 pt character's width

    def gid(row: TimelineRow) -> str:
        if row.kind == "request":
            return f"request:{row.agent_id}:{row.message_id}"
        if row.kind == "notification":
            return f"notification:{row.task}"
        n = counts[f"{row.kind}:{row.agent_id}"] = counts.get(f"{row.kind}:{row.agent_id}", 0) + 1
        return f"{row.kind}:{row.agent_id}:{n}"

    def bar(row: TimelineRow, x0: float, x1: float, band: tuple[float, float], **style: Any) -> Any:
        y = y_of.get(row.agent_id, 0.0) + band[0]
        patch = Rectangle((x0, y), max(x1 - x0, least), band[1], **style)
        ax.add_patch(patch)
        return patch

    for row in timeline.rows:
        y = y_of.get(row.agent_id, 0.0)
        name = gid(row)
        if row.kind == "request":
            token = row.first_token if row.first_token is not None else row.end
            token = min(max(token, row.start), row.end)
            bar(row, row.start, token, UPPER, color=COLORS["waiting"], gid=name)
            bar(row, token, row.end, UPPER, color=COLORS["streaming"], gid="streaming" + name[7:])
            ax.vlines(
                token,
                y + UPPER[0],
                y + sum(UPPER),
                color="black",
                lw=1.2,
                gid="first_token" + name[7:],
            )
            text = f"r {_k(row.cache_read)} w {_k(row.cache_write)}"
            if row.start >= label_end.get(row.agent_id, -span):  # else it would cover the last
                ax.text(row.start, y + sum(UPPER) + 0.03, text, fontsize=6.5, va="bottom", gid=name)
                label_end[row.agent_id] = row.start + len(text) * per_char
        elif row.kind in ("rate_wait", "held", "retry"):
            hatch = "////" if row.kind != "held" else None
            color = COLORS[row.kind]
            bar(row, row.start, row.end, UPPER, facecolor=color, alpha=0.6, hatch=hatch, gid=name)
        elif row.kind == "tool":
            bar(row, row.start, row.end, LOWER, color=COLORS["tool"], alpha=0.8, gid=name)
            ax.text(row.start, y + LOWER[0] + 0.04, row.label, fontsize=6, color="white", gid=name)
        elif row.kind == "approval":
            bar(row, row.start, row.end, _BAND["approval"], color=COLORS["approval"], gid=name)
        elif row.kind == "notification":
            task_y = y_of.get(row.task or "", y)
            ax.annotate(
                "",
                xy=(row.end, y - 0.1),
                xytext=(row.start, task_y + 0.2),
                arrowprops={"arrowstyle": "->", "color": COLORS["notification"], "alpha": 0.6},
                gid=name,
            )
            ax.plot([row.end], [y - 0.1], marker="v", color=COLORS["notification"], gid=name)


def _draw_leads(ax: Axes, timeline: Timeline, y_of: dict[str, float]) -> None:
    """When each lead's cache write became readable, and the siblings that read it."""
    lanes = timeline.lanes
    for lead in timeline.leads:
        y = y_of.get(lead.agent_id, 0.0)
        ax.vlines(
            lead.readable,
            -0.5,
            len(lanes) - 0.5,
            colors=COLORS["lead"],
            linestyles="dashed",
            lw=1,
            gid=f"lead:{lead.agent_id}",
        )
        ax.text(
            lead.readable,
            len(lanes) - 0.45,
            f" {timeline.lane_of(lead.agent_id)}'s cache write ({_k(lead.written)}) readable",
            fontsize=7,
            color=COLORS["lead"],
            va="bottom",
        )
        for reader in lead.readers:
            first = min(
                (r for r in timeline.rows if r.kind == "request" and r.agent_id == reader),
                key=lambda r: r.start,
            )
            ax.plot(
                [lead.readable, first.start],
                [y + 0.2, y_of.get(reader, 0.0) + 0.2],
                color=COLORS["lead"],
                lw=0.6,
                alpha=0.5,
                gid=f"read:{reader}",
            )


def _frame(fig: Figure, ax: Axes, timeline: Timeline, y_of: dict[str, float], span: float) -> None:
    """The lanes' names, the axes' limits, the title and the legend."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    lanes = timeline.lanes
    ax.set_yticks([y_of[lane.agent_id] for lane in lanes])
    ax.set_yticklabels(
        [
            lane.name if lane.kind in ("main", "fork") else f"{lane.name} ({lane.kind})"
            for lane in lanes
        ]
    )
    ax.set_ylim(-0.6, len(lanes) - 0.1)
    ax.set_xlim(-span * 0.01, span * 1.02)
    ax.set_xlabel("seconds")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(
        f"session {timeline.session_id}: {len(lanes) - 1} agent(s) and the parent",
        fontsize=10,
        loc="left",  # clear of an interactive canvas's toolbar, at the top right
    )
    handles = [
        Patch(color=COLORS["waiting"], label="request: sent, waiting"),
        Patch(color=COLORS["streaming"], label="streaming to last token"),
        Line2D([], [], color="black", lw=1.2, label="first token"),
        Patch(facecolor=COLORS["held"], alpha=0.6, label="held for the lead"),
        Patch(facecolor=COLORS["rate_wait"], alpha=0.6, hatch="////", label="rate-limit wait"),
        Patch(facecolor=COLORS["retry"], alpha=0.6, hatch="////", label="attempt retried"),
        Patch(color=COLORS["tool"], label="tool call"),
        Patch(color=COLORS["approval"], label="approval waited on"),
        Line2D([], [], color=COLORS["lead"], ls="--", label="lead's cache write readable"),
        Line2D([], [], color=COLORS["notification"], marker="v", label="report reaches parent"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=5, fontsize=7, frameon=False)


def png(fig: Figure, dpi: int = 100) -> bytes:
    """The figure as PNG bytes (rendered with Agg, whatever the backend of pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=dpi)
    return out.getvalue()
