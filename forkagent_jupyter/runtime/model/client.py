"""Talking to the model: the `ModelClient` protocol, request building, the Anthropic client.

Request building decides where `cache_control` breakpoints go (at most 4):
1. the last tool definition (the tools tier survives a system change),
2. the last system block,
3. the end of the message that closed the previous request (what the previous request wrote
   is found again whatever the number of blocks in between: the lookback window is only 20),
4. the last block of the conversation (the moving end: this request writes it).
Extra positions (`cache_points`) take precedence over 3 (forks use it to mark the prefix all
siblings share). The history is never mutated: marked blocks are copies.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from typing_extensions import Required, TypedDict

from ...messages_api.catalog import DEFAULT_MODEL
from ...messages_api.shapes import JSON
from ...messages_api.usage import Usage
from ..errors import ConfigError, ModelError, StreamInterruptedError
from ..events import ModelEvent, ModelResponse, TextDelta
from ..history import Block, Message, blocks_of
from ..secrets import redact, register_holder, register_secret
from .stream import MessageReducer, StreamError, sse_events
from .timing import RequestClock

__all__ = [
    "AnthropicModel",
    "CacheTTL",
    "ModelClient",
    "ModelRequest",
    "RequestBody",
    "build_request",
    "default_model_name",
]

CacheTTL = Literal["5m", "1h"]
MAX_BREAKPOINTS = 4
TRANSIENT_STREAM_ERRORS = frozenset(
    {
        "overloaded_error",
        "api_error",
        # Amazon Bedrock's stream exceptions of the same kind
        "internalServerException",
        "serviceUnavailableException",
        "modelStreamErrorException",
        "throttlingException",
    }
)
"""`error` events in a started stream that a new attempt of the same request may not meet."""


def default_model_name() -> str:
    return os.environ.get("FORKAGENT_MODEL") or DEFAULT_MODEL


@dataclass
class ModelRequest:
    """Everything one request needs, before cache markers are placed."""

    model: str
    system: list[Block]
    tools: list[dict[str, JSON]]
    messages: Sequence[Message]
    max_tokens: int = 8192
    thinking: dict[str, JSON] | None = None
    effort: str | None = None
    """`output_config.effort` (None: left out)."""
    cache_ttl: CacheTTL = "5m"
    cache_points: list[tuple[int, int]] = field(default_factory=list)
    previous_end: int | None = None
    metadata: dict[str, JSON] | None = None
    on_response_start: Callable[[], None] | None = None
    """Called once when the response starts (the moment its cache writes become readable)."""
    on_headers: Callable[[Mapping[str, str]], None] | None = None
    """Called with the HTTP headers of the response: the rate-limit pacer."""
    on_error_headers: Callable[[Mapping[str, str]], None] | None = None
    """Called with the HTTP headers of an error response (a 429's tell the pacer too)."""
    on_rate_wait: Callable[[float | None], None] | None = None
    """Told the expected seconds while the request waits for rate-limit room (None: done)."""
    clock: RequestClock | None = None
    """Marked with when the request waited, was sent, started, streamed and ended (the
    pacer marks it; timing.py)."""


@runtime_checkable
class ModelClient(Protocol):
    """A model: streams one reply as text deltas followed by one ModelResponse."""

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...

    async def aclose(self) -> None: ...


class RequestBody(TypedDict, total=False):
    """The JSON body of a /v1/messages request, as `build_request` makes it (keys in the
    order it adds them)."""

    model: Required[str]
    max_tokens: Required[int]
    system: list[Block]
    tools: list[dict[str, JSON]]
    messages: list[Message]
    thinking: dict[str, JSON]
    output_config: dict[str, JSON]
    metadata: dict[str, JSON]


def _marked(block: Block, ttl: CacheTTL) -> Block:
    copy = block.copy()
    copy["cache_control"] = (
        {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}
    )
    return copy


def _marked_tool(tool: dict[str, JSON], ttl: CacheTTL) -> dict[str, JSON]:
    copy = dict(tool)
    copy["cache_control"] = (
        {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}
    )
    return copy


def _markable(block: Block) -> bool:
    if block.get("type") in ("thinking", "redacted_thinking"):
        return False
    return not (block.get("type") == "text" and not str(block.get("text", "")).strip())


def build_request(req: ModelRequest) -> RequestBody:
    """The JSON body for /v1/messages, with cache breakpoints placed (see module doc)."""
    ttl = req.cache_ttl
    tools = list(req.tools)
    if tools:
        tools[-1] = _marked_tool(tools[-1], ttl)
    system = list(req.system)
    if system:
        system[-1] = _marked(system[-1], ttl)
    budget = MAX_BREAKPOINTS - bool(tools) - bool(system)

    messages: list[Message] = list(req.messages)
    last = len(messages) - 1
    candidates: list[tuple[int, int | None]] = []
    if last >= 0:
        candidates.append((last, None))
    candidates.extend(req.cache_points)
    if not req.cache_points and req.previous_end is not None and 0 <= req.previous_end < last:
        candidates.append((req.previous_end, None))
    marks: dict[int, set[int]] = {}
    used = 0
    for index, wanted in candidates:
        if used >= budget or not 0 <= index <= last:
            continue
        blocks = blocks_of(messages[index])
        pos = len(blocks) - 1 if wanted is None else min(wanted, len(blocks) - 1)
        while pos >= 0 and not _markable(blocks[pos]):
            pos -= 1
        if pos < 0 or pos in marks.get(index, set()):
            continue
        marks.setdefault(index, set()).add(pos)
        used += 1
    for index, positions in marks.items():
        blocks = blocks_of(messages[index])
        for pos in positions:
            blocks[pos] = _marked(blocks[pos], ttl)
        messages[index] = {**messages[index], "content": blocks}

    body: RequestBody = {"model": req.model, "max_tokens": req.max_tokens}
    if system:
        body["system"] = system
    if tools:
        body["tools"] = tools
    body["messages"] = messages
    if req.thinking:
        body["thinking"] = req.thinking
    if req.effort:
        body["output_config"] = {"effort": req.effort}
    if req.metadata:
        body["metadata"] = req.metadata
    return body


class AnthropicModel:
    """The Messages API through the official SDK, streaming.

    Credentials come from the arguments or from ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN, the
    endpoint from `base_url` or ANTHROPIC_BASE_URL. Retries before the response starts (429,
    5xx, 529, connection errors) are the SDK's; what is left after them becomes a `ModelError`
    with a clear message. A response that breaks off once streaming (dropped, cut short, an
    overloaded_error/api_error event) raises `StreamInterruptedError`: the loop retries it.
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        api_key: str | None = None,
        auth_token: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float = 600.0,
        client: Any = None,
    ) -> None:
        import anthropic

        if client is not None:  # an SDK client made by backends.py
            self.name = name or default_model_name()
            self._client = client
            return
        api_key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
        auth_token = auth_token or os.environ.get("ANTHROPIC_AUTH_TOKEN") or None
        if not api_key and not auth_token:
            raise ConfigError(
                "No Anthropic credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), "
                "pass api_key=..., or use backend='offline'."
            )
        register_secret(api_key)
        register_secret(auth_token)
        self.name = name or default_model_name()
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            auth_token=auth_token,
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or None,
            max_retries=max_retries,
            timeout=timeout,
        )
        register_holder(self._client, "api_key", "auth_token")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        import anthropic

        body = build_request(request)
        reducer = MessageReducer()
        streaming = False  # the 200 response has begun: a failure now breaks it mid-way
        try:
            async with self._client.messages.with_streaming_response.create(
                **body, stream=True
            ) as response:
                streaming = True
                if request.on_headers is not None:
                    request.on_headers(response.headers)
                retried = int(getattr(response, "retries_taken", 0) or 0)
                if request.on_error_headers is not None and retried:
                    # the SDK's own retries met errors (a 429) first: tell the pacer too
                    request.on_error_headers(response.headers)
                async for name, event in sse_events(response.iter_lines()):
                    was_started = reducer.started
                    text = reducer.feed(name, event)
                    if reducer.started and not was_started and request.on_response_start:
                        request.on_response_start()
                    if text:
                        yield TextDelta(text)
        except StreamError as exc:
            message = (
                f"The model API failed during the response (HTTP 200, {exc.error_type}): "
                f"{redact(exc.message)}"
            )
            if exc.error_type in TRANSIENT_STREAM_ERRORS:
                raise StreamInterruptedError(
                    message, reason=f"{exc.error_type} in the stream"
                ) from None
            raise ModelError(message, status=200) from None
        except anthropic.NotFoundError as exc:
            raise ModelError(
                f"Model {request.model!r} was not found by the API ({_api_message(exc)}).",
                status=404,
            ) from None
        except anthropic.APIStatusError as exc:
            headers = getattr(exc.response, "headers", None) or {}
            if request.on_error_headers is not None:
                request.on_error_headers(headers)
            raise ModelError(
                f"The model API failed with HTTP {exc.status_code} "
                f"({_api_type(exc)}): {_api_message(exc)}",
                status=exc.status_code,
                retryable=exc.status_code in (200, 408, 409, 429) or exc.status_code >= 500,
                retry_after=retry_after(headers),
            ) from None
        except anthropic.APIConnectionError as exc:
            raise ModelError(
                f"Could not reach the model API: {redact(str(exc))}", retryable=True
            ) from None
        except (OSError, ValueError, RuntimeError) as exc:  # the connection broke mid-stream
            raise _broken(exc, streaming) from None
        except Exception as exc:
            if not broke_the_connection(exc):
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

    async def aclose(self) -> None:
        await self._client.close()


TRANSPORT_PACKAGES = frozenset({"httpx2", "httpcore2", "httpx", "httpcore", "anyio", "botocore"})
"""Packages whose exceptions, raised while reading a response, mean the connection broke."""


def broke_the_connection(exc: BaseException) -> bool:
    """Whether `exc` comes from the transport (the connection broke), not from a bug."""
    return type(exc).__module__.split(".")[0] in TRANSPORT_PACKAGES


def _broken(exc: BaseException, streaming: bool) -> ModelError:
    message = f"The response stream broke off: {type(exc).__name__}: {redact(str(exc))}"
    if streaming:
        return StreamInterruptedError(message, reason="stream dropped")
    return ModelError(message, retryable=True)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The wait a response asks for: `retry-after-ms`, else `retry-after` in seconds (an
    HTTP date is left to the SDK); None when it asks for none."""
    for name, unit in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * unit
        except ValueError:
            continue
        if seconds >= 0:
            return seconds
    return None


def _api_type(exc: object) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        err = body.get("error")
        if isinstance(err, Mapping) and isinstance(err.get("type"), str):
            return str(err["type"])
    return type(exc).__name__


def _api_message(exc: object) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        err = body.get("error")
        if isinstance(err, Mapping) and isinstance(err.get("message"), str):
            return redact(str(err["message"]))
    return redact(str(getattr(exc, "message", exc)))
