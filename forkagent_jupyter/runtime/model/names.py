"""Model names as a person writes them: Claude Code's aliases (`sonnet`, `opus`, `haiku`, ...)
and full ids (Anthropic's `claude-...`, Bedrock's `us.anthropic....` and ARNs, Vertex's
`claude-...@20250929`), for agent files (`config/agent_definitions.py`) and for the session's
own model (`Session(model=)`, `%config ForkAgent.model`, `%%agent --model`).

An agent file may name a model only by an alias or a Claude model id (an unknown alias fails
when the file is read, not at the first request). The session's model may also be any other
id (a Foundry deployment, a proxy's name), so only its shape is checked there: one word of
letters, digits and `. _ - : / @ +` (with an optional `[1m]`), which every real id is.

Where the requests go decides the rest (`foreign_model`): the Anthropic API itself (and the
offline model, which knows the same models) answers 404 for a name that is no Claude model
(`gpt-4`), so there such a name is refused at once, naming the closest aliases and ids; any
other backend, a custom base URL or a model client of its own may know it, so there it is
taken with one line on stderr saying that it is sent as written.
"""

from __future__ import annotations

import difflib
import os
import re
import sys

from ...messages_api.catalog import DEFAULT_CATALOG

__all__ = [
    "ANTHROPIC_API",
    "MODEL_ALIASES",
    "OTHER_ALIASES",
    "foreign_model",
    "model_problem",
    "resolve_model",
    "session_model",
    "tell_once",
]

MODEL_ALIASES = {
    "sonnet": "claude-sonnet-5-5",
    "opus": "claude-opus-5-5",
    "haiku": "claude-haiku-5-5",
    "fable": "claude-fable-5-2",
}
"""Model aliases of agent files (Claude Code's), each the current model of its family. As in
Claude Code, `ANTHROPIC_DEFAULT_SONNET_MODEL` (`_OPUS_`, `_HAIKU_`, `_FABLE_`) names another
model for an alias."""
OTHER_ALIASES = ("inherit", "default", "best", "opusplan")
"""`inherit`: the parent's model; `default`: the session's model; `best`: fable;
`opusplan`: opus for an agent in plan mode, sonnet otherwise. Any alias or id may end in
`[1m]` (a 1M-token context; the 5.x models have it anyway)."""
_MODEL_ID = re.compile(
    r"^(?:claude-[a-z0-9.-]+(?:@[a-z0-9.-]+)?|[a-z0-9-]+\.anthropic\..+|anthropic\..+|arn:.+)$"
)
_ANY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,255}$")


def _bare(value: str) -> str:
    return value.strip().removesuffix("[1m]").removesuffix("[1M]")


def _alias_model(alias: str) -> str:
    env = os.environ.get(f"ANTHROPIC_DEFAULT_{alias.upper()}_MODEL", "").strip()
    return env or MODEL_ALIASES[alias]


def model_problem(value: str) -> str | None:
    """Why `value` is no model an agent file may name (None: it is one)."""
    name = _bare(value)
    if name.lower() in MODEL_ALIASES or name.lower() in OTHER_ALIASES or _MODEL_ID.match(name):
        return None
    known = ", ".join([*OTHER_ALIASES[:1], *MODEL_ALIASES, *OTHER_ALIASES[1:]])
    return f"unknown model {value!r}: use one of {known}, or a full model id (claude-...)"


def resolve_model(
    name: str | None, parent_model: str, permission_mode: str | None = None
) -> str | None:
    """A definition's `model`: None and `default` are None (the session's default),
    `inherit` is the parent's model, an alias is its model id (`opusplan`: opus for an agent
    in plan mode, else sonnet), anything else is taken as a model id. A `[1m]` suffix is
    dropped."""
    if name is None:
        return None
    name = _bare(name)
    alias = name.lower()
    if alias == "default":
        return None
    if alias == "inherit":
        return parent_model
    if alias == "best":
        return _alias_model("fable")
    if alias == "opusplan":
        return _alias_model("opus" if permission_mode == "plan" else "sonnet")
    if alias in MODEL_ALIASES:
        return _alias_model(alias)
    return name


