"""HTTP side: auth, versions, request ids, keep-alive, concurrency, stop, control, CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import anyio
import pytest

from forkagent_jupyter.emulator import Emulator, Fault, Reply
from forkagent_jupyter.emulator.server import TRANSPORT_MESSAGES

from .conftest import MODEL, ControlError, control, user

HI: dict[str, Any] = {"model": MODEL, "max_tokens": 50, "messages": [user("hi")]}


def test_sdk_sends_bearer_and_x_api_key_is_accepted(emulator: Emulator) -> None:
    bearer = anthropic.Anthropic(base_url=emulator.base_url, api_key="key-1")
    bearer.messages.create(**HI)
    x_key = anthropic.Anthropic(
        base_url=emulator.base_url,
        api_key="key-2",
        default_headers={"authorization": anthropic.Omit(), "x-api-key": "key-2"},
    )
    x_key.messages.create(**HI)
    first, second = emulator.requests
    assert first.headers["authorization"] == "Bearer key-1"
    assert first.headers["anthropic-version"] == "2026-10-21"
    assert first.headers["x-stainless-retry-count"] == "0"
    assert "authorization" not in second.headers and second.headers["x-api-key"] == "key-2"
    assert [e.workspace for e in emulator.ledger.entries()] == ["key-1", "key-2"]
    bearer.close()
    x_key.close()


def test_missing_and_unknown_keys_are_401() -> None:
    with Emulator(api_keys={"good"}) as emu:
        good = anthropic.Anthropic(base_url=emu.base_url, api_key="good")
        assert good.messages.create(**HI).type == "message"
        bad = anthropic.Anthropic(base_url=emu.base_url, api_key="bad")
        with pytest.raises(anthropic.AuthenticationError) as info:
            bad.messages.create(**HI)
        assert info.value.body["error"] == {
            "type": "authentication_error",
            "message": TRANSPORT_MESSAGES["bad_key"],
        }
        none = anthropic.Anthropic(
            base_url=emu.base_url,
            api_key="good",
            default_headers={"authorization": anthropic.Omit()},
        )
        with pytest.raises(anthropic.AuthenticationError, match="x-api-key header is required"):
            none.messages.create(**HI)
        assert len(emu.requests) == 3  # 401 carries x-should-retry: false
        assert [v.status for v in emu.violations] == [401, 401]
        for client in (good, bad, none):
            client.close()


def test_versions(lenient_emulator: Emulator) -> None:
    url = lenient_emulator.base_url
    for version, ok in (("2023-06-01", True), ("2026-10-21", True), ("2024-01-01", False)):
        client = anthropic.Anthropic(
            base_url=url, api_key="k", default_headers={"anthropic-version": version}
        )
        if ok:
            assert client.messages.create(**HI).type == "message"
        else:
            with pytest.raises(anthropic.BadRequestError, match="unsupported version"):
                client.messages.create(**HI)
        client.close()
    missing = anthropic.Anthropic(
        base_url=url, api_key="k", default_headers={"anthropic-version": anthropic.Omit()}
    )
    with pytest.raises(anthropic.BadRequestError) as info:
        missing.messages.create(**HI)
    assert info.value.body["error"]["message"] == TRANSPORT_MESSAGES["no_version"]
    missing.close()


def test_request_ids_and_unique_ids(emulator: Emulator, sync_client: anthropic.Anthropic) -> None:
    emulator.script(*[Reply.tool_use("t", {"i": i}) for i in range(5)])
    tools = [{"name": "t", "input_schema": {"type": "object"}}]
    replies = [sync_client.messages.create(**HI, tools=tools) for _ in range(5)]
    raw = sync_client.messages.with_raw_response.create(**HI)
    assert raw.headers["request-id"].startswith("req_011C")
    request_ids = {m._request_id for m in replies}
    assert len(request_ids) == 5 and all(r and r.startswith("req_") for r in request_ids)
    assert len({m.id for m in replies}) == 5
    tool_ids = [m.content[0].id for m in replies]
    assert len(set(tool_ids)) == 5 and all(t.startswith("toolu_01") for t in tool_ids)
    assert [e.request_id for e in emulator.ledger.entries()][:5] == [m._request_id for m in replies]


def test_seed_makes_ids_deterministic() -> None:
    def run() -> list[str]:
        with Emulator(seed=7) as emu:
            client = anthropic.Anthropic(base_url=emu.base_url, api_key="k")
            message = client.messages.create(**HI)
            client.close()
            return [message.id, message._request_id or ""]

    assert run() == run()


def test_unknown_query_params_and_routes(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    message = sync_client.messages.create(**HI, extra_query={"beta": "true", "x": "1"})
    assert message.type == "message"
    assert emulator.requests[0].query == "beta=true&x=1"
    with emulator.expect_violations(1), pytest.raises(anthropic.NotFoundError):
        sync_client.get("/v1/nothing-here", cast_to=object)


def test_keep_alive_reuses_one_connection(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    for i in range(6):
        if i % 2:
            with sync_client.messages.stream(**HI) as stream:
                stream.get_final_message()
        else:
            sync_client.messages.create(**HI)
    assert len({r.peer for r in emulator.requests}) == 1


def test_many_concurrent_clients(emulator: Emulator) -> None:
    def worker(n: int) -> list[str]:
        client = anthropic.Anthropic(base_url=emulator.base_url, api_key=f"k{n}")
        ids = []
        for i in range(4):
            if i % 2:
                with client.messages.stream(**HI) as stream:
                    ids.append(stream.get_final_message().id)
            else:
                ids.append(client.messages.create(**HI).id)
        client.close()
        return ids

    with ThreadPoolExecutor(16) as pool:
        ids = [i for batch in pool.map(worker, range(16)) for i in batch]
    assert len(set(ids)) == 64
    assert len(emulator.ledger) == 64


@pytest.mark.anyio
async def test_many_concurrent_async_requests(
    emulator: Emulator, async_client: anthropic.AsyncAnthropic
) -> None:
    ids: list[str] = []

    async def one() -> None:
        async with async_client.messages.stream(**HI) as stream:
            ids.append((await stream.get_final_message()).id)

    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(one)
    assert len(set(ids)) == 20


def test_stop_is_bounded_with_a_stream_in_flight() -> None:
    emu = Emulator().start()
    client = anthropic.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0)
    idle = anthropic.Anthropic(base_url=emu.base_url, api_key="k")
    idle.messages.create(**HI)  # leaves an idle keep-alive connection open
    emu.faults.next(Fault.delay(token_latency=300.0))  # the stream stalls before its first delta
    errors: list[BaseException] = []
    started = threading.Event()

    def consume() -> None:
        try:
            with client.messages.stream(**HI) as stream:
                for _ in stream:
                    started.set()
        except BaseException as exc:
            errors.append(exc)
        finally:
            started.set()

    thread = threading.Thread(target=consume)
    thread.start()
    assert started.wait(60)
    t0 = time.monotonic()
    emu.stop()
    assert time.monotonic() - t0 < 150  # long before the stall would end by itself
    thread.join(30)
    assert not thread.is_alive() and errors  # the client saw the connection go
    assert not emu.running
    client.close()
    idle.close()


def test_control_endpoints(emulator: Emulator, sync_client: anthropic.Anthropic) -> None:
    pending = control(
        emulator,
        "POST",
        "script",
        {
            "replies": [
                "plain text",
                [{"type": "tool_use", "name": "t", "input": {"a": 1}}],
                {"content": "refused", "stop_reason": "refusal"},
            ]
        },
    )
    assert pending == {"pending": 3}
    tools: Any = [{"name": "t", "input_schema": {"type": "object"}}]
    first = sync_client.messages.create(**HI, tools=tools)
    second = sync_client.messages.create(**HI, tools=tools)
    third = sync_client.messages.create(**HI, tools=tools)
    assert first.content[0].text == "plain text"
    assert second.stop_reason == "tool_use" and second.content[0].input == {"a": 1}
    assert third.stop_reason == "refusal"
    ledger = control(emulator, "GET", "ledger")
    assert len(ledger["entries"]) == 3
    assert ledger["total"]["output_tokens"] == sum(
        m.usage.output_tokens for m in (first, second, third)
    )
    requests = control(emulator, "GET", "requests")["requests"]
    assert [r["body"]["max_tokens"] for r in requests] == [50, 50, 50]
    assert requests[0]["headers"]["authorization"] == "Bearer test-key"
    assert control(emulator, "POST", "clock", {"set": 1000})["now"] >= 1000
    assert control(emulator, "GET", "clock")["now"] >= 1000
    assert control(emulator, "GET", "violations") == {"violations": [], "strict": True}
    assert control(emulator, "POST", "reset") == {"ok": True}
    assert emulator.requests == [] and len(emulator.ledger) == 0
    with pytest.raises(ControlError) as info:
        control(emulator, "POST", "nowhere", {})
    assert info.value.code == 404
    with pytest.raises(ControlError) as bad:
        control(emulator, "POST", "script", {"replies": [{"content": [{"type": "image"}]}]})
    assert bad.value.code == 400


def test_script_fallback_and_exhaustion(
    emulator: Emulator, sync_client: anthropic.Anthropic
) -> None:
    brain = emulator.script("one", when_empty="raise")
    brain.when_last_user_contains("weather", "It rains.", times=1)
    weather = sync_client.messages.create(**{**HI, "messages": [user("weather?")]})
    assert weather.content[0].text == "It rains."
    assert sync_client.messages.create(**HI).content[0].text == "one"
    failing = pytest.raises(anthropic.InternalServerError, match="no reply left")
    with emulator.expect_violations(1) as seen, failing:
        sync_client.messages.create(**HI)
    assert seen[0].status == 500
    assert len(emulator.api_requests()) == 3  # x-should-retry: false on a brain failure


def test_strict_check_lists_violations() -> None:
    emu = Emulator(strict=True).start()
    client = anthropic.Anthropic(base_url=emu.base_url, api_key="k")
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model=MODEL, max_tokens=10, messages=[user("")])
    client.close()
    emu.stop()
    with pytest.raises(AssertionError, match="1 protocol violation") as info:
        emu.check()
    assert "POST /v1/messages -> 400 invalid_request_error: messages.0: all messages" in str(
        info.value
    )
    assert "model='claude-sonnet-5-5'" in str(info.value)
    none_seen = pytest.raises(AssertionError, match="expected a protocol violation")
    with none_seen, emu.expect_violations():
        pass


def test_cli_serves_until_interrupted(tmp_path: Any) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "forkagent_jupyter.emulator", "--port", "0", "--seed", "3"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        client = anthropic.Anthropic(base_url=url, api_key="k")
        assert client.messages.create(**HI).type == "message"
        client.close()
        with urllib.request.urlopen(f"{url}/_emulator/ledger", timeout=60) as resp:
            assert b'"entries"' in resp.read()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 0  # its exit: seconds on a busy machine
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
