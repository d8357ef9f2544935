"""Approvals in the notebook: the permission policy whose prompts are widgets.

A call that needs approval shows a prompt on its worker's card (or in the running cell for the
parent's own calls), in the cell's pending-approvals strip and in the JupyterLab extension;
whichever answers first decides. The wait has one limit, kept here: `approval_timeout`, or
`headless_approval_timeout` when no frontend can answer (the session's own gate is given no
timeout by the kernel, so there is one clock and one message).
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING

from IPython.display import display

from ...runtime import Allow, Deny, PermissionRequest
from ..cards.hub import ApprovalPrompt
from ..comm.protocol import ApprovalDone, ApprovalMessage
from ..parents import in_latest_request

if TYPE_CHECKING:
    from ..frontend.rows import FrontendRows
    from ..host import ViewHost

__all__ = ["WidgetPolicy", "headless_notice"]


def headless_notice(request: PermissionRequest, timeout: float) -> str:
    """What a headless run (nbclient, papermill, nbconvert) prints when a call needs approval."""
    who = f"worker {request.task_id}" if request.task_id else "the parent"
    return (
        f"approval needed: {request.tool_name} for {who} ({request.summary}). No frontend can "
        f"answer here: run api.allow({request.tool_name!r}) or api.answer('allow') in a cell "
        "(from forkagent_jupyter.kernel import api), or set ForkAgent.permission_mode before "
        f"the work starts. Denied in {timeout:.0f} s (ForkAgent.headless_approval_timeout)."
    )


def _unanswerable(request: PermissionRequest) -> str:
    """Why the parent's own call is refused at once in a headless run, and how to allow it."""
    return (
        f"Not approved: {request.tool_name} ({request.summary}) needs an approval, and this "
        "notebook runs without a frontend (nbclient, papermill, nbconvert), where nobody can "
        f"answer while the cell runs. Allow it before the cell: api.allow({request.tool_name!r}) "
        "(from forkagent_jupyter.kernel import api), or %config ForkAgent.permission_mode."
    )


class WidgetPolicy:
    """The notebook's PermissionPolicy: a prompt on the worker's card (or in the running
    cell for the parent's own calls), answered by buttons or by the JupyterLab extension."""

    def __init__(self, ui: ViewHost, rows: FrontendRows) -> None:
        self.ui = ui
        self.rows = rows

    async def decide(self, request: PermissionRequest) -> Allow | Deny:
        ui = self.ui
        if request.task_id is None and ui.headless():
            # the parent's own call: its cell runs until the call is decided, and a headless
            # client runs no other cell meanwhile, so nobody can answer it: said at once
            refused = _unanswerable(request)
            in_latest_request(print, refused, file=sys.stderr, flush=True)
            return Deny(message=refused)
        prompt = ApprovalPrompt(request)
        ui.pending[prompt.request_id] = prompt
        ui.strip.add(prompt)
        card = ui.hub.cards.get(request.task_id or "") or ui.hub.reveal(request.task_id or "")
        shown_here = None
        if card is not None:
            card.add_prompt(prompt)
        else:  # in the running cell; its text is updated with the answer (a saved notebook)
            shown_here = display(prompt, display_id=True)
        shown: ApprovalMessage = {"type": "approval", **self.rows.approval_row(prompt)}
        ui.agent.bridge.broadcast(shown)
        ui.agent.terminal.add(prompt)  # a console: asked on stdin in the running cell
        ui.tasks_changed()
        headless = ui.headless()
        settings = ui.agent.settings
        timeout = settings.headless_approval_timeout if headless else settings.approval_timeout
        if headless:
            notice = headless_notice(request, timeout)
            ui.headless_notices[prompt.request_id] = notice
            in_latest_request(print, notice, file=sys.stderr, flush=True)
        try:
            decision: Allow | Deny = await asyncio.wait_for(asyncio.shield(prompt.future), timeout)
            return decision
        except asyncio.TimeoutError:
            prompt.answer("deny", f"no answer within {timeout:.0f} s")
            if headless:
                return Deny(
                    message=f"Not approved: this notebook runs without a frontend (headless), "
                    f"and nobody answered within {timeout:.0f} seconds."
                )
            return Deny(
                message=f"Not approved: nobody answered the approval card within "
                f"{timeout:.0f} seconds (ForkAgent.approval_timeout)."
            )
        finally:
            if shown_here is not None:
                in_latest_request(shown_here.update, prompt)
            ui.pending.pop(prompt.request_id, None)
            ui.headless_notices.pop(prompt.request_id, None)
            done: ApprovalDone = {"type": "approval_done", "request_id": prompt.request_id}
            ui.agent.bridge.broadcast(done)
            ui.tasks_changed()
