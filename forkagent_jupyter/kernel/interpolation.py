"""`{name}` in what a magic sends the model: the notebook's variables, as their text."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["interpolate"]

_VAR = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")


def interpolate(text: str, namespace: dict[str, Any]) -> str:
    """`{name}` -> str(namespace[name]) for defined names; `{{`/`}}` -> literal braces."""

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        return str(namespace[name]) if name in namespace else match.group(0)

    return _VAR.sub(sub, text).replace("{{", "{").replace("}}", "}")
