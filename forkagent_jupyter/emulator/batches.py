"""The Message Batches endpoints of the emulator, on its clock.

Served (as the `anthropic` SDK calls them through `client.messages.batches.*`):

- `POST   /v1/messages/batches`                   create: `{"requests": [{custom_id, params}]}`
- `GET    /v1/messages/batches/{id}`              retrieve
- `GET    /v1/messages/batches`                   list, newest first; `limit` (1..1000,
                                                  default 20), `after_id`, `before_id`;
                                                  `{"data", "has_more", "first_id", "last_id"}`
- `GET    /v1/messages/batches/{id}/results`      JSON Lines, one `{custom_id, result}` a line
- `POST   /v1/messages/batches/{id}/cancel`       cancel
- `DELETE /v1/messages/batches/{id}`              delete an ended batch

A batch object has the API's fields: `id` (`msgbatch_...`), `type: "message_batch"`,
`processing_status` (`in_progress` -> `canceling` -> `ended`), `request_counts`
(`processing`, `succeeded`, `errored`, `canceled`, `expired`; as the API documents, every
request counts as `processing` until the whole batch has ended), `created_at`, `expires_at`
(24 hours after creation), `ended_at`, `cancel_initiated_at`, `archived_at` and
`results_url` (set once ended). Times are RFC 3339, `EPOCH` plus the emulator clock.

Processing, on the emulator clock (lazy: a batch advances whenever any batch endpoint is
called; there is no background thread):

- Request i of n (in submission order) is processed at `created + processing_seconds *
  (i+1)/n` (`BatchOptions.processing_seconds`, default 0: the whole batch is done at the
  first look after its creation). The batch ends when its last request is processed.
- Each request goes through the same steps as a real-time `/v1/messages` request: the
  validation rules (a broken rule gives an `errored` result carrying the same error object,
  and a strict-mode violation), an injected fault of the `messages` endpoint that has a
  status (matched by count or by `metadata.user_id`; it gives an `errored` result), the
  cache plan with the request's own start time, the brain, and the cache commit.
- Cache order: requests are taken in waves of `BatchOptions.concurrency` (default 1). Within
  a wave every request is planned before any commits, so siblings in one wave cannot read
  each other's writes (the rule for concurrent real-time requests); with the default of 1,
  the first request that writes a shared prefix is read by every later one. The real service
  promises only best-effort caching inside a batch: concurrency=1 is the best case, a wave
  as large as the batch the worst.
- A request not processed by `expires_at` gets `expired`; after a cancel, the batch is
  `canceling` until the next look, when the requests not processed yet get `canceled` and
  the batch ends.
- A succeeded result's message has `usage.service_tier = "batch"`; its ledger entry has
  `service_tier="batch"` and costs `BATCH_DISCOUNT` (half) of the real-time price, cache
  writes and reads included.
- `stream: true` inside `params` is an `errored` result (our wording; the API refuses it).

Results are returned in submission order (the API does not promise an order). Choices the
documentation leaves open (our wording, marked [?] in the spec): results before the end
(400), cancel of an ended batch (returns it unchanged), delete before the end (400).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Protocol

from ..messages_api.errors import ApiError, error_body
from ..messages_api.validation import sign_thinking, validate_request
from .brains import Reply
from .ledger import make_entry
from .sse import finish_reply, message_dict

if TYPE_CHECKING:
    from ..messages_api.cache import PromptCache, VirtualClock
    from ..messages_api.catalog import ModelInfo
    from ..messages_api.tokens import Tokenizer
    from .brains import Brain
    from .faults import FaultPlan
    from .ids import IdFactory
    from .ledger import Ledger, RequestRecord
    from .transport import Handler

__all__ = ["BATCH_MESSAGES", "EPOCH", "BatchEmulator", "BatchOptions", "BatchStore"]


class BatchEmulator(Protocol):
    """The emulator as its batch store uses it (`server.Emulator` is one): the parts a
    batch request goes through, as for a real-time request."""

    ids: IdFactory
    catalog: Mapping[str, ModelInfo]
    tokenizer: Tokenizer
    strict_legacy: bool
    thinking_secret: bytes

    @property
    def base_url(self) -> str: ...
    @property
    def clock(self) -> VirtualClock: ...
    @property
    def cache(self) -> PromptCache: ...
    @property
    def brain(self) -> Brain: ...
    @property
    def faults(self) -> FaultPlan: ...
    @property
    def ledger(self) -> Ledger: ...

    def authorize(self, rec: RequestRecord, body_version: str | None = None) -> tuple[str, str]: ...
    def reject(self, h: Handler, rec: RequestRecord, err: ApiError) -> None: ...
    def response_headers(self, rec: RequestRecord) -> dict[str, str]: ...
    def record_violation(self, rec: RequestRecord, err: ApiError) -> None: ...


EPOCH = datetime(2026, 11, 1, tzinfo=timezone.utc)
EXPIRY_SECONDS = 24 * 3600.0
MAX_REQUESTS = 100_000
PREFIX = "/v1/messages/batches"
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_NOT_USAGE = ("service_tier", "inference_geo")

BATCH_MESSAGES: dict[str, str] = {
    "requests": "requests: Field required",
    "requests_type": "requests: Input should be a valid list",
    "empty": "requests: List should have at least 1 item after validation, not 0",
    "too_many": "requests: List should have at most {max} items after validation, not {n}",
    "custom_id": "requests.{i}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'",
    "duplicate": "requests: custom_id values must be unique within a batch: {id}",
    "params": "requests.{i}.params: Input should be a valid dictionary",
    "not_found": "message batch {id} not found",
    "not_ended": "message batch {id} has not finished processing; its results are not ready",
    "delete_running": "message batch {id} is still processing; cancel it before deleting it",
    "limit": "limit: Input should be between 1 and 1000",
    "stream": "params.stream: streaming is not supported for requests in a batch",
}


@dataclass
class BatchOptions:
    """How the emulator processes batches (see the module doc)."""

    processing_seconds: float = 0.0
    concurrency: int = 1
    expiry_seconds: float = EXPIRY_SECONDS


@dataclass
class _Item:
    custom_id: str
    params: Any
    due: float
    result: dict[str, Any] | None = None


@dataclass
class _Batch:
    id: str
    workspace: str
    version: str
    created_at: float
    expires_at: float
    items: list[_Item]
    record: RequestRecord
    processing_status: str = "in_progress"
    ended_at: float | None = None
    cancel_initiated_at: float | None = None
    done: int = 0  # items processed (or given a final result) so far
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def rfc3339(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return (EPOCH + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


class BatchStore:
    """Every batch the emulator holds, per workspace (thread-safe)."""

    def __init__(self, emulator: BatchEmulator) -> None:
        self._emu = emulator
        self.options = BatchOptions()
        self._batches: dict[str, _Batch] = {}
        self._order: list[str] = []
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._batches.clear()
            self._order.clear()

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._order)

    # -- HTTP ----------------------------------------------------------------------------

    def handle(self, h: Handler, rec: RequestRecord) -> None:
        """Answer one request under /v1/messages/batches (auth checked here)."""
        emu = self._emu
        try:
            workspace, version = emu.authorize(rec)
            rest = rec.path[len(PREFIX) :].strip("/")
            parts = rest.split("/") if rest else []
            status, payload = self._route(h, rec, parts, workspace, version)
        except ApiError as err:
            emu.reject(h, rec, err)
            return
        rec.status = status
        headers = emu.response_headers(rec)
        if isinstance(payload, bytes):
            h.send_bytes(status, {**headers, "Content-Type": "application/binary"}, payload)
        else:
            h.send_json(status, payload, headers)

    def _route(
        self, h: Handler, rec: RequestRecord, parts: list[str], workspace: str, version: str
    ) -> tuple[int, Any]:
        method = rec.method
        if not parts:
            if method == "POST":
                return 200, self._create(rec, workspace, version)
            if method == "GET":
                return 200, self._list(rec.query, workspace)
        elif len(parts) == 1:
            batch = self._get(parts[0], workspace)
            if method == "GET":
                return 200, self._view(batch)
            if method == "DELETE":
                return 200, self._delete(batch)
        elif len(parts) == 2 and parts[1] == "cancel" and method == "POST":
            return 200, self._cancel(self._get(parts[0], workspace))
        elif len(parts) == 2 and parts[1] == "results" and method == "GET":
            return 200, self._results(self._get(parts[0], workspace))
        else:
            raise ApiError(404, "not_found_error", "Not Found")
        raise ApiError(405, "invalid_request_error", "Method Not Allowed")

    # -- endpoints -----------------------------------------------------------------------

    def _create(self, rec: RequestRecord, workspace: str, version: str) -> dict[str, Any]:
        try:
            body = json.loads(rec.raw or b"null")
        except ValueError as exc:
            msg = f"There was an error parsing the body of your request: {exc}"
            raise ApiError(400, "invalid_request_error", msg) from None
        rec.body = body
        if not isinstance(body, Mapping) or "requests" not in body:
            raise ApiError(400, "invalid_request_error", BATCH_MESSAGES["requests"])
        requests = body["requests"]
        if not isinstance(requests, list):
            raise ApiError(400, "invalid_request_error", BATCH_MESSAGES["requests_type"])
        if not requests:
            raise ApiError(400, "invalid_request_error", BATCH_MESSAGES["empty"])
        if len(requests) > MAX_REQUESTS:
            msg = BATCH_MESSAGES["too_many"].format(max=MAX_REQUESTS, n=len(requests))
            raise ApiError(400, "invalid_request_error", msg)
        seen: set[str] = set()
        for i, item in enumerate(requests):
            cid = item.get("custom_id") if isinstance(item, Mapping) else None
            if not isinstance(cid, str) or not _CUSTOM_ID.match(cid):
                raise ApiError(
                    400, "invalid_request_error", BATCH_MESSAGES["custom_id"].format(i=i)
                )
            if cid in seen:
                raise ApiError(
                    400, "invalid_request_error", BATCH_MESSAGES["duplicate"].format(id=cid)
                )
            seen.add(cid)
            if not isinstance(item.get("params"), Mapping):
                raise ApiError(400, "invalid_request_error", BATCH_MESSAGES["params"].format(i=i))
        now = self._emu.clock.now()
        span = max(0.0, self.options.processing_seconds)
        n = len(requests)
        items = [
            _Item(str(r["custom_id"]), r["params"], now + span * (i + 1) / n)
            for i, r in enumerate(requests)
        ]
        batch = _Batch(
            id="msgbatch_" + self._emu.ids.message_id()[len("msg_") :],
            workspace=workspace,
            version=version,
            created_at=now,
            expires_at=now + self.options.expiry_seconds,
            items=items,
            record=rec,
        )
        with self._lock:
            self._batches[batch.id] = batch
            self._order.append(batch.id)
        return self._describe(batch)

    def _get(self, batch_id: str, workspace: str) -> _Batch:
        with self._lock:
            batch = self._batches.get(batch_id)
        if batch is None or batch.workspace != workspace:
            raise ApiError(404, "not_found_error", BATCH_MESSAGES["not_found"].format(id=batch_id))
        return batch

    def _view(self, batch: _Batch) -> dict[str, Any]:
        self.advance(batch)
        return self._describe(batch)

    def _list(self, query: str, workspace: str) -> dict[str, Any]:
        from urllib.parse import parse_qs

        args = {k: v[-1] for k, v in parse_qs(query).items()}
        try:
            limit = int(args.get("limit", "20"))
        except ValueError:
            limit = 0
        if not 1 <= limit <= 1000:
            raise ApiError(400, "invalid_request_error", BATCH_MESSAGES["limit"])
        with self._lock:
            newest_first = [
                self._batches[i]
                for i in reversed(self._order)
                if self._batches[i].workspace == workspace
            ]
        ids = [b.id for b in newest_first]
        if "after_id" in args:
            start = ids.index(args["after_id"]) + 1 if args["after_id"] in ids else len(ids)
            page = newest_first[start : start + limit]
            has_more = start + limit < len(ids)
        elif "before_id" in args:
            end = ids.index(args["before_id"]) if args["before_id"] in ids else 0
            page = newest_first[max(0, end - limit) : end]
            has_more = end - limit > 0
        else:
            page = newest_first[:limit]
            has_more = limit < len(ids)
        data = [self._view(b) for b in page]
        return {
            "data": data,
            "has_more": has_more,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }

    def _cancel(self, batch: _Batch) -> dict[str, Any]:
        self.advance(batch)
        with batch.lock:
            if batch.processing_status == "in_progress":
                batch.processing_status = "canceling"
                batch.cancel_initiated_at = self._emu.clock.now()
        return self._describe(batch)

    def _results(self, batch: _Batch) -> bytes:
        self.advance(batch)
        if batch.processing_status != "ended":
            raise ApiError(
                400, "invalid_request_error", BATCH_MESSAGES["not_ended"].format(id=batch.id)
            )
        lines = [
            json.dumps(
                {"custom_id": item.custom_id, "result": item.result},
                ensure_ascii=False,
                separators=(",", ":"),
            )
            for item in batch.items
        ]
        return ("\n".join(lines) + "\n").encode()

    def _delete(self, batch: _Batch) -> dict[str, Any]:
        self.advance(batch)
        if batch.processing_status != "ended":
            msg = BATCH_MESSAGES["delete_running"].format(id=batch.id)
            raise ApiError(400, "invalid_request_error", msg)
        with self._lock:
            self._batches.pop(batch.id, None)
            self._order.remove(batch.id)
        return {"id": batch.id, "type": "message_batch_deleted"}

    def _describe(self, batch: _Batch) -> dict[str, Any]:
        ended = batch.processing_status == "ended"
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if ended:
            for item in batch.items:
                kind = item.result["type"] if item.result is not None else "expired"
                counts[kind] += 1
        else:
            counts["processing"] = len(batch.items)
        results_url = None
        if ended:
            results_url = f"{self._emu.base_url}{PREFIX}/{batch.id}/results"
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": batch.processing_status,
            "request_counts": counts,
            "ended_at": rfc3339(batch.ended_at),
            "created_at": rfc3339(batch.created_at),
            "expires_at": rfc3339(batch.expires_at),
            "archived_at": None,
            "cancel_initiated_at": rfc3339(batch.cancel_initiated_at),
            "results_url": results_url,
        }

    # -- processing ----------------------------------------------------------------------

    def advance(self, batch: _Batch) -> None:
        """Process what is due by now (see the module doc)."""
        now = self._emu.clock.now()
        with batch.lock:
            if batch.processing_status == "ended":
                return
            canceling = batch.processing_status == "canceling"
            limit = min(now, batch.expires_at)
            wave = max(1, self.options.concurrency)
            while not canceling and batch.done < len(batch.items):
                due = [
                    item
                    for item in batch.items[batch.done : batch.done + wave]
                    if item.due <= limit
                ]
                if not due:
                    break
                self._process_wave(batch, due)
                batch.done += len(due)
            if batch.done >= len(batch.items):
                batch.processing_status = "ended"
                batch.ended_at = max(i.due for i in batch.items)
                return
            if canceling or now >= batch.expires_at:
                kind = "canceled" if canceling else "expired"
                for item in batch.items[batch.done :]:
                    item.result = {"type": kind}
                batch.done = len(batch.items)
                batch.processing_status = "ended"
                batch.ended_at = now if canceling else batch.expires_at

    def _process_wave(self, batch: _Batch, items: list[_Item]) -> None:
        emu = self._emu
        planned: list[tuple[_Item, Any, Any, Any]] = []
        for item in items:
            try:
                info = self._validate(batch, item)
            except ApiError as invalid:
                emu.record_violation(batch.record, invalid)
                item.result = self._errored(invalid)
                continue
            plan = emu.cache.plan(
                item.params,
                workspace=batch.workspace,
                model=info,
                tokenizer=emu.tokenizer,
                request_start=item.due,
            )
            planned.append((item, info, plan, emu.faults.take("messages", item.params, {})))
        for item, info, plan, fault in planned:
            if fault is not None and fault.status is not None:
                injected = ApiError(fault.status, fault.error_type_resolved, fault.message_resolved)
                item.result = self._errored(injected)
                continue
            params = item.params
            try:
                warm_up = int(params.get("max_tokens") or 0) == 0
                reply = Reply(()) if warm_up else emu.brain.reply(params)
                outcome = finish_reply(
                    reply,
                    params,
                    tokenizer=emu.tokenizer,
                    new_tool_id=emu.ids.tool_id,
                    sign=lambda text: sign_thinking(text, emu.thinking_secret),
                )
            except Exception as exc:
                msg = f"Internal server error (emulator brain failed: {exc})"
                failed = ApiError(500, "api_error", msg)
                emu.record_violation(batch.record, failed)
                item.result = self._errored(failed)
                continue
            emu.cache.commit(plan)
            message_id = emu.ids.message_id()
            message = message_dict(
                message_id=message_id,
                model=str(params["model"]),
                outcome=outcome,
                usage=plan.usage_dict(),
            )
            message["usage"]["service_tier"] = "batch"
            emu.ledger.add(
                make_entry(
                    request_id=f"{batch.id}:{item.custom_id}",
                    message_id=message_id,
                    time=item.due,
                    model=info.name,
                    workspace=batch.workspace,
                    streamed=False,
                    status=200,
                    usage={k: v for k, v in message["usage"].items() if k not in _NOT_USAGE},
                    hit_index=plan.hit_index,
                    breakpoints=list(plan.breakpoints),
                    stop_reason=outcome.stop_reason,
                    service_tier="batch",
                )
            )
            item.result = {"type": "succeeded", "message": message}

    def _errored(self, err: ApiError) -> dict[str, Any]:
        return {"type": "errored", "error": error_body(err, self._emu.ids.request_id())}

    def _validate(self, batch: _Batch, item: _Item) -> Any:
        emu = self._emu
        if isinstance(item.params, Mapping) and item.params.get("stream"):
            raise ApiError(400, "invalid_request_error", BATCH_MESSAGES["stream"])
        return validate_request(
            item.params,
            version=batch.version,
            catalog=emu.catalog,
            strict_legacy=emu.strict_legacy,
            tokenizer=emu.tokenizer,
            thinking_secret=emu.thinking_secret,
        )
