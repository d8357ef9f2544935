"""API errors as the Messages API returns them.

`ApiError` carries an HTTP status, the `error.type` string, the `error.message` string and any
extra response headers (for example `retry-after`). `error_body` renders the JSON body every
error response carries:

    {"type": "error", "error": {"type": ..., "message": ...}, "request_id": "req_..."}

`STATUS_TYPES` maps a status to its `error.type` (spec §7). 408 is not listed by the API
documentation; the emulator answers it as `timeout_error` (our choice, like 504).
"""

from __future__ import annotations

from typing import Any

__all__ = ["STATUS_TYPES", "ApiError", "error_body"]

STATUS_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


class ApiError(Exception):
    """An error response: HTTP `status`, `error_type`, `message` and extra `headers`.

    `error_type` may be left empty: it then follows `STATUS_TYPES` (`api_error` for a status
    the table does not list).
    """

    def __init__(
        self,
        status: int,
        error_type: str | None = None,
        message: str = "",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type or STATUS_TYPES.get(status, "api_error")
        self.message = message
        self.headers: dict[str, str] = dict(headers or {})

    def __repr__(self) -> str:
        return f"ApiError({self.status}, {self.error_type!r}, {self.message!r})"


def error_body(err: ApiError, request_id: str) -> dict[str, Any]:
    """The JSON body of an error response, exactly as the API shapes it."""
    return {
        "type": "error",
        "error": {"type": err.error_type, "message": err.message},
        "request_id": request_id,
    }
