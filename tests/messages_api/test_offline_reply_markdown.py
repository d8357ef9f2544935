"""The offline model's replies stay well-formed Markdown when they cut a long result: a cut
inside a code block closes it, and a result that holds fences of its own stays inside one."""

from __future__ import annotations

from typing import Any

from markdown_it import MarkdownIt

from forkagent_jupyter.messages_api.offline_reply import offline_reply

RESULT = (
    "Here is what the tool calls returned:\n\n**Python** returned:\n```\n"
    + ("row 1234567890 " * 60)
    + "\n```\n\nAfter the block: *prose*."
)


def _text(body: dict[str, Any]) -> str:
    content, _stop = offline_reply(body)
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def _tokens(text: str) -> list[Any]:
    return MarkdownIt("commonmark").parse(text)


def test_a_notification_cut_inside_a_code_block_closes_it() -> None:
    note = (
        "<task-notification>\n<task-id>a1</task-id>\n<status>completed</status>\n"
        f"<result>{RESULT}</result>\n</task-notification>"
    )
    text = _text({"messages": [{"role": "user", "content": note}]})
    assert "more characters)" in text
    fences = [t for t in _tokens(text) if t.type == "fence"]
    assert len(fences) == 1 and "more characters)" in fences[0].content
    text += "\n\nA paragraph after the reply."
    last = [t for t in _tokens(text) if t.type == "inline"][-1]
    assert last.content == "A paragraph after the reply."  # not swallowed by an open fence


def test_a_tool_result_with_fences_of_its_own_stays_in_one_block() -> None:
    output = "```python\nprint(1)\n```\nand more text"
    body = {
        "messages": [
            {"role": "user", "content": "Go. `py: 1`"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Python", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": output}],
            },
        ]
    }
    text = _text(body)
    fences = [t for t in _tokens(text) if t.type == "fence"]
    assert len(fences) == 1 and fences[0].content.rstrip("\n") == output
