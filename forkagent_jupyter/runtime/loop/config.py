"""What one agent's tool-use loop is given and what it keeps between requests.

`AgentConfig` (with its `CompactPolicy`) is what `loop.run_turn` runs an agent with;
`LoopState` is what carries over from one request of its conversation to the next. Both the
loop (`loop.py`) and its compaction (`compaction.py`) read them; they live here, below both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ...messages_api.shapes import JSON
from ..config.hooks import Hooks
from ..history import Block, Message, append_message
from ..model.client import CacheTTL, ModelClient
from ..model.retry import StreamRetry
from ..permissions.gate import PermissionGate
from ..tools.base import ToolContext, ToolSet

__all__ = [
    "DEFAULT_COMPACT_AT",
    "DEFAULT_KEEP_TURNS",
    "SUMMARY_MAX_TOKENS",
    "AgentConfig",
    "CompactPolicy",
    "LoopState",
]

DEFAULT_COMPACT_AT = 0.8
DEFAULT_KEEP_TURNS = 2
SUMMARY_MAX_TOKENS = 4096


@dataclass
class CompactPolicy:
    """When and how conversations compact; one object shared by all agents of a session, so
    a change applies to every agent from its next request on."""

    compact_at: float | None = DEFAULT_COMPACT_AT
    """Fraction of the window (input + max_tokens) at which to compact; None: never."""
    keep_turns: int = DEFAULT_KEEP_TURNS
    window: int | None = None
    """The context window in tokens (None: the catalog's figure for the model)."""
    summary_max_tokens: int = SUMMARY_MAX_TOKENS
    task_lines: Callable[[str], list[str]] | None = None
    """Lines naming the tasks of an agent (by agent id), appended to its summary."""


@dataclass
class AgentConfig:
    """What one agent's loop needs: its model, prompt, tools, permissions and limits."""

    client: ModelClient
    model: str
    system: list[Block]
    tools: ToolSet
    gate: PermissionGate
    ctx: ToolContext
    max_turns: int = 50
    max_tokens: int = 8192
    cache_ttl: CacheTTL = "5m"
    thinking: dict[str, JSON] | None = None
    """The API's `thinking` parameter (None: left out); a fork keeps its parent's exactly."""
    effort: str | None = None
    stream_retry: StreamRetry = field(default_factory=StreamRetry)
    compaction: CompactPolicy | None = None
    """When to compact the conversation before a request (see compaction.py); None: never."""
    hooks: Hooks | None = None
    """PreToolUse / PostToolUse hooks around each tool call (config/hooks.py); None: none."""


@dataclass
class LoopState:
    """What carries over between requests of one conversation, and the hooks of its owner.

    `previous_end` and `cache_points` drive cache placement. `before_first_request` is awaited
    and `on_first_response_start` called once, around the next request (the fork scheduler
    holds siblings with them; the hold returns whether it waited, which the request's clock
    keeps). `on_message` sees every message appended to the history before
    any event about it is yielded (transcripts). `inbox` returns texts to deliver at the next
    loop boundary (messages and notifications for a running agent).
    """

    previous_end: int | None = None
    cache_points: list[tuple[int, int]] = field(default_factory=list)
    requests: int = 0
    before_first_request: Callable[[], Awaitable[bool]] | None = None
    on_first_response_start: Callable[[], None] | None = None
    on_message: Callable[[Message], None] | None = None
    inbox: Callable[[], list[str]] | None = None
    context_tokens: int = 0
    """The last request's prompt size (uncached + cache writes + cache reads)."""
    last_estimate: int = 0
    token_ratio: float = 1.0
    """Measured / estimated prompt tokens of the last request (calibrates the estimate)."""
    on_history_replaced: Callable[[list[Message], dict[str, JSON]], None] | None = None
    """Called with the new history (and what happened) when compaction replaces it."""
    on_rate_wait: Callable[[float | None], None] | None = None
    """Told the expected seconds while a request waits for rate-limit room (model/pacer.py)."""

    def append(self, history: list[Message], message: Message) -> None:
        append_message(history, message)
        if self.on_message is not None:
            self.on_message(message)
