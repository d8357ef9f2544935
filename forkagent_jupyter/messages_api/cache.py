"""Prompt-cache accounting (spec §6.1–6.3) on a virtual clock.

`PromptCache.plan(body, ...)` computes, without touching the store:

1. the flattened prompt (`tokens.flatten`: tools -> system -> messages after merging; models
   with `strips_thinking` drop thinking blocks of earlier turns) and a hash chain over it:
   `h_0 = H(workspace, model)` (plus the thinking settings and effort when the model has
   `thinking_before_tools`), the system salt (speed, a web search server tool present,
   `citations: {"enabled": true}` on any message block) before the first system position,
   the messages salt (tool_choice, any image in the prompt, thinking settings, effort; all
   as sent, so an absent tool_choice differs from {"type": "auto"}) before the first message
   position, each added even when its tier is empty; then
   `h_i = H(h_{i-1}, role mark + canonical form of block i)`. `cache_control` is never
   hashed, so moving a marker invalidates nothing. The role mark (message role, and whether
   the block starts a merged message) keeps [user: A, B] and [user: A][assistant: B] apart;
2. `tok_i`, the cumulative tokens through block i;
3. the breakpoints K: blocks with `cache_control`, plus the automatic one (top-level
   `cache_control` -> the last cacheable block, walking back over ineligible ones; it merges
   with an explicit marker already on that block);
4. the hit A: for each breakpoint b, the first live entry among h_b, h_{b-1}, ...,
   h_{b-19}; A is the highest hit over all windows (none: tok_A = 0);
5. the writes: every breakpoint above A with tok_b >= the model's minimum. B = the highest
   1h one (else A), C = the highest one (else A). Usage: cache_read = tok_A,
   ephemeral_1h = tok_B - tok_A, ephemeral_5m = tok_C - tok_B,
   cache_creation = their sum, input = total - tok_C. Without breakpoints everything is
   input and the cache fields are 0.

`commit(plan)` happens at "response start" (the server calls it after validation and any
prefill delay, before the first byte of the reply): the writes become entries with
expiry = request start + TTL (5m = 300 s, 1h = 3600 s), and the hit entry's expiry is
refreshed to request start + its own TTL. A request planned before another commits cannot
read that other request's entries (concurrent identical requests both miss). An entry is
live for a request that starts before its `expires_at`. Entries are isolated
by (workspace, model). A 1h breakpoint that reads a 5m entry does not upgrade it (our
choice; the spec leaves it open).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .catalog import ModelInfo
from .tokens import FlatBlock, Tokenizer, flatten, is_server_tool

__all__ = [
    "LOOKBACK",
    "TTL_SECONDS",
    "CachePlan",
    "CacheWrite",
    "PromptCache",
    "VirtualClock",
    "WallClock",
    "auto_breakpoint",
    "breakpoints",
    "hash_chain",
]

LOOKBACK = 20
TTL_SECONDS: dict[str, float] = {"5m": 300.0, "1h": 3600.0}


class VirtualClock:
    """Seconds as a float that move only when told to (thread-safe)."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by `seconds`; returns the new time."""
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, value: float) -> None:
        with self._lock:
            self._now = float(value)


class WallClock(VirtualClock):
    """A clock that follows real time from 0 and can also be advanced or set.

    `scale` makes it run faster than real time (20: twenty seconds pass per real second), so
    that a workload of many minutes (cache TTLs, rate-limit refills) runs in seconds.
    """

    def __init__(self, scale: float = 1.0) -> None:
        if not scale > 0:
            raise ValueError(f"a clock's scale must be > 0, not {scale!r}")
        super().__init__(0.0)
        self.scale = float(scale)
        self._origin = time.monotonic()

    def now(self) -> float:
        return (time.monotonic() - self._origin) * self.scale + super().now()

    def advance(self, seconds: float) -> float:
        super().advance(seconds)
        return self.now()

    def set(self, value: float) -> None:
        super().set(value - (time.monotonic() - self._origin) * self.scale)


