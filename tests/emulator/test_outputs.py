"""What the output looks like: stop_sequences, max_tokens truncation, refusals, the ledger."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from forkagent_jupyter.emulator import Emulator, Reply
from forkagent_jupyter.messages_api.tokens import ByteTokenizer, count_output_tokens
from forkagent_jupyter.messages_api.usage import Usage, cost_usd

from .conftest import EPHEMERAL, MODEL, filler, user

HI: dict[str, Any] = {"model": MODEL, "max_tokens": 200, "messages": [user("hi")]}


def final(client: anthropic.Anthropic, streaming: bool, **kw: Any) -> Any:
    if streaming:
        with client.messages.stream(**kw) as stream:
            return stream.get_final_message()
    return client.messages.create(**kw)


@pytest.mark.parametrize("streaming", [False, True], ids=["create", "stream"])
def test_stop_sequences_cut_the_text(
    emulator: Emulator, sync_client: anthropic.Anthropic, streaming: bool
) -> None:
    emulator.script(
        Reply(
            (
                {"type": "text", "text": "Counting: one, two, END three, four"},
                {"type": "tool_use", "name": "never", "input": {}},
            )
        )
    )
    message = final(sync_client, streaming, **HI, stop_sequences=["four", "END"])
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == "Counting: one, two, "
    assert message.stop_reason == "stop_sequence"
    assert message.stop_sequence == "END"


@pytest.mark.parametrize("streaming", [False, True], ids=["create", "stream"])
def test_max_tokens_truncates(
    emulator: Emulator, sync_client: anthropic.Anthropic, streaming: bool
) -> None:
    long_text = filler("answer", 400)  # 100 tokens
    emulator.script(
        Reply(
            (
                {"type": "text", "text": long_text},
                {"type": "tool_use", "name": "dropped", "input": {"x": 1}},
            )
        )
    )
    message = final(sync_client, streaming, **{**HI, "max_tokens": 10})
    assert message.stop_reason == "max_tokens"
    assert message.stop_sequence is None
    assert message.usage.output_tokens == 10
    [block] = message.content
    assert long_text.startswith(block.text) and 0 < len(block.text) <= 40
    assert count_output_tokens([block.to_dict()], ByteTokenizer()) <= 10


def test_a_reply_that_fits_keeps_its_stop_reason(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.script(
        Reply(
            ({"type": "text", "text": "I can't help with that."},),
            stop_reason="refusal",
            stop_details={"type": "refusal", "category": "cyber", "explanation": "no"},
        )
    )
    with sync_client.messages.stream(**HI) as stream:
        message = stream.get_final_message()
    assert message.stop_reason == "refusal"
    assert message.stop_details is not None and message.stop_details.category == "cyber"


def test_ledger_sums_equal_the_responses(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    body = {
        **HI,
        "system": filler("system", 6000),
        "cache_control": EPHEMERAL,
    }
    total = Usage()
    for i in range(4):
        message = final(sync_client, bool(i % 2), **body)
        total = total + Usage.from_api(message.usage)
        body["messages"] = [
            *body["messages"],
            {"role": "assistant", "content": message.to_dict()["content"]},
            user(f"follow-up {i}"),
        ]
    entries = emulator.ledger.entries()
    assert [e.streamed for e in entries] == [False, True, False, True]
    assert emulator.ledger.total() == total
    assert total.cache_read_input_tokens > 0 and total.cache_creation_input_tokens > 0
    assert emulator.ledger.cost_usd() == pytest.approx(
        sum(cost_usd(e.usage_obj, MODEL) for e in entries)
    )
    assert all(e.complete and e.status == 200 and e.model == MODEL for e in entries)
    assert entries[0].cost_usd == pytest.approx(cost_usd(entries[0].usage_obj, MODEL))
    assert emulator.ledger.to_json()["total"] == total.model_dump()


def test_offline_brain_is_the_default(emulator: Emulator, sync_client: anthropic.Anthropic) -> None:
    tools: Any = [{"name": "Python", "input_schema": {"type": "object"}}]
    message = sync_client.messages.create(
        **{**HI, "messages": [user("Run this:\n```python\nprint(1 + 1)\n```")]}, tools=tools
    )
    assert message.stop_reason == "tool_use"
    call = message.content[-1]
    assert call.type == "tool_use" and call.name == "Python" and call.id.startswith("toolu_")


def test_tool_result_forms_are_accepted_and_recorded(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.script(
        Reply(tuple({"type": "tool_use", "name": "t", "input": {"n": n}} for n in range(3))),
        "All three answered.",
    )
    tools: Any = [{"name": "t", "input_schema": {"type": "object"}}]
    first = sync_client.messages.create(**HI, tools=tools)
    a, b, c = (block.id for block in first.content if block.type == "tool_use")
    results = [
        {"type": "tool_result", "tool_use_id": a, "content": "plain"},
        {
            "type": "tool_result",
            "tool_use_id": b,
            "content": [{"type": "text", "text": "Traceback: boom"}],
            "is_error": True,
        },
        {"type": "tool_result", "tool_use_id": c},
    ]
    history: Any = [
        *HI["messages"],
        {"role": "assistant", "content": first.to_dict()["content"]},
        user(results),
    ]
    second = sync_client.messages.create(**{**HI, "messages": history}, tools=tools)
    assert second.content[0].type == "text" and second.content[0].text == "All three answered."
    recorded = emulator.api_requests()[-1].body["messages"][-1]["content"]
    assert recorded == results
