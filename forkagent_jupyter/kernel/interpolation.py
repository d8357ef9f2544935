"""`{name}` in what a magic sends the model: the notebook's variables, as their text."""

from __future__ import annotations

import re

__all__ = ["interpolate"]

_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def interpolate(text: str, namespace: dict[str, object]) -> str:
    """`{name}` -> str(namespace[name]) for defined names; `{{`/`}}` -> literal braces. One
    pass over `text`: a value is put in verbatim, its own braces untouched (a `{{` in code
    that is substituted stays `{{`)."""

    def sub(match: re.Match[str]) -> str:
        token, name = match.group(0), match.group(1)
        if name is None:
            return token[0]  # `{{` -> `{`, `}}` -> `}`
        return str(namespace[name]) if name in namespace else token

    return _TOKEN.sub(sub, text)
