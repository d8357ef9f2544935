"""How big a prompt is next to the conversation it joins, and what it costs.

`Session.ask` (a prompt), `Session.fork` (a directive) and `Session.send` (a message) measure
what they are about to send before anything goes (`Session.check_prompt`). One of
`large_prompt_tokens` or more is said in one line, its size and cost, and sent. One that
cannot fit the model's context window is refused in one line (nothing sent, nothing added to
a history): one that would not fit even beside the system prompt and tools alone (no
compaction can make room for it), or, with compaction off, one larger than the conversation
so far that would not fit beside it. A full conversation with an ordinary prompt is not the
prompt's doing, and the figures are estimates: that stays compaction's to handle (with it
off, the API's window error, as before).

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
from typing import Literal

from ...messages_api.tokens import ByteTokenizer, count_input_tokens
from ...messages_api.usage import Usage, cost_usd
from ..errors import UsageError
from ..history import Message
from .compaction import estimate_tokens, predict_tokens, window_for
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
    base: int = 0
    """The system prompt and tools alone: the least a request of that conversation holds."""
    compaction: bool = True
    """Compaction is on: the conversation can shrink before the request that sends it."""
    compacts: bool = False
    """The conversation is compacted before the request that sends it (`compact_at`)."""

    def _over(self, joined: int) -> bool:
        return joined + self.tokens + self.max_tokens > self.window

    @property
    def alone_too_large(self) -> bool:
        """It does not fit even beside the system prompt and tools alone."""
        return self._over(self.base)

    @property
    def fits(self) -> bool:
        """False when the prompt is why a request with it cannot fit the context window: not
        even beside the system prompt and tools, or (compaction off) larger than the
        conversation so far and not beside it (see the module doc)."""
        if self.alone_too_large:
            return False
        own = self.context - self.base  # what the conversation itself has added
        return self.compaction or not (self._over(self.context) and self.tokens > own)

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
        first = " (the conversation is compacted first, to make room)" if self.compacts else ""
        return (
            f"{head}: {cost}{first}. Large data costs less saved to a file and named in the "
            f"{self.kind} (the agent reads what it needs)."
        )

    def refusal(self) -> str:
        """Why it was not sent, and what to do instead, in one line."""
        instead = (
            f"save the data to a file and name the file in the {self.kind} (the agent reads "
            "what it needs)"
        )
        if self.alone_too_large:
            beside = f"even beside the system prompt and tools alone (~{self.base:,})"
        else:  # compaction off: the conversation so far does not shrink by itself
            beside = f"with the conversation so far (~{self.context:,}; compaction is off)"
            instead += {
                "prompt": ", or compact the conversation first",
                "directive": ", or let the worker inherit fewer turns",
                "message": "",
            }[self.kind]
        return (
            f"this {self.kind} is ~{self.tokens:,} tokens: {beside} and room for the reply "
            f"({self.max_tokens:,}) it does not fit {self.model}'s {self.window:,}-token context "
            f"window, so it was not sent; {instead}."
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
    history: Sequence[Message],
    *,
    holder: str = "the conversation",
) -> PromptSize:
    """`text` as the next user message of the conversation `history` (run by `cfg`, its
    measurements in `state`): its size and cost (see the module doc)."""
    raw = count_input_tokens({"messages": [{"role": "user", "content": text}]}, _TOKENIZER)
    tokens = round(raw * state.token_ratio)
    context, _raw = predict_tokens(cfg, state, history)
    window = window_for(cfg.model, cfg.compaction)
    policy = cfg.compaction
    at = policy.compact_at if policy is not None else None
    compacts = at is not None and context + tokens + cfg.max_tokens >= at * window
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
        window=window,
        model=cfg.model,
        send_usd=cost_usd(written, cfg.model),
        reread_usd=cost_usd(Usage(cache_read_input_tokens=tokens), cfg.model),
        holder=holder,
        base=round(estimate_tokens(cfg, []) * state.token_ratio),
        compaction=at is not None,
        compacts=compacts,
    )
