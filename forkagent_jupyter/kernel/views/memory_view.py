"""`%tasks --memory`: the worker processes, what each shares with the kernel and holds alone,
and the values it keeps for pulls (formatting only; the numbers come from the compute plane)."""

from __future__ import annotations

import html
from collections.abc import Sequence

from ...runtime import Held, Rollup, WorkerProcess

__all__ = ["EXPLAINED", "NOT_AVAILABLE", "memory_bundle", "size_text"]

NOT_AVAILABLE = (
    "%tasks --memory: not available on this platform (it reads /proc/<pid>/smaps_rollup, "
    "which only Linux has)"
)
EXPLAINED = (
    "MB, read from /proc/<pid>/smaps_rollup. own = Private_Clean + Private_Dirty: pages only "
    "that process maps (what its code wrote or allocated; freed when it ends). shared = "
    "Shared_Clean + Shared_Dirty: pages another process maps too; for a worker, the kernel's "
    "pages it has not written since the fork (copy-on-write, also mapped by the snapshot it "
    "was forked from and by its siblings) and shared libraries (Linux does not say which "
    "process shares a page). Pss: its proportional share of all it maps; Rss = own + shared. "
    "Holds: the names its code bound (new or rebound), sizes approximate, as of its last "
    "finished call; %tasks --pull ID NAME copies one here."
)
_HEAD = ("task", "status", "pid", "own", "shared", "Pss", "Rss", "holds for pull")


def size_text(size: int | None) -> str:
    """Bytes as "512 B", "1.5 KB", "200.0 MB" ("?" when unknown)."""
    if size is None:
        return "?"
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KB", "MB"):
        if value < 1024:
            return f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} GB"


def _holds(held: Sequence[Held], count: int) -> str:
    if not held:
        return "nothing yet"
    text = ", ".join(f"{h.name} ({h.kind}, {size_text(h.size)})" for h in held)
    return text + (f", and {count - len(held)} more" if count > len(held) else "")


def _numbers(memory: Rollup | None) -> list[str]:
    if memory is None:
        return ["?"] * 4
    return [f"{x:,.1f}" for x in (memory.own_mb, memory.shared_mb, memory.pss_mb, memory.rss_mb)]


def memory_bundle(
    kernel: Rollup | None,
    rows: Sequence[tuple[str, str, WorkerProcess]],
    missing: Sequence[str] = (),
) -> dict[str, str]:
    """The view as HTML and text: `rows` are (task label, status, process); `kernel` the
    kernel's own numbers, for comparison; `missing` one line each for tasks asked for that
    have no live process."""
    table: list[list[str]] = [
        [label, status, str(p.pid), *_numbers(p.memory), _holds(p.held, p.held_count)]
        for label, status, p in rows
    ]
    if kernel is not None:
        table.append(["(kernel)", "", str(kernel.pid), *_numbers(kernel), ""])
    widths = [max(len(r[i]) for r in [list(_HEAD), *table]) for i in range(len(_HEAD) - 1)]
    lines = [
        "  ".join(
            cell.rjust(widths[i]) if 2 <= i < len(widths) else cell.ljust(widths[i])
            for i, cell in enumerate(row[:-1])
        )
        + f"  {row[-1]}"
        for row in [list(_HEAD), *table]
    ]
    if not rows:
        lines.insert(1, "(no worker process is alive)")
    lines += missing
    text = "Worker processes\n" + "\n".join(line.rstrip() for line in lines) + f"\n{EXPLAINED}"
    esc = html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in _HEAD)
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>" for row in table
    )
    notes = "".join(f"<div>{esc(line)}</div>" for line in missing)
    empty = "" if rows else "<div><i>No worker process is alive.</i></div>"
    html_text = (
        f"<table class='forkagent-memory'><tr>{head}</tr>{body}</table>{empty}{notes}"
        f"<div class='forkagent-memory-note'><small>{esc(EXPLAINED)}</small></div>"
    )
    return {"text/html": html_text, "text/plain": text}