class CacheWrite(NamedTuple):
    """One entry a plan writes: prefix hash, block index, cumulative tokens, TTL, expiry."""

    digest: str
    position: int
    tokens: int
    ttl: str
    expires_at: float


@dataclass
class _Entry:
    index: int
    tokens: int
    ttl: str
    expires_at: float


@dataclass
class CachePlan:
    """The usage of one request and what committing it changes in the store."""

    workspace: str
    model: str
    total_tokens: int
    input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0
    hit_index: int = -1
    breakpoints: list[tuple[int, str, int]] = field(default_factory=list)
    writes: list[CacheWrite] = field(default_factory=list)
    refresh: str | None = None
    request_start: float = 0.0

    def usage_dict(self) -> dict[str, Any]:
        """The input and cache fields of the API's `usage` object (ints, never None)."""
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.ephemeral_5m_input_tokens,
                "ephemeral_1h_input_tokens": self.ephemeral_1h_input_tokens,
            },
        }


def _ttl(cache_control: Mapping[str, Any]) -> str:
    ttl = cache_control.get("ttl")
    return ttl if isinstance(ttl, str) and ttl in TTL_SECONDS else "5m"


def auto_breakpoint(blocks: list[FlatBlock]) -> int:
    """Where automatic caching puts its breakpoint: the last cacheable block, or -1."""
    for i in range(len(blocks) - 1, -1, -1):
        if blocks[i].cacheable:
            return i
    return -1


def breakpoints(body: Mapping[str, Any], blocks: list[FlatBlock]) -> list[tuple[int, str]]:
    """(index, ttl) of every breakpoint, the automatic one included, in prefix order."""
    points: dict[int, str] = {}
    for i, block in enumerate(blocks):
        if block.cache_control is not None:
            points[i] = _ttl(block.cache_control)
    auto = body.get("cache_control")
    if isinstance(auto, Mapping):
        i = auto_breakpoint(blocks)
        if i >= 0:
            points.setdefault(i, _ttl(auto))
    return sorted(points.items())


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _h(previous: str, data: str) -> str:
    return hashlib.sha256(f"{previous}\x1f{data}".encode()).hexdigest()


def _citations_enabled(value: Any) -> bool:
    if isinstance(value, Mapping):
        cit = value.get("citations")
        if isinstance(cit, Mapping) and cit.get("enabled") is True:
            return True
        return any(_citations_enabled(v) for v in value.values() if isinstance(v, (list, Mapping)))
    if isinstance(value, list):
        return any(_citations_enabled(v) for v in value)
    return False


def _salts(body: Mapping[str, Any], blocks: Iterable[FlatBlock]) -> tuple[str, str, dict[str, Any]]:
    tools = [t for t in body.get("tools") or [] if isinstance(t, Mapping)]
    web = any(is_server_tool(t) and str(t.get("type", "")).startswith("web_search") for t in tools)
    citations = _citations_enabled(body.get("messages") or [])
    system = _json(["system", body.get("speed") or "standard", web, citations])
    output_config = body.get("output_config")
    effort = output_config.get("effort") if isinstance(output_config, Mapping) else None
    thinking = {
        "thinking": body.get("thinking"),
        "effort": effort,
    }
    images = any(b.is_image for b in blocks)
    messages = _json(["messages", body.get("tool_choice"), images, thinking])
    return system, messages, thinking


def hash_chain(
    body: Mapping[str, Any], blocks: list[FlatBlock], workspace: str, model: ModelInfo
) -> list[str]:
    """h_i for every position of `blocks` (spec §6.3 step 3)."""
    system_salt, messages_salt, thinking = _salts(body, blocks)
    seed: list[Any] = [workspace, model.name]
    if model.thinking_before_tools:
        seed.append(thinking)
    h = _h("", _json(seed))
    out: list[str] = []
    salted: set[str] = set()
    for block in blocks:
        if block.tier != "tools" and "system" not in salted:
            h = _h(h, system_salt)
            salted.add("system")
        if block.tier == "messages" and "messages" not in salted:
            h = _h(h, messages_salt)
            salted.add("messages")
        mark = f"{block.role}{'^' if block.starts_message else '+'}" if block.role else ""
        h = _h(h, mark + block.canon)
        out.append(h)
    return out


