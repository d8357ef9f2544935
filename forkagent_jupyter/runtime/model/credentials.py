"""Credentials for the Anthropic API, found the way the official SDK finds them.

The SDK's own chain decides (constructor argument, `ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`,
`ANTHROPIC_PROFILE`, workload identity federation variables, the active profile under
`~/.config/anthropic/` or `ANTHROPIC_CONFIG_DIR`). `anthropic_client` returns the client when
that chain found a credential and None when it found none; a configuration the user set up
but the SDK cannot load is an error, never a silent fall-back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..secrets import hide_environment_block, redact, register_holder, register_secret

if TYPE_CHECKING:
    import anthropic

__all__ = ["HELD_ATTRIBUTES", "anthropic_client"]

HELD_ATTRIBUTES = ("api_key", "auth_token", "credentials", "_token_cache", "_custom_auth")
"""Where an `AsyncAnthropic` keeps what it authenticates with (wiped in worker processes)."""


def anthropic_client(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    max_retries: int = 2,
    timeout: float = 600.0,
) -> anthropic.AsyncAnthropic | None:
    """An `anthropic.AsyncAnthropic` with the credential the SDK resolved, or None."""
    import anthropic

    register_secret(api_key)
    try:
        client = anthropic.AsyncAnthropic(
            api_key=api_key or None,
            base_url=base_url or None,
            max_retries=max_retries,
            timeout=timeout,
        )
    except (anthropic.AnthropicError, ValueError, OSError) as exc:
        raise ConfigError(
            f"The Anthropic credentials could not be loaded: {redact(str(exc))}"
        ) from None
    if client.api_key is None and client.auth_token is None and client.credentials is None:
        return None
    register_secret(client.api_key)
    register_secret(client.auth_token)
    register_holder(client, *HELD_ATTRIBUTES)
    hide_environment_block()
    return client
