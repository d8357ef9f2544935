"""A cell shows what matters to its reader, and no empty widget rows."""

from __future__ import annotations

import pytest

from .conftest import Execution, Kernel
from .test_compute import wait_until

pytestmark = pytest.mark.kernel

STRIP = "[forkagent pending approvals]"


def _shown(run: Execution) -> list[str]:
    return [
        m["content"]["data"].get("text/plain", "")
        for m in run.messages
        if m["msg_type"] == "display_data"
    ]


def test_the_approvals_strip_shows_only_while_an_approval_waits(kernel: Kernel) -> None:
    """An empty approvals strip had been displayed under every %fork cell (a row in JupyterLab,
    its name in a text frontend); it is shown in a cell only while something waits."""
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    quiet = kernel.execute("%fork --name calm count `py: 6 * 7`")
    assert quiet.status == "ok", quiet.texts()
    assert STRIP not in _shown(quiet)
    kernel.execute("%tasks --wait calm", timeout=120)
    kernel.execute("%config ForkAgent.permission_mode = 'default'")
    kernel.execute("%config ForkAgent.approval_timeout = 600")
    kernel.execute("%fork --name asks write `py: open('a.txt', 'w').write('x')`")
    wait_until(kernel, "len(__forkagent__.ui.pending)", timeout=120)
    asked = kernel.execute("%fork --name next count `py: 6 * 8`")
    assert STRIP in _shown(asked)  # something waits: the strip names it here


def _plain(run: Execution) -> str:
    return "\n".join(
        m["content"]["data"].get("text/plain", "")
        for m in run.messages
        if m["msg_type"] in ("display_data", "execute_result")
    )


def test_tasks_lists_a_line_each_and_tasks_name_shows_one_whole(kernel: Kernel) -> None:
    """`%tasks` had repeated every worker's result; it lists one line a task, and
    `%tasks NAME` shows that task whole (its result, every earlier one)."""
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    for name in ("alpha", "beta"):
        kernel.execute(f"%fork --name {name} list `py: print('\\n'.join(['RESULT' + 'LINE'] * 5))`")
    kernel.execute("%tasks --wait alpha beta", timeout=120)
    listed = _plain(kernel.execute("%tasks"))
    rows = [line for line in listed.splitlines() if line.startswith(("alpha ", "beta "))]
    assert len(rows) == 2, listed
    assert "RESULTLINE" not in listed  # no result lines
    assert "%tasks NAME shows one task whole" in listed
    whole = kernel.execute("%tasks alpha")
    assert "RESULTLINE" in _plain(whole) and "beta" not in _plain(whole)
    html = "".join(
        m["content"]["data"].get("text/html", "")
        for m in whole.messages
        if m["msg_type"] in ("display_data", "execute_result")
    )
    assert "<details open class='forkagent-results'>" in html
