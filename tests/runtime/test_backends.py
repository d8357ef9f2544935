"""Choosing the backend: the SDK's own credential resolution, "no credentials" said only when
that is why the offline model runs, and the SDK's platform clients (Vertex AI and Foundry
against the emulator; Bedrock's AWS event-stream responses are not served by the emulator)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from forkagent_jupyter.emulator import Emulator
from forkagent_jupyter.emulator.faults import Fault
from forkagent_jupyter.runtime.errors import ConfigError, UsageError
from forkagent_jupyter.runtime.permissions.gate import AllowAll
from forkagent_jupyter.runtime.session.session import Session

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
NOTICE = "no Anthropic credentials found"
CREDENTIAL_VARS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CONFIG_DIR",
    "ANTHROPIC_FEDERATION_RULE_ID",
    "ANTHROPIC_ORGANIZATION_ID",
    "ANTHROPIC_IDENTITY_TOKEN",
    "ANTHROPIC_IDENTITY_TOKEN_FILE",
    "FORKAGENT_BACKEND",
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No credential anywhere the SDK looks: variables unset, an empty home."""
    for name in CREDENTIAL_VARS:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    yield home


def _sessions_stderr(code: str, tmp_path: Path) -> str:
    """Make Sessions in a fresh process (the notice is said once per process); its stderr."""
    script = f"from forkagent_jupyter.runtime import Session\nworkdir = {str(tmp_path)!r}\n" + code
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_no_credentials_is_said_once_and_only_then(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    twice = (
        "for _ in range(2):\n"
        "    s = Session(workdir=workdir, transcripts=False)\n"
        "    assert s.backend == 'offline', s.backend\n"
    )
    assert _sessions_stderr(twice, tmp_path).count(NOTICE) == 1

    key = "sk-ant-test-" + "0" * 24
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    explicit = (
        "s = Session(backend='offline', workdir=workdir, transcripts=False)\n"
        "assert s.backend == 'offline'\n"
    )
    err = _sessions_stderr(explicit, tmp_path)
    assert NOTICE not in err and "credentials" not in err
    assert key not in err
    monkeypatch.setenv("FORKAGENT_BACKEND", "offline")
    by_env = "s = Session(workdir=workdir, transcripts=False)\nassert s.backend == 'offline'\n"
    assert NOTICE not in _sessions_stderr(by_env, tmp_path)


def _write_profile(config_dir: Path, base_url: str, token: str) -> None:
    """An SDK profile whose access token is minted elsewhere (user_oauth, no client_id)."""
    (config_dir / "configs").mkdir(parents=True)
    (config_dir / "credentials").mkdir()
    (config_dir / "configs" / "default.json").write_text(
        json.dumps({"authentication": {"type": "user_oauth"}, "base_url": base_url})
    )
    secret = config_dir / "credentials" / "default.json"
    secret.write_text(json.dumps({"access_token": token}))
    secret.chmod(0o600)


async def test_an_sdk_profile_is_a_credential(
    clean_env: Path, tmp_path: Path, emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "profile-access-token-" + "7" * 20
    _write_profile(clean_env / ".config" / "anthropic", emulator.base_url, token)
    # Session() is synchronous and the SDK reads its profile file there, once: the caller's
    # own blocking call, made here off the loop (as a script makes it)
    session = await asyncio.to_thread(
        Session, workdir=tmp_path, permission_policy=AllowAll(), home=clean_env
    )
    try:
        assert session.backend == "anthropic"
        turn = await session.ask("Say hello.")
        assert turn.ok, turn.error
    finally:
        await session.aclose()
    (request,) = emulator.api_requests()
    assert request.headers["authorization"] == f"Bearer {token}"
    assert "x-api-key" not in request.headers
    _assert_secret_absent(token, session, tmp_path)


def test_a_broken_profile_is_an_error_not_offline(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_PROFILE", "missing")
    with pytest.raises(ConfigError, match="credentials could not be loaded"):
        Session(workdir=tmp_path, transcripts=False)


def _assert_secret_absent(secret: str, session: Session, workdir: Path) -> None:
    assert secret not in json.dumps(session.messages)
    for path in (workdir / ".forkagent").rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path


def _platform_session(
    backend: str,
    key: str,
    emulator: Emulator,
    workdir: Path,
    home: Path,
    model: str | None = None,
) -> Session:
    """A session on a cloud platform's SDK client, pointed at the emulator."""
    return Session(
        model,
        backend=backend,
        api_key=key,
        base_url=emulator.base_url,
        workdir=workdir,
        permission_policy=AllowAll(),
        home=home,
    )


async def test_vertex_through_the_sdk_client(
    clean_env: Path, tmp_path: Path, emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
    monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "demo-project")
    token = "ya29.vertex-access-token-" + "5" * 16
    session = _platform_session("vertex", token, emulator, tmp_path, clean_env)
    try:
        assert session.backend == "vertex"
        first = await session.ask("Say hello.")
        second = await session.ask("And again.")
        assert first.ok and second.ok, (first.error, second.error)
        assert second.usage.cache_read_input_tokens > 0  # cache markers survive the route
    finally:
        await session.aclose()
    requests = emulator.api_requests(
        "/projects/demo-project/locations/us-east5/publishers/anthropic/models/"
        f"{session.model}:streamRawPredict"
    )
    assert len(requests) == 2
    assert requests[0].headers["authorization"] == f"Bearer {token}"
    assert emulator.api_requests() == []  # nothing went to the first-party path
    _assert_secret_absent(token, session, tmp_path)


async def test_foundry_through_the_sdk_client(
    clean_env: Path, tmp_path: Path, emulator: Emulator
) -> None:
    key = "foundry-key-" + "3" * 20
    session = _platform_session("foundry", key, emulator, tmp_path, clean_env)
    try:
        assert session.backend == "foundry"
        turn = await session.ask("Say hello.")
        assert turn.ok, turn.error
    finally:
        await session.aclose()
    (request,) = emulator.api_requests()
    assert request.headers["api-key"] == key  # Foundry's own header, next to x-api-key
    _assert_secret_absent(key, session, tmp_path)


async def test_bedrock_through_the_sdk_client(
    clean_env: Path, tmp_path: Path, emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bedrock's route, its body and its AWS event-stream frames, decoded by the SDK's Bedrock
    client (botocore); an exception frame, a dropped connection or an early end mid-stream
    is sent again, as a broken first-party stream is."""
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    key = "bedrock-api-key-" + "9" * 24
    model = "us.anthropic.claude-sonnet-4-6-v1:0"  # a cross-region inference profile
    session = _platform_session("bedrock", key, emulator, tmp_path, clean_env, model)
    try:
        assert session.backend == "bedrock"
        first = await session.ask("Say hello.")
        emulator.faults.next(Fault.stream_error(after=1, error_type="overloaded_error"))
        second = await session.ask("And again.")
        emulator.faults.next(Fault.dropped(after=1))
        third = await session.ask("Once more.")
        emulator.faults.next(Fault.truncated(after=1))
        fourth = await session.ask("And the last.")
        turns = (first, second, third, fourth)
        assert all(t.ok for t in turns), [t.error for t in turns]
        assert [t.retries for t in turns] == [0, 1, 1, 1]
        assert second.usage.cache_read_input_tokens > 0  # cache markers survive the route
    finally:
        await session.aclose()
    requests = emulator.api_requests(f"/model/{model}/invoke-with-response-stream")
    assert len(requests) == 7  # each broken stream was sent again
    assert requests[0].headers["authorization"] == f"Bearer {key}"
    assert requests[0].body["model"] == "claude-sonnet-4-6"  # the catalog model of the id
    assert emulator.api_requests() == []  # nothing went to the first-party path
    assert emulator.violations == []
    _assert_secret_absent(key, session, tmp_path)


def test_bedrock_without_botocore_is_one_clear_message(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "botocore", None)  # as if the extra were not installed
    with pytest.raises(ConfigError, match=r"needs botocore.*forkagent-jupyter\[bedrock\]"):
        Session(backend="bedrock", api_key="bedrock-key", workdir=tmp_path)


def test_platform_misconfiguration_is_one_clear_message(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLOUD_ML_REGION", raising=False)
    with pytest.raises(ConfigError, match="backend 'vertex': No region was given"):
        Session(backend="vertex", api_key="token-000000000", workdir=tmp_path)
    monkeypatch.delenv("ANTHROPIC_FOUNDRY_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="backend 'foundry': Missing credentials"):
        Session(backend="foundry", workdir=tmp_path)


def test_unknown_backend_lists_the_choices(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="'bedrock', 'vertex', 'foundry', 'offline'"):
        Session(backend="azure", workdir=tmp_path)
