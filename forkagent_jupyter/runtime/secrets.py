"""Keeping credentials out of everything the runtime writes or shows.

The API key must never reach a transcript, a tool output, an error message, a log line or a
notebook. Two measures: subprocesses get an environment without credential variables, and
text that leaves the runtime passes through `redact`, which replaces any known secret value.

The credential variables (`is_secret_name`) are the model backends' keys and Jupyter's own
tokens: the Jupyter server's token (`JUPYTER_TOKEN`, set by docker-stacks; with it a process
can have any kernel of that server run code over its websocket) and JupyterHub's (the API
token, `JPY_API_TOKEN`, and every `JUPYTERHUB_*` variable that holds a token, secret, key,
password, OAuth or cookie setting). `JPY_SESSION_NAME` (the notebook's path) is kept: it is
no secret.
"""

from __future__ import annotations

import os
import re
import threading
import weakref
from collections.abc import Mapping

__all__ = [
    "SECRET_ENV_VARS",
    "forget_secrets",
    "hide_environment_block",
    "is_secret_name",
    "known_secrets",
    "redact",
    "register_holder",
    "register_secret",
    "scrubbed_env",
    "secret_names",
]

SECRET_ENV_VARS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_IDENTITY_TOKEN",
    "ANTHROPIC_FOUNDRY_API_KEY",
    "ANTHROPIC_AWS_API_KEY",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "JUPYTER_TOKEN",
    "JUPYTERHUB_API_TOKEN",
    "JPY_API_TOKEN",
    "JPY_COOKIE_SECRET",
    "CONFIGPROXY_AUTH_TOKEN",
)
"""Credential variables by name; `is_secret_name` adds JupyterHub's by their form."""
_HUB = "JUPYTERHUB_"
_HUB_SECRET_PREFIXES = ("JUPYTERHUB_OAUTH_", "JUPYTERHUB_COOKIE")
_HUB_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "CRYPT")
_KEY_PATTERN = re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}")
_MASK = "[redacted]"

_lock = threading.Lock()
_secrets: set[str] = set()
_holders: weakref.WeakKeyDictionary[object, tuple[str, ...]] = weakref.WeakKeyDictionary()


def register_secret(value: str | None) -> None:
    """Remember a secret so that `redact` removes it wherever it appears."""
    if value and len(value) >= 8:
        with _lock:
            _secrets.add(value)


def is_secret_name(name: str) -> bool:
    """Whether the environment variable `name` holds a credential (see the module doc)."""
    if name in SECRET_ENV_VARS:
        return True
    if not name.startswith(_HUB):
        return False
    words = name[len(_HUB) :].split("_")
    return (
        name.startswith(_HUB_SECRET_PREFIXES)
        or words[-1] == "KEY"
        or any(word.startswith(_HUB_SECRET_WORDS) for word in words)
    )


def secret_names(env: Mapping[str, str] | None = None) -> list[str]:
    """The credential variables set in `env` (default: this process's environment)."""
    return [name for name in (os.environ if env is None else env) if is_secret_name(name)]


def _known() -> list[str]:
    for name in secret_names():
        register_secret(os.environ.get(name))
    with _lock:
        return sorted(_secrets, key=len, reverse=True)


def known_secrets() -> list[str]:
    """Every secret value this process knows of (longest first)."""
    return _known()


def redact(text: str) -> str:
    """`text` with every known secret and anything shaped like an Anthropic key masked."""
    for secret in _known():
        if secret in text:
            text = text.replace(secret, _MASK)
    return _KEY_PATTERN.sub(_MASK, text)


def scrubbed_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment without credential variables, for subprocesses."""
    env = dict(os.environ if base is None else base)
    for name in secret_names(env):
        del env[name]
    return env


def register_holder(obj: object, *attributes: str) -> None:
    """Remember an object that holds credentials in these attributes (an SDK client), so a
    process forked from this one can wipe them (`forget_secrets`)."""
    with _lock:
        _holders[obj] = attributes


def forget_secrets() -> None:
    """In a worker process forked from the kernel: remove every credential this process
    knows of - the environment variables (also from the environment block the process
    started with, which /proc/self/environ shows), the registered holders' attributes and
    the list of secret values itself."""
    _wipe_environment_block()
    for name in secret_names():
        os.environ.pop(name, None)
    with _lock:
        holders = list(_holders.items())
        _secrets.clear()
    for obj, attributes in holders:
        for attribute in attributes:
            try:
                setattr(obj, attribute, None)
            except Exception:
                continue


def hide_environment_block() -> None:
    """Overwrite the credential values in the environment block this process started with
    (`/proc/<pid>/environ` shows it to every process of the user: a tool's `cat` or `tr`
    could read the kernel's key there), keeping the variables: `os.environ` holds them, and
    the C environment gets a fresh copy that the process's own children inherit."""
    values = {name: os.environ[name] for name in secret_names() if os.environ.get(name)}
    if not values:
        return
    _wipe_environment_block()
    for name, value in values.items():
        os.putenv(name, value)  # setenv: a new copy, outside the block /proc shows


def _wipe_environment_block() -> None:
    """Overwrite credential values in the C environment in place (Linux, glibc or musl)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        environ = ctypes.POINTER(ctypes.c_void_p).in_dll(libc, "environ")
    except (OSError, ValueError, AttributeError):
        return
    index = 0
    while environ[index]:
        address = environ[index]
        assert address is not None
        entry = ctypes.string_at(address)
        name, equals, _value = entry.partition(b"=")
        if equals and is_secret_name(name.decode("utf-8", "replace")):
            ctypes.memset(address + len(name) + 1, ord("x"), len(entry) - len(name) - 1)
        index += 1
