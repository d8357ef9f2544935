"""Extended thinking: the parameter from the session, a fork's exact copy of it, named agents'
own; thinking blocks kept byte for byte with their signatures (history, a fork's clone of the
parent's message, transcripts, resume, compaction); the emulator and the offline model sign
them and refuse altered or dropped ones; thinking tokens billed as output."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anthropic
import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain
from forkagent_jupyter.messages_api.tokens import ByteTokenizer, count_output_tokens
from forkagent_jupyter.messages_api.usage import Usage, cost_usd
from forkagent_jupyter.messages_api.validation import verify_thinking
from forkagent_jupyter.runtime.errors import ModelError, UsageError
from forkagent_jupyter.runtime.model.client import ModelRequest
from forkagent_jupyter.runtime.model.offline import OfflineModel
from forkagent_jupyter.runtime.permissions.gate import AllowAll
from forkagent_jupyter.runtime.session.session import Session
from tests.reported import tool_outputs

from .helpers import first_fork_requests

pytestmark = pytest.mark.anyio

THINK = {"type": "enabled", "budget_tokens": 2048}


def _raw(block: dict[str, Any]) -> bytes:
    """A block as the SDK puts it on the wire."""
    return json.dumps(block, separators=(",", ":"), ensure_ascii=False).encode()


def _thinking(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in message["content"] if b.get("type") in ("thinking", "redacted_thinking")]


async def test_thinking_blocks_go_back_byte_for_byte_and_bill_as_output(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(auto_respond=False, thinking=2048)
    turn = await session.ask("Compute `py: 6 * 7`")
    assert turn.ok and tool_outputs(turn.text) == ["42"], turn.text
    first, second = emulator.api_requests()
    assert first.body["thinking"] == second.body["thinking"] == THINK
    assert first.body["max_tokens"] == 8192 + 2048  # the budget on top of the answer's room
    [block] = _thinking(session.messages[1])
    assert verify_thinking(block) and block["thinking"]
    # sent back exactly as it came: the same JSON bytes, the signature with it
    sent = second.body["messages"][1]["content"][0]
    assert json.dumps(sent) == json.dumps(block)
    assert _raw(block) in second.raw
    usage = emulator.ledger.entries()[0].usage
    content = session.messages[1]["content"]
    without = [b for b in content if b.get("type") != "thinking"]
    tok = ByteTokenizer()
    assert usage["output_tokens"] == count_output_tokens(content, tok)
    assert usage["output_tokens"] > count_output_tokens(without, tok)  # thinking is output
    # priced as output: the turn costs what its usage (thinking included) costs
    entries = emulator.ledger.entries()
    expected = sum(cost_usd(Usage.from_api(e.usage), session.model) for e in entries)
    assert turn.cost_usd == pytest.approx(expected) and expected > 0


async def test_a_fork_sends_its_parents_thinking_and_clones_the_thinking_block(
    emulator: Any, make_session: Any
) -> None:
    session = make_session(auto_respond=False, thinking=2048)
    await session.ask("Split it:\nfork: count `py: 1 + 1`\nfork: count `py: 2 + 2`")
    await session.wait(timeout=30)
    parent_first = emulator.api_requests()[0]
    forks = first_fork_requests(emulator)
    assert len(forks) == 2
    cloned = session.messages[1]
    assert _thinking(cloned)
    raws = [r.raw for r in emulator.api_requests() if any(r.body == body for body, _ in forks)]
    for body, _usage in forks:
        assert body["thinking"] == parent_first.body["thinking"]  # the exact parameter
        assert body["max_tokens"] == parent_first.body["max_tokens"]
        # the parent's assistant message, thinking block first, unchanged
        assert json.dumps(body["messages"][1]["content"][0]) == json.dumps(cloned["content"][0])
    # the siblings' requests are the same bytes up to their directives
    a, b = (raw.split(b"<fork-directive>")[0] for raw in raws)
    assert a == b and _raw(cloned["content"][0]) in a
    # and the parent's own next request (it may go before or after the forks') shares those
    # bytes up to its tool results, but for where its cache_control markers sit (moving a
    # marker does not change what the cache holds: its own marks the end of its last request)
    parent_next = next(
        r.raw for r in emulator.api_requests()[1:] if b"<fork-directive>" not in r.raw
    )
    a, parent_next = _unmarked(a), _unmarked(parent_next)
    n = next((i for i, (x, y) in enumerate(zip(a, parent_next, strict=False)) if x != y), len(a))
    shared = a[:n]
    assert _raw(cloned["content"][0]) in shared


def _unmarked(raw: bytes) -> bytes:
    """A request's bytes without its cache_control markers."""
    return re.sub(rb',"cache_control":\{"type":"ephemeral"(,"ttl":"[0-9a-z]+")?\}', b"", raw)


def _define(folder: Path, name: str, front: str) -> None:
    agents = folder / ".forkagent" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / f"{name}.md").write_text(f"---\n{front}\n---\nYou check numbers.\n")


