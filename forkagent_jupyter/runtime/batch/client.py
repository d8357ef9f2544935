"""A batched fork's model client and the SDK behind it: the fork's first request goes into
the batch (its body byte-identical to a real-time first request's), the rest to the real-time
client; a batch request that did not succeed fails the fork with the API's reason.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, cast

from typing_extensions import TypedDict

from ...messages_api.shapes import JSON, Block
from ...messages_api.usage import Usage
from ..errors import ConfigError, ModelError
from ..events import ModelEvent, ModelResponse, TextDelta
from ..model.client import ModelClient, ModelRequest, RequestBody, build_request
from ..secrets import redact

if TYPE_CHECKING:
    import anthropic
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

__all__ = [
    "OFFLINE_POLL_INTERVAL",
    "BatchFirstModel",
    "BatchMessage",
    "BatchResult",
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


class BatchMessage(TypedDict, total=False):
    """The message of a succeeded batch request (its JSON)."""

    id: str
    model: str
    content: list[Block]
    stop_reason: str | None
    usage: dict[str, JSON]


class BatchResult(TypedDict, total=False):
    """One request's result in a batch (its JSON): `succeeded` with its `message`, `errored`
    with the API's `error`, `canceled` or `expired`."""

    type: str
    message: BatchMessage
    error: dict[str, JSON]


class BatchSubmitter(Protocol):
    """Where a fork's first request goes (a `BatchRun`): the batch result for it."""

    async def submit(
        self, custom_id: str, body: MessageCreateParamsNonStreaming
    ) -> BatchResult: ...


def sdk_client_of(client: ModelClient) -> anthropic.AsyncAnthropic:
    """The `anthropic.AsyncAnthropic` behind a session's model client, or a ConfigError."""
    import anthropic

    seen: object = client
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
        self.offline: tuple[anthropic.AsyncAnthropic, Callable[[], Awaitable[None]]] | None = None
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
        return sdk

    async def aclose(self) -> None:
        """Stop the offline emulator, if it was started."""
        if self.offline is not None:
            _sdk, stop = self.offline
            self.offline = None
            await stop()


def wire_order(body: RequestBody) -> MessageCreateParamsNonStreaming:
    """`body` with its keys in the order the SDK's `messages.create` puts them on the wire
    (the order of its parameter TypedDict), so a batch's `params` serialize to the same
    bytes as the real-time request's body: the SDK's params from here on."""
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    fields = dict(body)
    order = [k for k in MessageCreateParamsNonStreaming.__annotations__ if k in fields]
    wired = {**{k: fields[k] for k in order}, **fields}
    return cast("MessageCreateParamsNonStreaming", wired)


def _message_response(message: BatchMessage) -> ModelResponse:
    content = [b.copy() for b in message.get("content") or []]
    return ModelResponse(
        content=content,
        stop_reason=str(message.get("stop_reason") or "end_turn"),
        usage=Usage.from_api(message.get("usage") or {}),
        model=str(message.get("model") or ""),
        message_id=str(message.get("id") or ""),
        service_tier="batch",
    )


def failure_reason(result: BatchResult) -> str:
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
        response = _message_response(result.get("message") or {})
        text = "".join(str(b.get("text", "")) for b in response.content if b.get("type") == "text")
        if text:
            yield TextDelta(text)
        yield response

    async def aclose(self) -> None:  # the session closes the shared client
        return None
