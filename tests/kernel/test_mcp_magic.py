"""`%mcp` in a real kernel: the servers of `.mcp.json` with their state and tools (a real
MCPServer over stdio, and one that cannot start, with why); a bad argument is one line; the
server's processes end when the extension is unloaded (the session closes)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from tests.runtime.helpers import trust_folder

from .conftest import Kernel

pytestmark = pytest.mark.kernel

DEMO = Path(__file__).resolve().parents[1] / "runtime" / "mcp_fixtures" / "demo_server.py"


def test_mcp_magic_lists_servers_states_and_tools(
    kernel: Kernel, tmp_path: Path, user_home: Path
) -> None:
    pids = tmp_path / "pids"
    ran = tmp_path / "theirs-ran"  # written by the server `theirs` if it were started
    servers = {
        "demo": {"command": sys.executable, "args": [str(DEMO)], "env": {"PID_FILE": str(pids)}},
        "gone": {"command": str(tmp_path / "no-such-server")},
        "theirs": {"command": sys.executable, "args": [str(DEMO)], "env": {"PID_FILE": str(ran)}},
    }
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    (tmp_path / ".claude").mkdir()
    approved = {"enabledMcpjsonServers": ["demo", "gone"]}  # the person's approval
    (tmp_path / ".claude" / "settings.local.json").write_text(json.dumps(approved))
    trust_folder(tmp_path, user_home)  # in a folder the person trusts: approval is what is left
    shown = kernel.execute("%mcp", timeout=120)
    assert shown.status == "ok", shown.texts()
    text = shown.texts()
    assert "MCP servers (2):" in text
    assert "  demo  connected  (stdio, .mcp.json)" in text
    assert "    tools: mcp__demo__add, mcp__demo__crash, mcp__demo__hang, mcp__demo__shout" in text
    assert "  gone  failed: " in text and "no-such-server" in text
    assert "  theirs  not approved  (stdio, .mcp.json)" in text  # not in the approval list
    assert "add its name to enabledMcpjsonServers" in text
    assert not ran.exists()
    assert "Traceback" not in text
    bad = kernel.execute("%mcp now")
    assert bad.status == "error" and "Traceback" not in bad.texts()
    assert "invalid choice: 'now'" in json.dumps(bad.reply["content"])
    local = tmp_path / ".claude" / "settings.local.json"
    approved = kernel.execute("%mcp approve theirs", timeout=60)
    assert approved.status == "ok" and "Traceback" not in approved.texts()
    assert (
        "MCP server 'theirs' approved in .claude/settings.local.json (enabledMcpjsonServers); "
        "it starts at this session's next turn"
    ) in approved.texts()
    assert json.loads(local.read_text())["enabledMcpjsonServers"] == ["demo", "gone", "theirs"]
    listed = kernel.execute("%mcp", timeout=120).texts()  # its next use: no restart needed
    assert "MCP servers (3):" in listed and "  theirs  connected  (stdio, .mcp.json)" in listed
    assert "not approved" not in listed and ran.read_text().split()  # its process runs
    for line, said in (
        ("%mcp approve", "%mcp: approve takes one server name (%mcp approve NAME)"),
        ("%mcp approve a__b", "%mcp: 'a__b' is not a server name"),
    ):
        refused = kernel.execute(line, timeout=60)
        shown_text = json.dumps(refused.reply["content"]) + json.dumps(
            [m["content"] for m in refused.messages]
        )
        assert said in shown_text and "Traceback" not in refused.texts()
    assert json.loads(local.read_text())["enabledMcpjsonServers"] == ["demo", "gone", "theirs"]
    assert pids.read_text().split()  # `demo` ran; `theirs` ends the same way
    # its processes as this machine numbers them (it has a PID namespace of its own)
    started = _holding(f"PID_FILE={pids}")
    assert started
    assert kernel.execute("%unload_ext forkagent_jupyter").status == "ok"
    deadline = time.monotonic() + 30
    while _holding(f"PID_FILE={pids}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _holding(f"PID_FILE={pids}")


def _holding(variable: str) -> list[int]:
    """Pids of live processes (not zombies) whose environment holds `variable`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().split(") ")[-1][:1]
        except OSError:
            continue
        if variable.encode() in environ and state != "Z":
            found.append(int(entry.name))
    return found
