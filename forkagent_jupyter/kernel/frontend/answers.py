"""Workers' notifications and the parent's answer to them, delivered to the notebook.

With the JupyterLab extension connected: a new cell below each launching cell (one
`insert_cell` message per cell). A cell run that launched more than `DIGEST_AT` workers gets
one digest cell instead (a table, a row per task), inserted with its first notifications and
replaced, at most every `DIGEST_INTERVAL`, as more arrive; the parent still reads every
notification. Without it: the launching cell's notification area (a display
id), so the result still lands next to the work that asked for it. `%notifications ID` shows a
recorded delivery again, also after a restart (from the parent's transcript).
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from IPython.core.error import UsageError
from IPython.display import display

from ...runtime import AutoTurn, TaskSnapshot, answers_covering
from ..comm.protocol import InsertCellMessage, MarkdownBundle, jsonable
from ..parents import in_latest_request
from .delivery import (
    answer_bundle,
    digest_cell,
    joined,
    notification_bundle,
    notification_cell,
    shown_bundle,
)

if TYPE_CHECKING:
    from ..host import ViewHost

__all__ = ["DIGEST_AT", "DIGEST_INTERVAL", "AnswerDelivery"]

DIGEST_AT = 8
"""A cell run that launched more workers than this gets one digest cell for their
notifications, not a cell per answer."""
DIGEST_INTERVAL = 2.0
"""Seconds between two updates of a digest cell (its first one goes at once); a digest of
more than 400 rows waits one second more per 200 rows (the frontend redraws it whole)."""


@dataclass
class _Digest:
    """The digest cell of one cell run's workers."""

    key: str
    cell_id: str | None
    run: str
    tasks: dict[str, TaskSnapshot] = field(default_factory=dict)  # by task id
    answer: str = ""
    source: str = ""
    due: asyncio.TimerHandle | None = None
    sent_at: float = float("-inf")


class AnswerDelivery:
    def __init__(self, ui: ViewHost) -> None:
        self.ui = ui
        self._notes: dict[str, list[MarkdownBundle]] = {}  # display id -> what its area shows
        self._digests: dict[str, _Digest] = {}  # cell run (execute_request id) -> its digest

    def _digest_for(self, task_id: str) -> _Digest | None:
        """The digest of the cell run that launched `task_id`, if that run launched more than
        DIGEST_AT workers and the extension is connected."""
        launch = self.ui.launches.get(task_id)
        if launch is None or not launch.run or not self.ui.agent.bridge.connected:
            return None
        digest = self._digests.get(launch.run)
        if digest is None:
            if self.ui.launched(launch.run) <= DIGEST_AT:
                return None
            key = "d-" + hashlib.sha256(launch.run.encode()).hexdigest()[:16]
            digest = self._digests[launch.run] = _Digest(key, launch.cell_id, launch.run)
        return digest

    def _schedule(self, digest: _Digest) -> None:
        if digest.due is not None:
            return
        loop = asyncio.get_running_loop()
        interval = max(DIGEST_INTERVAL, len(digest.tasks) / 200)
        wait = max(0.0, digest.sent_at + interval - loop.time())
        digest.due = loop.call_later(wait, self._send_digest, digest)

    def _send_digest(self, digest: _Digest) -> None:
        digest.due = None
        digest.sent_at = asyncio.get_running_loop().time()
        tasks = list(digest.tasks.values())
        cell = digest_cell(tasks, digest.answer, digest.key)
        # its source (`%notifications` and every id) changes once, when the digest is whole:
        # the editor redraws a long line on each change
        whole = len(tasks) >= self.ui.launched(digest.run)
        if not whole and digest.source:
            cell["source"] = digest.source
        digest.source = cell["source"]
        message: InsertCellMessage = {
            "type": "insert_cell",
            "key": digest.key,
            "after_cell_id": digest.cell_id,
            "task_ids": [t.task_id for t in tasks],
            "cell": cell,
            "replace": True,
        }
        self.ui.agent.bridge.broadcast(message)

    def deliver(self, auto: AutoTurn) -> None:
        """The parent answered notifications: show them with the answer, grouped by the cell
        that launched each task."""
        ui = self.ui
        answer = auto.turn.text
        by_cell: dict[str | None, list[TaskSnapshot]] = {}
        for snapshot in auto.snapshots:
            launch = ui.launches.get(snapshot.task_id)
            by_cell.setdefault(launch.cell_id if launch else None, []).append(snapshot)
        for cell_id, snapshots in by_cell.items():
            digest = self._digest_for(snapshots[0].task_id)
            if digest is not None:
                for snapshot in snapshots:
                    digest.tasks[snapshot.task_id] = snapshot
                if answer.strip():
                    digest.answer = answer
                self._schedule(digest)
                continue
            cell = notification_cell(snapshots, answer)
            message: InsertCellMessage = {
                "type": "insert_cell",
                "key": cell["metadata"]["forkagent"]["key"],
                "after_cell_id": cell_id,
                "task_ids": [s.task_id for s in snapshots],
                "cell": cell,
                "replace": False,
            }
            if ui.agent.bridge.broadcast(message):
                continue
            launch = ui.launches.get(snapshots[0].task_id)
            if launch is None:
                continue
            shown = self._notes.setdefault(launch.display_id, [])
            shown.append(shown_bundle(snapshots, answer))
            body = joined(shown)
            in_latest_request(display, body, raw=True, display_id=launch.display_id, update=True)

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
        records = await asyncio.to_thread(answers_covering, root, ids) if root else []
        shown = {s.task_id for record in records for s in record.tasks}
        missing = [key for key, found in zip(keys, ids, strict=True) if found not in shown]
        if not records:
            asked = " ".join(keys)
            asked = asked if len(asked) <= 80 else asked[:77] + "..."
            raise UsageError(
                f"%notifications: no recorded notification for {asked} "
                "(notifications are recorded when the parent answers them)"
            )
        for record in records:  # each turn that answered one of them, oldest first
            for snapshot in record.tasks:
                display(jsonable(notification_bundle(snapshot)), raw=True)
            if record.answer.strip():
                display(answer_bundle(record.answer), raw=True)
        if missing:
            print(f"%notifications: none recorded yet for {' '.join(missing)}", file=sys.stderr)
