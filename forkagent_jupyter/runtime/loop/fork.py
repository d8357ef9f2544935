"""Building a fork child's conversation.

A fork child inherits the parent's exact system prompt bytes, tools array (Agent included, in
the same order), model and thinking settings, and its whole history, so its first request
shares the parent's cached prefix. Only the directive at the very end differs between
siblings.

Choices where the reference systems differ, and why:
* Placeholder results: one `tool_result` per `tool_use` of the parent's assistant message,
  all with the same text, so every sibling's request is byte-identical up to its directive
  and all siblings read one cached prefix. The directive follows in the same user message, so
  no two user messages are ever consecutive (no reliance on the API merging them).
* The directive names the child's own `tool_use` id and tells it the other calls belong to
  its siblings: parallel forks otherwise answer each other's topics (seen in the reference).
* The recursion guard is an out-of-band flag on the child's run (`AgentRun.is_fork`), never a
  scan of history text: a scan poisons the parent, whose history contains the boilerplate of
  every fork it started, so it could fork only once.
* The child keeps the Agent tool declaration (byte-identical tools keep the cache) but its
  fork path refuses with an error result; explicit named agents remain possible.
* Histories are shared, not copied: the child's list holds the same message dicts as the
  parent's (nothing is mutated in place; appends merge by building new dicts), so a hundred
  forks of a large history cost a hundred small lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..history import FORK_TAG, Block, Message, blocks_of

__all__ = [
    "FORK_PLACEHOLDER",
    "FORK_RECURSION_ERROR",
    "FORK_TAG",
    "ForkMessages",
    "build_fork_messages",
    "child_directive",
]

FORK_PLACEHOLDER = "Forked into background workers; each reports back when it finishes."
FORK_RECURSION_ERROR = (
    "Forking is not available to a forked worker: you are already one. Do the work yourself "
    "with your tools, or start a named agent with an explicit subagent_type."
)

_DIRECTIVE = """\
<{tag}>
You are now a forked worker, not the main agent. You inherited the conversation above; from \
here on you work alone, in the background, on one directive.
{own}
Rules:
1. Do the directive yourself with your tools. Do not fork; do not ask questions.
2. Stay inside the directive. Other workers cover the other topics; mention anything outside \
your scope in one sentence at most.
3. Work silently between tool calls, then write one report at the end, under 400 words \
unless the directive asks for more.
4. If you change files, list them and say how you checked the change.
5. Start the report with "Scope:" and use these plain labels:
   Scope: <your directive in one sentence>
   Result: <the findings or the answer>
   Files: <files read or changed, when relevant>
   Issues: <problems to flag, only if any>
</{tag}>

Directive: {directive}"""


def child_directive(directive: str, own_tool_use_id: str | None) -> str:
    """The text that turns a copy of the parent's conversation into a worker's task."""
    if own_tool_use_id:
        own = (
            f"Your directive came from the Agent call with id {own_tool_use_id}; the other "
            "calls in that message started your sibling workers, so leave their topics to them.\n"
        )
    else:
        own = "The person started you directly from the notebook.\n"
    return _DIRECTIVE.format(tag=FORK_TAG, own=own, directive=directive)


@dataclass(frozen=True)
class ForkMessages:
    """A child's starting history and where its shared prefix ends (for a cache breakpoint)."""

    messages: list[Message]
    shared_end: tuple[int, int] | None


def build_fork_messages(
    history: Sequence[Message],
    directive: str,
    *,
    own_tool_use_id: str | None = None,
) -> ForkMessages:
    """The child's messages for any ending of the parent's history.

    * ends with an assistant message holding tool_use blocks (a model-initiated fork, or a
      user fork while a turn is running): that message unchanged, then one user message with a
      placeholder result for every tool_use and the directive;
    * ends with an assistant message without tool_use: a user message with the directive;
    * ends with a user message: the directive is merged into it (a new dict);
    * is empty: just the directive.
    The returned list shares every unchanged message dict with `history`.
    """
    text: Block = {"type": "text", "text": child_directive(directive, own_tool_use_id)}
    messages = list(history)
    if not messages:
        return ForkMessages([{"role": "user", "content": [text]}], None)
    last = messages[-1]
    if last["role"] == "assistant":
        uses = [b for b in blocks_of(last) if b.get("type") == "tool_use"]
        if uses:
            placeholders: list[Block] = [
                {"type": "tool_result", "tool_use_id": b["id"], "content": FORK_PLACEHOLDER}
                for b in uses
            ]
            messages.append({"role": "user", "content": [*placeholders, text]})
            return ForkMessages(messages, (len(messages) - 1, len(placeholders) - 1))
        messages.append({"role": "user", "content": [text]})
        return ForkMessages(messages, (len(messages) - 2, len(blocks_of(last)) - 1))
    blocks = blocks_of(last)
    messages[-1] = {"role": "user", "content": [*blocks, text]}
    return ForkMessages(messages, (len(messages) - 1, len(blocks) - 1))
