"""The offline model: deterministic, no key, no network.

It is the default when no Anthropic credentials exist. Its reply is
`messages_api.offline_reply` (the emulator's default brain answers with the same function);
requests go through the Messages API's validation and prompt-cache accounting
(`messages_api`), so a malformed history fails offline as it would against the API, and cache
reads and writes are visible offline too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from ...messages_api.cache import PromptCache, VirtualClock, WallClock
from ...messages_api.catalog import DEFAULT_CATALOG, ModelInfo, lookup
from ...messages_api.errors import ApiError
from ...messages_api.offline_reply import offline_reply, with_ids
from ...messages_api.tokens import ByteTokenizer, count_output_tokens
from ...messages_api.usage import Usage
from ...messages_api.validation import sign_thinking, validate_request
from ..errors import ModelError
from ..events import ModelEvent, ModelResponse, TextDelta
from .client import ModelRequest, build_request, default_model_name

__all__ = ["OFFLINE_NOTICE", "OfflineModel"]

OFFLINE_NOTICE = (
    "forkagent: no Anthropic credentials found, using the offline model "
    "(deterministic, no network; set ANTHROPIC_API_KEY to talk to Claude)."
)


class OfflineModel:
    """A `ModelClient` that answers with `offline_reply`, in process.

    Requests are validated by the Messages API's rules (a malformed history, or one that does
    not fit the model's context window, fails here as it would against the API; `catalog`
    gives other models or windows) and billed by the emulator's prompt-cache accounting on a
    wall clock (or `clock`).
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        clock: VirtualClock | None = None,
        catalog: Mapping[str, ModelInfo] | None = None,
    ) -> None:
        self.name = name or default_model_name()
        self.catalog = catalog or DEFAULT_CATALOG
        self._clock = clock or WallClock()
        self._cache = PromptCache(self._clock)
        self._tokenizer = ByteTokenizer()
        self._count = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        body = build_request(request)
        try:
            info = validate_request(body, version="2026-10-21", catalog=self.catalog)
        except ApiError as exc:
            raise ModelError(
                f"The model API failed with HTTP {exc.status} ({exc.error_type}): {exc.message}",
                status=exc.status,
            ) from None
        info = lookup(request.model, self.catalog)
        blocks, stop_reason = offline_reply(body, sign_thinking)
        blocks = with_ids(body, blocks)
        plan = self._cache.plan(
            body,
            workspace="offline",
            model=info,
            tokenizer=self._tokenizer,
            request_start=self._clock.now(),
        )
        self._cache.commit(plan)
        if request.on_response_start is not None:
            request.on_response_start()
        self._count += 1
        for block in blocks:
            if block["type"] == "text":
                words = block["text"].split(" ")
                for i in range(0, len(words), 8):
                    chunk = " ".join(words[i : i + 8])
                    yield TextDelta(chunk if i == 0 else " " + chunk)
        usage = Usage.from_api(
            {**plan.usage_dict(), "output_tokens": count_output_tokens(blocks, self._tokenizer)}
        )
        yield ModelResponse(
            content=blocks,
            stop_reason=stop_reason,
            usage=usage,
            model=request.model,
            message_id=f"msg_offline{self._count:06d}",
        )

    async def aclose(self) -> None:
        return None
