"""Fault injection: error statuses, mid-stream errors, dropped connections and delays.

A `Fault` says what goes wrong with one request. A `FaultPlan` holds rules that pick the
fault for each API request (`/v1/messages`, `/v1/messages/count_tokens`), tried in order:

* `plan.next(fault, times=N)` — the next N requests;
* `plan.on_header(value, fault)` — requests with `x-emulator-fault: <value>`;
* `plan.on_user(user_id, fault)` — requests with `metadata.user_id == user_id`;
* `plan.at_rate(rate, fault, ..., seed=S)` — each request with probability `rate`, one of the
  given faults picked at random (a seeded generator: the same sequence of requests meets the
  same faults), for soak tests.

A request with an `x-emulator-fault` header no rule claims gets an ad-hoc fault: an integer
status (`529`) or a JSON object of `Fault` fields (`{"status": 429, "retry_after": 0}`).
Global delays (`ttft`, `token_latency`, seconds) apply to every response unless a fault sets
its own. An injected fault never counts as a strict-mode violation.

Headers follow the real API (`error_headers`): `x-should-retry: false` on 4xx except
408/409/429, `retry-after` on 429 (1 s unless the fault sets it), optional rate-limit headers.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

from ..messages_api.errors import STATUS_TYPES

__all__ = [
    "FAULT_HEADER",
    "Fault",
    "FaultPlan",
    "FaultRule",
    "error_headers",
    "rate_limit_headers",
]

FAULT_HEADER = "x-emulator-fault"

DEFAULT_MESSAGES: dict[int, str] = {
    400: "Invalid request",
    401: "invalid x-api-key",
    402: "Your credit balance is too low to access the Anthropic API.",
    403: "Your API key does not have permission to use the specified resource.",
    404: "The requested resource could not be found.",
    408: "Request timed out",
    409: "Conflict",
    413: "Request exceeds the maximum allowed number of bytes.",
    429: "Number of request tokens has exceeded your per-minute rate limit",
    500: "Internal server error",
    504: "Gateway timeout",
    529: "Overloaded",
}

Endpoint = Literal["messages", "count_tokens"]


@dataclass(frozen=True)
class Fault:
    """What goes wrong. All fields optional; an empty Fault changes nothing.

    - `status` (+ `error_type`, `message`): answer with this error before any body.
    - `retry_after` (seconds, or an HTTP date string), `retry_after_ms`, `should_retry`
      (sets `x-should-retry`), `headers`: extra response headers of the error.
    - `stream_error_after=K`: a streaming response sends `event: error` after K content
      events (content_block_start/delta/stop) and ends; `stream_error_type`/`_message`.
      A non-streaming response with this set answers the error status instead.
    - `drop="before"`: close the connection without any response; `drop="mid"` closes it
      after `drop_after` content events of a stream (non-streaming: after the headers);
      `drop="end"` ends the stream cleanly there instead (a truncated stream: no
      message_delta, no message_stop; non-streaming: like "mid").
    - `ttft`, `token_latency`: delays in seconds (before the response starts / per delta).
    """

    status: int | None = None
    error_type: str | None = None
    message: str | None = None
    retry_after: float | str | None = None
    retry_after_ms: float | None = None
    should_retry: bool | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    stream_error_after: int | None = None
    stream_error_type: str = "overloaded_error"
    stream_error_message: str = "Overloaded"
    drop: Literal["before", "mid", "end"] | None = None
    drop_after: int = 0
    ttft: float | None = None
    token_latency: float | None = None

    @classmethod
    def error(cls, status: int, message: str | None = None, **kw: Any) -> Fault:
        return cls(status=status, message=message, **kw)

    @classmethod
    def overloaded(cls, **kw: Any) -> Fault:
        return cls(status=529, **kw)

    @classmethod
    def rate_limited(cls, retry_after: float | str | None = 1, **kw: Any) -> Fault:
        return cls(status=429, retry_after=retry_after, **kw)

    @classmethod
    def stream_error(
        cls, after: int = 0, error_type: str = "overloaded_error", message: str = "Overloaded"
    ) -> Fault:
        return cls(
            stream_error_after=after, stream_error_type=error_type, stream_error_message=message
        )

    @classmethod
    def dropped(cls, *, after: int | None = None) -> Fault:
        """Close the connection: before any response (`after=None`) or mid-stream."""
        if after is None:
            return cls(drop="before")
        return cls(drop="mid", drop_after=after)

    @classmethod
    def truncated(cls, *, after: int = 0) -> Fault:
        """End the stream cleanly after `after` content events, before the message is done."""
        return cls(drop="end", drop_after=after)

    @classmethod
    def delay(cls, ttft: float | None = None, token_latency: float | None = None) -> Fault:
        return cls(ttft=ttft, token_latency=token_latency)

    @classmethod
    def from_json(cls, data: Any) -> Fault:
        """From an int status, a numeric string, or an object of Fault fields."""
        if isinstance(data, bool):
            raise ValueError("a fault must be a status or an object")
        if isinstance(data, int):
            return cls(status=data)
        if isinstance(data, str):
            text = data.strip()
            if text.isdigit():
                return cls(status=int(text))
            data = json.loads(text)
        if not isinstance(data, Mapping):
            raise ValueError(f"a fault must be a status or an object, not {data!r}")
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown fault fields: {', '.join(sorted(unknown))}")
        kwargs: dict[str, Any] = {k: (dict(v) if k == "headers" else v) for k, v in data.items()}
        return cls(**kwargs)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, {}, 0) or k == "status"}

    @property
    def error_type_resolved(self) -> str:
        return self.error_type or STATUS_TYPES.get(self.status or 500, "api_error")

    @property
    def message_resolved(self) -> str:
        if self.message is not None:
            return self.message
        return DEFAULT_MESSAGES.get(self.status or 500, "Internal server error")

    def error_headers(self) -> dict[str, str]:
        return error_headers(
            self.status or 500,
            retry_after=self.retry_after,
            retry_after_ms=self.retry_after_ms,
            should_retry=self.should_retry,
            extra=self.headers,
        )


def error_headers(
    status: int,
    *,
    retry_after: float | str | None = None,
    retry_after_ms: float | None = None,
    should_retry: bool | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The headers a real error response of `status` carries."""
    headers: dict[str, str] = {}
    if should_retry is not None:
        headers["x-should-retry"] = "true" if should_retry else "false"
    elif 400 <= status < 500 and status not in (408, 409, 429):
        headers["x-should-retry"] = "false"
    if retry_after is None and status == 429 and retry_after_ms is None:
        retry_after = 1
    if retry_after is not None:
        headers["retry-after"] = _number(retry_after)
    if retry_after_ms is not None:
        headers["retry-after-ms"] = _number(retry_after_ms)
    headers.update(extra or {})
    return headers


