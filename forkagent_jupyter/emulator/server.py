"""`Emulator`: the Anthropic-compatible HTTP server the SDK talks to in tests and demos.

Endpoints: `POST /v1/messages` (JSON or `stream: true`), `POST /v1/messages/count_tokens`,
Vertex AI's `...:streamRawPredict` / `:rawPredict` and Bedrock's `/model/{id}/invoke...` route
to messages (`platforms.py`; Bedrock streams event-stream frames, `eventstream.py`),
the Message Batches endpoints under `/v1/messages/batches` (see `batches.py`; options in
`emulator.batches.options`), and the control endpoints under `/_emulator/` (see
`control.py`). Query strings are ignored.

Per API request, in this order: parse the JSON body (400), authenticate (`x-api-key` or
`Authorization: Bearer`; 401), check `anthropic-version` (2023-06-01 or 2026-10-21; 400),
validate (core rules), plan the cache usage (pure), check the rate limits when configured
(`rate_limits=`, see `ratelimits.py`: 429 with `retry-after`, or the costs are taken and
every later response of the request carries the `anthropic-ratelimit-*` headers), apply
injected faults, ask the brain,
wait the time-to-first-token, **commit the cache plan** (response start: errors and faults
before this point write nothing), then send the body or the SSE stream and add a ledger
entry with the usage actually returned. Every response carries `request-id: req_...`.

Strict mode: every 4xx the emulator produces itself (not an injected fault) and every brain
failure is recorded as a violation; `check()` raises AssertionError listing them. Wrap
deliberate bad requests in `with emulator.expect_violations(): ...`.

Clock: by default a `WallClock` (follows real time from 0, and can be advanced or set).
Pass `clock=VirtualClock()` for a clock that moves only when told to, or
`clock=WallClock(scale=20)` for one that runs twenty times faster than real time (cache TTLs
and rate-limit refills alike).

The key and version checks: `checks.py`; sending a reply's body or stream: `replies.py`.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal

from ..messages_api.cache import CachePlan, PromptCache, VirtualClock, WallClock
from ..messages_api.catalog import DEFAULT_CATALOG, ModelInfo
from ..messages_api.errors import STATUS_TYPES, ApiError, error_body
from ..messages_api.ratelimits import RateLimit
from ..messages_api.tokens import ByteTokenizer, Tokenizer, count_input_tokens
from ..messages_api.validation import THINKING_SECRET, sign_thinking, validate_request
from .batches import BatchStore
from .brains import Brain, OfflineBrain, Reply, ScriptedBrain
from .checks import API_VERSIONS, TRANSPORT_MESSAGES, authorize
from .faults import Fault, FaultPlan, error_headers
from .ids import IdFactory
from .ledger import Ledger, RequestRecord, Violation, make_entry, summarize_request
from .platforms import platform_route
from .ratelimits import Admission, RateLimiter, Refusal, Throttle
from .replies import send_body, send_stream
from .sse import Outcome, StreamOptions, finish_reply, message_dict
from .transport import ClientGoneError, EmulatorHTTPServer, Handler
from .web import WebCorpus, WebUse

__all__ = ["API_VERSIONS", "TRANSPORT_MESSAGES", "Emulator", "IdFactory", "WallClock"]

_NOT_USAGE = ("service_tier", "inference_geo")
_STATUS_OF_TYPE = {v: k for k, v in STATUS_TYPES.items() if k != 408}


class _AbortError(Exception):
    """The emulator is stopping; give up on this request."""


class Emulator:
    """An Anthropic Messages API emulator on a real socket (see the module doc)."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        strict: bool = False,
        api_keys: set[str] | None = None,
        brain: Brain | None = None,
        clock: VirtualClock | None = None,
        seed: int | None = None,
        catalog: Mapping[str, ModelInfo] | None = None,
        tokenizer: Tokenizer | None = None,
        ping_interval: int | None = None,
        ttft: float = 0.0,
        token_latency: float = 0.0,
        stream_options: StreamOptions | None = None,
        strict_legacy: bool = False,
        thinking_secret: bytes = THINKING_SECRET,
        stop_timeout: float = 5.0,
        rate_limits: Mapping[str, RateLimit] | RateLimit | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.strict = strict
        self.api_keys = set(api_keys) if api_keys is not None else None
        self._brain: Brain = brain if brain is not None else OfflineBrain()
        self._clock = clock if clock is not None else WallClock()
        self.catalog: Mapping[str, ModelInfo] = catalog if catalog is not None else DEFAULT_CATALOG
        self.tokenizer: Tokenizer = tokenizer if tokenizer is not None else ByteTokenizer()
        opts = stream_options or StreamOptions()
        if ping_interval is not None:
            opts = StreamOptions(**{**opts.__dict__, "ping_every": ping_interval})
        self.stream_options = opts
        self.strict_legacy = strict_legacy
        self.thinking_secret = thinking_secret
        self.stop_timeout = stop_timeout
        self.ids = IdFactory(seed)
        self._cache = PromptCache(self._clock)
        self._faults = FaultPlan(ttft=ttft, token_latency=token_latency)
        self._ledger = Ledger()
        self.rate_limits = RateLimiter(self._clock, rate_limits)
        self.batches = BatchStore(self)
        self.web = WebCorpus()
        """The pages its `web_search` and `web_fetch` server tools know (`web.py`)."""
        self._lock = threading.Lock()
        self._requests: list[RequestRecord] = []
        self._violations: list[Violation] = []
        self._expecting = 0
        self._stopping = threading.Event()
        self._httpd: EmulatorHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Emulator:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = EmulatorHTTPServer((self.host, self.port), self._dispatch)
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"forkagent-emulator:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; open connections are closed; bounded by `stop_timeout`."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.close_all(self.stop_timeout)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(self.stop_timeout)
            self._thread = None

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the emulator is not running; call start() first")
        return f"http://{self.host}:{self.port}"

    # -- state ---------------------------------------------------------------------------

    @property
    def brain(self) -> Brain:
        return self._brain

    @brain.setter
    def brain(self, value: Brain) -> None:
        self._brain = value

    def script(
        self, *replies: Reply | str | Any, when_empty: Literal["ok", "raise", "fallback"] = "ok"
    ) -> ScriptedBrain:
        """Queue `replies` (Reply, str, or JSON as for `Reply.from_json`) on a ScriptedBrain.

        The first call installs the ScriptedBrain. `when_empty` (applied then) says what
        happens once the queue is empty: answer "ok", "raise" (a 500 and a violation), or
        "fallback" to the brain that was installed before.
        """
        brain = self._brain
        if not isinstance(brain, ScriptedBrain):
            empty: Literal["ok", "raise"] | Brain = (
                brain if when_empty == "fallback" else when_empty
            )
            brain = ScriptedBrain(when_empty=empty)
            self._brain = brain
        brain.push(*(r if isinstance(r, (Reply, str)) else Reply.from_json(r) for r in replies))
        return brain

    @property
    def faults(self) -> FaultPlan:
        return self._faults

    @property
    def ledger(self) -> Ledger:
        return self._ledger

    @property
    def cache(self) -> PromptCache:
        return self._cache

    @property
    def clock(self) -> VirtualClock:
        return self._clock

    @property
    def requests(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._requests)

    def api_requests(self, path: str = "/v1/messages") -> list[RequestRecord]:
        """Recorded requests to exactly `path` (query ignored)."""
        return [r for r in self.requests if r.path == path]

    @property
    def violations(self) -> list[Violation]:
        """Violations not covered by `expect_violations`."""
        with self._lock:
            return [v for v in self._violations if not v.expected]

    @property
    def all_violations(self) -> list[Violation]:
        with self._lock:
            return list(self._violations)

    def reset(self) -> None:
        """Forget requests, ledger, violations, cache, faults and any scripted replies."""
        with self._lock:
            self._requests.clear()
            self._violations.clear()
        self._ledger.clear()
        self._cache.clear()
        self._faults.clear()
        self.batches.clear()
        self.rate_limits.configure(self.rate_limits.limits)  # full buckets again
        if isinstance(self._brain, ScriptedBrain):
            self._brain.clear()

    def check(self) -> None:
        """In strict mode, raise AssertionError listing unexpected violations."""
        found = self.violations
        if self.strict and found:
            lines = "\n".join(f"  - {v.describe()}" for v in found)
            raise AssertionError(f"the emulator saw {len(found)} protocol violation(s):\n{lines}")

    @contextmanager
    def expect_violations(self, count: int | None = None) -> Iterator[list[Violation]]:
        """Violations inside the block are expected (at least one, or exactly `count`)."""
        with self._lock:
            self._expecting += 1
            start = len(self._violations)
        got: list[Violation] = []
        try:
            yield got
        finally:
            with self._lock:
                self._expecting -= 1
                got.extend(v for v in self._violations[start:] if v.expected)
        if count is None and not got:
            raise AssertionError("expected a protocol violation, but the emulator saw none")
        if count is not None and len(got) != count:
            raise AssertionError(f"expected {count} violation(s), the emulator saw {len(got)}")

    def record_violation(self, rec: RequestRecord, err: ApiError) -> None:
        """Note `err`, an error the emulator itself answered `rec` with (see `check`)."""
        with self._lock:
            self._violations.append(
                Violation(
                    rec.request_id,
                    rec.method,
                    rec.path,
                    err.status,
                    err.error_type,
                    err.message,
                    summarize_request(rec.body),
                    expected=self._expecting > 0,
                )
            )

    # -- dispatch ------------------------------------------------------------------------

    def _dispatch(self, h: Handler) -> None:
        try:
            raw = h.read_body()
        except (OSError, ValueError):
            h.close_connection = True
            return
        if h.path_only.startswith("/_emulator/"):
            from .control import handle_control

            handle_control(self, h, raw)
            return
        rec = RequestRecord(
            method=h.command,
            path=h.path_only,
            query=h.query,
            headers=h.lower_headers(),
            body=None,
            raw=raw,
            time=self._clock.now(),
            request_id=self.ids.request_id(),
            peer=f"{h.client_address[0]}:{h.client_address[1]}",
        )
        with self._lock:
            self._requests.append(rec)
        try:
            self._api(h, rec)
        except ClientGoneError:
            pass
        except _AbortError:
            h.drop()

    def response_headers(self, rec: RequestRecord) -> dict[str, str]:
        """The headers every response to `rec` carries (request id, rate limits)."""
        return {
            "request-id": rec.request_id,
            **rec.response_headers,
            **self._faults.extra_headers,
        }

    def _send_error(self, h: Handler, rec: RequestRecord, err: ApiError, *, fault: bool) -> None:
        rec.status, rec.fault = err.status, fault
        headers = {
            **self.response_headers(rec),
            **error_headers(err.status),
            **err.headers,
        }
        h.send_json(err.status, error_body(err, rec.request_id), headers)

    def reject(self, h: Handler, rec: RequestRecord, err: ApiError) -> None:
        """Answer `rec` with `err` and record it as a violation."""
        self.record_violation(rec, err)
        self._send_error(h, rec, err, fault=False)

    def _api(self, h: Handler, rec: RequestRecord) -> None:
        if rec.path == "/v1/messages/batches" or rec.path.startswith("/v1/messages/batches/"):
            self.batches.handle(h, rec)
            return
        route = platform_route(rec.path)
        endpoint = (
            "messages"
            if route is not None
            else {"/v1/messages": "messages", "/v1/messages/count_tokens": "count_tokens"}.get(
                rec.path
            )
        )
        if endpoint is None:
            self.reject(h, rec, ApiError(404, "not_found_error", TRANSPORT_MESSAGES["not_found"]))
            return
        if rec.method != "POST":
            err = ApiError(405, "invalid_request_error", TRANSPORT_MESSAGES["method"])
            self.reject(h, rec, err)
            return
        start = self._clock.now()
        try:
            body = json.loads(rec.raw or b"null")
        except ValueError as exc:
            msg = TRANSPORT_MESSAGES["bad_json"].format(detail=exc)
            self.reject(h, rec, ApiError(400, "invalid_request_error", msg))
            return
        rec.body = body
        try:
            body_version = None
            if route is not None:
                body, body_version = route.messages_body(body)
                rec.body = body
            workspace, version = self.authorize(rec, body_version)
            info = validate_request(
                body,
                version=version,
                catalog=self.catalog,
                strict_legacy=self.strict_legacy,
                for_count_tokens=endpoint == "count_tokens",
                tokenizer=self.tokenizer,
                thinking_secret=self.thinking_secret,
            )
        except ApiError as err:
            self.reject(h, rec, err)
            return
        if endpoint == "count_tokens":
            fault = self._faults.take("count_tokens", body, rec.headers)
            if fault is not None and self._apply_early_fault(h, rec, fault, streaming=False):
                return
            self._wait(fault.ttft if fault is not None and fault.ttft else 0.0)
            rec.response_headers.update(self.rate_limits.headers(workspace, info.name))
            rec.status = 200
            tokens = count_input_tokens(body, self.tokenizer)
            h.send_json(200, {"input_tokens": tokens}, self.response_headers(rec))
            return
        eventstream = route is not None and route.platform == "bedrock"
        self._messages(h, rec, body, info, workspace, start, eventstream=eventstream)

    def authorize(self, rec: RequestRecord, body_version: str | None = None) -> tuple[str, str]:
        """(workspace, API version) of `rec`, or the ApiError that answers it."""
        return authorize(rec.headers, self.api_keys, body_version)

    def _apply_early_fault(
        self, h: Handler, rec: RequestRecord, fault: Fault, *, streaming: bool
    ) -> bool:
        """Answer a fault that strikes before the response starts; True if it did."""
        if fault.drop == "before":
            rec.fault = True
            h.drop()
            return True
        status = fault.status
        if status is None and fault.stream_error_after is not None and not streaming:
            status = _STATUS_OF_TYPE.get(fault.stream_error_type, 500)
            fault = Fault(
                status=status,
                error_type=fault.stream_error_type,
                message=fault.stream_error_message,
            )
        if status is None:
            return False
        self._wait(fault.ttft or 0.0)
        err = ApiError(
            status, fault.error_type_resolved, fault.message_resolved, fault.error_headers()
        )
        self._send_error(h, rec, err, fault=True)
        return True

    def _rate_limit(
        self,
        h: Handler,
        rec: RequestRecord,
        body: Mapping[str, Any],
        usage: Mapping[str, Any],
        model: str,
        workspace: str,
    ) -> Admission | Refusal | None:
        """Check the rate limits (see `ratelimits.py`): a Refusal has been answered with 429;
        an Admission's costs are taken. Either way the response's rate-limit headers are
        set on `rec`. None: the model is not limited."""
        limiter = self.rate_limits
        if not limiter.enabled:
            return None
        charged = int(usage["input_tokens"]) + int(usage["cache_creation_input_tokens"])
        verdict = limiter.admit(
            workspace, model, input_tokens=charged, max_tokens=int(body.get("max_tokens") or 0)
        )
        rec.response_headers.update(limiter.headers(workspace, model))
        if isinstance(verdict, Refusal):
            self._ledger.throttled(
                Throttle(
                    rec.request_id,
                    self._clock.now(),
                    model,
                    workspace,
                    verdict.kind,
                    verdict.retry_after,
                )
            )
            err = ApiError(429, "rate_limit_error", verdict.message)
            err.headers["retry-after"] = limiter.retry_after_header(verdict.retry_after)
            self._send_error(h, rec, err, fault=False)
        return verdict

    def _wait(self, seconds: float) -> None:
        if seconds > 0 and self._stopping.wait(seconds):
            raise _AbortError

    def _messages(
        self,
        h: Handler,
        rec: RequestRecord,
        body: Mapping[str, Any],
        info: ModelInfo,
        workspace: str,
        start: float,
        *,
        eventstream: bool = False,
    ) -> None:
        streaming = bool(body.get("stream"))
        plan = self._cache.plan(
            body, workspace=workspace, model=info, tokenizer=self.tokenizer, request_start=start
        )
        admission = self._rate_limit(h, rec, body, plan.usage_dict(), info.name, workspace)
        if isinstance(admission, Refusal):
            return
        fault = self._faults.take("messages", body, rec.headers)
        if fault is not None and self._apply_early_fault(h, rec, fault, streaming=streaming):
            if admission is not None:
                self.rate_limits.settle(admission, 0)
            return
        try:
            outcome, web = self._reply(body)
        except Exception as exc:
            err = ApiError(500, "api_error", TRANSPORT_MESSAGES["brain"].format(detail=exc))
            err.headers["x-should-retry"] = "false"
            self.record_violation(rec, err)
            if admission is not None:
                self.rate_limits.settle(admission, 0)
            self._send_error(h, rec, err, fault=False)
            return
        ttft = fault.ttft if fault is not None and fault.ttft is not None else self._faults.ttft
        latency = self._faults.token_latency
        if fault is not None and fault.token_latency is not None:
            latency = fault.token_latency
        self._wait(ttft)
        self._cache.commit(plan)  # response start: the writes become readable now
        message_id = self.ids.message_id()
        usage = dict(plan.usage_dict())
        if web.web_search_requests or web.web_fetch_requests:  # what the server tools did
            fetched = sum(self.tokenizer.count(text) for text in web.fetched_text)
            usage["input_tokens"] = int(usage.get("input_tokens") or 0) + fetched
            usage["server_tool_use"] = {
                "web_search_requests": web.web_search_requests,
                "web_fetch_requests": web.web_fetch_requests,
            }
        message = message_dict(
            message_id=message_id,
            model=str(body["model"]),
            outcome=outcome,
            usage=usage,
        )
        rec.status = 200
        bill = self._biller(
            rec, message, plan, outcome, admission, start, info.name, workspace, streaming
        )
        headers = self.response_headers(rec)
        send = functools.partial(send_stream, eventstream=eventstream) if streaming else send_body
        try:
            send(h, headers, message, fault, latency, bill, self._wait, self.stream_options)
        finally:
            bill(False)  # cut short (client gone, emulator stopping): the cache write stands

    def _biller(
        self,
        rec: RequestRecord,
        message: Mapping[str, Any],
        plan: CachePlan,
        outcome: Outcome,
        admission: Admission | None,
        start: float,
        model: str,
        workspace: str,
        streaming: bool,
    ) -> Callable[[bool], None]:
        """What adds the response's ledger entry (once), before its last byte leaves, and
        settles its rate-limit admission: `bill(complete)`."""
        billed: list[bool] = []

        def bill(complete: bool) -> None:
            if billed:
                return
            billed.append(complete)
            usage = dict(message["usage"])
            if streaming and not complete:
                usage["output_tokens"] = 1  # only message_start's usage reached the client
            if admission is not None:
                self.rate_limits.settle(admission, int(usage.get("output_tokens") or 0))
            self._ledger.add(
                make_entry(
                    request_id=rec.request_id,
                    message_id=str(message["id"]),
                    time=start,
                    model=model,
                    workspace=workspace,
                    streamed=streaming,
                    status=200,
                    usage={k: v for k, v in usage.items() if k not in _NOT_USAGE},
                    hit_index=plan.hit_index,
                    breakpoints=list(plan.breakpoints),
                    complete=complete,
                    stop_reason=outcome.stop_reason if complete else None,
                )
            )

        return bill

    def _reply(self, body: Mapping[str, Any]) -> tuple[Outcome, WebUse]:
        """The brain's reply to `body` (none for a cache pre-warm), the server tools it used
        run, finished into what the response carries."""
        warm_up = int(body.get("max_tokens") or 0) == 0  # no brain for a cache pre-warm
        reply = Reply(()) if warm_up else self._brain.reply(body)
        reply, web = self.web.serve(reply, body, lambda: "srv" + self.ids.tool_id())
        outcome = finish_reply(
            reply,
            body,
            tokenizer=self.tokenizer,
            new_tool_id=self.ids.tool_id,
            sign=lambda text: sign_thinking(text, self.thinking_secret),
        )
        return outcome, web