async def test_named_agents_think_as_their_definition_says(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    _define(tmp_path, "deep", "description: Thinks\nthinking: 4096\neffort: high")
    _define(tmp_path, "plain", "description: Does not think")
    brain = ScriptedBrain(when_empty=OfflineBrain())
    for kind in ("deep", "plain"):
        call = {"description": kind, "prompt": f"{kind.upper()} `py: 1`", "subagent_type": kind}
        brain.when_last_user_contains(
            f"ASK {kind}",
            # a model with thinking on starts its reply with a thinking block (signed by the
            # emulator)
            Reply(
                (
                    {"type": "thinking", "thinking": f"The {kind} agent fits."},
                    {"type": "tool_use", "name": "Agent", "input": call},
                )
            ),
        )
    emulator.brain = brain
    session = make_session(auto_respond=False, thinking=2048, forking=False)
    await session.ask("ASK deep")
    await session.ask("ASK plain")
    bodies = [r.body for r in emulator.api_requests()]
    deep = next(b for b in bodies if "DEEP `py" in json.dumps(b["messages"][0]))
    plain = next(b for b in bodies if "PLAIN `py" in json.dumps(b["messages"][0]))
    assert deep["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert deep["output_config"] == {"effort": "high"}
    assert deep["max_tokens"] == 8192 + 4096
    assert "thinking" not in plain and "output_config" not in plain  # off unless defined


async def test_transcripts_resume_and_compaction_keep_thinking_blocks(
    emulator: Any, make_session: Any
) -> None:
    first = make_session(auto_respond=False, thinking=2048)
    await first.ask("One `py: 1 + 1`")
    await first.ask("Two `py: 2 + 2`")
    before = json.dumps(first.messages)
    assert before.count('"signature"') == 4
    await first.aclose()
    second = make_session(auto_respond=False, thinking=2048)
    await second.resume(first.session_id)
    assert json.dumps(second.messages) == before  # byte for byte, signatures included
    await second.compact(keep_turns=1)
    kept = [b for m in second.messages if m["role"] == "assistant" for b in _thinking(m)]
    assert kept and all(json.dumps(b) in before for b in kept)
    turn = await second.ask("Three `py: 3 + 3`")  # the strict emulator verifies them
    assert turn.ok and tool_outputs(turn.text) == ["6"], turn.text


async def test_the_offline_model_signs_its_thinking_and_refuses_altered_or_dropped_blocks(
    tmp_path: Path,
) -> None:
    session = Session(
        backend="offline",
        workdir=tmp_path,
        home=tmp_path,
        auto_respond=False,
        permission_policy=AllowAll(),
        thinking="adaptive",
    )
    try:
        turn = await session.ask("Compute `py: 6 * 7`")
        assert turn.ok and tool_outputs(turn.text) == ["42"], turn.text
        assistant = session.messages[1]
        [block] = _thinking(assistant)
        assert verify_thinking(block)
    finally:
        await session.aclose()
    model = OfflineModel()
    user, answer = session.messages[0], session.messages[2]

    async def send(content: list[dict[str, Any]], thinking: dict[str, Any]) -> None:
        request = ModelRequest(
            model=model.name,
            system=[],
            tools=session.contexts.tools.specs(),
            messages=[user, {"role": "assistant", "content": content}, answer],
            max_tokens=8192 + 2048,
            thinking=thinking,
        )
        async for _ in model.stream(request):
            pass

    altered = [{**block, "thinking": block["thinking"] + " (edited)"}, *assistant["content"][1:]]
    with pytest.raises(ModelError, match="cannot be modified"):
        await send(altered, {"type": "adaptive"})
    with pytest.raises(ModelError, match="Expected `thinking` or `redacted_thinking`"):
        await send(assistant["content"][1:], {"type": "adaptive"})
    with pytest.raises(ModelError, match="budget_tokens"):
        await send(assistant["content"], {"type": "enabled", "budget_tokens": 512})
    await send(assistant["content"], {"type": "adaptive"})  # unchanged: accepted
    with pytest.raises(UsageError, match="a budget of 1024 tokens or more"):
        Session(backend="offline", workdir=tmp_path, home=tmp_path, thinking=512)


async def test_the_emulator_refuses_altered_thinking_and_budgets_out_of_range(
    emulator: Any, sync_client: anthropic.Anthropic
) -> None:
    ask = {"role": "user", "content": "Compute `py: 1 + 1`"}
    tools = [{"name": "Python", "input_schema": {"type": "object"}}]
    first = sync_client.messages.create(
        model="claude-sonnet-5-5", max_tokens=4096, thinking=THINK, messages=[ask], tools=tools
    )
    blocks = [b.model_dump(exclude_none=True) for b in first.content]
    assert blocks[0]["type"] == "thinking" and blocks[0]["signature"]
    use = next(b for b in blocks if b["type"] == "tool_use")
    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "2"}],
    }
    altered = [{**blocks[0], "thinking": "something else"}, *blocks[1:]]
    with emulator.expect_violations(3):
        for content, thinking in (
            (altered, THINK),
            (blocks[1:], THINK),  # dropped
            (blocks, {"type": "enabled", "budget_tokens": 4096}),  # not below max_tokens
        ):
            with pytest.raises(anthropic.BadRequestError):
                sync_client.messages.create(
                    model="claude-sonnet-5-5",
                    max_tokens=4096,
                    thinking=thinking,
                    tools=tools,
                    messages=[ask, {"role": "assistant", "content": content}, result],
                )
