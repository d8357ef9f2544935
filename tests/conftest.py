"""Shared fixtures: a strict Anthropic-compatible emulator on an ephemeral port, SDK clients.

- ``emulator``: started per test with ``strict=True``. At teardown ``emulator.check()`` fails
  the test if any request was rejected by validation (a protocol violation by the code under
  test). A test that sends bad requests on purpose wraps them in
  ``with emulator.expect_violations(): ...`` or uses ``lenient_emulator``.
- ``lenient_emulator``: the same server with ``strict=False`` (no teardown check).
- ``sync_client`` / ``async_client``: ``anthropic.Anthropic`` / ``AsyncAnthropic`` pointed at
  ``emulator.base_url`` with ``api_key="test-key"`` and the SDK's default retries.
- ``user_home`` (every test but the packaging and browser ones): HOME is an empty folder of
  its own, so a person's ~/.claude or ~/.forkagent never reaches a test.
- ``loop_guard`` (every test): records each blocking call that the package makes on a
  running event loop (file or socket I/O, sleeps, contended locks: see ``tests/loop_guard.py``)
  and fails the test at its end, listing the calls and their stacks. A test that blocks on
  purpose reads ``loop_guard.findings`` and clears them.
- Tests run in random order (pytest-randomly; the seed is printed, ``-p randomly
  --randomly-seed=N`` repeats an order, ``-p no:randomly`` runs them in file order).
- Async tests run on anyio's pytest plugin: mark them ``@pytest.mark.anyio`` (or set
  ``pytestmark = pytest.mark.anyio``); ``anyio_backend`` selects asyncio.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from forkagent_jupyter.emulator import Emulator
from forkagent_jupyter.runtime.permissions.gate import AllowAll
from forkagent_jupyter.runtime.session.session import Session
from tests.dask_cluster import cluster
from tests.loop_guard import LoopGuard, guarded


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def loop_guard() -> Iterator[LoopGuard]:
    with guarded() as guard:
        yield guard
    if guard.findings:
        pytest.fail(guard.report(), pytrace=False)


@pytest.fixture(scope="session")
def _mpl_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("matplotlib")


@pytest.fixture(autouse=True)
def user_home(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
    _mpl_config: Path,
) -> Path | None:
    """An empty home directory for each test (HOME, inherited by the kernels it starts): the
    settings, agents, MCP servers and memory a person keeps in their own home never reach a
    test, and nothing a test writes there reaches another. Matplotlib's cache is shared by
    the run (built once). Not for the packaging and browser tests: the wheel's build uses
    the machine's own package-manager setup, the browser tests set up their own home."""
    if {"distribution", "browser"} & set(request.path.parts):
        return None
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MPLCONFIGDIR", os.environ.get("MPLCONFIGDIR") or str(_mpl_config))
    return home


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator(strict=True, seed=0) as emu:
        yield emu
    emu.check()


@pytest.fixture
def lenient_emulator() -> Iterator[Emulator]:
    with Emulator(strict=False, seed=0) as emu:
        yield emu


@pytest.fixture
def sync_client(emulator: Emulator) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(base_url=emulator.base_url, api_key="test-key")
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
async def async_client(emulator: Emulator) -> AsyncIterator[anthropic.AsyncAnthropic]:
    client = anthropic.AsyncAnthropic(base_url=emulator.base_url, api_key="test-key")
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def make_session(emulator: Emulator, tmp_path: Path) -> AsyncIterator[Callable[..., Session]]:
    """Sessions on the emulator (real SDK over HTTP), closed at the end of the test."""
    made: list[Session] = []

    def make(**kw: Any) -> Session:
        kw.setdefault("permission_policy", AllowAll())
        kw.setdefault("home", tmp_path / "home")
        kw.setdefault("workdir", tmp_path)
        session = Session(backend="anthropic", api_key="test-key", base_url=emulator.base_url, **kw)
        made.append(session)
        return session

    yield make
    for session in made:
        await session.aclose()


@pytest.fixture(scope="module")
def dask_address() -> Iterator[str]:
    """The scheduler address of a local Dask cluster (`tests/dask_cluster.py`), one per test
    module that asks for it."""
    with cluster() as address:
        yield address
