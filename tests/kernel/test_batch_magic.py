"""`%fork --batch --over NAME` and `api.fan_out` in a real kernel against the emulator."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.reported import tool_outputs

from .conftest import Kernel
from .test_no_math import exposed_dollars

pytestmark = pytest.mark.kernel


def wait_value(kernel: Kernel, expr: str, expected: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = kernel.value(expr)
        if value == expected:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{expr} is {value!r}, not {expected!r}")


def test_fork_batch_over_a_list_shows_one_card_and_loads_a_table(
    kernel: Kernel, emulator: Any
) -> None:
    kernel.execute('labels = ["red", "green", "blue"]')
    run = kernel.execute('%fork --batch --over labels --poll 0.05 "Name a fruit that is {item}."')
    assert run.status == "ok", run.texts()
    assert kernel.cards() == []  # one batch card, not a card per fork
    batch = "[b for b in __forkagent__.session.batches if b.startswith('msgbatch_')]"
    [batch_id] = wait_value(kernel, f"len({batch})", 1) and kernel.value(batch)
    wait_value(kernel, "[t.status for t in __forkagent__.session.tasks]", ["completed"] * 3)
    # the kernel answers while the batch runs and after: the card was updated in place
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        kernel.drain()
        updates = [
            m["content"]["data"].get("text/html", "")
            for m in kernel.iopub
            if m["msg_type"] == "update_display_data"
            and "forkagent-batch" in m["content"]["data"].get("text/html", "")
        ]
        if updates and "completed 3" in updates[-1]:
            break
    assert "succeeded 3" in updates[-1] and batch_id in updates[-1]
    # the same facts as text (an HTML object's repr had stood there)
    [plain] = [
        m["content"]["data"]["text/plain"]
        for m in kernel.iopub
        if m["msg_type"] == "update_display_data"
        and m["content"]["data"].get("text/html", "") == updates[-1]
    ][-1:]
    assert "Batch of 3 forks" in plain and batch_id in plain and "succeeded 3" in plain, plain
    assert "<" not in plain and "cost so far $0." in plain
    assert "cost so far $0." in updates[-1]  # kept out of math typesetting
    assert exposed_dollars(updates[-1]) == [], updates[-1]
    assert kernel.value("len(__forkagent__.ui.hub.cards)") == 0  # no card per fork
    table = kernel.execute(
        "from forkagent_jupyter.kernel import api\n"
        f"df = api.batch_results({batch_id!r}).to_dataframe()\n"
        "print(list(df['item']), list(df['status']))"
    )
    assert "['red', 'green', 'blue'] ['completed', 'completed', 'completed']" in table.texts()
    directives = [
        r["params"]["messages"][-1]["content"][-1]["text"]
        for rec in emulator.api_requests("/v1/messages/batches")
        if rec.method == "POST"
        for r in rec.body["requests"]
    ]
    assert [d.rsplit("Directive: ", 1)[1] for d in directives] == [
        f"Name a fruit that is {c}." for c in ("red", "green", "blue")
    ]


def test_stop_cancels_a_batch(kernel: Kernel, emulator: Any) -> None:
    emulator.batches.options.processing_seconds = 3600.0
    kernel.execute("xs = [1, 2]")
    assert kernel.execute('%fork --batch --over xs --poll 0.05 "Look at {item}."').status == "ok"
    batch = "[b for b in __forkagent__.session.batches if b.startswith('msgbatch_')]"
    wait_value(kernel, f"len({batch})", 1)
    [batch_id] = kernel.value(batch)
    assert kernel.execute(f"%stop {batch_id}").status == "ok"
    wait_value(kernel, "[t.status for t in __forkagent__.session.tasks]", ["killed"] * 2)
    from forkagent_jupyter.emulator.batches import BatchStore

    assert isinstance(emulator.batches, BatchStore)
    import anthropic

    client = anthropic.Anthropic(base_url=emulator.base_url, api_key="test-key")
    try:
        assert client.messages.batches.retrieve(batch_id).request_counts.canceled == 2
    finally:
        client.close()


def test_bad_batch_arguments_are_one_line_usage_errors(kernel: Kernel) -> None:
    kernel.execute("one = 5\nempty = []")
    cases = {
        '%fork --batch "x {item}"': "--batch and --over NAME go together",
        '%fork --batch --over nope "x {item}"': "no variable 'nope'",
        '%fork --batch --over one "x {item}"': "a list (or other collection) is needed",
        '%fork --batch --over empty "x {item}"': "is empty",
        '%fork --batch --over empty --poll soon "x {item}"': "--poll needs a number",
    }
    kernel.execute("labels = ['a']")
    cases['%fork --batch --over labels "no placeholder"'] = "needs {item}"
    for code, expected in cases.items():
        result = kernel.execute(code)
        assert result.status == "error", code
        reply = result.reply["content"]
        assert reply["ename"] == "UsageError", (code, reply)
        assert expected in reply["evalue"], (code, reply["evalue"])


def test_a_restarted_kernel_resumes_polling_the_batch(kernel: Kernel, emulator: Any) -> None:
    emulator.batches.options.processing_seconds = 600.0
    kernel.execute("xs = ['x', 'y']")
    run = kernel.execute('%fork --batch --over xs --poll 0.05 "Describe {item}."')
    assert run.status == "ok", run.texts()
    batch = "[b for b in __forkagent__.session.batches if b.startswith('msgbatch_')]"
    wait_value(kernel, f"len({batch})", 1)
    [batch_id] = kernel.value(batch)

    kernel.km.restart_kernel(now=True)
    kernel.client.wait_for_ready(timeout=60)
    assert kernel.execute("%load_ext forkagent_jupyter").status == "ok"
    kernel.execute("__forkagent__.session")  # the session starts: batches are polled again
    wait_value(kernel, f"{batch}", [batch_id])
    emulator.clock.advance(601)
    wait_value(kernel, "[t.status for t in __forkagent__.session.tasks]", ["completed"] * 2)
    creates = [r for r in emulator.api_requests("/v1/messages/batches") if r.method == "POST"]
    assert len(creates) == 1


def test_fork_batch_runs_offline_through_the_in_process_emulator(
    kernel: Kernel, emulator: Any
) -> None:
    kernel.execute("%config ForkAgent.backend = 'offline'")
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    kernel.execute("numbers = [2, 3]")
    run = kernel.execute('%fork --batch --over numbers "square it `py: {item} ** 2`"')
    assert run.status == "ok", run.texts()
    assert "Anthropic backend" not in run.texts()
    wait_value(kernel, "[t.status for t in __forkagent__.session.tasks]", ["completed"] * 2)
    results = kernel.value("[t.result for t in __forkagent__.session.tasks]")
    assert [tool_outputs(r) for r in results] == [["4"], ["9"]], results
    assert kernel.value("__forkagent__.session.backend") == "offline"
    assert emulator.api_requests() == []  # nothing went to the test's emulator (the network)
