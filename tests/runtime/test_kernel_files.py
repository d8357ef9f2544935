"""The kernel's connection file and Jupyter's runtime folder are out of every file tool's
reach, in every mode: with the notebook in the home folder (or the home folder among the
additional directories) Read had read `~/.local/share/jupyter/runtime/kernel-*.json`, whose key
has the kernel run any code, and Grep had shown it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jupyter_core.paths  # noqa: F401  (the sandbox asks Jupyter where its runtime folder is)
import pytest

from forkagent_jupyter.runtime import Deny
from forkagent_jupyter.runtime.tools.base import Tool, ToolContext
from forkagent_jupyter.runtime.tools.files import GrepTool, ReadTool, WriteTool

pytestmark = pytest.mark.anyio

KEY = "a0b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d"


@pytest.fixture
def home(user_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The notebook works in the home folder; Jupyter's runtime folder is inside it, holding a
    kernel's connection file."""
    runtime = user_home / ".local" / "share" / "jupyter" / "runtime"
    runtime.mkdir(parents=True)
    (runtime / "kernel-1.json").write_text(json.dumps({"key": KEY, "shell_port": 1}))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    (user_home / "notes.txt").write_text("no key here\n")
    return user_home.resolve()


async def _run(session: Any, tool: Tool[Any], raw: dict[str, Any]) -> tuple[Any, str]:
    ctx = ToolContext(workdir=session.workdir)
    decision = await session.gate.check(tool, tool.parse(raw), ctx, raw)
    if isinstance(decision, Deny):
        return decision, ""
    return decision, await tool.run(tool.parse(raw), ctx)


@pytest.mark.parametrize("mode", ["default", "acceptEdits", "bypassPermissions"])
async def test_no_file_tool_reads_or_writes_the_kernels_connection_file(
    make_session: Any, home: Path, mode: str
) -> None:
    session = make_session(workdir=home, home=home, permission_mode=mode, permission_policy=None)
    session.gate.add_rule("Read")
    session.gate.add_rule("Write")
    path = ".local/share/jupyter/runtime/kernel-1.json"
    read, _ = await _run(session, ReadTool(), {"file_path": path})
    assert isinstance(read, Deny) and "runtime folder" in read.message, read
    assert KEY not in read.message
    wrote, _ = await _run(session, WriteTool(), {"file_path": path, "content": "{}"})
    assert isinstance(wrote, Deny)
    planted, _ = await _run(
        session, WriteTool(), {"file_path": ".local/share/jupyter/runtime/x.json", "content": "1"}
    )
    assert isinstance(planted, Deny) and "runtime folder" in planted.message
    # a search of the home folder does not show it, and still finds the rest
    _, found = await _run(session, GrepTool(), {"pattern": "key", "path": "."})
    assert KEY not in found and "kernel-1.json" not in found
    assert "notes.txt" in found
