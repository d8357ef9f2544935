"""Keeping credentials out of everything the runtime writes or shows.

The API key must never reach a transcript, a tool output, an error message, a log line or a
notebook. Two measures: subprocesses get an environment without credential variables, and
text that leaves the runtime passes through `redact`, which replaces any known secret value.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping

__all__ = ["SECRET_ENV_VARS", "redact", "register_secret", "scrubbed_env"]

SECRET_ENV_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
_KEY_PATTERN = re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}")
_MASK = "[redacted]"

_lock = threading.Lock()
_secrets: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember a secret so that `redact` removes it wherever it appears."""
    if value and len(value) >= 8:
        with _lock:
            _secrets.add(value)


def _known() -> list[str]:
    for name in SECRET_ENV_VARS:
        register_secret(os.environ.get(name))
    with _lock:
        return sorted(_secrets, key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with every known secret and anything shaped like an Anthropic key masked."""
    for secret in _known():
        if secret in text:
            text = text.replace(secret, _MASK)
    return _KEY_PATTERN.sub(_MASK, text)


def scrubbed_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment without credential variables, for subprocesses."""
    env = dict(os.environ if base is None else base)
    for name in SECRET_ENV_VARS:
        env.pop(name, None)
    return env
