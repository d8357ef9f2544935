"""Forks, named agents and the task lifecycle, through the real SDK against the strict
emulator (offline brain: ```python blocks and `py:` spans run, `fork:` lines fork)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.runtime.fork import FORK_TAG
from forkagent_jupyter.runtime.permissions import AllowAll
from forkagent_jupyter.runtime.session import Session

pytestmark = pytest.mark.anyio


def make_session(emulator: Any, tmp_path: Path, **kw: Any) -> Session:
    kw.setdefault("permission_policy", AllowAll())
    kw.setdefault("home", tmp_path / "home")
    return Session(
        backend="anthropic", api_key="test-key", base_url=emulator.base_url, workdir=tmp_path, **kw
    )


def fork_bodies(emulator: Any) -> list[dict[str, Any]]:
    return [
        r.body
        for r in emulator.requests
        if r.path.startswith("/v1/messages") and FORK_TAG in json.dumps(r.body)
    ]


async def test_three_forks_share_one_cached_prefix(emulator: Any, tmp_path: Path) -> None:
    session = make_session(emulator, tmp_path, auto_respond=False)
    session.namespace["data"] = list(range(10))
    # a long enough conversation to pass the model's minimum cacheable length
    await session.ask("Context:\n" + "notes about the data set. " * 300)
    turn = await session.ask(
        "Split it.\nfork: sum `py: sum(data)`\nfork: max `py: max(data)`\nfork: len `py: len(data)`"
    )
    assert turn.stop_reason == "end_turn", turn.error
    assert [c.name for c in turn.tool_calls] == ["Agent", "Agent", "Agent"]
    tasks = await session.wait(timeout=30)
    assert len(tasks) == 3
    assert [t.status for t in tasks] == ["completed"] * 3
    results = sorted(t.result or "" for t in tasks)
    assert any("45" in r for r in results) and any("9" in r for r in results)

    firsts = fork_bodies(emulator)[:3]
    texts = [json.dumps(b, ensure_ascii=False) for b in firsts]
    cut = texts[0].index(f"<{FORK_TAG}>")
    assert all(t[:cut] == texts[0][:cut] for t in texts)  # byte-identical up to the directive
    # ledger: the first fork request writes the shared prefix, the other two read it
    entries = [e for e in emulator.ledger.entries() if e.request_id in {r for r in []}] or None
    fork_entries = emulator.ledger.entries()[-6:]  # 3 forks x (tool call + report)
    firsts_usage = sorted(
        (e.usage for e in fork_entries[:3]), key=lambda u: u["cache_read_input_tokens"]
    )
    assert entries is None
    assert firsts_usage[0]["cache_creation_input_tokens"] > 0
    shared = firsts_usage[0]["cache_read_input_tokens"] + firsts_usage[0][
        "cache_creation_input_tokens"
    ]
    assert firsts_usage[1]["cache_read_input_tokens"] >= shared - 200
    assert firsts_usage[2]["cache_read_input_tokens"] >= shared - 200
