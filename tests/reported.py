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

_REPORTED = re.compile(r"\*\*(\w+)\*\* (returned|failed):\n(`{3,})\n(.*?)\n\3", re.DOTALL)


def tool_outputs(text: str, tool: str = "Python", *, failed: bool = False) -> list[str]:
    """The fenced outputs of every `tool` call that `text` reports as returned (or, with
    `failed`, as failed), in order."""
    status = "failed" if failed else "returned"
    return [m.group(4) for m in _REPORTED.finditer(text) if m[1] == tool and m[2] == status]
