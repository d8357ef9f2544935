"""Which model a Session talks to: the backend named, or the one the credentials allow.

`backend=` (or `FORKAGENT_BACKEND`) names one of `BACKENDS`:
- `anthropic`: the Messages API; the SDK resolves the credential (see `credentials.py`).
- `bedrock`, `vertex`, `foundry`: the same API through the SDK's own platform clients
  (`AsyncAnthropicBedrock`, `AsyncAnthropicVertex`, `AsyncAnthropicFoundry`), each with its
  own credentials, environment variables and model ids.
- `offline`: the deterministic offline model.
Unset: `anthropic` when the SDK finds a credential, else `offline` with a one-line notice (the
only case in which "no credentials" is said).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar, get_args

from ..errors import ConfigError
from ..secrets import redact, register_holder, register_secret
from .client import AnthropicModel, ModelClient
from .credentials import HELD_ATTRIBUTES, anthropic_client
from .decoded_stream import DecodedStreamModel
from .offline import OFFLINE_NOTICE, OfflineModel

if TYPE_CHECKING:
    import anthropic

_Client = TypeVar("_Client")

__all__ = ["BACKENDS", "Backend", "Selection", "mark_offline_announced", "select_backend"]

Backend = Literal["anthropic", "bedrock", "vertex", "foundry", "offline"]
BACKENDS: tuple[Backend, ...] = get_args(Backend)

_announced = False


@dataclass(frozen=True)
class Selection:
    backend: Backend
    client: ModelClient
    no_credentials: bool = False
    """True when nothing was asked for and the SDK found no credential: offline by default."""


def mark_offline_announced() -> None:
    """The offline choice was said already (by `%load_ext`): the notice is not repeated."""
    global _announced
    _announced = True


def _announce_offline() -> None:
    global _announced
    if not _announced:
        _announced = True
        print(OFFLINE_NOTICE, file=sys.stderr)


def select_backend(
    backend: str | None,
    *,
    model: str,
    api_key: str | None = None,
    base_url: str | None = None,
) -> Selection:
    """The backend asked for (argument, else FORKAGENT_BACKEND), else by the credentials."""
    chosen = backend or os.environ.get("FORKAGENT_BACKEND") or None
    if chosen is not None and chosen not in BACKENDS:
        raise ConfigError(f"Unknown backend {chosen!r}: use one of {', '.join(BACKENDS)}.")
    if chosen == "offline":
        return Selection("offline", OfflineModel(model))
    if chosen in (None, "anthropic"):
        client = anthropic_client(api_key=api_key, base_url=base_url)
        if client is not None:
            return Selection("anthropic", AnthropicModel(model, client=client))
        if chosen == "anthropic":
            raise ConfigError(
                "No Anthropic credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN, or an "
                "SDK profile: ANTHROPIC_PROFILE), pass api_key=..., or use backend='offline'."
            )
        _announce_offline()
        return Selection("offline", OfflineModel(model), no_credentials=True)
    register_secret(api_key)
    if chosen == "bedrock":
        return Selection("bedrock", DecodedStreamModel(model, client=_bedrock(api_key, base_url)))
    if chosen == "vertex":
        return Selection("vertex", AnthropicModel(model, client=_vertex(api_key, base_url)))
    return Selection("foundry", AnthropicModel(model, client=_foundry(api_key, base_url)))


def _platform(name: str, make: Callable[..., _Client], *held: str, **kwargs: str | None) -> _Client:
    import anthropic

    try:
        client = make(max_retries=2, timeout=600.0, **kwargs)
    except (anthropic.AnthropicError, ValueError, TypeError, OSError) as exc:
        raise ConfigError(f"backend {name!r}: {redact(str(exc))}") from None
    for attribute in held:
        value = getattr(client, attribute, None)
        if isinstance(value, str):
            register_secret(value)
    register_holder(client, *held)
    return client


def _needs(module: str, backend: str, why: str) -> None:
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package (google of google.auth) is missing
        found = False
    if not found:
        raise ConfigError(
            f"backend {backend!r} needs {module} {why}: pip install 'forkagent-jupyter[{backend}]'."
        )


def _bedrock(api_key: str | None, base_url: str | None) -> anthropic.AsyncAnthropicBedrock:
    """Amazon Bedrock: a Bedrock API key (`api_key=` or AWS_BEARER_TOKEN_BEDROCK) or AWS
    credentials (the usual AWS chain), AWS_REGION; model ids such as
    `anthropic.claude-...-v1:0` or a cross-region inference profile (`us.anthropic...`)."""
    import anthropic

    _needs("botocore", "bedrock", "(the responses are AWS event streams)")
    return _platform(
        "bedrock",
        anthropic.AsyncAnthropicBedrock,
        "api_key",
        "aws_secret_key",
        "aws_access_key",
        "aws_session_token",
        api_key=api_key,
        base_url=base_url,
    )


def _vertex(access_token: str | None, base_url: str | None) -> anthropic.AsyncAnthropicVertex:
    """Google Cloud Vertex AI: an access token (`api_key=`) or Application Default
    Credentials (google-auth), CLOUD_ML_REGION and ANTHROPIC_VERTEX_PROJECT_ID; model ids such
    as `claude-...@20250929`."""
    import anthropic

    if access_token is None:
        _needs("google.auth", "vertex", "(Application Default Credentials)")
    return _platform(
        "vertex",
        anthropic.AsyncAnthropicVertex,
        "access_token",
        "credentials",
        access_token=access_token,
        base_url=base_url,
    )


def _foundry(api_key: str | None, base_url: str | None) -> anthropic.AsyncAnthropicFoundry:
    """Microsoft Foundry: `api_key=` or ANTHROPIC_FOUNDRY_API_KEY, and ANTHROPIC_FOUNDRY_RESOURCE
    (or a base URL); the first-party model ids."""
    import anthropic

    return _platform(
        "foundry",
        anthropic.AsyncAnthropicFoundry,
        *HELD_ATTRIBUTES[:2],
        "_azure_ad_token_provider",
        api_key=api_key,
        base_url=base_url,
    )
