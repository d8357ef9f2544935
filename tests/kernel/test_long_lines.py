"""Long `%fork` and `%send` lines: our `{name}` interpolation only (IPython's own expansion of
a magic's line took 72 s for 100 KB); a line this long answers well within the timeout."""

from __future__ import annotations

import pytest

from .conftest import Kernel
from .test_compute import SESSION, setup, wait_until

pytestmark = pytest.mark.kernel

LONG = "data " * 20_000  # 100 KB


def test_a_long_fork_and_send_line_returns_at_once(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("marker = 'MARKER-' + str(6 * 7)")
    forked = kernel.execute(
        f"%fork --name big sleep then look at {{marker}} {LONG} `py: import time; time.sleep(5)`",
        timeout=30,
    )
    assert forked.status == "ok", forked.texts()
    history = f"str({SESSION}.workers.runs[{SESSION}.registry.get('big').id].history)"
    assert kernel.value(f"'MARKER-42' in {history} and '{{marker}}' not in {history}") is True
    wait_until(kernel, f"{SESSION}.registry.get('big').current_tool == 'Python'")
    sent = kernel.execute(f"%send big also {{marker}} {LONG}", timeout=30)
    assert sent.status == "ok", sent.texts()
    indented = kernel.execute(f"if True:\n    %send big again {{marker}} {LONG}", timeout=30)
    assert indented.status == "ok", indented.texts()
    kernel.run_approving("%tasks --wait big", timeout=60)
    assert kernel.value(f"{history}.count('MARKER-42')") >= 3
