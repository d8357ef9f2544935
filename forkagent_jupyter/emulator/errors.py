"""API errors as the Messages API returns them."""

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
    """An error response: HTTP status, `error.type`, `error.message`, extra headers."""

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
        self.headers = dict(headers or {})


def error_body(err: ApiError, request_id: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": err.error_type, "message": err.message},
        "request_id": request_id,
    }
