"""A rate-limited fan-out in a real kernel: `%tasks` shows the pacer's state and which tasks
wait for rate-limit room; they all complete."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from forkagent_jupyter.emulator import Emulator, WallClock
from forkagent_jupyter.messages_api.ratelimits import RateLimit

from .conftest import Kernel

SESSION = "__forkagent__.session"
SCALE = 30.0  # the emulator's minute lasts two real seconds


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    limits = RateLimit(2, None, None)  # two requests per (two-second) minute
    with Emulator(strict=True, seed=0, clock=WallClock(scale=SCALE), rate_limits=limits) as emu:
        yield emu
    emu.check()


def test_tasks_shows_the_pacer_and_waiting_tasks(kernel: Kernel, emulator: Emulator) -> None:
    assert kernel.execute(f"{SESSION}.rate_limits.period = {60 / SCALE}").status == "ok"
    assert kernel.execute("%%agent\nHello.").status == "ok"
    for i in range(5):
        started = kernel.execute(f"%fork --name w{i} Part {i}: summarise.")
        assert started.status == "ok", started.texts()
    table = kernel.execute("%tasks")
    data = next(m["content"]["data"] for m in table.messages if m["msg_type"] == "display_data")
    assert "rate limits: claude-" in data["text/plain"]
    assert "RPM " in data["text/plain"] and "waiting" in data["text/plain"]
    assert "waiting for rate limit (" in data["text/plain"]  # a card line
    assert "running · waiting for rate limit (" in data["text/html"]
    assert "forkagent-rate-limits" in data["text/html"]
    kernel.execute("%tasks --wait", timeout=60)
    for i in range(5):
        assert kernel.value(f"{SESSION}.registry.get('w{i}').status") == "completed"
    assert [r.status for r in emulator.api_requests()].count(429) == 0