def _number(value: float | str) -> str:
    if isinstance(value, str):
        return value
    return str(int(value)) if float(value).is_integer() else str(value)


def rate_limit_headers(
    *,
    requests_limit: int = 4000,
    requests_remaining: int = 3999,
    tokens_limit: int = 2_000_000,
    tokens_remaining: int = 1_999_000,
    reset_in: float = 60.0,
    now: datetime | None = None,
) -> dict[str, str]:
    """`anthropic-ratelimit-*` headers (reset in RFC 3339)."""
    reset = ((now or datetime.now(timezone.utc)) + timedelta(seconds=reset_in)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    out: dict[str, str] = {}
    for kind, limit, remaining in (
        ("requests", requests_limit, requests_remaining),
        ("tokens", tokens_limit, tokens_remaining),
        ("input-tokens", tokens_limit, tokens_remaining),
        ("output-tokens", tokens_limit // 5, tokens_remaining // 5),
    ):
        out[f"anthropic-ratelimit-{kind}-limit"] = str(limit)
        out[f"anthropic-ratelimit-{kind}-remaining"] = str(remaining)
        out[f"anthropic-ratelimit-{kind}-reset"] = reset
    return out


@dataclass
class FaultRule:
    """Which requests get `fault`. `times` counts the faults it may still inject (None: no
    limit). With `rate`, a matching request gets a fault only with that probability, drawn
    from a generator seeded with `seed`, and the fault is one of `choices` (default
    `(fault,)`), picked by the same generator."""

    fault: Fault
    times: int | None = 1
    header: str | None = None
    user_id: str | None = None
    endpoint: Endpoint | None = None
    rate: float | None = None
    choices: tuple[Fault, ...] = ()
    seed: int | None = None
    _rng: random.Random = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.rate is not None and not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"a fault rate must be between 0 and 1, not {self.rate!r}")
        self._rng = random.Random(self.seed)

    def draw(self) -> Fault | None:
        """The fault for a matching request (call under the plan's lock), or None when the
        rate spares it."""
        if self.rate is None:
            return self.fault
        if self._rng.random() >= self.rate:
            return None
        options = self.choices or (self.fault,)
        return options[self._rng.randrange(len(options))]

    def matches(self, endpoint: Endpoint, header: str | None, user_id: str | None) -> bool:
        if self.times is not None and self.times <= 0:
            return False
        if self.endpoint is not None and self.endpoint != endpoint:
            return False
        if self.header is not None and self.header != header:
            return False
        return self.user_id is None or self.user_id == user_id

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "fault": self.fault.to_json(),
            "times": self.times,
            "header": self.header,
            "user_id": self.user_id,
            "endpoint": self.endpoint,
        }
        if self.rate is not None:
            out["rate"] = self.rate
            out["seed"] = self.seed
            if self.choices:
                out["choices"] = [f.to_json() for f in self.choices]
        return out


