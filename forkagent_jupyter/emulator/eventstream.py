"""AWS event-stream frames: how Amazon Bedrock streams a response (`invoke-with-response-stream`).

A frame is a prelude (total length, headers length: two big-endian uint32), the prelude's
CRC32, the headers (name length byte, name, type byte 7 = string, uint16 length, value), the
payload, and the CRC32 of everything before it. Each Messages API stream event travels as a
`chunk` event whose JSON payload holds the event's JSON, base64-encoded, under `bytes`; an
error mid-stream is an `exception` frame whose `:exception-type` names one of Bedrock's
stream exceptions. The SDK's Bedrock client decodes both with botocore.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Mapping
from typing import Any

__all__ = ["CONTENT_TYPE", "chunk_frame", "exception_frame", "frame"]

CONTENT_TYPE = "application/vnd.amazon.eventstream"

_STRING = 7
_EXCEPTION_OF = {
    "overloaded_error": "serviceUnavailableException",
    "rate_limit_error": "throttlingException",
    "invalid_request_error": "validationException",
    "timeout_error": "modelTimeoutException",
}
"""A first-party error type as the Bedrock stream exception that stands for it (others:
internalServerException)."""


def _header(name: str, value: str) -> bytes:
    key, text = name.encode(), value.encode()
    return struct.pack("!B", len(key)) + key + struct.pack("!BH", _STRING, len(text)) + text


def frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event-stream message."""
    head = b"".join(_header(k, v) for k, v in headers.items())
    prelude = struct.pack("!II", 12 + len(head) + len(payload) + 4, len(head))
    body = prelude + struct.pack("!I", zlib.crc32(prelude)) + head + payload
    return body + struct.pack("!I", zlib.crc32(body))


def chunk_frame(data: Mapping[str, Any]) -> bytes:
    """A Messages API stream event (its `data`) as a Bedrock `chunk` event."""
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    payload = json.dumps({"bytes": base64.b64encode(raw).decode()}).encode()
    headers = {
        ":event-type": "chunk",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return frame(headers, payload)


def exception_frame(error_type: str, message: str) -> bytes:
    """An error mid-stream (a first-party `error_type`) as a Bedrock stream exception."""
    headers = {
        ":exception-type": _EXCEPTION_OF.get(error_type, "internalServerException"),
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return frame(headers, json.dumps({"message": message}).encode())
