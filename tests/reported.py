"""What a tool call returned, read out of a report of the offline model.

The offline model (and the emulator's default brain) reports each tool call as
``**Python** returned:`` followed by its output in a fence. A report reaches the tests inside
texts that also hold random agent ids, session ids, token counts and durations (an Agent
call's footer, a `<task-notification>`, a cell's card), so a check like ``"42" in text`` can
pass on a digit of an id. These helpers return the outputs themselves, to compare exactly.
"""

from __future__ import annotations

import re

__all__ = ["tool_outputs"]

# a report may be indented as a whole (a card's plain text indents the result under its row)
_REPORTED = re.compile(
    r"^([ \t]*)\*\*(\w+)\*\* (returned|failed):\n\1(`{3,})\n(.*?)\n\1\4(?!`)", re.DOTALL | re.M
)


def tool_outputs(text: str, tool: str = "Python", *, failed: bool = False) -> list[str]:
    """The fenced outputs of every `tool` call that `text` reports as returned (or, with
    `failed`, as failed), in order."""
    status = "failed" if failed else "returned"
    return [
        "\n".join(line.removeprefix(m[1]) for line in m[5].split("\n"))
        for m in _REPORTED.finditer(text)
        if m[2] == tool and m[3] == status
    ]
