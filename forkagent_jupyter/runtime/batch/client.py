"""A batched fork's model client and the SDK behind it: the fork's first request goes into
the batch (its body byte-identical to a real-time first request's), the rest to the real-time
client; a batch request that did not succeed fails the fork with the API's reason.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from ...messages_api.usage import Usage
from ..errors import ConfigError, ModelError
from ..events import ModelEvent, ModelResponse, TextDelta
from ..model.client import ModelClient, ModelRequest, build_request
from ..secrets import redact

if TYPE_CHECKING:
    import anthropic

__all__ = [
    "OFFLINE_POLL_INTERVAL",
    "BatchFirstModel",
    "BatchSdk",
    "BatchSubmitter",
    "failure_reason",
    "sdk_client_of",
    "wire_order",
]

FAILED_REASONS = {
    "expired": "the batch request expired: the Message Batches API did not process it within "
    "the batch's 24 hours",
    "canceled": "the batch request was canceled before it was processed",
}


class BatchSubmitter(Protocol):
    """Where a fork's first request goes (a `BatchRun`): the batch result for it."""

    async def submit(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]: ...


def sdk_client_of(client: ModelClient) -> anthropic.AsyncAnthropic:
    """The `anthropic.AsyncAnthropic` behind a session's model client, or a ConfigError."""
    import anthropic

    seen: ModelClient | Any = client
    for _ in range(8):
        sdk = getattr(seen, "_client", None)
        if isinstance(sdk, anthropic.AsyncAnthropic):
            return sdk
        inner = getattr(seen, "inner", None)
        if inner is None:
            break
        seen = inner
    raise ConfigError(
        "Batched fan-out needs the Anthropic backend (the Message Batches API); this session "
        "uses another model client. Use batch=False, or a Session with backend='anthropic'."
    )


OFFLINE_POLL_INTERVAL = 0.5
"""Seconds between polls of an offline batch (processed at once by the in-process emulator)."""


class BatchSdk:
    """The SDK client whose Message Batches API a session's batched fan-outs use: the
    session's own, or for an offline session the in-process emulator's
    (`forkagent_jupyter.offline_batches`, started on first use, stopped with `aclose`)."""

    def __init__(self, client: Callable[[], ModelClient], backend: str) -> None:
        self.client = client
        """The session's model client as it stands (a `RequestLog` may wrap it)."""
        self.backend = backend
        self.offline: tuple[Any, Callable[[], Awaitable[None]]] | None = None
        """The in-process emulator's SDK client and how to stop it, once started."""

    async def get(self) -> anthropic.AsyncAnthropic:
        try:
            return sdk_client_of(self.client())
        except ConfigError:
            if self.backend != "offline":
                raise
        if self.offline is None:
            import importlib

            service = importlib.import_module("forkagent_jupyter.offline_batches")
            self.offline = await service.start()
        sdk, _stop = self.offline
        return cast("anthropic.AsyncAnthropic", sdk)

    async def aclose(self) -> None:
        """Stop the offline emulator, if it was started."""
        if self.offline is not None:
            _sdk, stop = self.offline
            self.offline = None
            await stop()


def wire_order(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with its keys in the order the SDK's `messages.create` puts them on the wire
    (the order of its parameter TypedDict), so a batch's `params` serialize to the same
    bytes as the real-time request's body."""
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    order = [k for k in MessageCreateParamsNonStreaming.__annotations__ if k in body]
    return {**{k: body[k] for k in order}, **body}


def _message_response(message: dict[str, Any]) -> ModelResponse:
    content = [dict(b) for b in message.get("content") or []]
    return ModelResponse(
        content=content,
        stop_reason=str(message.get("stop_reason") or "end_turn"),
        usage=Usage.from_api(message.get("usage") or {}),
        model=str(message.get("model") or ""),
        message_id=str(message.get("id") or ""),
        service_tier="batch",
    )


def failure_reason(result: dict[str, Any]) -> str:
    """The API's reason a batch request did not succeed, as one line."""
    kind = str(result.get("type"))
    if kind == "errored":
        body = result.get("error") or {}
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict):
            return redact(
                f"the batch request errored ({err.get('type', 'error')}): {err.get('message', '')}"
            )
        return "the batch request errored"
    return FAILED_REASONS.get(kind, f"the batch request ended as {kind!r}")


class BatchFirstModel:
    """A fork's model client: its first request goes into the batch, the rest to `inner`."""

    def __init__(self, inner: ModelClient, run: BatchSubmitter, custom_id: str) -> None:
        self.inner = inner
        self.name = inner.name
        self._run = run
        self._custom_id = custom_id
        self._used = False

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if self._used:
            async for event in self.inner.stream(request):
                yield event
            return
        self._used = True
        result = await self._run.submit(self._custom_id, wire_order(build_request(request)))
        if result.get("type") != "succeeded":
            raise ModelError(failure_reason(result))
        if request.on_response_start is not None:
            request.on_response_start()
        response = _message_response(dict(result.get("message") or {}))
        text = "".join(str(b.get("text", "")) for b in response.content if b.get("type") == "text")
        if text:
            yield TextDelta(text)
        yield response

    async def aclose(self) -> None:  # the session closes the shared client
        return None
