"""The key is not in the environment block the kernel started with: every process of the same
user can read that block (`/proc/<pid>/environ`), so a tool's command (`cat`, `tr` on
`/proc/$PPID/environ`, then `rev` past the redaction) took the key from it. The variable keeps
its value for the process and for the child processes it starts."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

KEY = "sk-ant-api03-" + "Kq7" * 14

PROGRAM = """
import subprocess
from forkagent_jupyter.runtime.model.credentials import anthropic_client
import os
assert anthropic_client() is not None
seen = subprocess.run(
    ["sh", "-c", "tr '\\\\0' '\\\\n' < /proc/$PPID/environ"], capture_output=True, text=True
).stdout
inherited = subprocess.run(
    ["sh", "-c", "echo $ANTHROPIC_API_KEY"], capture_output=True, text=True
).stdout.strip()
print(repr((seen, inherited, os.environ["ANTHROPIC_API_KEY"])))
"""


def test_the_environment_block_does_not_show_the_key(tmp_path: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "ANTHROPIC_API_KEY": KEY,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen, inherited, own = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert "ANTHROPIC_API_KEY=" in seen and KEY not in seen
    assert KEY[::-1] not in seen[::-1]
    assert inherited == KEY and own == KEY  # the process and its children keep the key
