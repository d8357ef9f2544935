"""`%trust` in a real kernel: a folder whose committed settings allow Bash is not trusted, so
the `%%agent` cell says so in one line (once) and the model's Bash call is asked, not run;
`%trust` shows what the folder asks for; `%trust yes` records the person's trust in
`~/.claude.json` (HOME a temporary folder) and the next turn applies it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import Reply

from .conftest import Kernel

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(400)]

SESSION = "__forkagent__.session"


def _bash(command: str) -> Reply:
    return Reply(({"type": "tool_use", "name": "Bash", "input": {"command": command}},))


def test_trust_magic_and_the_one_line_a_turn_says_in_a_folder_not_trusted(
    kernel: Kernel, emulator: Any, tmp_path: Path, user_home: Path
) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"allow": ["Bash"], "deny": ["Read(secret.txt)"]}})
    )
    # nobody answers the approval card here: an asked call is refused after a few seconds
    assert kernel.execute("%config ForkAgent.approval_timeout = 3").status == "ok"
    emulator.script(_bash("touch ran"), Reply.text("ok"))
    first = kernel.execute("%%agent\nGo.", timeout=120)
    assert first.status == "ok", first.texts()
    said = [line for line in first.texts().splitlines() if "is not trusted" in line]
    assert said == [
        f"this folder ({tmp_path}) is not trusted, so what its files grant is not applied: "
        "allow Bash (.claude/settings.json). Their deny and ask rules apply. %trust shows it; "
        "%trust yes trusts it (from the next turn)"
    ], first.texts()
    assert not (tmp_path / "ran").exists()  # asked (and nobody could answer): not run
    decided = kernel.value(f"[(e['tool'], e['decision'], e['by']) for e in {SESSION}.gate.log]")
    assert decided == [("Bash", "deny", "policy")]
    again = kernel.execute("%%agent\nHello.", timeout=120)
    assert "is not trusted" not in again.texts()  # said once

    shown = kernel.execute("%trust")
    assert shown.status == "ok", shown.texts()
    assert shown.texts().splitlines() == [
        f"{tmp_path}: not trusted",
        "what its files grant (1; not applied until the folder is trusted; %trust yes trusts "
        "it (from the next turn)):",
        "  allow Bash  .claude/settings.json",
        "their deny rules, ask rules and narrower modes apply already",
    ]
    bad = kernel.execute("%trust maybe")
    assert bad.status == "error" and "Traceback" not in bad.texts()
    assert "%trust: argument yes: invalid choice: 'maybe'" in json.dumps(bad.reply["content"])
    assert not (user_home / ".claude.json").exists()

    trusted = kernel.execute("%trust yes")
    assert trusted.status == "ok", trusted.texts()
    assert trusted.texts().strip() == (
        f"trusted {tmp_path} (~/.claude.json: projects[...].hasTrustDialogAccepted); what its "
        "files grant applies from the next turn"
    )
    recorded = json.loads((user_home / ".claude.json").read_text())
    assert recorded == {"projects": {str(tmp_path): {"hasTrustDialogAccepted": True}}}
    emulator.script(_bash("touch ran"), Reply.text("ok"))
    after = kernel.execute("%%agent\nGo again.", timeout=120)
    assert after.status == "ok", after.texts()
    assert (tmp_path / "ran").exists()  # the folder's allow rule applies now
    assert "is not trusted" not in after.texts()
    listed = kernel.execute("%permissions").texts()
    assert "Bash  .claude/settings.json" in listed and "not applied until" not in listed
    assert (
        kernel.execute("%trust")
        .texts()
        .startswith(f"{tmp_path}: trusted (~/.claude.json, {tmp_path})")
    )
