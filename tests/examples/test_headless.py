"""A notebook run without a frontend (nbclient, as papermill and nbconvert run it): an approval
nobody can answer is announced at once and denied after a short wait, not hung on."""

from __future__ import annotations

from collections.abc import Callable

import nbformat
import pytest

from .conftest import Executed

pytestmark = pytest.mark.kernel


def test_an_approval_in_a_headless_run_is_announced_then_denied(
    run_notebook: Callable[..., Executed],
) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "%load_ext forkagent_jupyter\n%config ForkAgent.headless_approval_timeout = 2.0"
        ),
        nbformat.v4.new_code_cell("%fork --name asker compute `py: 6 * 7`"),
        nbformat.v4.new_code_cell("%tasks --wait asker"),
        nbformat.v4.new_code_cell(
            "from forkagent_jupyter.kernel import api\n"
            "task = api.session().registry.get('asker')\n"
            "print(task.status, '|', task.result)"
        ),
    ]
    # without the headless rule the call would wait for the 600 s approval timeout and this
    # run would hit nbclient's timeout instead
    ran = run_notebook(nb, timeout=60)
    text = ran.all_text()
    assert "approval needed: Python for worker" in text
    assert "api.allow('Python')" in text and "Denied in 2 s" in text
    outcome = ran.text("from forkagent_jupyter.kernel import api")
    assert outcome.startswith("completed |")
    assert "without a frontend (headless)" in outcome  # the model read why it was denied
    assert text.count("approval needed:") <= 2  # at once, and again in the cell that waits


def test_a_parent_approval_denied_in_a_headless_run_is_saved_as_denied(
    run_notebook: Callable[..., Executed],
) -> None:
    """The parent's own call cannot be answered in a headless run (its cell is the one that
    runs): it is refused at once, and the saved notebook says how to allow it; no approval
    prompt is left behind waiting."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "%load_ext forkagent_jupyter\n%config ForkAgent.headless_approval_timeout = 600"
        ),
        nbformat.v4.new_code_cell("%%agent\nCompute it. `py: 6 * 7`"),
    ]
    ran = run_notebook(nb, timeout=60)  # the old 600 s wait would hit nbclient's timeout
    shown = ran.text("%%agent")
    assert "Not approved" in shown and "api.allow('Python')" in shown, shown
    assert "waiting for an answer" not in shown
