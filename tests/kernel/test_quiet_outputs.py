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
