"""`%permissions` and `api.permissions()` in a real kernel: the rules in force with the file
each came from, and the refused ones with why (settings files written for the test, HOME a
temporary folder); `api.allow` refuses a bad rule in one line and adds the others."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime.helpers import trust_folder

from .conftest import Kernel

pytestmark = pytest.mark.kernel


@pytest.fixture
def settings_kernel(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Kernel]:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["Bash(rm:*)"], "allow": ["Bash()"]}})
    )
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"allow": ["Bash(npm run *)"], "defaultMode": "acceptEdits"}})
    )
    trust_folder(tmp_path, home)  # the person trusts the folder: its allow rules and mode apply
    monkeypatch.setenv("HOME", str(home))
    yield request.getfixturevalue("kernel")


def test_permissions_magic_lists_rules_sources_and_refusals(settings_kernel: Kernel) -> None:
    k = settings_kernel
    k.execute("from forkagent_jupyter.kernel import api\napi.allow('Python')")
    shown = k.execute("%permissions")
    assert shown.status == "ok", shown.texts()
    text = shown.texts()
    assert "Permission mode: acceptEdits (.claude/settings.json)" in text
    assert "Bash(rm:*)  ~/.claude/settings.json" in text
    assert "Bash(npm run *)  .claude/settings.json" in text
    assert "Python           api.allow" in text
    assert "allow Bash()  ~/.claude/settings.json: 'Bash()' has an empty spec" in text
    data = k.value("(await api.permissions())['deny']")
    assert data == [{"rule": "Bash(rm:*)", "source": "~/.claude/settings.json"}]
    bad = k.execute("api.allow('bash', 'Read')")
    assert bad.status == "error" and "Traceback" not in bad.texts()
    assert "did you mean Bash" in json.dumps(bad.reply["content"])
    assert "Read" in k.value("[r['rule'] for r in (await api.permissions())['allow']]")
