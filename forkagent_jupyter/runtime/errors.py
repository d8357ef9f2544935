"""Errors that end a run or reject a call (as opposed to tool errors, which the model reads).

`AgentError` is the base of failures of the runtime itself; `ConfigError` is bad set-up
(missing key, unknown backend); `ModelError` is an API failure left after the SDK's retries
(its `StreamInterruptedError` broke a response already streaming: the loop sends the request
again before giving up); `UsageError` is bad input from the caller (empty prompt, unknown task
id); `RunEndedError` is raised inside a tool call when the agent cannot go on (its worker
process died): it is not a tool error for the model to read, it ends the run as `failed`.
"""

from __future__ import annotations

__all__ = [
    "AgentError",
    "ConfigError",
    "ModelError",
    "RunEndedError",
    "StreamInterruptedError",
    "UsageError",
]


class AgentError(Exception):
    """Base of the runtime's own errors."""


class ConfigError(AgentError):
    """The session cannot be set up as asked (the message says how to fix it)."""


class UsageError(AgentError, ValueError):
    """The caller passed something the runtime cannot accept."""


class ModelError(AgentError):
    """The model API failed after its retries."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after  # seconds the server asked to wait (a 429's retry-after)


class StreamInterruptedError(ModelError):
    """A response that had started streaming broke off (the connection dropped, the stream
    ended early, or an `overloaded_error`/`api_error` event arrived). Nothing of it was kept
    and no tool ran, so the same request can be sent again; `reason` says what happened in a
    few words ("stream dropped", "overloaded_error in the stream")."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message, status=200, retryable=True)
        self.reason = reason


class RunEndedError(AgentError):
    """A tool call found that its agent cannot go on; the run fails with this message."""
