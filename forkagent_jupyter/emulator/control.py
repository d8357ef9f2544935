"""The emulator's control endpoints (JSON in, JSON out; no auth; not recorded as requests).

- `GET  /_emulator/ledger`      billed responses: {"entries", "total", "cost_usd"}
- `POST /_emulator/reset`       forget requests, ledger, violations, cache, faults, script
- `GET  /_emulator/cache`       {"now", "entries": [{workspace, model, hash, index, tokens,
                                ttl, expires_at}]}
- `GET|POST /_emulator/clock`   POST {"advance": seconds} or {"set": t}; answers {"now"}
- `GET  /_emulator/requests`    recorded API requests (method, path, headers, body, status)
- `POST /_emulator/script`      {"replies": [reply, ...], "replace"?: bool,
                                "when_empty"?: "ok"|"raise"|"fallback"}; a reply is a string,
                                a list of blocks, or {"content", "stop_reason", "stop_details"}
- `GET|POST /_emulator/faults`  POST {"faults": [{"fault": {...Fault fields} | status,
                                "times"?: n|null, "header"?, "user_id"?, "endpoint"?,
                                "rate"?: p, "seed"?, "choices"?: [fault, ...]}],
                                "clear"?: bool, "ttft"?, "token_latency"?, "extra_headers"?}
- `GET  /_emulator/violations`  {"violations": [...], "strict": bool}
- `GET|POST /_emulator/rate_limits` POST {"limits": {model or "*": [RPM, ITPM, OTPM]} | null,
                                "round_to"?: n}: replaces the rate limits (null or {}: off;
                                a null in a triple: that bucket unlimited) with full buckets;
                                answers {"limits", "scale", "round_to", "buckets"}
- `GET|POST /_emulator/batches` POST {"processing_seconds"?, "concurrency"?,
                                "expiry_seconds"?} sets the batch options (batches.py);
                                answers {"options", "batches": [ids]}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..messages_api.ratelimits import RateLimit
from .brains import Brain, Reply, ScriptedBrain
from .faults import Fault, FaultRule

if TYPE_CHECKING:
    from ..messages_api.cache import PromptCache, VirtualClock
    from .batches import BatchStore
    from .faults import FaultPlan
    from .ledger import Ledger, RequestRecord, Violation
    from .ratelimits import RateLimiter
    from .transport import Handler

__all__ = ["ControlledEmulator", "handle_control"]


class ControlledEmulator(Protocol):
    """The emulator as its control endpoints use it (`server.Emulator` is one)."""

    strict: bool
    rate_limits: RateLimiter
    batches: BatchStore

    @property
    def brain(self) -> Brain: ...
    @brain.setter
    def brain(self, value: Brain) -> None: ...
    @property
    def clock(self) -> VirtualClock: ...
    @property
    def cache(self) -> PromptCache: ...
    @property
    def faults(self) -> FaultPlan: ...
    @property
    def ledger(self) -> Ledger: ...
    @property
    def requests(self) -> list[RequestRecord]: ...
    @property
    def all_violations(self) -> list[Violation]: ...

    def reset(self) -> None: ...


class _BadControlError(Exception):
    pass


def _obj(body: Any) -> Mapping[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, Mapping):
        raise _BadControlError("the body must be a JSON object")
    return body


def _ledger(emu: ControlledEmulator, body: Any) -> Any:
    return emu.ledger.to_json()


def _reset(emu: ControlledEmulator, body: Any) -> Any:
    emu.reset()
    return {"ok": True}


def _cache(emu: ControlledEmulator, body: Any) -> Any:
    return {"now": emu.clock.now(), "entries": emu.cache.snapshot()}


def _clock(emu: ControlledEmulator, body: Any) -> Any:
    data = _obj(body)
    if "advance" in data:
        emu.clock.advance(float(data["advance"]))
    if "set" in data:
        emu.clock.set(float(data["set"]))
    return {"now": emu.clock.now()}


def _requests(emu: ControlledEmulator, body: Any) -> Any:
    return {"requests": [r.to_json() for r in emu.requests]}


def _violations(emu: ControlledEmulator, body: Any) -> Any:
    return {"violations": [v.to_json() for v in emu.all_violations], "strict": emu.strict}


def _script(emu: ControlledEmulator, body: Any) -> Any:
    data = _obj(body)
    replies = [Reply.from_json(r) for r in data.get("replies") or []]
    when_empty = data.get("when_empty", "ok")
    if when_empty not in ("ok", "raise", "fallback"):
        raise _BadControlError("when_empty must be 'ok', 'raise' or 'fallback'")
    brain = emu.brain
    if not isinstance(brain, ScriptedBrain) or data.get("replace"):
        previous: Brain = brain
        if isinstance(brain, ScriptedBrain) and not isinstance(brain.when_empty, str):
            previous = brain.when_empty
        brain = ScriptedBrain(when_empty=previous if when_empty == "fallback" else when_empty)
        emu.brain = brain
    elif "when_empty" in data and when_empty != "fallback":
        brain.when_empty = when_empty
    brain.push(*replies)
    return {"pending": brain.pending}


def _faults(emu: ControlledEmulator, body: Any) -> Any:
    data = _obj(body)
    plan = emu.faults
    if data.get("clear"):
        plan.clear()
    for key in ("ttft", "token_latency"):
        if key in data:
            setattr(plan, key, float(data[key]))
    if "extra_headers" in data:
        plan.extra_headers.update({str(k): str(v) for k, v in _obj(data["extra_headers"]).items()})
    for item in data.get("faults") or []:
        spec = _obj(item)
        fault = Fault.from_json(spec.get("fault", {}))
        endpoint = spec.get("endpoint")
        if endpoint not in (None, "messages", "count_tokens"):
            raise _BadControlError("endpoint must be 'messages' or 'count_tokens'")
        rate = spec.get("rate")
        try:
            rule = FaultRule(
                fault,
                times=spec.get("times", 1 if rate is None else None),
                header=spec.get("header"),
                user_id=spec.get("user_id"),
                endpoint=endpoint,
                rate=None if rate is None else float(rate),
                choices=tuple(Fault.from_json(c) for c in spec.get("choices") or []),
                seed=spec.get("seed", 0 if rate is not None else None),
            )
        except (TypeError, ValueError) as exc:
            raise _BadControlError(str(exc)) from None
        plan.add(rule)
    return plan.snapshot()


def _faults_get(emu: ControlledEmulator, body: Any) -> Any:
    return emu.faults.snapshot()


def _clock_get(emu: ControlledEmulator, body: Any) -> Any:
    return {"now": emu.clock.now()}


def _batches(emu: ControlledEmulator, body: Any) -> Any:
    data = _obj(body)
    options = emu.batches.options
    for key in ("processing_seconds", "expiry_seconds"):
        if key in data:
            value = float(data[key])
            if value < 0:
                raise _BadControlError(f"{key} must be >= 0")
            setattr(options, key, value)
    if "concurrency" in data:
        if int(data["concurrency"]) < 1:
            raise _BadControlError("concurrency must be >= 1")
        options.concurrency = int(data["concurrency"])
    return {
        "options": {
            "processing_seconds": options.processing_seconds,
            "concurrency": options.concurrency,
            "expiry_seconds": options.expiry_seconds,
        },
        "batches": emu.batches.ids(),
    }


def _rate_limits(emu: ControlledEmulator, body: Any) -> Any:
    data = _obj(body)
    if "round_to" in data:
        if int(data["round_to"]) < 1:
            raise _BadControlError("round_to must be >= 1")
        emu.rate_limits.round_to = int(data["round_to"])
    if "limits" in data:
        limits: dict[str, RateLimit] = {}
        for model, triple in _obj(data["limits"]).items():
            if not isinstance(triple, list) or len(triple) != 3:
                raise _BadControlError(f"limits[{model!r}] must be [RPM, ITPM, OTPM]")
            text = ",".join("" if v is None else str(int(v)) for v in triple)
            limits[str(model)] = RateLimit.parse(text)
        emu.rate_limits.configure(limits)
    return emu.rate_limits.snapshot()


_ROUTES: dict[tuple[str, str], Callable[[ControlledEmulator, Any], Any]] = {
    ("GET", "ledger"): _ledger,
    ("POST", "reset"): _reset,
    ("GET", "cache"): _cache,
    ("GET", "clock"): _clock_get,
    ("POST", "clock"): _clock,
    ("GET", "requests"): _requests,
    ("POST", "script"): _script,
    ("GET", "faults"): _faults_get,
    ("POST", "faults"): _faults,
    ("GET", "violations"): _violations,
    ("GET", "rate_limits"): _rate_limits,
    ("POST", "rate_limits"): _rate_limits,
    ("GET", "batches"): _batches,
    ("POST", "batches"): _batches,
}


def handle_control(emu: ControlledEmulator, h: Handler, raw: bytes) -> None:
    name = h.path_only[len("/_emulator/") :].strip("/")
    route = _ROUTES.get((h.command, name))
    if route is None:
        known = any(n == name for _, n in _ROUTES)
        status = 405 if known else 404
        h.send_json(status, {"error": f"no control endpoint {h.command} /_emulator/{name}"})
        return
    try:
        body = json.loads(raw) if raw.strip() else None
        result = route(emu, body)
    except (ValueError, TypeError, _BadControlError) as exc:
        h.send_json(400, {"error": str(exc)})
        return
    h.send_json(200, result)
