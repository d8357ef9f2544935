"""What the emulator saw and billed: raw requests, the usage ledger, strict-mode violations.

* `RequestRecord`: every API request as received (method, path, query, lower-cased headers,
  parsed JSON body or None, raw bytes) plus the status and request id it got.
* `Ledger`: one `LedgerEntry` per *billed* response, i.e. per `/v1/messages` request that
  reached response start (errors and injected faults before that point are not billed;
  `count_tokens` is free). The usage is what the response carried; cost via
  `forkagent_jupyter.messages_api.usage.cost_usd`. It also counts the requests the rate
  limits refused (`throttles()`: one `Throttle` per 429 `rate_limit_error`, not billed).
* `Violation`: a request the emulator rejected with a 4xx of its own (not an injected fault).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..messages_api.usage import Usage, cost_usd
from .ratelimits import Throttle

__all__ = ["Ledger", "LedgerEntry", "RequestRecord", "Violation", "summarize_request"]


@dataclass
class RequestRecord:
    """One API request as received; `status`/`request_id` are filled in when answered."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    time: float
    request_id: str = ""
    status: int | None = None
    fault: bool = False
    peer: str = ""  # client host:port (one per connection: keep-alive reuses it)
    response_headers: dict[str, str] = field(default_factory=dict)  # e.g. rate limits

    @property
    def retry_count(self) -> int | None:
        value = self.headers.get("x-stainless-retry-count")
        return int(value) if value is not None and value.isdigit() else None

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "headers": dict(self.headers),
            "body": self.body,
            "time": self.time,
            "request_id": self.request_id,
            "status": self.status,
            "fault": self.fault,
            "peer": self.peer,
        }


@dataclass(frozen=True)
class LedgerEntry:
    request_id: str
    message_id: str
    time: float  # the emulator clock at request start
    model: str
    workspace: str
    streamed: bool
    status: int
    usage: dict[str, Any]  # as returned: input/cache fields, cache_creation, output_tokens
    hit_index: int  # flattened block index of the cache hit, -1 for none
    breakpoints: list[tuple[int, str, int]]  # (block index, ttl, cumulative tokens)
    cost_usd: float
    complete: bool = True  # False when the stream was cut (fault) before message_delta
    stop_reason: str | None = None
    service_tier: str = "standard"  # "batch": a Message Batches request, billed at half

    @property
    def usage_obj(self) -> Usage:
        return Usage.from_api(self.usage)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["breakpoints"] = [list(b) for b in self.breakpoints]
        return data


@dataclass(frozen=True)
class Violation:
    request_id: str
    method: str
    path: str
    status: int
    error_type: str
    message: str
    summary: str = ""
    expected: bool = False

    def describe(self) -> str:
        return (
            f"{self.method} {self.path} -> {self.status} {self.error_type}: {self.message}"
            f" [{self.request_id}] {self.summary}"
        ).rstrip()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize_request(body: Any) -> str:
    """A one-line description of a request body for violation reports."""
    if not isinstance(body, Mapping):
        return "(no JSON object body)"
    roles = [str(m.get("role")) for m in body.get("messages") or [] if isinstance(m, Mapping)]
    shown = ",".join(roles[-8:])
    if len(roles) > 8:
        shown = f"...,{shown}"
    tools = len(body.get("tools") or [])
    return (
        f"model={body.get('model')!r} max_tokens={body.get('max_tokens')!r} "
        f"messages={len(roles)}[{shown}] tools={tools} stream={bool(body.get('stream'))}"
    )


def make_entry(
    *,
    request_id: str,
    message_id: str,
    time: float,
    model: str,
    workspace: str,
    streamed: bool,
    status: int,
    usage: Mapping[str, Any],
    hit_index: int,
    breakpoints: list[tuple[int, str, int]],
    complete: bool = True,
    stop_reason: str | None = None,
    service_tier: str = "standard",
) -> LedgerEntry:
    plain = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in usage.items()}
    return LedgerEntry(
        request_id=request_id,
        message_id=message_id,
        time=time,
        model=model,
        workspace=workspace,
        streamed=streamed,
        status=status,
        usage=plain,
        hit_index=hit_index,
        breakpoints=list(breakpoints),
        cost_usd=cost_usd(Usage.from_api(plain), model, service_tier),
        complete=complete,
        stop_reason=stop_reason,
        service_tier=service_tier,
    )


@dataclass
class Ledger:
    """Billed responses, in the order their responses started (thread-safe)."""

    _entries: list[LedgerEntry] = field(default_factory=list)
    _throttles: list[Throttle] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def throttled(self, throttle: Throttle) -> None:
        """Count a request the rate limits refused."""
        with self._lock:
            self._throttles.append(throttle)

    def throttles(self) -> list[Throttle]:
        with self._lock:
            return list(self._throttles)

    def add(self, entry: LedgerEntry) -> None:
        with self._lock:
            self._entries.append(entry)

    def entries(self) -> list[LedgerEntry]:
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def total(self) -> Usage:
        total = Usage()
        for entry in self.entries():
            total = total + entry.usage_obj
        return total

    def cost_usd(self) -> float:
        return sum(e.cost_usd for e in self.entries())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._throttles.clear()

    def to_json(self) -> dict[str, Any]:
        entries = self.entries()
        return {
            "entries": [e.to_json() for e in entries],
            "total": self.total().model_dump(),
            "cost_usd": sum(e.cost_usd for e in entries),
            "rate_limited": [t.to_json() for t in self.throttles()],
        }
