"""After a kernel restart, `%send` to a named agent resumes it even with bad agent files
beside its own: one line per bad file, never a traceback (it raised the first bad file's
YAML error through a long traceback before)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.reported import tool_outputs

from .conftest import Kernel

START = """\
s = __forkagent__.session
d = await s.workers.definition("counter")
t = s.workers.start(s.workers.named(s.main, d, "Count `py: 1 + 1`", description="count"))
await s.wait(t.id, timeout=30)
print("RESULT", t.id, t.status)
"""


def test_send_after_restart_with_bad_agent_files(
    kernel: Kernel, emulator: Any, tmp_path: Path
) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "counter.md").write_text("---\ndescription: counts\ntools: Python\n---\nCount.\n")
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    started = kernel.execute(START)
    assert started.status == "ok", started.texts()
    line = next(ln for ln in started.texts().splitlines() if ln.startswith("RESULT"))
    _, agent_id, status = line.split()
    assert status == "completed"

    kernel.km.restart_kernel(now=True)
    kernel.client.wait_for_ready(timeout=60)
    assert kernel.execute("%load_ext forkagent_jupyter").status == "ok"
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    (agents / "broken.md").write_text("---\ndescription: x\ntools:\n  - Read\n - Grep\n---\n")
    (agents / "negative.md").write_text("---\ndescription: x\nmaxTurns: -3\n---\n")
    resumed = kernel.execute(f"%send {agent_id} again `py: 3 * 3`")
    text = resumed.texts()
    assert resumed.status == "ok", text
    assert "resumed from its transcript" in text
    assert "Traceback" not in text
    kernel.execute("%tasks --wait", timeout=60)
    key = f"__forkagent__.session.registry.get('{agent_id}')"
    assert kernel.value(f"{key}.status") == "completed"
    result = kernel.value(f"{key}.result")
    assert tool_outputs(result) == ["9"], result
    # each bad file was said once, in one line naming the file, the line and the field
    said = [ln for ln in text.splitlines() if "broken.md" in ln or "negative.md" in ln]
    assert any("broken.md:5: field 'tools'" in ln for ln in said), said
    assert any("negative.md:3: field 'maxTurns'" in ln for ln in said), said
