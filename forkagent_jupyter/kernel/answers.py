"""Workers' notifications and the parent's answer to them, delivered to the notebook.

With the JupyterLab extension connected: a new cell below each launching cell (one
`insert_cell` message per cell). Without it: the launching cell's notification area (a display
id), so the result still lands next to the work that asked for it. `%notifications ID` shows a
recorded delivery again, also after a restart (from the parent's transcript).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.display import display

from ..runtime.session import AutoTurn
from ..runtime.tasks import task_snapshot
from ..runtime.transcripts import answered_notifications
from .delivery import answer_bundle, notification_bundle, notification_cell
from .markdown import SafeMarkdown, fenced
from .parents import in_latest_request
from .protocol import InsertCellMessage

if TYPE_CHECKING:
    from .ui import KernelUI

__all__ = ["AnswerDelivery"]


class AnswerDelivery:
    def __init__(self, ui: KernelUI) -> None:
        self.ui = ui
        self._notes: dict[str, list[str]] = {}  # display id -> what its area shows

    def deliver(self, auto: AutoTurn) -> None:
        """The parent answered notifications: show them with the answer, grouped by the cell
        that launched each task."""
        ui = self.ui
        session = ui.agent.session
        answer = auto.turn.text
        by_cell: dict[str | None, list[tuple[str, str]]] = {}
        for task_id, xml in zip(auto.task_ids, auto.notifications, strict=False):
            launch = ui.launches.get(task_id)
            by_cell.setdefault(launch.cell_id if launch else None, []).append((task_id, xml))
        for cell_id, pairs in by_cell.items():
            snapshots: list[dict[str, Any]] = []
            for task_id, xml in pairs:
                task = session.find_task(task_id)
                snapshots.append(
                    task_snapshot(task, xml) if task else {"id": task_id, "notification": xml}
                )
            cell = notification_cell(snapshots, answer)
            message: InsertCellMessage = {
                "type": "insert_cell",
                "key": cell["metadata"]["forkagent"]["key"],
                "after_cell_id": cell_id,
                "task_ids": [t for t, _ in pairs],
                "cell": cell,
            }
            if ui.agent.bridge.broadcast(dict(message)):
                continue
            launch = ui.launches.get(pairs[0][0])
            if launch is None:
                continue
            shown = self._notes.setdefault(launch.display_id, [])
            notes = "\n\n".join(fenced(xml, "xml") for _, xml in pairs)
            shown.append(f"{notes}\n\n{answer}")
            body = SafeMarkdown("\n\n---\n\n".join(shown))
            in_latest_request(display, body, display_id=launch.display_id, update=True)

    async def replay(self, keys: list[str]) -> None:
        """`%notifications ID ...`: show recorded notifications and the answer again (the
        transcripts are read on a thread)."""
        session = self.ui.agent.session
        ids = []
        for key in keys:
            task = session.find_task(key)
            found = task.id if task else None
            if found is None and session.store is not None:
                found = await session.store.aagent_id_for(key)
            ids.append(found or key)
        root = session.store.root if session.store is not None else None
        record = None
        if root is not None:
            record = await asyncio.to_thread(answered_notifications, root, ids)
        if record is None:
            raise UsageError(
                f"%notifications: no recorded notification for {' '.join(keys)} "
                "(notifications are recorded when the parent answers them)"
            )
        for snapshot in record.get("tasks") or []:
            display(notification_bundle(snapshot), raw=True)
        if str(record.get("answer") or "").strip():
            display(answer_bundle(str(record["answer"])), raw=True)
