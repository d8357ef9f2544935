"""A permission prompt in the notebook (`ApprovalPrompt`: what the call would do, and three
answers) and the strip of every approval waiting in this kernel (`PendingStrip`).
"""

from __future__ import annotations

import asyncio
import secrets

import ipywidgets as w

from ...runtime import Allow, Deny, PermissionRequest
from .widget_parts import WholeText, clip, esc

__all__ = ["ApprovalPrompt", "PendingStrip"]


class ApprovalPrompt(WholeText, w.VBox):
    """One pending approval: what the call would do (the tool's own preview: for a file
    change, the diff that would be written), and three answers."""

    def __repr__(self) -> str:
        request = self.request
        who = f"worker {request.task_id}" if request.task_id else "the parent"
        state = "waiting for an answer"
        if self.future.done() and not self.future.cancelled():
            decision = self.future.result()
            state = "allowed" if isinstance(decision, Allow) else f"denied ({decision.message})"
        return f"[approval: {request.tool_name} for {who}, {state}]\n{request.preview[:2000]}"

    def __init__(self, request: PermissionRequest) -> None:
        self.request = request
        self.request_id = secrets.token_hex(8)
        """How frontends name this request (never reused, unlike `id()`: a late answer to an
        answered request cannot reach a new one)."""
        self.future: asyncio.Future[Allow | Deny] = asyncio.get_running_loop().create_future()
        title = w.HTML(
            f"<b>{esc(request.tool_name)}</b> wants approval"
            + (f" (worker <code>{esc(request.task_id)}</code>)" if request.task_id else "")
        )
        body: w.Widget = w.HTML(
            "<pre style='max-height:16em;overflow:auto;margin:0'>" + esc(request.preview) + "</pre>"
        )
        self.reason = w.Text(placeholder="reason (optional, the model reads it)")
        once = w.Button(description="Allow once", button_style="success", tooltip="Allow this call")
        rule = request.suggested_rule
        always = w.Button(
            description=f"Allow for session: {clip(rule, 60)}" if rule else "Allow for session",
            button_style="info",
            disabled=rule is None,
            tooltip=f"Allow this call now, and calls matching exactly {rule} until the kernel "
            "restarts"
            if rule
            else "No rule can name exactly this call: allow it once",
            layout=w.Layout(width="auto", max_width="100%"),
        )
        if rule:  # the whole rule, however long: what the click adds
            body = w.VBox([body, w.HTML(f"Allow for session adds <code>{esc(rule)}</code>")])
        if request.reason:  # why it is asked although the mode or a rule would allow it
            body = w.VBox([w.HTML(f"<i>{esc(request.reason)}.</i>"), body])
        deny = w.Button(description="Deny", button_style="danger", tooltip="Deny this call")
        once.on_click(lambda _b: self.answer("allow"))
        always.on_click(lambda _b: self.answer("always"))
        deny.on_click(lambda _b: self.answer("deny"))
        super().__init__(
            [title, body, w.HBox([once, always, deny, self.reason])],
            _dom_classes=["forkagent-approval", f"forkagent-request-{self.request_id}"],
        )

    def answer(self, choice: object, reason: str | None = None) -> None:
        """Decide the call: "allow" runs it once, "always" runs it and remembers its rule;
        "deny" and every other value deny it. A second answer does nothing."""
        if self.future.done():
            return
        if choice == "allow":
            self.future.set_result(Allow())
        elif choice == "always":
            self.future.set_result(Allow(remember=True))
        else:
            why = reason if reason is not None else self.reason.value
            message = "The user denied this call" + (f": {why}" if why else ".")
            self.future.set_result(Deny(message=message))


class PendingStrip(w.HBox):
    """All approvals waiting in this kernel, one line each."""

    def __repr__(self) -> str:
        return "[forkagent pending approvals]"

    def __init__(self) -> None:
        self.label = w.HTML()
        super().__init__([self.label])
        self.prompts: list[ApprovalPrompt] = []
        self.refresh()

    def add(self, prompt: ApprovalPrompt) -> None:
        self.prompts.append(prompt)
        prompt.future.add_done_callback(lambda _f: self.remove(prompt))
        self.refresh()

    def remove(self, prompt: ApprovalPrompt) -> None:
        if prompt in self.prompts:
            self.prompts.remove(prompt)
        self.refresh()

    def refresh(self) -> None:
        if not self.prompts:
            self.layout.display = "none"
            return
        self.layout.display = "flex"
        items = ", ".join(
            f"{esc(p.request.tool_name)} ({esc(p.request.task_id or 'main')})" for p in self.prompts
        )
        self.label.value = f"<b>{len(self.prompts)} pending approval(s):</b> {items}"