def session_model(value: str, default: str) -> str:
    """The session's model for `value` (`default`: the model when it is empty or `default`):
    an alias is its model id, an id is kept; ValueError (one line) for what no model is
    named like (spaces, quotes, other characters, or `inherit`, which only an agent can)."""
    name = _bare(value)
    if not name or name.lower() == "default":
        return default
    if name.lower() == "inherit":
        raise ValueError("'inherit' is for agent files (the session has no parent to inherit from)")
    if not _ANY_ID.match(name):
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise ValueError(
            f"{shown!r} is no model id (one word: letters, digits and . _ - : / @ +); use an "
            f"alias ({', '.join(MODEL_ALIASES)}) or an id such as {MODEL_ALIASES['sonnet']}"
        )
    return resolve_model(name, default) or default


ANTHROPIC_API = "https://api.anthropic.com"
"""The Anthropic API's own address: a base URL that is this one is no custom endpoint."""

_told: set[str] = set()


def tell_once(line: str) -> None:
    """`line` on stderr, once per process: a setting is checked again where it lands (the
    kernel's `%config`, then the session), and the person reads it once."""
    if line not in _told:
        _told.add(line)
        print(line, file=sys.stderr)


def _endpoint(backend: str | None, base_url: str | None, client: bool) -> str | None:
    """Where a session's requests go, in words, when that may know models the Anthropic API
    does not (None: the Anthropic API itself, or the offline model)."""
    if client:
        return "the session's own model client"
    backend = backend or os.environ.get("FORKAGENT_BACKEND") or None
    if backend not in (None, "anthropic", "offline"):
        return f"the {backend} backend"
    if backend == "offline":
        return None
    if base_url:
        given = "base_url"
    elif os.environ.get("ANTHROPIC_BASE_URL", "").strip():
        base_url, given = os.environ["ANTHROPIC_BASE_URL"].strip(), "ANTHROPIC_BASE_URL"
    else:
        return None
    if base_url.rstrip("/") == ANTHROPIC_API:
        return None
    return f"the endpoint at {given}"


def _closest(name: str) -> list[str]:
    """The aliases and Claude model ids closest to `name` (at most two; [] if none is)."""
    known = [*MODEL_ALIASES, *(m for m in DEFAULT_CATALOG if not m[-8:].isdigit())]
    return difflib.get_close_matches(name.lower(), known, n=2, cutoff=0.6)


def foreign_model(
    value: str, *, backend: str | None, base_url: str | None, client: bool = False
) -> str | None:
    """What is said of the session model `value` (as written) on the backend that would get
    it (`backend` and `base_url` as given, None: from the environment; `client`: a model
    client of its own): None for an alias or a Claude model id; for any other name, the one
    line saying it is sent as written, or, where it goes to the Anthropic API (or the offline
    model), a ValueError naming the closest models."""
    name = _bare(value)
    if name.lower() in MODEL_ALIASES or name.lower() in OTHER_ALIASES or _MODEL_ID.match(name):
        return None
    where = _endpoint(backend, base_url, client)
    if where is not None:
        return (
            f"forkagent: model {name!r} is no Claude model id; it is sent to {where} as "
            "written (its first request says whether that endpoint knows it)."
        )
    close = _closest(name)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    shown = name if len(name) <= 60 else name[:57] + "..."
    raise ValueError(
        f"{shown!r} is no Claude model, and the Anthropic API answers 404 for it: {hint}use an "
        f"alias ({', '.join(MODEL_ALIASES)}) or an id such as {MODEL_ALIASES['sonnet']}; a "
        "proxy's or platform's name needs its backend or ANTHROPIC_BASE_URL"
    )
