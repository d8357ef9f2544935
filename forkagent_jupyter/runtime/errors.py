"""Errors that end a run or reject a call (as opposed to tool errors, which the model reads).

`AgentError` is the base of failures of the runtime itself; `ConfigError` is bad set-up
(missing key, unknown backend); `ModelError` is an API failure left after the SDK's retries;
`UsageError` is bad input from the caller (empty prompt, unknown task id); `RunEndedError` is raised
inside a tool call when the agent cannot go on (its worker process died): it is not a tool
error for the model to read, it ends the run as `failed`.
"""

from __future__ import annotations

__all__ = ["AgentError", "ConfigError", "ModelError", "RunEndedError", "UsageError"]


class AgentError(Exception):
    """Base of the runtime's own errors."""


class ConfigError(AgentError):
    """The session cannot be set up as asked (the message says how to fix it)."""


class UsageError(AgentError, ValueError):
    """The caller passed something the runtime cannot accept."""


class ModelError(AgentError):
    """The model API failed after its retries."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class RunEndedError(AgentError):
    """A tool call found that its agent cannot go on; the run fails with this message."""
