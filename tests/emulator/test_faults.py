"""Injected faults as the SDK sees them: retries, retry headers, mid-stream errors, drops."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import pytest

from forkagent_jupyter.emulator import Emulator, Fault
from forkagent_jupyter.emulator.faults import rate_limit_headers

from .conftest import MODEL, control, user

HI: dict[str, Any] = {"model": MODEL, "max_tokens": 50, "messages": [user("hi")]}


def retry_counts(emulator: Emulator) -> list[int | None]:
    return [r.retry_count for r in emulator.api_requests()]


def test_529_twice_then_success_is_three_attempts(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.script("finally")
    emulator.faults.next(Fault.overloaded(retry_after_ms=1), times=2)
    message = sync_client.messages.create(**HI)
    assert message.content[0].text == "finally"
    assert retry_counts(emulator) == [0, 1, 2]
    assert [r.status for r in emulator.api_requests()] == [529, 529, 200]
    assert [r.fault for r in emulator.api_requests()] == [True, True, False]
    assert len(emulator.ledger) == 1  # failed attempts are not billed
    assert emulator.violations == []  # injected faults are not violations


@pytest.mark.anyio
async def test_529_three_times_exhausts_async_retries(
    emulator: Emulator, async_client: anthropic.AsyncAnthropic
) -> None:
    emulator.faults.next(Fault.overloaded(retry_after_ms=1), times=3)
    with pytest.raises(anthropic.OverloadedError) as info:
        await async_client.messages.create(**HI)
    assert info.value.status_code == 529
    assert info.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": info.value.request_id,
    }
    assert retry_counts(emulator) == [0, 1, 2]
    assert emulator.ledger.entries() == []


def test_mid_stream_error_is_status_200_and_not_retried(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.script("a reply long enough to be cut into several text deltas")
    emulator.faults.next(Fault.stream_error(after=3))
    with pytest.raises(anthropic.APIStatusError) as info, sync_client.messages.stream(**HI) as s:
        for _ in s:
            pass
    assert type(info.value) is anthropic.APIStatusError
    assert info.value.status_code == 200
    assert info.value.body["error"]["type"] == "overloaded_error"
    assert retry_counts(emulator) == [0]
    [entry] = emulator.ledger.entries()
    assert entry.complete is False and entry.usage["output_tokens"] == 1


@pytest.mark.anyio
async def test_mid_stream_error_async(
    emulator: Emulator, async_client: anthropic.AsyncAnthropic
) -> None:
    emulator.faults.next(Fault.stream_error(after=0, error_type="api_error", message="boom"))
    with pytest.raises(anthropic.APIStatusError) as info:
        async with async_client.messages.stream(**HI) as stream:
            await stream.get_final_message()
    assert info.value.status_code == 200
    assert info.value.body == {"type": "error", "error": {"type": "api_error", "message": "boom"}}
    assert retry_counts(emulator) == [0]


def test_stream_error_fault_on_a_json_request_is_an_error_status(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.faults.next(Fault.stream_error(after=1))
    with pytest.raises(anthropic.OverloadedError):
        sync_client.with_options(max_retries=0).messages.create(**HI)


def test_429_retry_after_is_honoured(emulator: Emulator, sync_client: anthropic.Anthropic) -> None:
    emulator.faults.next(Fault.rate_limited(retry_after=0.3))
    sync_client.messages.create(**HI)
    first, second = emulator.api_requests()
    assert first.status == 429 and second.status == 200
    assert second.time - first.time >= 0.25  # the SDK waited what retry-after said
    assert [first.retry_count, second.retry_count] == [0, 1]


def test_429_headers_without_retry(emulator: Emulator, sync_client: anthropic.Anthropic) -> None:
    emulator.faults.next(Fault.rate_limited(retry_after=7, headers=rate_limit_headers()))
    with pytest.raises(anthropic.RateLimitError) as info:
        sync_client.with_options(max_retries=0).messages.create(**HI)
    headers = info.value.response.headers
    assert headers["retry-after"] == "7"
    assert "x-should-retry" not in headers  # 429 is retryable
    assert headers["anthropic-ratelimit-requests-remaining"] == "3999"
    assert headers["anthropic-ratelimit-tokens-reset"].endswith("Z")
    assert info.value.type == "rate_limit_error"


def test_dropped_connection_is_retried(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.faults.next(Fault.dropped())
    message = sync_client.messages.create(**HI)
    assert message.type == "message"
    assert retry_counts(emulator) == [0, 1]
    assert len(emulator.ledger) == 1


def test_drop_mid_stream_raises_and_keeps_the_cache_write(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.faults.next(Fault.dropped(after=2))
    # the SDK does not wrap a transport error raised while iterating a stream
    cut = pytest.raises(httpx2.RemoteProtocolError, match="incomplete chunked read")
    with cut, sync_client.messages.stream(**HI) as stream:
        stream.get_final_message()
    assert retry_counts(emulator) == [0]
    [entry] = emulator.ledger.entries()
    assert entry.complete is False


def test_drop_mid_json_body_is_retried(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.faults.next(Fault(drop="mid"))
    assert sync_client.messages.create(**HI).type == "message"
    assert retry_counts(emulator) == [0, 1]
    # the first response had started: its cache plan was committed and it was billed
    assert [e.complete for e in emulator.ledger.entries()] == [False, True]


def test_4xx_fault_is_not_retried_unless_the_server_says_so(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.faults.next(Fault.error(403))
    with pytest.raises(anthropic.PermissionDeniedError) as info:
        sync_client.messages.create(**HI)
    assert info.value.response.headers["x-should-retry"] == "false"
    assert retry_counts(emulator) == [0]
    emulator.faults.next(Fault.error(400, "try again", should_retry=True, retry_after_ms=1), 2)
    assert sync_client.messages.create(**HI).type == "message"
    assert retry_counts(emulator) == [0, 0, 1, 2]


@pytest.mark.parametrize(
    ("status", "exc", "error_type"),
    [
        (401, anthropic.AuthenticationError, "authentication_error"),
        (402, anthropic.APIStatusError, "billing_error"),
        (404, anthropic.NotFoundError, "not_found_error"),
        (409, anthropic.ConflictError, "conflict_error"),
        (413, anthropic.APIStatusError, "request_too_large"),
        (500, anthropic.InternalServerError, "api_error"),
        (504, anthropic.InternalServerError, "timeout_error"),
        (529, anthropic.OverloadedError, "overloaded_error"),
    ],
)
def test_every_status_maps_to_its_exception(
    emulator: Emulator,
    sync_client: anthropic.Anthropic,
    status: int,
    exc: type[anthropic.APIStatusError],
    error_type: str,
) -> None:
    emulator.faults.next(Fault.error(status))
    with pytest.raises(exc) as info:
        sync_client.with_options(max_retries=0).messages.create(**HI)
    assert info.value.status_code == status
    assert info.value.type == error_type


def test_fault_by_header_and_by_user_id(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    client = sync_client.with_options(max_retries=0)
    with pytest.raises(anthropic.OverloadedError):  # ad-hoc: the header names a status
        client.messages.create(**HI, extra_headers={"x-emulator-fault": "529"})
    emulator.faults.on_header("slow-429", Fault.rate_limited(retry_after=9))
    with pytest.raises(anthropic.RateLimitError) as info:
        client.messages.create(**HI, extra_headers={"x-emulator-fault": "slow-429"})
    assert info.value.response.headers["retry-after"] == "9"
    emulator.faults.on_user("user-7", Fault.error(500, "user seven fails"), times=1)
    assert client.messages.create(**HI, metadata={"user_id": "someone"}).type == "message"
    with pytest.raises(anthropic.InternalServerError, match="user seven fails"):
        client.messages.create(**HI, metadata={"user_id": "user-7"})
    assert client.messages.create(**HI, metadata={"user_id": "user-7"}).type == "message"


def test_faults_through_the_control_endpoint(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    snap = control(
        emulator,
        "POST",
        "faults",
        {"faults": [{"fault": {"status": 529, "retry_after_ms": 1}, "times": 1}]},
    )
    assert snap["rules"][0]["times"] == 1
    sync_client.messages.create(**HI)
    assert retry_counts(emulator) == [0, 1]
    assert control(emulator, "GET", "faults")["rules"] == []
    control(emulator, "POST", "faults", {"faults": [{"fault": 500, "times": None}]})
    control(emulator, "POST", "faults", {"clear": True})
    assert sync_client.messages.create(**HI).type == "message"


def test_count_tokens_faults(emulator: Emulator, sync_client: anthropic.Anthropic) -> None:
    emulator.faults.next(Fault.overloaded(retry_after_ms=1), endpoint="count_tokens")
    sync_client.messages.create(**HI)  # not affected
    counted = sync_client.messages.count_tokens(model=MODEL, messages=[user("hi")])
    assert counted.input_tokens > 0
    paths = [(r.path, r.status) for r in emulator.requests]
    assert paths == [
        ("/v1/messages", 200),
        ("/v1/messages/count_tokens", 529),
        ("/v1/messages/count_tokens", 200),
    ]


def test_truncated_stream_ends_cleanly_before_message_stop(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.script("a reply long enough to be cut into several text deltas")
    emulator.faults.next(Fault.truncated(after=2))
    with sync_client.messages.with_streaming_response.create(**HI, stream=True) as response:
        assert response.status_code == 200
        text = "".join(response.iter_lines())  # no transport error: the body ended cleanly
    assert "content_block_delta" in text
    assert "message_delta" not in text and "message_stop" not in text and "error" not in text
    assert retry_counts(emulator) == [0]
    [entry] = emulator.ledger.entries()
    assert entry.complete is False


def test_faults_at_a_rate_are_seeded() -> None:
    from forkagent_jupyter.emulator.faults import FaultPlan

    kinds = (Fault.dropped(after=1), Fault.stream_error(after=1), Fault.truncated(after=1))

    def draws(seed: int) -> list[Fault | None]:
        plan = FaultPlan()
        plan.at_rate(0.3, *kinds, seed=seed)
        out = [plan.take("messages", HI, {}) for _ in range(2000)]
        assert plan.take("count_tokens", HI, {}) is None  # messages only, by default
        assert plan.injected == sum(f is not None for f in out)
        return out

    first = draws(seed=7)
    assert draws(seed=7) == first  # the same requests meet the same faults
    assert draws(seed=8) != first
    hit = [f for f in first if f is not None]
    assert 0.26 < len(hit) / len(first) < 0.34
    assert {f.drop or "error" for f in hit} == {"mid", "end", "error"}
    with pytest.raises(ValueError, match="between 0 and 1"):
        FaultPlan().at_rate(1.5, Fault.dropped(after=1))


def test_rate_faults_through_the_control_endpoint(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    snap = control(
        emulator,
        "POST",
        "faults",
        {"faults": [{"fault": {"status": 529, "retry_after_ms": 1}, "rate": 1.0, "seed": 3}]},
    )
    assert snap["rules"][0]["rate"] == 1.0 and snap["rules"][0]["times"] is None
    with pytest.raises(anthropic.OverloadedError):
        sync_client.messages.create(**HI)  # every attempt meets it: rate 1, no limit
    assert retry_counts(emulator) == [0, 1, 2]
    control(emulator, "POST", "faults", {"clear": True, "faults": [{"fault": 529, "rate": 0.0}]})
    assert sync_client.messages.create(**HI).type == "message"
