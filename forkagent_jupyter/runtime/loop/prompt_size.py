"""How big a prompt is next to the conversation it joins, and what it costs.

`Session.ask` (a prompt), `Session.fork` (a directive) and `Session.send` (a message) measure
what they are about to send before anything goes (`Session.check_prompt`): one that cannot
fit the model's context window with the conversation so far and room for the reply is
refused in one line (nothing sent, nothing added to a history); one of `large_prompt_tokens`
or more is said in one line, its size and cost, and sent.

The figures are the project's own (`messages_api`): the prompt's tokens are the emulator's
count of a user message holding it, scaled by the conversation's measured/estimated ratio
(`LoopState.token_ratio`); the conversation's are `predict_tokens`' (what the last response
measured, plus what was added since). A request's last cache breakpoint sits at the end of
its last message, so the request that first sends the prompt writes it to the prompt cache
(the model's cache-write price for the TTL), and each later request of that conversation
reads it from there: a fork pays its directive's own tokens (the prefix it inherits is read
from the cache); a prompt stays in the parent's context, read again by every later request,
a message in its agent's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ...messages_api.tokens import ByteTokenizer, count_input_tokens
from ...messages_api.usage import Usage, cost_usd
from ..errors import UsageError
from .compaction import predict_tokens, window_for
from .config import AgentConfig, LoopState

__all__ = ["PromptKind", "PromptSize", "prompt_size"]

PromptKind = Literal["prompt", "directive", "message"]
"""The parent's prompt, a fork's directive, a message to an agent."""

_TOKENIZER = ByteTokenizer()


def _usd(value: float) -> str:
    return (
        f"${value:,.2f}" if value >= 0.1 else f"${value:.3f}" if value >= 0.01 else f"${value:.4f}"
    )


def _share(part: int, whole: int) -> str:
    share = part / whole
    return "<1%" if 0 < share < 0.005 else f"{share:.0%}"


@dataclass(frozen=True)
class PromptSize:
    """A prompt's tokens next to the conversation it joins, and what it costs."""

    kind: PromptKind
    tokens: int
    """The prompt's own tokens (estimated)."""
    context: int
    """The conversation it joins (the request it would go with, without it)."""
    max_tokens: int
    """The room that request keeps for the reply."""
    window: int
    model: str
    send_usd: float
    """The request that first sends it: its tokens written to the prompt cache."""
    reread_usd: float
    """Each later request of that conversation: its tokens read from the cache."""
    holder: str = "the conversation"
    """Whose conversation keeps it, in words ("the conversation", "x's conversation")."""

    @property
    def fits(self) -> bool:
        """Whether the request fits the model's context window with it."""
        return self.context + self.tokens + self.max_tokens <= self.window

    def line(self) -> str:
        """Its size and cost in one line (said before a large one is sent)."""
        head = (
            f"forkagent: this {self.kind} is ~{self.tokens:,} tokens "
            f"({_share(self.tokens, self.window)} of {self.model}'s {self.window:,}-token "
            "context window)"
        )
        if self.kind == "directive":
            cost = (
                f"about {_usd(self.send_usd)} for the worker's first request (what it inherits "
                f"is read from the cache), and {_usd(self.reread_usd)} for each later one"
            )
        else:
            cost = (
                f"about {_usd(self.send_usd)} to send, and it stays in {self.holder}: "
                f"{_usd(self.reread_usd)} more for each later request"
            )
        return (
            f"{head}: {cost}. Large data costs less saved to a file and named in the "
            f"{self.kind} (the agent reads what it needs)."
        )

    def refusal(self) -> str:
        """Why it was not sent, and what to do instead, in one line."""
        instead = (
            f"save the data to a file and name the file in the {self.kind} (the agent reads "
            "what it needs)"
        )
        if self.tokens + self.max_tokens <= self.window:  # the conversation is what is full
            instead += {
                "prompt": ", or compact the conversation first",
                "directive": ", or let the worker inherit fewer turns",
                "message": "",
            }[self.kind]
        return (
            f"this {self.kind} is ~{self.tokens:,} tokens: with the conversation so far "
            f"(~{self.context:,}) and room for the reply ({self.max_tokens:,}) it does not fit "
            f"{self.model}'s {self.window:,}-token context window, so it was not sent; "
            f"{instead}."
        )

    def checked(self, threshold: int | None) -> str | None:
        """A UsageError (`refusal`) when it does not fit; its `line` when it has `threshold`
        tokens or more (None: never); else None."""
        if not self.fits:
            raise UsageError(self.refusal())
        if threshold is not None and self.tokens >= threshold:
            return self.line()
        return None


def prompt_size(
    kind: PromptKind,
    text: str,
    cfg: AgentConfig,
    state: LoopState,
    history: Sequence[dict[str, Any]],
    *,
    holder: str = "the conversation",
) -> PromptSize:
    """`text` as the next user message of the conversation `history` (run by `cfg`, its
    measurements in `state`): its size and cost (see the module doc)."""
    raw = count_input_tokens({"messages": [{"role": "user", "content": text}]}, _TOKENIZER)
    tokens = round(raw * state.token_ratio)
    context, _raw = predict_tokens(cfg, state, history)
    hour = cfg.cache_ttl == "1h"
    written = Usage(
        cache_creation_input_tokens=tokens,
        ephemeral_5m_input_tokens=0 if hour else tokens,
        ephemeral_1h_input_tokens=tokens if hour else 0,
    )
    return PromptSize(
        kind=kind,
        tokens=tokens,
        context=context,
        max_tokens=cfg.max_tokens,
        window=window_for(cfg.model, cfg.compaction),
        model=cfg.model,
        send_usd=cost_usd(written, cfg.model),
        reread_usd=cost_usd(Usage(cache_read_input_tokens=tokens), cfg.model),
        holder=holder,
    )
