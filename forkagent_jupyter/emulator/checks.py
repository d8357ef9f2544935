"""The transport-level checks of an API request, before its body is validated: the API key
(`x-api-key` or `Authorization: Bearer`) and the `anthropic-version`; and the messages of the
errors the emulator's transport answers with.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ..messages_api.errors import ApiError

__all__ = ["API_VERSIONS", "TRANSPORT_MESSAGES", "authorize"]

API_VERSIONS = ("2023-06-01", "2026-10-21")

TRANSPORT_MESSAGES: dict[str, str] = {
    "bad_json": "There was an error parsing the body of your request: {detail}",
    "no_key": "x-api-key header is required",
    "bad_key": "invalid x-api-key",
    "no_version": "anthropic-version: header is required",
    "bad_version": "anthropic-version: unsupported version '{version}'",
    "not_found": "Not Found",
    "method": "Method Not Allowed",
    "brain": "Internal server error (emulator brain failed: {detail})",
}


def authorize(
    headers: Mapping[str, str], api_keys: Collection[str] | None, body_version: str | None = None
) -> tuple[str, str]:
    """(workspace, API version) of a request with these (lower-case) `headers`; an ApiError
    (401, 400) when its key is missing or not one of `api_keys` (None: any key), or its
    version (`body_version`, from a platform's body, else the header) is missing or unknown."""
    key = headers.get("x-api-key")
    auth = headers.get("authorization", "")
    if not key and auth[:7].lower() == "bearer ":
        key = auth[7:].strip()
    if not key:
        raise ApiError(401, "authentication_error", TRANSPORT_MESSAGES["no_key"])
    if api_keys is not None and key not in api_keys:
        raise ApiError(401, "authentication_error", TRANSPORT_MESSAGES["bad_key"])
    version = body_version or headers.get("anthropic-version")
    if not version:
        raise ApiError(400, "invalid_request_error", TRANSPORT_MESSAGES["no_version"])
    if version not in API_VERSIONS:
        msg = TRANSPORT_MESSAGES["bad_version"].format(version=version)
        raise ApiError(400, "invalid_request_error", msg)
    return headers.get("anthropic-workspace-id") or key, version
