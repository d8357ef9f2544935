"""Batched fan-out in the notebook: `%fork --batch --over NAME "... {item} ..."`, one card.

The magic returns at once: the forks are created and their batch submitted in the
background, and one card (a display updated in place, at most every `REFRESH` seconds)
shows the batch: the API's request counts (processing / succeeded / errored / canceled /
expired), how many forks completed, failed or were stopped, and the cost so far at the
batch price. Per-fork results are in each fork's transcript and in
`api.batch_results(id)` (`.to_dataframe()`); `%stop <batch id>` cancels the batch.
"""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.display import display

from ..interpolation import interpolate
from ..render.task_line import no_math

if TYPE_CHECKING:
    from ...runtime import BatchRun, Session

__all__ = ["BatchCard", "directives_over", "start_batch"]

REFRESH = 0.5


def directives_over(
    template: str, over: str, namespace: dict[str, Any]
) -> tuple[list[str], list[Any]]:
    """One directive per element of `namespace[over]`: `{item}` is the element, other `{name}`s
    the notebook's variables. A missing, non-iterable or empty value is a UsageError."""
    text = template.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    if not text.strip():
        raise UsageError("%fork --batch: say what each worker should do, with {item} in it")
    if over not in namespace:
        raise UsageError(f"%fork --batch: --over {over}: no variable {over!r} in the notebook")
    value = namespace[over]
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise UsageError(f"%fork --batch: --over {over}: a list (or other collection) is needed")
    items = list(value)
    if not items:
        raise UsageError(f"%fork --batch: --over {over} is empty: nothing to fan out over")
    if "{item}" not in text:
        raise UsageError("%fork --batch: the directive needs {item} where each element goes")
    return [interpolate(text, {**namespace, "item": item}) for item in items], items


class BatchCard:
    """The batch's one card: a display updated in place from the run's listeners."""

    def __init__(self, total: int, label: str) -> None:
        self.total = total
        self.label = label
        self.run: BatchRun | None = None
        self.error: str | None = None
        self._pending: asyncio.Handle | None = None
        self.handle = display(self.bundle(), raw=True, display_id=True)

    def attach(self, run: BatchRun) -> None:
        self.run = run
        run.listeners.append(lambda _run: self.schedule())
        self.refresh()

    def schedule(self) -> None:
        if self.run is not None and all(t.done for t in self.run.tasks):
            if self._pending is not None:
                self._pending.cancel()
            self.refresh()  # the final state at once
            return
        if self._pending is None:
            self._pending = asyncio.get_event_loop().call_later(REFRESH, self.refresh)

    def refresh(self) -> None:
        self._pending = None
        if self.handle is not None:
            self.handle.update(self.bundle(), raw=True)

    def bundle(self) -> dict[str, str]:
        """The card as HTML and, with the same facts, as text (an export, a console)."""
        markup = self.render()
        text = re.sub(r"<br\s*/?>", "\n", markup)
        return {"text/html": markup, "text/plain": html.unescape(re.sub(r"<[^>]+>", "", text))}

    def render(self) -> str:
        run = self.run
        title = f"<b>Batch</b> of {self.total} forks: {html.escape(self.label)}"
        if self.error is not None:
            return f"<div>{title}<br>failed: {html.escape(self.error)}</div>"
        if run is None:
            return f"<div>{title}<br>submitting…</div>"
        counts = run.counts()
        api = " · ".join(f"{k} {v}" for k, v in counts.items())
        tasks = run.tasks
        done = {s: sum(t.status == s for t in tasks) for s in ("completed", "failed", "killed")}
        forks = " · ".join(f"{k} {v}" for k, v in done.items())
        running = sum(not t.done for t in tasks)
        lines = [
            f"{title} — <code>{html.escape(run.key)}</code> ({html.escape(run.processing_status)})",
            f"requests: {api}",
            f"forks: running {running} · {forks}",
            f"cost so far ${run.cost_usd:.4f} at the batch price (half the real-time price)",
        ]
        if run.error:
            lines.append(f"error: {html.escape(run.error)}")
        return no_math("<div class='forkagent-batch'>" + "<br>".join(lines) + "</div>", "div")


def start_batch(
    session: Session,
    namespace: dict[str, Any],
    template: str,
    over: str,
    name: str | None,
    poll_interval: float,
    *,
    check_budget: Callable[[], None],
    spawn: Callable[[Coroutine[object, object, None]], object],
) -> BatchCard:
    """Fan out over `namespace[over]` in the background (`check_budget` first, then `spawn`
    runs the launch); returns the card at once."""
    directives, items = directives_over(template, over, namespace)
    check_budget()
    names = [f"{name}-{i}" for i in range(len(items))] if name else None
    card = BatchCard(len(items), f"{over}: {template.strip()[:80]}")

    async def launch() -> None:
        try:
            fan = await session.fan_out(
                directives, batch=True, names=names, items=items, poll_interval=poll_interval
            )
        except Exception as exc:
            card.error = f"{type(exc).__name__}: {exc}"
            card.refresh()
            return
        if fan.batch is not None:
            card.attach(fan.batch)

    spawn(launch())
    return card
