"""Cloud platforms' routes to the Messages API, as the SDK's platform clients call them.

Google Cloud Vertex AI: `POST .../projects/{project}/locations/{region}/publishers/anthropic/
models/{model}:streamRawPredict` (`:rawPredict` without streaming), the model in the path, the
API version in the body (`anthropic_version`), a Bearer access token, SSE as on the first-party
API. The emulator serves it by turning the request into a first-party one.

Not served: Amazon Bedrock (`/model/{id}/invoke-with-response-stream` answers in AWS
event-stream frames, not SSE). Microsoft Foundry needs no route: it is the first-party path
(`/v1/messages`) under its own base URL, with the key also sent as `api-key`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from ..messages_api.errors import ApiError

__all__ = ["VERTEX_VERSION", "PlatformRoute", "platform_route"]

VERTEX_VERSION = "vertex-2023-10-16"
"""The version Vertex documents for `anthropic_version`; it speaks 2023-06-01."""

_VERTEX = re.compile(
    r"^(?:/v1)?/projects/[^/]+/locations/[^/]+/publishers/anthropic/models/"
    r"([^/:]+):(streamRawPredict|rawPredict)$"
)


@dataclass(frozen=True)
class PlatformRoute:
    platform: str
    model: str
    streaming: bool

    def messages_body(self, body: Any) -> tuple[Any, str]:
        """The first-party request body and the API version the platform request carries."""
        if not isinstance(body, dict):
            return body, ""
        body = dict(body)
        version = body.pop("anthropic_version", None)
        if not isinstance(version, str) or not version:
            raise ApiError(400, "invalid_request_error", "anthropic_version: Field required")
        if "model" in body:
            raise ApiError(
                400,
                "invalid_request_error",
                "model: Extra inputs are not permitted (the model is part of the URL)",
            )
        if bool(body.get("stream")) != self.streaming:
            raise ApiError(
                400,
                "invalid_request_error",
                "stream: must be true with :streamRawPredict and false with :rawPredict",
            )
        body = {"model": self.model, **body}
        return body, "2023-06-01" if version == VERTEX_VERSION else version


def platform_route(path: str) -> PlatformRoute | None:
    match = _VERTEX.match(path)
    if match is None:
        return None
    return PlatformRoute("vertex", unquote(match.group(1)), match.group(2) == "streamRawPredict")
