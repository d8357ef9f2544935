"""Rate limits as the SDK meets them: the three buckets, their headers, 429 with retry-after."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import anthropic
import pytest

from forkagent_jupyter.emulator import Emulator, VirtualClock, WallClock
from forkagent_jupyter.messages_api.ratelimits import EXAMPLE_TIER, RateLimit, parse_headers

from .conftest import EPHEMERAL, MODEL, control, filler, user

KINDS = ("requests", "tokens", "input-tokens", "output-tokens")


def limited(limit: RateLimit, clock: Any = None) -> Emulator:
    emu = Emulator(strict=True, seed=0, clock=clock or VirtualClock(), rate_limits={MODEL: limit})
    emu.rate_limits.round_to = 1  # exact remaining counts, to check the arithmetic
    return emu


@pytest.fixture
def tier() -> Iterator[Emulator]:
    with limited(EXAMPLE_TIER) as emu:
        yield emu
    emu.check()


def client(emu: Emulator, retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=emu.base_url, api_key="k", max_retries=retries)


def remaining(headers: Any) -> dict[str, int]:
    return {k: r.remaining for k, r in parse_headers(dict(headers)).items()}


def test_off_by_default(emulator: Emulator, sync_client: anthropic.Anthropic) -> None:
    raw = sync_client.messages.with_raw_response.create(
        model=MODEL, max_tokens=100, messages=[user("hi")]
    )
    assert not [h for h in raw.headers if h.startswith("anthropic-ratelimit-")]
    assert parse_headers(dict(raw.headers)) == {}


def test_every_response_carries_the_documented_headers(tier: Emulator) -> None:
    with client(tier) as sdk:
        raw = sdk.messages.with_raw_response.create(
            model=MODEL, max_tokens=1000, messages=[user("hi")]
        )
        counted = sdk.messages.with_raw_response.count_tokens(model=MODEL, messages=[user("hi")])
    for headers in (raw.headers, counted.headers):
        for kind in KINDS:
            assert int(headers[f"anthropic-ratelimit-{kind}-limit"]) > 0
            assert int(headers[f"anthropic-ratelimit-{kind}-remaining"]) >= 0
            stamp = headers[f"anthropic-ratelimit-{kind}-reset"]
            assert datetime.fromisoformat(stamp.replace("Z", "+00:00")).tzinfo is not None
    assert raw.headers["anthropic-ratelimit-requests-limit"] == "50"
    assert raw.headers["anthropic-ratelimit-input-tokens-limit"] == "30000"
    assert raw.headers["anthropic-ratelimit-output-tokens-limit"] == "8000"
    assert raw.headers["anthropic-ratelimit-tokens-limit"] == "38000"  # input plus output
    left = remaining(raw.headers)
    assert left["requests"] == 49
    assert left["output-tokens"] == 8000 - 1000  # max_tokens reserved at the start
    tokens = int(raw.headers["anthropic-ratelimit-tokens-remaining"])
    assert tokens == left["input-tokens"] + left["output-tokens"]


def test_output_reservation_is_corrected_when_the_response_ends(tier: Emulator) -> None:
    tier.script("four words of reply")
    with client(tier) as sdk:
        with sdk.messages.stream(model=MODEL, max_tokens=3000, messages=[user("hi")]) as s:
            at_start = remaining(s.response.headers)["output-tokens"]
            used = s.get_final_message().usage.output_tokens
        after = sdk.messages.with_raw_response.create(
            model=MODEL, max_tokens=10, messages=[user("hi")]
        )
    assert at_start == 8000 - 3000
    assert 0 < used < 100
    assert remaining(after.headers)["output-tokens"] == 8000 - used - 10


def test_cache_reads_are_free_and_cache_writes_count(tier: Emulator) -> None:
    prefix = {"type": "text", "text": filler("ctx", 20_000), "cache_control": EPHEMERAL}
    body: dict[str, Any] = {"model": MODEL, "max_tokens": 1, "messages": [user([prefix])]}
    with client(tier) as sdk:
        first = sdk.messages.with_raw_response.create(**body)
        second = sdk.messages.with_raw_response.create(**body)
    u1, u2 = first.parse().usage, second.parse().usage
    assert u1.cache_creation_input_tokens > 4000 and u2.cache_read_input_tokens > 4000
    charged_1 = u1.input_tokens + u1.cache_creation_input_tokens
    assert remaining(first.headers)["input-tokens"] == 30_000 - charged_1
    assert remaining(second.headers)["input-tokens"] == 30_000 - charged_1 - u2.input_tokens


def test_a_request_over_a_bucket_gets_429_with_retry_after(tier: Emulator) -> None:
    with client(tier) as sdk:
        for _ in range(50):
            sdk.messages.create(model=MODEL, max_tokens=1, messages=[user("hi")])
        with pytest.raises(anthropic.RateLimitError) as info:
            sdk.messages.create(model=MODEL, max_tokens=1, messages=[user("hi")])
    err = info.value
    assert err.status_code == 429
    assert err.type == "rate_limit_error"
    assert "50 requests per minute" in str(err.message)
    assert err.response.headers["retry-after"] == "2"  # one request refills in 1.2 s
    assert "x-should-retry" not in err.response.headers
    assert err.response.headers["anthropic-ratelimit-requests-remaining"] == "0"
    throttles = tier.ledger.throttles()
    assert [(t.kind, t.request_id) for t in throttles] == [("requests", err.request_id)]
    assert len(tier.ledger) == 50  # the refused request is not billed
    assert tier.ledger.to_json()["rate_limited"][0]["kind"] == "requests"
    assert tier.violations == []  # a rate limit is not a protocol violation
    tier.clock.advance(1.2)  # the bucket refills continuously
    with client(tier) as sdk:
        sdk.messages.create(model=MODEL, max_tokens=1, messages=[user("hi")])


def test_max_tokens_over_the_output_limit_needs_a_full_bucket(tier: Emulator) -> None:
    with client(tier) as sdk:
        sdk.messages.create(model=MODEL, max_tokens=8192, messages=[user("hi")])
        with pytest.raises(anthropic.RateLimitError) as info:
            sdk.messages.create(model=MODEL, max_tokens=8192, messages=[user("hi")])
    assert "8,000 output tokens per minute" in str(info.value.message)
    # the first used a few tokens: a full bucket again once those have refilled
    wait = float(info.value.response.headers["retry-after"])
    assert 0 < wait <= 5


def test_scaled_clock_lets_the_sdk_wait_out_a_limit_in_real_time() -> None:
    # 2 RPM: the third waits up to 30 emulated seconds = 3 real seconds. The three requests
    # must go out within those 3 s for the third to be throttled (a loaded machine can take
    # a second or so for them: a faster clock made this depend on the machine's speed)
    with limited(RateLimit(2, None, None), clock=WallClock(scale=10.0)) as emu:
        with client(emu, retries=2) as sdk:
            started = time.monotonic()
            for _ in range(3):
                sdk.messages.create(model=MODEL, max_tokens=1, messages=[user("hi")])
            took = time.monotonic() - started
        throttles = emu.ledger.throttles()
        statuses = [r.status for r in emu.api_requests()]
    assert len(throttles) == 1
    assert 0 < throttles[0].retry_after <= 3.0
    assert statuses == [200, 200, 429, 200]
    assert took >= throttles[0].retry_after  # the SDK waited it out, in real time
    assert took < 30  # the scaled clock: unscaled, the wait alone would be 30 s


def test_limits_per_model_and_by_control_endpoint(emulator: Emulator) -> None:
    state = control(emulator, "POST", "rate_limits", {"limits": {MODEL: [1, None, None]}})
    assert state["limits"] == {MODEL: [1, None, None]}
    with client(emulator) as sdk:
        raw = sdk.messages.with_raw_response.create(
            model=MODEL, max_tokens=1, messages=[user("hi")]
        )
        assert raw.headers["anthropic-ratelimit-requests-remaining"] == "0"
        assert "anthropic-ratelimit-input-tokens-limit" not in raw.headers  # not limited
        other = sdk.messages.with_raw_response.create(
            model="claude-haiku-4-5", max_tokens=1, messages=[user("hi")]
        )
        assert "anthropic-ratelimit-requests-limit" not in other.headers
        with pytest.raises(anthropic.RateLimitError):
            sdk.messages.create(model=MODEL, max_tokens=1, messages=[user("hi")])
    control(emulator, "POST", "rate_limits", {"limits": None})
    with client(emulator) as sdk:
        sdk.messages.create(model=MODEL, max_tokens=1, messages=[user("hi")])


def test_token_remaining_is_rounded_to_thousands_as_documented(tier: Emulator) -> None:
    tier.rate_limits.round_to = 1000
    with client(tier) as sdk:
        raw = sdk.messages.with_raw_response.create(
            model=MODEL, max_tokens=1300, messages=[user("hi")]
        )
    assert raw.headers["anthropic-ratelimit-output-tokens-remaining"] == "7000"  # 6700
    assert raw.headers["anthropic-ratelimit-requests-remaining"] == "49"  # not rounded


def test_the_command_line_sets_rate_limits_and_the_clock_scale() -> None:
    from forkagent_jupyter.emulator.__main__ import build_emulator, build_parser

    ns = build_parser().parse_args(["--rate-limit", "50,30000,8000", "--time-scale", "20"])
    with build_emulator(ns) as emu, client(emu) as sdk:
        raw = sdk.messages.with_raw_response.create(
            model=MODEL, max_tokens=10, messages=[user("hi")]
        )
        assert emu.rate_limits.limit_for(MODEL) == EXAMPLE_TIER
        assert emu.clock.now() > 0 and getattr(emu.clock, "scale", None) == 20.0
    assert raw.headers["anthropic-ratelimit-output-tokens-limit"] == "8000"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--rate-limit", "50,30000"])
    off = build_parser().parse_args([])
    assert off.rate_limit is None  # off by default
