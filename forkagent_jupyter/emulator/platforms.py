"""Cloud platforms' routes to the Messages API, as the SDK's platform clients call them.

Google Cloud Vertex AI: `POST .../projects/{project}/locations/{region}/publishers/anthropic/
models/{model}:streamRawPredict` (`:rawPredict` without streaming), the model in the path, the
API version in the body (`anthropic_version`), a Bearer access token, SSE as on the first-party
API. The emulator serves it by turning the request into a first-party one.

Amazon Bedrock: `POST /model/{model id}/invoke-with-response-stream` (`/invoke` without
streaming), the model in the path and `stream` left out of the body, `anthropic_version`
`bedrock-2023-05-31` in the body, a Bearer API key (or SigV4: any credential is accepted). The
stream answers in AWS event-stream frames (`eventstream.py`), not SSE. A Bedrock model id
(`anthropic.claude-sonnet-4-5-20250929-v1:0`, a cross-region profile `us.anthropic...`), like
a Vertex id (`claude-sonnet-4-5@20250929`), names the catalog model inside it (`catalog_name`).

Microsoft Foundry needs no route: it is the first-party path (`/v1/messages`) under its own
base URL, with the key also sent as `api-key`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from ..messages_api.catalog import catalog_name
from ..messages_api.errors import ApiError

__all__ = ["BEDROCK_VERSION", "VERTEX_VERSION", "PlatformRoute", "platform_route"]

VERTEX_VERSION = "vertex-2023-10-16"
"""The version Vertex documents for `anthropic_version`; it speaks 2023-06-01."""
BEDROCK_VERSION = "bedrock-2023-05-31"
"""The version the SDK's Bedrock client sends in `anthropic_version`; it speaks 2023-06-01."""

_VERTEX = re.compile(
    r"^(?:/v1)?/projects/[^/]+/locations/[^/]+/publishers/anthropic/models/"
    r"([^/:]+):(streamRawPredict|rawPredict)$"
)
_BEDROCK = re.compile(r"^/model/([^/]+)/(invoke-with-response-stream|invoke)$")


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
        if self.platform == "bedrock":
            if "stream" in body:
                raise ApiError(
                    400,
                    "invalid_request_error",
                    "stream: Extra inputs are not permitted (streaming is the URL's "
                    "invoke-with-response-stream)",
                )
            betas = body.pop("anthropic_beta", None)  # the beta header, moved into the body
            if betas is not None and not isinstance(betas, list):
                raise ApiError(400, "invalid_request_error", "anthropic_beta: must be a list")
            body = {"model": self.model, **body, "stream": self.streaming}
            return body, "2023-06-01" if version == BEDROCK_VERSION else version
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
    if match is not None:
        model = catalog_name(unquote(match.group(1)))
        return PlatformRoute("vertex", model, match.group(2) == "streamRawPredict")
    match = _BEDROCK.match(path)
    if match is not None:
        streaming = match.group(2) == "invoke-with-response-stream"
        return PlatformRoute("bedrock", catalog_name(unquote(match.group(1))), streaming)
    return None
