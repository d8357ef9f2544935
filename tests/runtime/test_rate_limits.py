"""The pacer: a fan-out waits for rate-limit room instead of failing on 429s (real SDK, the
emulator's rate limits on a clock twelve times faster than real time)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator import Emulator, Fault, WallClock
from forkagent_jupyter.messages_api.ratelimits import RateLimit
from forkagent_jupyter.messages_api.usage import Usage
from forkagent_jupyter.runtime.model.pacer import RATE_WAIT, Pacer
from forkagent_jupyter.runtime.session.session import Session
from forkagent_jupyter.runtime.tasks.registry import Task

from .helpers import first_fork_requests, paced_session

pytestmark = pytest.mark.anyio

MODEL = "claude-sonnet-5-5"
SCALE = 12.0  # a rate-limit minute lasts five real seconds


@pytest.fixture
def fast_emulator() -> Iterator[Emulator]:
    with Emulator(strict=True, seed=0, clock=WallClock(scale=SCALE)) as emu:
        yield emu
    emu.check()


@pytest.fixture
async def session_on(tmp_path: Path) -> AsyncIterator[Callable[[Emulator], Session]]:
    made: list[Session] = []

    def make(emu: Emulator) -> Session:
        session = paced_session(emu.base_url, tmp_path, MODEL, 60.0 / SCALE, max_tokens=400)
        made.append(session)
        return session

    yield make
    for session in made:
        await session.aclose()


def watch_activity(session: Session) -> list[str]:
    seen: list[str] = []

    def note(task: Task) -> None:
        if task.activity and (not seen or seen[-1] != task.activity):
            seen.append(task.activity)

    session.registry.subscribe(note)
    return seen


def statuses(emu: Emulator) -> list[int | None]:
    return [r.status for r in emu.api_requests()]


async def fan_out(session: Session, n: int) -> list[Task]:
    await session.ask("Here is the context. " + "The data loads slowly today. " * 300)
    tasks = [await session.fork(f"Part {i}: summarise your share.") for i in range(n)]
    await session.wait(*(t.id for t in tasks), timeout=120)
    return tasks


async def test_a_fan_out_waits_for_room_and_no_task_fails(
    fast_emulator: Emulator, session_on: Callable[[Emulator], Session]
) -> None:
    # 3 requests per rate-limit minute (5 real seconds): whatever the speed of this machine,
    # the parent's turn and 6 forks need more than one
    fast_emulator.rate_limits.configure({MODEL: RateLimit(3, 100_000, 100_000)})
    session = session_on(fast_emulator)
    shown = watch_activity(session)
    tasks = await fan_out(session, 6)
    assert [t.status for t in tasks] == ["completed"] * 6
    pacer = session.rate_limits.pacer(MODEL)
    assert pacer.known and pacer.waited > 0
    assert fast_emulator.ledger.throttles() == []  # paced: no request was sent to fail
    assert 429 not in statuses(fast_emulator)
    assert any(a.startswith(f"{RATE_WAIT} (") and a.endswith(" s)") for a in shown)
    assert all(not t.activity for t in tasks)  # cleared once sent
    assert "RPM" in pacer.describe() and "rate-limited (429)" in pacer.describe()


async def test_the_lead_fork_still_goes_first_and_siblings_read_its_cache(
    fast_emulator: Emulator, session_on: Callable[[Emulator], Session]
) -> None:
    fast_emulator.rate_limits.configure({MODEL: RateLimit(3, 100_000, 100_000)})
    session = session_on(fast_emulator)
    await fan_out(session, 6)
    firsts = first_fork_requests(fast_emulator)
    assert len(firsts) == 6
    writes = [int(u["cache_creation_input_tokens"]) for _, u in firsts]
    reads = [int(u["cache_read_input_tokens"]) for _, u in firsts]
    shared = max(reads)
    assert shared > 1000
    assert all(r == shared for r in reads[1:])  # every sibling read the leader's write
    assert all(w < writes[0] or writes[0] == 0 for w in writes[1:])


async def test_output_reservations_pace_by_max_tokens_and_cache_reads_are_free(
    fast_emulator: Emulator, session_on: Callable[[Emulator], Session]
) -> None:
    # ITPM far below the shared context (about 2,400 tokens a fork would read): only the
    # uncached tokens count, so it does not bind; OTPM 1,200 with max_tokens 400 does
    fast_emulator.rate_limits.configure({MODEL: RateLimit(1000, 3_000, 1_200)})
    session = session_on(fast_emulator)
    tasks = await fan_out(session, 8)
    assert [t.status for t in tasks] == ["completed"] * 8
    pacer = session.rate_limits.pacer(MODEL)
    assert pacer.waited > 0
    assert len(fast_emulator.ledger.throttles()) <= 1


async def test_without_rate_limit_headers_nothing_is_held_back(
    fast_emulator: Emulator, session_on: Callable[[Emulator], Session]
) -> None:
    session = session_on(fast_emulator)
    tasks = await fan_out(session, 6)
    assert [t.status for t in tasks] == ["completed"] * 6
    pacer = session.rate_limits.pacer(MODEL)
    assert not pacer.known
    assert pacer.waited == 0 and pacer.sent == 7
    assert "nothing held back" in pacer.describe()


async def test_a_429_after_the_sdk_retries_is_waited_out_not_a_failed_task(
    fast_emulator: Emulator, session_on: Callable[[Emulator], Session]
) -> None:
    session = session_on(fast_emulator)
    shown = watch_activity(session)
    await session.ask("Some context to fork from.")
    # five 429s in a row: the SDK's own two retries are not enough
    fast_emulator.faults.next(Fault.rate_limited(retry_after=0.2), times=5)
    task = await session.fork("Part 1: summarise.")
    await session.wait(task.id, timeout=60)
    assert task.status == "completed", task.error
    assert statuses(fast_emulator).count(429) == 5
    pacer = session.rate_limits.pacer(MODEL)
    assert pacer.throttled >= 1
    assert any(a.startswith(RATE_WAIT) for a in shown)


async def test_the_parent_turn_waits_too(
    fast_emulator: Emulator, session_on: Callable[[Emulator], Session]
) -> None:
    fast_emulator.rate_limits.configure({MODEL: RateLimit(1, None, None)})
    session = session_on(fast_emulator)
    first = await session.ask("hello")
    second = await session.ask("again")  # one request per (5-second) minute: it waits
    assert first.ok and second.ok
    assert session.rate_limits.pacer(MODEL).waited == 1
    assert 429 not in statuses(fast_emulator)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_headers_keep_the_pacers_copy_at_or_under_the_servers_level() -> None:
    pacer = Pacer(MODEL)
    headers: dict[str, Any] = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "40",
        "anthropic-ratelimit-output-tokens-limit": "8000",
        "anthropic-ratelimit-output-tokens-remaining": "3000",  # rounded: 2,500 to 3,499
    }
    pacer.observe(headers)
    assert int(pacer.buckets["requests"].level) == 40
    assert int(pacer.buckets["output-tokens"].level) == 2500
    ticket = await pacer.acquire(input_tokens=0, max_tokens=1000)  # let through, unseen
    assert int(pacer.buckets["output-tokens"].level) == 1500
    more = {
        **headers,
        "anthropic-ratelimit-requests-remaining": "45",
        "anthropic-ratelimit-output-tokens-remaining": "4000",
    }
    pacer.observe(more)  # another response's: it may not count the request under way
    assert int(pacer.buckets["requests"].level) == 44
    assert int(pacer.buckets["output-tokens"].level) == 2500
    pacer.observe({**headers, "anthropic-ratelimit-requests-remaining": "20"}, ticket)
    assert int(pacer.buckets["requests"].level) == 20  # lowered: another client spends too
    pacer.settle(ticket, Usage(output_tokens=300))
    assert int(pacer.buckets["output-tokens"].level) == 3200  # the reservation corrected
    pacer.observe({"anthropic-ratelimit-requests-limit": "junk"})  # ignored, no error
    assert int(pacer.buckets["requests"].capacity) == 50


async def test_the_batch_prewarm_goes_through_the_pacer(
    fast_emulator: Emulator, session_on: Callable[[Emulator], Session]
) -> None:
    fast_emulator.rate_limits.configure({MODEL: RateLimit(1, None, None)})
    session = session_on(fast_emulator)
    await session.ask("Here is the context. " + "The data loads slowly today. " * 300)
    fan = await session.fan_out(["Part A.", "Part B."], batch=True, poll_interval=0.02)
    tasks = await fan.batch.wait(timeout=30)
    assert [t.status for t in tasks] == ["completed"] * 2
    entries = fast_emulator.ledger.entries()
    prewarms = [e for e in entries if not e.streamed and e.service_tier == "standard"]
    assert len(prewarms) == 1 and prewarms[0].usage["output_tokens"] == 0
    pacer = session.rate_limits.pacer(MODEL)
    assert pacer.sent == 2 and pacer.waited == 1  # 1 RPM: the pre-warm waited its turn
    assert 429 not in statuses(fast_emulator)


SKEW = 0.1
"""Seconds of refill the pacer's copy and the server's bucket may stand apart (see below)."""


def _levels(pacer: Pacer) -> dict[str, float]:
    now = pacer.now()
    return {
        kind: min(b.capacity, b.level + max(now - b.at, 0.0) * b.rate)
        for kind, b in pacer.buckets.items()
    }


def _server_levels(emu: Emulator) -> dict[str, float]:
    return {b["kind"]: float(b["level"]) for b in emu.rate_limits.snapshot()["buckets"]}


async def test_the_pacers_copy_matches_the_servers_buckets_request_after_request(
    tmp_path: Path,
) -> None:
    # a clock only twice real time: the buckets stay well below full between the requests,
    # so a copy that is off (the rounding of -remaining, the first request's input counted
    # twice, the headers read late) shows; -reset then carries the exact level
    tier = RateLimit(50, 30_000, 8_000)
    with Emulator(strict=True, seed=0, clock=WallClock(scale=2.0), rate_limits=tier) as emu:
        session = paced_session(emu.base_url, tmp_path, MODEL, 60.0 / 2.0, max_tokens=400)
        pacer = session.rate_limits.pacer(MODEL)
        below: list[bool] = []

        def compare(step: str) -> None:
            # the server's level between two reads of the copy (both refill meanwhile); the
            # copy is set from a wall-clock -reset and kept on the monotonic clock, the server
            # keeps its own: on a loaded machine the two readings of "now" may stand tens of
            # milliseconds apart, so the copy may differ by SKEW seconds of refill, no more (the
            # faults this looks for are hundreds or thousands of tokens)
            before = _levels(pacer)
            server = _server_levels(emu)
            after = _levels(pacer)
            assert set(server) == set(before) == {"requests", "input-tokens", "output-tokens"}
            gap = {}
            for kind, level in server.items():
                low, high = min(before[kind], after[kind]), max(before[kind], after[kind])
                slack = 1 + pacer.buckets[kind].rate * SKEW
                ok = low - slack <= level <= high + slack
                gap[kind] = 0.0 if ok else level - before[kind]
            below.append(server["input-tokens"] < 30_000 and server["output-tokens"] < 8_000)
            assert all(g == 0.0 for g in gap.values()), (step, server, before, after)

        try:
            await session.ask("Here is the context. " + "The data loads slowly today. " * 800)
            compare("the first turn (sent before the limits were known)")
            for i in range(3):
                task = await session.fork(f"Part {i}: summarise your share.")
                await session.wait(task.id, timeout=60)
                assert task.status == "completed", task.error
                compare(f"fork {i}")
                await session.ask(f"And now part {i}?")
                compare(f"turn {i}")
        finally:
            await session.aclose()
        assert pacer.sent == 7 and emu.ledger.throttles() == []
        # not between two full buckets: they were below full at every comparison
        assert all(below), below
    emu.check()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_headers_of_a_request_the_server_admitted_first_do_not_raise_the_copy() -> None:
    # two requests let through in turn reach the server the other way round; the first one
    # ends before the second one's headers are read: those headers do not count it yet
    pacer = Pacer(MODEL)
    limits = {"anthropic-ratelimit-requests-limit": "50"}
    pacer.observe({**limits, "anthropic-ratelimit-requests-remaining": "40"})
    first = await pacer.acquire(input_tokens=0, max_tokens=0)
    second = await pacer.acquire(input_tokens=0, max_tokens=0)
    assert int(pacer.buckets["requests"].level) == 38
    pacer.settle(first, Usage(output_tokens=1))
    pacer.observe({**limits, "anthropic-ratelimit-requests-remaining": "39"}, second)
    assert int(pacer.buckets["requests"].level) == 38  # the server holds 38 by now
    pacer.settle(second, Usage(output_tokens=1))
    assert int(pacer.buckets["requests"].level) == 38


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_reset_header_gives_the_level_now_within_the_rounding() -> None:
    pacer = Pacer(MODEL)
    full_in = 3.0  # the bucket is full again in 3 s: 8,000 - 3 x 8,000 / 60 = 7,600 now
    reset = datetime.now(timezone.utc) + timedelta(seconds=full_in)
    headers = {
        "anthropic-ratelimit-output-tokens-limit": "8000",
        "anthropic-ratelimit-output-tokens-remaining": "8000",  # 7,600 rounded
        "anthropic-ratelimit-output-tokens-reset": reset.isoformat().replace("+00:00", "Z"),
    }
    pacer.observe(headers)
    assert 7590 <= pacer.buckets["output-tokens"].level <= 7601
    # a reset that disagrees with -remaining (a clock far off) stays within the rounding
    pacer = Pacer(MODEL)
    late = datetime.now(timezone.utc) + timedelta(seconds=50)
    pacer.observe({**headers, "anthropic-ratelimit-output-tokens-reset": late.isoformat()})
    assert pacer.buckets["output-tokens"].level == 7500


class _ClockPacer(Pacer):
    """A pacer on a clock the test moves."""

    t = 1000.0

    def now(self) -> float:  # type: ignore[override]
        return self.t


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_copy_does_not_refill_past_requests_still_on_their_way() -> None:
    # the server's bucket is full and stays full until the request reaches it: the copy,
    # which took the request already, refills only to the limit less its cost
    pacer = _ClockPacer(MODEL)
    headers = {
        "anthropic-ratelimit-output-tokens-limit": "8000",
        "anthropic-ratelimit-output-tokens-remaining": "8000",
    }
    pacer.observe(headers)
    ticket = await pacer.acquire(input_tokens=0, max_tokens=1000)
    pacer.t += 60.0  # a whole minute on its way (a slow network, a busy event loop)
    assert "OTPM 7,000/8,000" in pacer.describe()
    pacer.observe({**headers, "anthropic-ratelimit-output-tokens-remaining": "7000"}, ticket)
    pacer.t += 60.0  # the server has it now: its bucket refills
    assert "OTPM 8,000/8,000" in pacer.describe()
    pacer.settle(ticket, Usage(output_tokens=300))
    assert "OTPM 8,000/8,000" in pacer.describe()
