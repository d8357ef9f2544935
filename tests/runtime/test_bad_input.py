"""Bad input gets one clear message; nothing crashes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.runtime.errors import ConfigError, UsageError
from forkagent_jupyter.runtime.session.session import Session

pytestmark = pytest.mark.anyio


def test_missing_key_with_anthropic_backend_forced(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        Session(backend="anthropic", workdir=tmp_path)


def test_unknown_backend(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^backend = 'gpt' refused: it takes one of 'anthropic'"):
        Session(backend="gpt", workdir=tmp_path)


def test_no_key_means_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("FORKAGENT_BACKEND", raising=False)
    assert Session(workdir=tmp_path).backend == "offline"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-" + "ant-not-a-real-key-000000")
    assert Session(workdir=tmp_path).backend == "anthropic"


async def test_empty_prompt(emulator: Any, make_session: Any) -> None:
    session = make_session()
    for prompt in ("", "   \n"):
        with pytest.raises(UsageError, match="The prompt is empty"):
            await session.ask(prompt)
    assert session.messages == []
    assert emulator.ledger.entries() == []


async def test_unknown_model_is_one_clear_error(emulator: Any, make_session: Any) -> None:
    session = make_session(model="claude-nonexistent-9")
    with emulator.expect_violations():
        turn = await session.ask("hello")
    assert turn.stop_reason == "error"
    assert turn.error is not None
    assert "claude-nonexistent-9" in turn.error and "not found" in turn.error
    assert "\n" not in turn.error
    # the prompt stays in the history; nothing half-made was appended
    assert [m["role"] for m in session.messages] == ["user"]


async def test_workdir_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        Session(backend="offline", workdir=tmp_path / "missing")
