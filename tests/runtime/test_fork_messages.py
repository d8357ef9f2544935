"""Fork construction: every history ending, byte-identity across siblings, shared history."""

from __future__ import annotations

import json
from typing import Any

import pytest

from forkagent_jupyter.runtime.loop.fork import (
    FORK_PLACEHOLDER,
    FORK_TAG,
    build_fork_messages,
    child_directive,
)
from forkagent_jupyter.runtime.model.client import ModelRequest, build_request

ASSISTANT_WITH_CALLS = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "Splitting the work."},
        {"type": "tool_use", "id": "toolu_a", "name": "Agent", "input": {"prompt": "topic A"}},
        {"type": "tool_use", "id": "toolu_b", "name": "Agent", "input": {"prompt": "topic B"}},
        {"type": "tool_use", "id": "toolu_c", "name": "Agent", "input": {"prompt": "topic C"}},
    ],
}
BASE = [
    {"role": "user", "content": [{"type": "text", "text": "Look at the data."}]},
    {"role": "assistant", "content": [{"type": "text", "text": "It has 3 columns."}]},
    {"role": "user", "content": [{"type": "text", "text": "Analyse each topic."}]},
]


def check_valid(messages: list[dict[str, Any]]) -> None:
    for i, msg in enumerate(messages):
        assert msg["content"]
        if i:
            assert msg["role"] != messages[i - 1]["role"]
        uses = [b["id"] for b in msg["content"] if b.get("type") == "tool_use"]
        if uses:
            answered = [
                b["tool_use_id"] for b in messages[i + 1]["content"] if b["type"] == "tool_result"
            ]
            assert answered == uses
            first = [b["type"] for b in messages[i + 1]["content"]][: len(uses)]
            assert first == ["tool_result"] * len(uses)
    assert messages[-1]["role"] == "user"


def request_bytes(messages: list[dict[str, Any]], shared_end: tuple[int, int] | None) -> str:
    body = build_request(
        ModelRequest(
            model="claude-sonnet-5-5",
            system=[{"type": "text", "text": "system"}],
            tools=[{"name": "Agent", "description": "d", "input_schema": {"type": "object"}}],
            messages=messages,
            cache_points=[shared_end] if shared_end else [],
        )
    )
    return json.dumps(body, ensure_ascii=False)


def test_model_initiated_siblings_are_byte_identical_up_to_the_directive() -> None:
    history = [*BASE, ASSISTANT_WITH_CALLS]
    forks = [
        build_fork_messages(history, f"topic {x}", own_tool_use_id=f"toolu_{x.lower()}")
        for x in "ABC"
    ]
    for fork in forks:
        check_valid(fork.messages)
        # the parent's assistant message is included unchanged (the same object)
        assert fork.messages[3] is ASSISTANT_WITH_CALLS
        last = fork.messages[-1]["content"]
        assert [b["tool_use_id"] for b in last[:3]] == ["toolu_a", "toolu_b", "toolu_c"]
        assert {b["content"] for b in last[:3]} == {FORK_PLACEHOLDER}
        assert last[3]["text"].startswith(f"<{FORK_TAG}>")
    texts = [request_bytes(f.messages, f.shared_end) for f in forks]
    cut = texts[0].index(f"<{FORK_TAG}>")
    assert all(t[:cut] == texts[0][:cut] for t in texts)
    # they differ only after the tag: the own-call id and the directive
    assert len({t[cut:] for t in texts}) == 3
    # the shared cache breakpoint sits on the last placeholder of every sibling
    for fork in forks:
        assert fork.shared_end == (4, 2)


def test_directive_names_the_childs_own_call() -> None:
    text = child_directive("profile column x", "toolu_b")
    assert "toolu_b" in text and text.endswith("Directive: profile column x")
    assert "toolu_b" not in child_directive("profile column x", None)


@pytest.mark.parametrize(
    ("history", "expect_len", "shared"),
    [
        ([*BASE, ASSISTANT_WITH_CALLS], 5, (4, 2)),
        ([*BASE, {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}], 5, (3, 0)),
        (BASE, 3, (2, 0)),
        ([], 1, None),
    ],
    ids=["assistant-with-calls", "assistant-text", "trailing-user", "empty"],
)
def test_every_history_ending_gives_a_valid_conversation(
    history: list[dict[str, Any]], expect_len: int, shared: tuple[int, int] | None
) -> None:
    snapshot = json.dumps(history)
    fork = build_fork_messages(history, "do it")
    check_valid(fork.messages)
    assert len(fork.messages) == expect_len
    assert fork.shared_end == shared
    assert json.dumps(history) == snapshot  # the parent's history is untouched
    assert fork.messages[-1]["content"][-1]["text"].endswith("Directive: do it")


def test_forks_share_the_parents_message_objects() -> None:
    history = [
        {"role": r, "content": [{"type": "text", "text": f"m{i}"}]}
        for i, r in enumerate(["user", "assistant"] * 50)
    ]
    fork = build_fork_messages(history, "x")
    assert all(a is b for a, b in zip(fork.messages[:100], history, strict=True))
