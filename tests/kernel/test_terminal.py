"""Terminal IPython (no kernel, no loop between cells): the extension refuses in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_terminal_ipython_gets_one_line_and_no_traceback(tmp_path: Path) -> None:
    code = (
        "ip = get_ipython()\n"
        "ip.run_line_magic('load_ext', 'forkagent_jupyter')\n"
        "print('magics:', 'fork' in ip.magics_manager.magics['line'])\n"
    )
    env = {**os.environ, "FORKAGENT_BACKEND": "offline", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "IPython", "--no-banner", "--colors=NoColor", "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "forkagent_jupyter: not loaded - it needs a Jupyter kernel" in out
    assert out.count("forkagent_jupyter: not loaded") == 1
    assert "Traceback" not in out and "magics: False" in out
