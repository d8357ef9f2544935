"""A reply whose stream breaks off mid-way is sent again from the same request (issue 14).

Faults come from the emulator (strict mode) through the real SDK over HTTP: a dropped
connection, a stream that ends before message_stop, an `event: error` with overloaded_error or
api_error. The retry must send byte-identical requests (the prompt cache still applies), keep
exactly one assistant message, and end the run cleanly once the retries are used up.
"""

from __future__ import annotations

from typing import Any

import pytest

from forkagent_jupyter.emulator.faults import Fault
from forkagent_jupyter.runtime.errors import UsageError
from forkagent_jupyter.runtime.events import LoopEvent, Retrying, Stop, TextDelta
from forkagent_jupyter.runtime.model.retry import StreamRetry
from forkagent_jupyter.runtime.session.session import fold_turn

from .test_conversation import CODE_TURN, assert_valid_history

pytestmark = pytest.mark.anyio

FAST = 0.01  # seconds: the first retry's base delay in these tests


async def run(session: Any, prompt: str) -> tuple[list[LoopEvent], Any]:
    events: list[LoopEvent] = []
    turn = await fold_turn(session.parent.stream(prompt), events.append)
    return events, turn


def assistant_messages(session: Any) -> list[dict[str, Any]]:
    return [m for m in session.messages if m["role"] == "assistant"]


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (Fault.dropped(after=2), "stream dropped"),
        (Fault.truncated(after=2), "stream ended early"),
    ],
    ids=["connection-dropped", "stream-truncated"],
)
async def test_broken_stream_is_retried_with_the_same_request(
    emulator: Any, make_session: Any, fault: Fault, reason: str
) -> None:
    reply = "The first words arrive, then the rest of a reply that is long enough."
    emulator.script(reply, reply)  # one reply per attempt
    session = make_session(stream_retry_delay=FAST)
    emulator.faults.next(fault)
    events, turn = await run(session, "Say something.")

    assert turn.stop_reason == "end_turn", turn.error
    retries = [e for e in events if isinstance(e, Retrying)]
    assert [(r.attempt, r.retries, r.reason) for r in retries] == [(1, 3, reason)]
    assert retries[0].discarded > 0  # the broken attempt had streamed some text
    assert retries[0].summary == f"{reason}, retrying (1/3)"
    # exactly one assistant message; the turn's text is the reply once, not twice
    [answer] = assistant_messages(session)
    assert turn.text == answer["content"][0]["text"]
    assert turn.text == reply
    assert turn.retries == 1
    # the retry is the very same request, byte for byte
    first, second = emulator.api_requests()
    assert first.raw == second.raw
    # the broken attempt's cache write stands: the retry reads it
    entries = emulator.ledger.entries()
    assert [e.complete for e in entries] == [False, True]
    written = int(entries[0].usage["cache_creation_input_tokens"])
    assert written > 0
    assert int(entries[1].usage["cache_read_input_tokens"]) == written
    assert_valid_history(session.messages)


@pytest.mark.parametrize("error_type", ["overloaded_error", "api_error"])
async def test_in_stream_error_event_is_retried_and_tools_run_once(
    emulator: Any, make_session: Any, error_type: str
) -> None:
    session = make_session(stream_retry_delay=FAST)
    emulator.faults.next(Fault.stream_error(after=1, error_type=error_type, message="try later"))
    events, turn = await run(session, CODE_TURN)

    assert turn.stop_reason == "end_turn", turn.error
    retries = [e for e in events if isinstance(e, Retrying)]
    assert [(r.attempt, r.reason) for r in retries] == [(1, f"{error_type} in the stream")]
    # the Python call was asked for once and ran once; history is one tool round
    assert [c.name for c in turn.tool_calls] == ["Python"]
    assert "x is 42" in turn.tool_calls[0].result
    assert session.namespace["x"] == 42
    roles = [m["role"] for m in session.messages]
    assert roles == ["user", "assistant", "user", "assistant"]
    requests = emulator.api_requests()
    assert len(requests) == 3  # broken + retry of the first request, then the second one
    assert requests[0].raw == requests[1].raw
    assert_valid_history(session.messages)