class PromptCache:
    """The cache store, isolated per (workspace, model), on `clock`."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self._entries: dict[tuple[str, str, str], _Entry] = {}
        self._lock = threading.Lock()

    def plan(
        self,
        body: Mapping[str, Any],
        *,
        workspace: str,
        model: ModelInfo,
        tokenizer: Tokenizer | None = None,
        request_start: float | None = None,
    ) -> CachePlan:
        """The request's cache usage; the store is only read (`commit` applies the plan)."""
        start = self.clock.now() if request_start is None else request_start
        blocks = flatten(body, tokenizer, strip_previous_thinking=model.strips_thinking)
        cumulative: list[int] = []
        running = 0
        for block in blocks:
            running += block.tokens
            cumulative.append(running)
        plan = CachePlan(workspace, model.name, running, request_start=start)
        points = breakpoints(body, blocks)
        plan.breakpoints = [(i, ttl, cumulative[i]) for i, ttl in points]
        if not points:
            plan.input_tokens = running
            return plan
        hashes = hash_chain(body, blocks, workspace, model)
        hit = -1
        with self._lock:
            for b, _ttl in points:
                for j in range(b, max(b - LOOKBACK, -1), -1):
                    entry = self._entries.get((workspace, model.name, hashes[j]))
                    if entry is not None and entry.expires_at > start:
                        hit = max(hit, j)
                        break
        tok_a = cumulative[hit] if hit >= 0 else 0
        writable = [
            (i, ttl) for i, ttl in points if i > hit and cumulative[i] >= model.min_cache_tokens
        ]
        one_hour = [i for i, ttl in writable if ttl == "1h"]
        tok_b = cumulative[max(one_hour)] if one_hour else tok_a
        tok_c = cumulative[max(i for i, _ in writable)] if writable else tok_a
        plan.hit_index = hit
        plan.cache_read_input_tokens = tok_a
        plan.ephemeral_1h_input_tokens = tok_b - tok_a
        plan.ephemeral_5m_input_tokens = tok_c - tok_b
        plan.cache_creation_input_tokens = tok_c - tok_a
        plan.input_tokens = running - tok_c
        plan.writes = [
            CacheWrite(hashes[i], i, cumulative[i], ttl, start + TTL_SECONDS[ttl])
            for i, ttl in writable
        ]
        plan.refresh = hashes[hit] if hit >= 0 else None
        return plan

    def commit(self, plan: CachePlan) -> None:
        """Apply a plan at response start: write its entries, refresh its hit."""
        with self._lock:
            for write in plan.writes:
                key = (plan.workspace, plan.model, write.digest)
                old = self._entries.get(key)
                if old is None or old.expires_at < write.expires_at:
                    new = _Entry(write.position, write.tokens, write.ttl, write.expires_at)
                    self._entries[key] = new
            if plan.refresh is not None:
                entry = self._entries.get((plan.workspace, plan.model, plan.refresh))
                if entry is not None:
                    refreshed = plan.request_start + TTL_SECONDS[entry.ttl]
                    entry.expires_at = max(entry.expires_at, refreshed)

    def snapshot(self) -> list[dict[str, Any]]:
        """Every stored entry (expired ones included, with `live` telling them apart)."""
        now = self.clock.now()
        with self._lock:
            items = sorted(self._entries.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[1].index))
            return [
                {
                    "workspace": ws,
                    "model": model,
                    "hash": digest[:16],
                    "index": e.index,
                    "tokens": e.tokens,
                    "ttl": e.ttl,
                    "expires_at": e.expires_at,
                    "live": e.expires_at > now,
                }
                for (ws, model, digest), e in items
            ]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
