"""API faults, failing tools and invalid tool input end or continue a turn cleanly."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from forkagent_jupyter.emulator.brains import Reply
from forkagent_jupyter.emulator.faults import Fault
from forkagent_jupyter.runtime.tools import builtin_tools
from forkagent_jupyter.runtime.tools.base import Tool, ToolContext

from .test_conversation import CODE_TURN, assert_valid_history

pytestmark = pytest.mark.anyio


async def test_two_overloads_then_success_completes(emulator: Any, make_session: Any) -> None:
    session = make_session()
    emulator.faults.next(Fault.overloaded(retry_after_ms=0), times=2)
    turn = await session.ask(CODE_TURN)
    assert turn.stop_reason == "end_turn", turn.error
    counts = [r.retry_count for r in emulator.api_requests()]
    assert counts[:3] == [0, 1, 2]  # three attempts for the first request
    assert len(emulator.ledger.entries()) == 2  # only successful responses are billed


async def test_mid_stream_error_ends_the_turn_and_keeps_history(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(stream_retries=0)  # retries: see test_stream_retries.py
    await session.ask(CODE_TURN)
    kept = list(session.messages)
    emulator.faults.next(Fault.stream_error(after=1))
    turn = await session.ask("and then? `py: 1`")
    assert turn.stop_reason == "error"
    assert turn.error is not None and "overloaded_error" in turn.error
    assert "\n" not in turn.error
    # nothing half-received was added; the prompt is kept for the next turn
    assert session.messages[: len(kept)] == kept
    assert session.messages[-1]["role"] == "user"
    assert len(emulator.api_requests()) == 3  # not retried (stream_retries=0)
    again = await session.ask("try again `py: 2 + 2`")
    assert again.stop_reason == "end_turn"
    # the unanswered prompt and the new one arrive together, as one user message
    assert [c.result for c in again.tool_calls] == ["1", "4"]
    assert_valid_history(session.messages)


async def test_dropped_connection_mid_stream_ends_the_turn_cleanly(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(stream_retries=0)
    emulator.faults.next(Fault.dropped(after=2))
    turn = await session.ask("hello there")
    assert turn.stop_reason == "error"
    assert turn.error is not None and "broke off" in turn.error
    assert [m["role"] for m in session.messages] == ["user"]
    again = await session.ask("and now `py: 6 * 7`")
    assert again.stop_reason == "end_turn" and again.tool_calls[0].result == "42"


class BoomInput(BaseModel):
    what: str


class Boom(Tool[BoomInput]):
    name: ClassVar[str] = "Boom"
    description: ClassVar[str] = "Always fails."
    input_model = BoomInput
    concurrency_safe = True
    needs_approval = False
    allowed_in_plan = True

    async def run(self, args: BoomInput, ctx: ToolContext) -> str:
        raise RuntimeError(f"kaboom {args.what}")


async def test_raising_tool_and_invalid_input_become_error_results(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(tools=[*builtin_tools(), Boom()])
    emulator.script(
        Reply(
            (
                {"type": "tool_use", "name": "Boom", "input": {"what": "now"}},
                {"type": "tool_use", "name": "Python", "input": {"cod": "1"}},
                {"type": "tool_use", "name": "Nope", "input": {}},
            )
        ),
        Reply.text("I see the errors."),
    )
    turn = await session.ask("go")
    assert turn.stop_reason == "end_turn"
    boom, bad, unknown = turn.tool_calls
    assert boom.is_error and "raised RuntimeError: kaboom now" in boom.result
    assert bad.is_error and "Invalid input for Python" in bad.result and "code" in bad.result
    assert unknown.is_error and "Unknown tool 'Nope'" in unknown.result
    sent = emulator.api_requests()[-1].body["messages"][-1]["content"]
    assert [b.get("is_error") for b in sent] == [True, True, True]
    assert_valid_history(session.messages)


async def test_refusal_does_not_run_tools(emulator: Any, make_session: Any, tmp_path: Any) -> None:
    session = make_session()
    emulator.script(
        Reply(
            (
                {"type": "text", "text": "No."},
                {"type": "tool_use", "name": "Write", "input": {"file_path": "x", "content": "y"}},
            ),
            stop_reason="refusal",
        )
    )
    turn = await session.ask("write it")
    assert turn.stop_reason == "refusal"
    assert not (tmp_path / "x").exists()
    assert_valid_history(session.messages)
    await session.ask("fine `py: 1`")  # the history is still valid for the API
