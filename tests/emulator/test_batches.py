"""The Message Batches endpoints, through the real SDK (`client.messages.batches.*`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anthropic
import pytest

from forkagent_jupyter.emulator import Emulator, Fault
from forkagent_jupyter.messages_api.usage import Usage, cost_usd

from .conftest import EPHEMERAL, MODEL, ControlError, control, filler, user

SHARED = filler("shared", 8000)  # ~2000 tokens: above the 1024 minimum


def params(question: str, **kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 64,
        "system": [{"type": "text", "text": SHARED, "cache_control": EPHEMERAL}],
        "messages": [user(question)],
    }
    body.update(kw)
    return body


def requests(n: int) -> list[dict[str, Any]]:
    return [{"custom_id": f"fork-{i}", "params": params(f"Question {i}?")} for i in range(n)]


def test_create_retrieve_results_succeeded(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.batches.options.processing_seconds = 60.0
    emulator.script("Answer zero.", "Answer one.", "Answer two.")
    clock = emulator.clock
    batch = sync_client.messages.batches.create(requests=requests(3))
    assert batch.type == "message_batch"
    assert batch.id.startswith("msgbatch_")
    assert batch.processing_status == "in_progress"
    assert batch.request_counts.processing == 3
    assert batch.results_url is None
    assert batch.expires_at - batch.created_at == timedelta(hours=24)
    with pytest.raises(anthropic.AnthropicError, match="finished processing"):
        sync_client.messages.batches.results(batch.id)

    clock.advance(30)  # half the batch is processed, but counts stay "processing" until the end
    mid = sync_client.messages.batches.retrieve(batch.id)
    assert mid.processing_status == "in_progress"
    assert mid.request_counts.processing == 3 and mid.request_counts.succeeded == 0

    clock.advance(31)
    done = sync_client.messages.batches.retrieve(batch.id)
    assert done.processing_status == "ended"
    assert done.ended_at is not None
    counts = done.request_counts
    assert (counts.processing, counts.succeeded, counts.errored) == (0, 3, 0)
    assert done.results_url and done.results_url.endswith(f"/{batch.id}/results")

    rows = list(sync_client.messages.batches.results(batch.id))
    assert [r.custom_id for r in rows] == ["fork-0", "fork-1", "fork-2"]
    texts = []
    for row in rows:
        assert row.result.type == "succeeded"
        message = row.result.message
        assert message.usage.service_tier == "batch"
        texts.append(message.content[0].text)  # type: ignore[union-attr]
    assert texts == ["Answer zero.", "Answer one.", "Answer two."]


def test_shared_prefix_written_once_then_read_and_billed_at_half(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    batch = sync_client.messages.batches.create(requests=requests(4))
    rows = list(sync_client.messages.batches.results(batch.id))
    usages = [r.result.message.usage for r in rows]  # type: ignore[union-attr]
    # processed one after another in submission order: the first writes, the others read
    assert usages[0].cache_creation_input_tokens > 1024
    assert usages[0].cache_read_input_tokens == 0
    for u in usages[1:]:
        assert u.cache_creation_input_tokens == 0
        assert u.cache_read_input_tokens == usages[0].cache_creation_input_tokens
    entries = emulator.ledger.entries()
    assert len(entries) == 4
    for entry in entries:
        assert entry.service_tier == "batch"
        full = cost_usd(Usage.from_api(entry.usage), MODEL)
        assert entry.cost_usd == pytest.approx(full / 2)


def test_one_wave_cannot_read_its_own_writes(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.batches.options.concurrency = 4
    batch = sync_client.messages.batches.create(requests=requests(4))
    rows = list(sync_client.messages.batches.results(batch.id))
    for row in rows:
        usage = row.result.message.usage  # type: ignore[union-attr]
        assert usage.cache_read_input_tokens == 0
        assert usage.cache_creation_input_tokens > 1024


def test_invalid_request_is_errored_with_the_api_error(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    bad = params("x", messages=[user("")])
    reqs = [*requests(1), {"custom_id": "bad", "params": bad}]
    with emulator.expect_violations(1):
        batch = sync_client.messages.batches.create(requests=reqs)
        done = sync_client.messages.batches.retrieve(batch.id)
    assert (done.request_counts.succeeded, done.request_counts.errored) == (1, 1)
    rows = {r.custom_id: r.result for r in sync_client.messages.batches.results(batch.id)}
    errored = rows["bad"]
    assert errored.type == "errored"
    assert errored.error.error.type == "invalid_request_error"
    assert "non-empty content" in errored.error.error.message
    assert len(emulator.ledger) == 1  # errored requests are not billed


def test_injected_fault_gives_an_errored_result(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.faults.on_user("u-7", Fault.overloaded())
    reqs = [
        {"custom_id": "ok", "params": params("a")},
        {"custom_id": "hit", "params": params("b", metadata={"user_id": "u-7"})},
    ]
    batch = sync_client.messages.batches.create(requests=reqs)
    rows = {r.custom_id: r.result for r in sync_client.messages.batches.results(batch.id)}
    assert rows["ok"].type == "succeeded"
    assert rows["hit"].type == "errored"
    assert rows["hit"].error.error.type == "overloaded_error"


def test_unprocessed_requests_expire_after_24_hours(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.batches.options.processing_seconds = 4 * 24 * 3600.0  # one request a day
    batch = sync_client.messages.batches.create(requests=requests(4))
    emulator.clock.advance(25 * 3600)
    done = sync_client.messages.batches.retrieve(batch.id)
    assert done.processing_status == "ended"
    assert done.ended_at == done.expires_at
    assert (done.request_counts.succeeded, done.request_counts.expired) == (1, 3)
    types = [r.result.type for r in sync_client.messages.batches.results(batch.id)]
    assert types == ["succeeded", "expired", "expired", "expired"]


def test_cancel_goes_through_canceling_to_ended(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    emulator.batches.options.processing_seconds = 100.0
    batch = sync_client.messages.batches.create(requests=requests(4))
    emulator.clock.advance(50)
    canceled = sync_client.messages.batches.cancel(batch.id)
    assert canceled.processing_status == "canceling"
    assert canceled.cancel_initiated_at is not None
    done = sync_client.messages.batches.retrieve(batch.id)
    assert done.processing_status == "ended"
    assert (done.request_counts.succeeded, done.request_counts.canceled) == (2, 2)
    types = [r.result.type for r in sync_client.messages.batches.results(batch.id)]
    assert types == ["succeeded", "succeeded", "canceled", "canceled"]


def test_list_is_paginated_newest_first(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    made = [sync_client.messages.batches.create(requests=requests(1)).id for _ in range(5)]
    page = sync_client.messages.batches.list(limit=2)
    assert [b.id for b in page.data] == made[::-1][:2]
    assert page.has_more is True
    assert [b.id for b in sync_client.messages.batches.list(limit=2)] == made[::-1]  # auto-paging
    other = anthropic.Anthropic(base_url=emulator.base_url, api_key="another-key")
    try:
        assert list(other.messages.batches.list()) == []  # batches belong to a workspace
        with emulator.expect_violations(1), pytest.raises(anthropic.NotFoundError):
            other.messages.batches.retrieve(made[0])
    finally:
        other.close()


def test_bad_batches_are_refused_whole(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    dup = [{"custom_id": "same", "params": params("a")}] * 2
    with emulator.expect_violations(3):
        with pytest.raises(anthropic.BadRequestError, match="unique"):
            sync_client.messages.batches.create(requests=dup)
        with pytest.raises(anthropic.BadRequestError, match="custom_id"):
            sync_client.messages.batches.create(
                requests=[{"custom_id": "has space", "params": params("a")}]
            )
        with pytest.raises(anthropic.BadRequestError, match="at least 1"):
            sync_client.messages.batches.create(requests=[])
    assert emulator.batches.ids() == []


def test_delete_only_after_the_end(emulator: Emulator, sync_client: anthropic.Anthropic) -> None:
    emulator.batches.options.processing_seconds = 10.0
    batch = sync_client.messages.batches.create(requests=requests(1))
    with emulator.expect_violations(1), pytest.raises(anthropic.BadRequestError):
        sync_client.messages.batches.delete(batch.id)
    emulator.clock.advance(11)
    deleted = sync_client.messages.batches.delete(batch.id)
    assert deleted.type == "message_batch_deleted"
    assert emulator.batches.ids() == []


@pytest.mark.anyio
async def test_async_client(emulator: Emulator, async_client: anthropic.AsyncAnthropic) -> None:
    batch = await async_client.messages.batches.create(requests=requests(2))
    done = await async_client.messages.batches.retrieve(batch.id)
    assert done.request_counts.succeeded == 2
    rows = [r async for r in await async_client.messages.batches.results(batch.id)]
    assert [r.result.type for r in rows] == ["succeeded", "succeeded"]


def test_batch_options_through_the_control_endpoint(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    got = control(emulator, "POST", "batches", {"processing_seconds": 100, "concurrency": 2})
    assert got["options"] == {
        "processing_seconds": 100.0,
        "concurrency": 2,
        "expiry_seconds": 24 * 3600.0,
    }
    batch = sync_client.messages.batches.create(requests=requests(1))
    assert control(emulator, "GET", "batches")["batches"] == [batch.id]
    assert sync_client.messages.batches.retrieve(batch.id).processing_status == "in_progress"
    with pytest.raises(ControlError) as bad:
        control(emulator, "POST", "batches", {"concurrency": 0})
    assert bad.value.code == 400 and "concurrency" in bad.value.body["error"]
