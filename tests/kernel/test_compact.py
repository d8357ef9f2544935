"""%compact, ForkAgent.compact_at, %fork --turns and the context size in %tasks, in a real
kernel against the emulator."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import Kernel
from .test_no_math import exposed_dollars

pytestmark = pytest.mark.kernel

SESSION = "__forkagent__.session"
NOTES = "lorem ipsum dolor sit amet " * 40


def test_compact_magic_shows_what_it_did(kernel: Kernel, emulator: Any) -> None:
    for i in range(4):
        assert kernel.execute(f"%%agent\nCell {i}: {NOTES}").status == "ok"
    before = kernel.value(f"len({SESSION}.messages)")
    assert before == 8
    shown = kernel.execute("%compact --keep 1", timeout=60)
    assert shown.status == "ok", shown.texts()
    text = shown.texts()
    assert "Compacted the conversation" in text
    assert "summary request:" in text and "tokens read from cache" in text and "$" in text
    assert "<td>messages</td><td>8</td><td>2</td>" in text
    assert exposed_dollars(text) == [], text  # the cost is kept out of math typesetting
    assert kernel.value(f"len({SESSION}.messages)") == 2
    first = kernel.value(f"{SESSION}.messages[0]['content'][0]['text']")
    assert first.startswith("<conversation-summary>")
    # the summary request read the conversation from the prompt cache
    summary = emulator.api_requests()[-1]
    assert "<compaction-request>" in json.dumps(summary.body["messages"][-1])
    usage = {e.request_id: e.usage for e in emulator.ledger.entries()}[summary.request_id]
    assert usage["cache_read_input_tokens"] > 0
    # the conversation goes on from the summary
    assert kernel.execute("%%agent\nAnd now?").status == "ok"
    assert kernel.value(f"len({SESSION}.messages)") == 4
    # bad input: one line each, nothing changed
    for code, expected in {
        "%compact --keep 0": "%compact: --keep needs a number of turns >= 1",
        "%compact now": "%compact: unrecognized arguments: now",
    }.items():
        result = kernel.execute(code)
        assert result.reply["content"]["ename"] == "UsageError", code
        assert expected in result.reply["content"]["evalue"]
    nothing = kernel.execute("%compact --keep 5")
    assert "nothing to compact" in nothing.texts()
    assert kernel.value(f"len({SESSION}.messages)") == 4


def test_compact_at_setting_applies_live_and_refuses_bad_values(kernel: Kernel) -> None:
    kernel.execute(f"{SESSION}")
    assert kernel.value(f"{SESSION}.compact_at") == 0.8
    assert kernel.execute("%config ForkAgent.compact_at = 0.5").status == "ok"
    assert kernel.value(f"{SESSION}.compact_at") == 0.5
    assert kernel.value(f"{SESSION}.main.config.compaction.compact_at") == 0.5
    refused = kernel.execute("%config ForkAgent.compact_at = 1.5")
    assert "ForkAgent.compact_at = 1.5 refused: it takes a fraction" in refused.texts()
    assert kernel.value(f"{SESSION}.compact_at") == 0.5
    assert kernel.value("__forkagent__.settings.compact_at") == 0.5
    assert kernel.execute("%config ForkAgent.compact_at = None").status == "ok"
    assert kernel.value(f"{SESSION}.compact_at") is None


def test_fork_turns_and_context_in_tasks(kernel: Kernel, emulator: Any) -> None:
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    for i in range(3):
        assert kernel.execute(f"%%agent\nCell {i}: {NOTES}").status == "ok"
    started = kernel.execute("%fork --turns 1 --name recent Sum: `py: 2 + 3`")
    assert started.status == "ok", started.texts()
    kernel.execute("%tasks --wait recent", timeout=60)
    fork_first = next(
        r.body for r in emulator.api_requests() if "Directive: Sum" in json.dumps(r.body)
    )
    texts = json.dumps(fork_first["messages"])
    assert "Cell 2:" in texts and "Cell 1:" not in texts and "Cell 0:" not in texts
    assert kernel.value(f"{SESSION}.registry.get('recent').status") == "completed"
    bad = kernel.execute("%fork --turns zero Sum again")
    assert bad.reply["content"]["evalue"] == "%fork: argument --turns: invalid int value: 'zero'"
    none = kernel.execute("%fork --turns 0 Sum again")
    assert "%fork: --turns needs a number of turns >= 1" in none.reply["content"]["evalue"]
    # the context of the parent and of each task against its window
    table = kernel.execute("%tasks")
    data = next(m["content"]["data"] for m in table.messages if m["msg_type"] == "display_data")
    parent = kernel.value(f"{SESSION}.main.state.context_tokens")
    window = kernel.value(f"{SESSION}.context_window")
    worker = kernel.value(f"{SESSION}.registry.get('recent').context_tokens")
    assert parent > 0 and worker > 0
    assert f"main (parent) · context {parent:,} / {window:,}" in data["text/plain"]
    assert f"context {worker:,} / {window:,}" in data["text/plain"]
    assert "<th>context</th>" in data["text/html"]
    assert f"parent: context {parent:,} / {window:,}" in data["text/html"]
