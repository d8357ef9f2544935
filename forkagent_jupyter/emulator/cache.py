"""Prompt-cache accounting: the documented rules, on a virtual clock.

For a request, `PromptCache.plan` computes (without touching the store):

1. the flattened prompt (tools -> system -> messages; see tokens.py) and a hash chain over
   the blocks' canonical forms (cache_control excluded), seeded with the workspace and the
   model, salted before the system tier (speed, web search, citations) and before the
   messages tier (tool_choice, images anywhere, thinking settings, effort), so a change in a
   tier invalidates that tier and the ones after it;
2. the breakpoints: blocks with `cache_control`, plus the automatic one (top-level
   `cache_control` -> the last cacheable block);
3. the hit A: for each breakpoint, the first live entry among it and the 19 positions before
   it; A is the highest such hit;
4. the writes: breakpoints above A whose prefix reaches the model's minimum length. B is the
   highest 1h one (else A), C the highest one (else A). Usage: read = tok(A),
   1h write = tok(B) - tok(A), 5m write = tok(C) - tok(B), input = total - tok(C).

`commit` then writes the entries (expiry = request start + TTL) and refreshes the hit, at
"response start": an entry is readable only by requests planned after that.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .catalog import ModelInfo
from .tokens import FlatBlock, Tokenizer, flatten

__all__ = ["LOOKBACK", "TTL_SECONDS", "CachePlan", "PromptCache", "VirtualClock", "breakpoints"]

LOOKBACK = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


class VirtualClock:
    """Seconds as a float; moves only when told to (thread-safe)."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, value: float) -> None:
        with self._lock:
            self._now = value


@dataclass
class _Entry:
    index: int
    tokens: int
    ttl: str
    expires_at: float


@dataclass
class CachePlan:
    """The usage of one request and what committing it would change."""

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
    writes: list[tuple[str, int, int, str]] = field(default_factory=list)
    refresh: str | None = None
    request_start: float = 0.0

    def usage_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.ephemeral_5m_input_tokens,
                "ephemeral_1h_input_tokens": self.ephemeral_1h_input_tokens,
            },
        }


def _salt(*parts: Any) -> str:
    return json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)


def _salts(body: Mapping[str, Any]) -> tuple[str, str]:
    tools = [t for t in body.get("tools") or [] if isinstance(t, Mapping)]
    web = any(str(t.get("type", "")).startswith("web_search") for t in tools)
    citations = "citations" in json.dumps(body.get("messages") or [])
    system = _salt("system", body.get("speed"), web, citations)
    images = '"type":"image"' in json.dumps(
        [body.get("system"), body.get("messages")], separators=(",", ":")
    )
    effort = (body.get("output_config") or {}).get("effort")
    messages = _salt("messages", body.get("tool_choice"), images, body.get("thinking"), effort)
    return system, messages


def _chain(body: Mapping[str, Any], blocks: list[FlatBlock], workspace: str) -> list[str]:
    system_salt, messages_salt = _salts(body)
    h = hashlib.sha256(_salt(workspace, body.get("model")).encode()).hexdigest()
    out: list[str] = []
    salted = {"tools"}
    for block in blocks:
        if block.tier == "system" and "system" not in salted:
            h = hashlib.sha256((h + system_salt).encode()).hexdigest()
            salted.add("system")
        if block.tier == "messages" and "messages" not in salted:
            if "system" not in salted:
                h = hashlib.sha256((h + system_salt).encode()).hexdigest()
                salted.add("system")
            h = hashlib.sha256((h + messages_salt).encode()).hexdigest()
            salted.add("messages")
        h = hashlib.sha256((h + block.canon).encode("utf-8")).hexdigest()
        out.append(h)
    return out


def breakpoints(body: Mapping[str, Any], blocks: list[FlatBlock]) -> list[tuple[int, str]]:
    """(index, ttl) of every breakpoint, the automatic one included, in prefix order."""
    points: dict[int, str] = {}
    for i, block in enumerate(blocks):
        if block.cache_control is not None:
            points[i] = str(block.cache_control.get("ttl", "5m"))
    auto = body.get("cache_control")
    if isinstance(auto, Mapping):
        for i in range(len(blocks) - 1, -1, -1):
            if blocks[i].cacheable:
                points.setdefault(i, str(auto.get("ttl", "5m")))
                break
    return sorted(points.items())


class PromptCache:
    """The cache store, isolated per (workspace, model)."""

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
        start = self.clock.now() if request_start is None else request_start
        blocks = flatten(body, tokenizer)
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
        hashes = _chain(body, blocks, workspace)
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
        ones = [i for i, ttl in writable if ttl == "1h"]
        tok_b = cumulative[max(ones)] if ones else tok_a
        tok_c = cumulative[max(i for i, _ in writable)] if writable else tok_a
        plan.hit_index = hit
        plan.cache_read_input_tokens = tok_a
        plan.ephemeral_1h_input_tokens = tok_b - tok_a
        plan.ephemeral_5m_input_tokens = tok_c - tok_b
        plan.cache_creation_input_tokens = tok_c - tok_a
        plan.input_tokens = running - tok_c
        plan.writes = [(hashes[i], i, cumulative[i], ttl) for i, ttl in writable]
        plan.refresh = hashes[hit] if hit >= 0 else None
        return plan

    def commit(self, plan: CachePlan) -> None:
        """Make the plan's writes readable and refresh its hit (at response start)."""
        with self._lock:
            for digest, index, tokens, ttl in plan.writes:
                key = (plan.workspace, plan.model, digest)
                expires = plan.request_start + TTL_SECONDS.get(ttl, 300.0)
                old = self._entries.get(key)
                if old is None or old.expires_at < expires:
                    self._entries[key] = _Entry(index, tokens, ttl, expires)
            if plan.refresh is not None:
                entry = self._entries.get((plan.workspace, plan.model, plan.refresh))
                if entry is not None:
                    entry.expires_at = max(
                        entry.expires_at, plan.request_start + TTL_SECONDS.get(entry.ttl, 300.0)
                    )

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return [
                {
                    "workspace": ws,
                    "model": model,
                    "hash": digest[:16],
                    "index": e.index,
                    "tokens": e.tokens,
                    "ttl": e.ttl,
                    "expires_at": e.expires_at,
                }
                for (ws, model, digest), e in sorted(
                    self._entries.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[1].index)
                )
            ]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