class FaultPlan:
    """The fault rules and global delays of one emulator (thread-safe)."""

    def __init__(self, *, ttft: float = 0.0, token_latency: float = 0.0) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self.ttft = ttft
        self.token_latency = token_latency
        self.extra_headers: dict[str, str] = {}
        self.injected = 0

    def add(self, rule: FaultRule) -> FaultRule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def next(self, fault: Fault, times: int = 1, *, endpoint: Endpoint | None = None) -> FaultRule:
        """`fault` for the next `times` API requests."""
        return self.add(FaultRule(fault, times, endpoint=endpoint))

    def on_header(self, value: str, fault: Fault, times: int | None = None) -> FaultRule:
        """`fault` for requests carrying `x-emulator-fault: <value>`."""
        return self.add(FaultRule(fault, times, header=value))

    def on_user(self, user_id: str, fault: Fault, times: int | None = None) -> FaultRule:
        """`fault` for requests with `metadata.user_id == user_id`."""
        return self.add(FaultRule(fault, times, user_id=user_id))

    def at_rate(
        self,
        rate: float,
        *faults: Fault,
        seed: int | None = 0,
        times: int | None = None,
        endpoint: Endpoint | None = "messages",
    ) -> FaultRule:
        """One of `faults` (picked at random) for each request with probability `rate`;
        `seed` makes the draws repeatable. Rules added before it are tried first."""
        if not faults:
            raise ValueError("at_rate needs at least one fault")
        rule = FaultRule(
            faults[0], times, endpoint=endpoint, rate=rate, choices=tuple(faults), seed=seed
        )
        return self.add(rule)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
            self.extra_headers.clear()

    @property
    def rules(self) -> list[FaultRule]:
        with self._lock:
            return [r for r in self._rules if r.times is None or r.times > 0]

    def take(
        self, endpoint: Endpoint, body: Mapping[str, Any] | None, headers: Mapping[str, str]
    ) -> Fault | None:
        """The fault for one request (consuming one use of its rule), or None."""
        header = headers.get(FAULT_HEADER)
        metadata = body.get("metadata") if isinstance(body, Mapping) else None
        user = metadata.get("user_id") if isinstance(metadata, Mapping) else None
        with self._lock:
            for rule in self._rules:
                if rule.matches(endpoint, header, user if isinstance(user, str) else None):
                    fault = rule.draw()
                    if fault is None:
                        continue
                    if rule.times is not None:
                        rule.times -= 1
                    self._rules = [r for r in self._rules if r.times is None or r.times > 0]
                    self.injected += 1
                    return fault
        if header:
            try:
                fault = Fault.from_json(header)
            except (ValueError, TypeError):
                return None
            with self._lock:
                self.injected += 1
            return fault
        return None

    def snapshot(self) -> dict[str, Any]:
        return {
            "rules": [r.to_json() for r in self.rules],
            "ttft": self.ttft,
            "token_latency": self.token_latency,
            "extra_headers": dict(self.extra_headers),
            "injected": self.injected,
        }
