"""The card's "Allow for session" button shows the exact rule the click adds, before the
click; with no rule that says exactly the call, it is disabled."""

from __future__ import annotations

from typing import Any

import ipywidgets as w
import pytest

from forkagent_jupyter.kernel.cards.hub import ApprovalPrompt
from forkagent_jupyter.runtime.permissions.gate import Allow, PermissionRequest

pytestmark = pytest.mark.anyio


def _buttons(widget: Any) -> list[w.Button]:
    if isinstance(widget, w.Button):
        return [widget]
    return [b for child in getattr(widget, "children", ()) for b in _buttons(child)]


def _html(widget: Any) -> str:
    if isinstance(widget, w.HTML):
        return str(widget.value)
    return "".join(_html(child) for child in getattr(widget, "children", ()))


def _request(rule: str | None) -> PermissionRequest:
    return PermissionRequest(
        tool_name="Bash",
        input={"command": "sh -c 'echo hi'"},
        agent_id="a",
        task_id="t",
        summary="Bash: sh -c 'echo hi'",
        preview="sh -c 'echo hi'",
        subject="sh -c 'echo hi'",
        suggested_rule=rule,
    )


async def test_the_button_names_the_exact_rule() -> None:
    prompt = ApprovalPrompt(_request("Bash(sh -c 'echo hi')"))
    always = next(b for b in _buttons(prompt) if b.description.startswith("Allow for session"))
    assert always.description == "Allow for session: Bash(sh -c 'echo hi')"
    assert not always.disabled and "Bash(sh -c 'echo hi')" in always.tooltip
    assert "Allow for session adds <code>Bash(sh -c &#x27;echo hi&#x27;)</code>" in _html(prompt)
    always.click()
    assert prompt.future.result() == Allow(remember=True)


async def test_a_long_rule_is_shown_whole_next_to_the_button() -> None:
    rule = "Bash(" + "echo " + "x" * 200 + ")"
    prompt = ApprovalPrompt(_request(rule))
    always = next(b for b in _buttons(prompt) if b.description.startswith("Allow for session"))
    assert len(always.description) < 100 and always.description.endswith("…")
    assert rule in _html(prompt)


async def test_without_an_exact_rule_the_button_is_disabled() -> None:
    prompt = ApprovalPrompt(_request(None))
    always = next(b for b in _buttons(prompt) if b.description.startswith("Allow for session"))
    assert always.disabled and always.description == "Allow for session"
    assert "allow it once" in always.tooltip


async def test_a_call_asked_in_every_mode_says_why_and_offers_no_rule() -> None:
    """A write to a file that runs later is asked even in acceptEdits: the card says why,
    and no rule is offered (none would ever let it through)."""
    why = (
        ".git/config runs later without being asked (git runs the commands a repository's "
        "configuration and hooks name), so a change to it is always approved by the user"
    )
    request = PermissionRequest(
        tool_name="Write",
        input={"file_path": ".git/config", "content": "[core]\n"},
        agent_id="a",
        task_id="t",
        summary="Write .git/config (1 lines)",
        preview="+[core]",
        reason=why,
    )
    prompt = ApprovalPrompt(request)
    assert "runs later without being asked (git runs the commands a repository&#x27;s" in _html(
        prompt
    )
    always = next(b for b in _buttons(prompt) if b.description.startswith("Allow for session"))
    assert always.disabled