async def test_retries_used_up_fail_the_run_with_valid_history(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(stream_retries=2, stream_retry_delay=FAST)
    emulator.faults.next(Fault.stream_error(after=1), times=3)
    events, turn = await run(session, "hello there")

    assert turn.stop_reason == "error"
    assert turn.error is not None
    assert "overloaded_error" in turn.error
    assert "retried 2 times" in turn.error
    assert "\n" not in turn.error
    assert [e.attempt for e in events if isinstance(e, Retrying)] == [1, 2]
    stops = [e for e in events if isinstance(e, Stop)]
    assert len(stops) == 1 and stops[0].reason == "error"
    # nothing half-received was appended: only the prompt is there (after the agent listing)
    [only] = session.messages
    assert only["role"] == "user" and only["content"][-1] == {"type": "text", "text": "hello there"}
    requests = emulator.api_requests()
    assert len(requests) == 3 and len({r.raw for r in requests}) == 1
    # the conversation goes on: the unanswered prompt arrives with the next one
    again = await session.ask("and now `py: 6 * 7`")
    assert again.stop_reason == "end_turn", again.error
    assert again.tool_calls[0].result == "42"
    assert_valid_history(session.messages)


async def test_other_in_stream_errors_are_not_retried(emulator: Any, make_session: Any) -> None:
    session = make_session(stream_retry_delay=FAST)
    emulator.faults.next(
        Fault.stream_error(after=1, error_type="invalid_request_error", message="bad thing")
    )
    events, turn = await run(session, "hello there")
    assert turn.stop_reason == "error"
    assert turn.error is not None and "invalid_request_error" in turn.error
    assert not [e for e in events if isinstance(e, Retrying)]
    assert len(emulator.api_requests()) == 1


async def test_no_retry_when_stream_retries_is_zero(emulator: Any, make_session: Any) -> None:
    session = make_session(stream_retries=0)
    emulator.faults.next(Fault.dropped(after=2))
    events, turn = await run(session, "hello there")
    assert turn.stop_reason == "error"
    assert turn.error is not None and "broke off" in turn.error
    assert "retried" not in turn.error
    assert not [e for e in events if isinstance(e, Retrying)]
    assert len(emulator.api_requests()) == 1
    # the setting changes on a live session
    session.stream_retries = 1
    emulator.faults.next(Fault.dropped(after=2))
    again = await session.ask("once more")
    assert again.stop_reason == "end_turn", again.error
    assert again.retries == 1


async def test_text_of_a_broken_attempt_is_not_kept(emulator: Any, make_session: Any) -> None:
    reply = "alpha beta gamma delta epsilon zeta eta theta iota kappa"
    emulator.script(reply, reply)
    session = make_session(stream_retry_delay=FAST)
    emulator.faults.next(Fault.dropped(after=4))
    events, turn = await run(session, "Say something.")
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    [retry] = [e for e in events if isinstance(e, Retrying)]
    # what the UI saw: the broken attempt's text, withdrawn, then the whole reply
    assert streamed[: retry.discarded] == streamed[retry.discarded :][: retry.discarded]
    assert turn.text == reply


def test_backoff_is_exponential_with_bounded_jitter() -> None:
    policy = StreamRetry(retries=5, base_delay=1.0, max_delay=5.0, jitter=0.25)
    for attempt, base in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (5, 5.0)]:
        delays = {policy.delay(attempt) for _ in range(50)}
        assert all(0.75 * base <= d <= base for d in delays), (attempt, delays)
        assert len(delays) > 1  # jittered
    with pytest.raises(UsageError, match="stream_retries must be a whole number >= 0"):
        StreamRetry(retries=-1)
