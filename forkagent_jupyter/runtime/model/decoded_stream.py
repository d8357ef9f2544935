"""A model whose stream is decoded by the SDK: for Amazon Bedrock, whose responses are AWS
event-stream frames rather than server-sent events (`AnthropicModel` reads SSE lines itself).
The SDK's `AsyncStream` decodes the frames (with botocore) into the same Messages API events,
which the same `MessageReducer` folds into the message."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ...messages_api.usage import Usage
from ..errors import ModelError, StreamInterruptedError
from ..events import ModelEvent, ModelResponse, TextDelta
from ..secrets import redact
from .client import (
    TRANSIENT_STREAM_ERRORS,
    AnthropicModel,
    ModelRequest,
    _api_message,
    _api_type,
    _broken,
    broke_the_connection,
    build_request,
)
from .stream import MessageReducer

__all__ = ["DecodedStreamModel"]


class DecodedStreamModel(AnthropicModel):
    """`AnthropicModel` over `messages.create(stream=True)`: the SDK decodes each event."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        import anthropic

        reducer = MessageReducer()
        streaming = False  # the 200 response has begun: a failure now breaks it mid-way
        try:
            events = await self._client.messages.create(**build_request(request), stream=True)
            streaming = True
            async for event in events:
                data = event.to_dict()
                was_started = reducer.started
                text = reducer.feed(str(data.get("type", "")), data)
                if reducer.started and not was_started and request.on_response_start:
                    request.on_response_start()
                if text:
                    yield TextDelta(text)
        except anthropic.APIStatusError as exc:
            if exc.status_code == 200:  # an error event (an exception frame) mid-stream
                kind = _api_type(exc)
                message = (
                    f"The model API failed during the response (HTTP 200, {kind}): "
                    f"{_api_message(exc)}"
                )
                if kind in TRANSIENT_STREAM_ERRORS:
                    raise StreamInterruptedError(message, reason=f"{kind} in the stream") from None
                raise ModelError(message, status=200) from None
            raise ModelError(
                f"The model API failed with HTTP {exc.status_code} "
                f"({_api_type(exc)}): {_api_message(exc)}",
                status=exc.status_code,
                retryable=exc.status_code in (408, 409, 429) or exc.status_code >= 500,
            ) from None
        except (anthropic.APIConnectionError, anthropic.APIError, OSError) as exc:
            if streaming:  # the frames stopped coming: sent again, as a broken SSE stream is
                raise _broken(exc, streaming) from None
            raise ModelError(
                f"Could not reach the model API: {redact(str(exc))}", retryable=True
            ) from None
        except Exception as exc:
            if not streaming or not broke_the_connection(exc):
                raise
            raise _broken(exc, streaming) from None
        if not reducer.finished:
            raise StreamInterruptedError(
                "The response stream ended before the message was complete.",
                reason="stream ended early",
            )
        yield ModelResponse(
            content=reducer.blocks(),
            stop_reason=reducer.stop_reason or "end_turn",
            usage=Usage.from_api(reducer.usage),
            model=reducer.model or request.model,
            message_id=reducer.id,
        )
