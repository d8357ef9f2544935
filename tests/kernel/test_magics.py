"""The extension in a real kernel: %%agent, %fork, %tasks, cards, approvals, interrupts."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator import Reply
from forkagent_jupyter.emulator.faults import Fault
from forkagent_jupyter.kernel.cards.hub import PLAIN_CARDS
from tests.reported import tool_outputs

from .conftest import Kernel

pytestmark = pytest.mark.kernel

AGENT_CELL = "%%agent\nCompute it.\n\n```python\nanswer = 6 * 7\nprint('answer is', answer)\n```"


def test_agent_cell_streams_uses_a_tool_and_keeps_history(kernel: Kernel, emulator: Any) -> None:
    first = kernel.run_approving(AGENT_CELL)
    assert first.status == "ok", first.texts()
    text = first.texts()
    assert "**Python**" in text and "answer is 42" in text
    assert "cache read" in text and "session $" in text  # the usage line
    prompt = kernel.value("__forkagent__.session.usage.total_input_tokens")
    assert f"tokens: {prompt:,} in (" in text  # the whole prompt, as in the Tasks panel
    assert kernel.value("answer") == 42  # the tool ran in the user's namespace
    second = kernel.run_approving("%%agent\nAnd double it: `py: answer * 2`")
    assert "84" in tool_outputs(second.texts()), second.texts()
    assert kernel.value("len(__forkagent__.session.messages)") == 8
    # streamed: the cell's display was updated more than once
    updates = [m for m in second.messages if m["msg_type"] == "update_display_data"]
    assert updates


def test_model_html_in_an_answer_is_shown_as_text(kernel: Kernel, emulator: Any) -> None:
    """An answer is shown as HTML the kernel rendered: raw HTML from the model (an injection
    through the data it read) stays text, where JupyterLab would run it in trusted Markdown."""
    emulator.script(Reply.text("**Found it.** <img src=x onerror=alert(1)>"))
    result = kernel.execute("%%agent\nWhat is in the file?")
    assert result.status == "ok", result.texts()
    final = [
        m["content"]["data"]
        for m in result.messages
        if m["msg_type"] in ("display_data", "update_display_data")
    ][-1]
    assert "<strong>Found it.</strong>" in final["text/html"]
    assert "<img" not in final["text/html"] and "&lt;img" in final["text/html"]
    assert "session $" in final["text/html"]  # the usage line, ours, stays HTML


def test_interpolates_kernel_variables(kernel: Kernel) -> None:
    kernel.execute("n = 21")
    result = kernel.run_approving("%%agent\nDouble `py: {n} * 2`")
    assert "42" in tool_outputs(result.texts()), result.texts()


def test_bad_magic_arguments_are_one_line_usage_errors(kernel: Kernel) -> None:
    cases = {
        "%fork": "%fork: say what the worker should do",
        "%fork --bogus x": "%fork: unknown option --bogus",
        "%fork --name": "%fork: option --name needs a value",
        "%send onlyone": "%send: usage",
        "%stop": "%stop: give a task id or name, or --all",
        "%send nobody hello": "%send: No task 'nobody'",
        "%%agent --frobnicate\nhi": "unknown option --frobnicate",
        "%%agent\n   ": "the cell is empty",
        # the same parser whether the magic is awaited or called from code
        "get_ipython().run_cell_magic('agent', '--frobnicate', 'hi')": (
            "%%agent: unknown option --frobnicate"
        ),
        "%%agent stray words\nhi": "%%agent: unrecognized arguments: stray words",
        "%tasks --wait --bogus": "%tasks: unknown option --bogus",
        "%stop a b": "%stop: unrecognized arguments: b",
    }
    for code, expected in cases.items():
        result = kernel.execute(code)
        assert result.status == "error", code
        reply = result.reply["content"]
        assert reply["ename"] == "UsageError", (code, reply)
        assert expected in reply["evalue"], (code, reply["evalue"])
        assert "\n" not in reply["evalue"].strip()
        shown = result.texts()  # IPython shows one line, no traceback
        assert "Traceback" not in shown and expected in shown


def test_three_forks_then_wait(kernel: Kernel, emulator: Any) -> None:
    kernel.execute("data = list(range(10))")
    ctx = kernel.execute("%%agent\nContext: " + "facts about data. " * 300)
    assert ctx.status == "ok"
    for i, expr in enumerate(["sum(data)", "max(data)", "len(data)"]):
        r = kernel.execute(f"%fork --name w{i} compute `py: {expr}`")
        assert r.status == "ok", r.texts()
        assert len(kernel.cards()) == i + 1  # a card was displayed
    done = kernel.run_approving("%tasks --wait", timeout=120)  # approves the workers' calls
    assert done.status == "ok", done.texts()
    statuses = kernel.value("[t.status for t in __forkagent__.session.tasks]")
    assert statuses == ["completed"] * 3
    assert kernel.value("len(__forkagent__.session.responder.auto_turns)") >= 1
    table = done.texts()
    assert table.count("completed") == 3
    # without the JupyterLab extension, each launching cell's notification area shows the
    # notifications and the parent's answer (an update of its display id)
    kernel.drain()
    notes = [
        m["content"]["data"]["text/markdown"]
        for m in kernel.iopub
        if m["msg_type"] == "update_display_data"
        and "<task-notification>" in m["content"]["data"].get("text/markdown", "")
    ]
    assert len(notes) >= 1
    assert all(n.count("<task-notification>") >= 1 for n in notes)
    assert "reported back" in notes[-1]
    # the emulator saw the siblings read the shared prefix
    reads = [e.usage["cache_read_input_tokens"] for e in emulator.ledger.entries()]
    assert sum(1 for r in reads if r > 0) >= 3


def _views(execution: Any) -> list[str]:
    return [
        m["content"]["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
        for m in execution.messages
        if m["msg_type"] == "display_data"
        and "application/vnd.jupyter.widget-view+json" in m["content"]["data"]
    ]


def test_every_fork_cell_run_shows_its_own_cards(kernel: Kernel) -> None:
    """Each run of a %fork cell displays a container holding the cards it started (a re-run
    clears the cell's earlier output, so cards must not join an earlier run's container)."""
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    ui = "__forkagent__.ui"
    for name in ("first", "second"):
        run = kernel.execute(f"%fork --name {name} say hello")
        assert run.status == "ok", run.texts()
        key = f"__forkagent__.session.registry.get({name!r}).id"
        box = kernel.value(f"{ui}._run_cards[{ui}.launches[{key}].run].model_id")
        children = kernel.value(
            f"[c.model_id for c in {ui}._run_cards[{ui}.launches[{key}].run].children]"
        )
        assert box in _views(run)
        assert children == [kernel.value(f"{ui}.hub.cards[{key}].model_id")]
        # where widgets cannot be drawn (a saved notebook elsewhere), a line says what was here
        [plain] = [
            m["content"]["data"]["text/plain"]
            for m in run.messages
            if m["msg_type"] == "display_data"
            and m["content"]["data"]
            .get("application/vnd.jupyter.widget-view+json", {})
            .get("model_id")
            == box
        ]
        assert plain == PLAIN_CARDS
    kernel.execute("%tasks --wait", timeout=60)


def _approval_buttons(kernel: Kernel) -> list[str]:
    kernel.drain()
    return kernel.widget_comms(_view_name="ButtonView", description="Allow once")


def test_card_states_sent_between_cells_are_sent_again_in_the_next(kernel: Kernel) -> None:
    """A headless client (nbclient, papermill) keeps only the messages of the cell it runs: a
    card that ended while no cell ran sends its final state again in the next cell."""
    fork = kernel.execute("%fork --name quick say hello")
    assert fork.status == "ok", fork.texts()
    [card] = kernel.cards()
    header = next(
        m["content"]["data"]["state"]["children"][0].removeprefix("IPY_MODEL_")
        for m in kernel.iopub
        if m["msg_type"] == "comm_open" and m["content"]["comm_id"] == card
    )

    def final_states(messages: list[dict[str, Any]]) -> list[str]:
        return [
            m["content"]["data"]["state"]["value"]
            for m in messages
            if m["msg_type"] == "comm_msg"
            and m["content"]["comm_id"] == header
            and ">completed<" in m["content"]["data"].get("state", {}).get("value", "")
        ]

    deadline = time.monotonic() + 30
    while not final_states(kernel.iopub) and time.monotonic() < deadline:
        kernel.drain(timeout=0.5)  # no cell runs meanwhile
    [between] = [m for m in kernel.iopub if final_states([m]) and m["parent_header"].get("msg_id")]
    assert between["parent_header"]["msg_id"] == fork.reply["parent_header"]["msg_id"]
    nxt = kernel.execute("1 + 1")
    assert len(final_states(nxt.messages)) == 1  # sent again, owned by the running cell
    assert final_states(kernel.execute("2 + 2").messages) == []  # once


def test_permission_click_while_idle_and_during_agent_cell(kernel: Kernel) -> None:
    kernel.execute("%config ForkAgent.approval_timeout = 60")
    kernel.execute("%fork --name writer `py: open('a.txt', 'w').write('x')`")
    deadline = time.monotonic() + 30
    while not _approval_buttons(kernel) and time.monotonic() < deadline:
        time.sleep(0.2)
    [button] = _approval_buttons(kernel)
    kernel.click(button)  # the kernel is idle
    kernel.execute("%tasks --wait writer", timeout=60)
    assert kernel.value("__forkagent__.session.registry.get('writer').status") == "completed"
    assert kernel.value("open('a.txt').read()") == "x"
    expr = (
        "__forkagent__.ui.hub.cards[__forkagent__.session.registry.get('writer').id]"
        ".transcript.value"
    )
    assert kernel.value(expr) == ""  # filled only when opened
    task_id = kernel.value("__forkagent__.session.registry.get('writer').id")
    # open the card's transcript as the frontend does when the accordion is clicked
    [card] = kernel.widget_comms(_dom_classes=["forkagent-card", f"forkagent-task-{task_id}"])
    accordions = set(kernel.widget_comms(_view_name="AccordionView"))
    [card_state] = [
        m["content"]["data"]["state"]
        for m in kernel.iopub
        if m["msg_type"] == "comm_open" and m["content"]["comm_id"] == card
    ]
    [accordion] = [
        c.removeprefix("IPY_MODEL_")
        for c in card_state["children"]
        if c.removeprefix("IPY_MODEL_") in accordions
    ]
    kernel.comm_msg(
        accordion, {"method": "update", "state": {"selected_index": 0}, "buffer_paths": []}
    )
    deadline = time.monotonic() + 60
    while not kernel.value(expr) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "Running 1 Python block." in kernel.value(expr)  # the card's transcript

    # now a worker asks while an %%agent cell is running
    kernel.execute("%fork --name writer2 `py: open('b.txt', 'w').write('y')`")
    busy = kernel.start("%%agent\nWait a little.\n```python\nimport time; time.sleep(0)\n```")
    deadline = time.monotonic() + 30
    buttons: list[str] = []
    while len(buttons) < 2 and time.monotonic() < deadline:
        buttons = _approval_buttons(kernel)
        time.sleep(0.2)
    for b in buttons[1:]:
        kernel.click(b)
    kernel.drain(until_idle_of=busy, timeout=60)
    kernel.execute("%tasks --wait writer2", timeout=60)
    assert kernel.value("open('b.txt').read()") == "y"


def test_approvals_and_stop_through_the_comm(kernel: Kernel) -> None:
    """The extension's pending-approvals indicator and tasks panel: approval requests arrive
    with the full input; answers and stops sent on the comm act like the card's buttons."""
    kernel.execute("%config ForkAgent.approval_timeout = 60")
    kernel.open_comm("ext")
    kernel.execute("%fork --name ok `py: open('ok.txt', 'w').write('ok')`")
    kernel.execute("%fork --name no `py: open('no.txt', 'w').write('no')`")
    asks = kernel.wait_comm("ext", "approval", until=lambda a: len(a) == 2)
    ids = {kernel.value(f"__forkagent__.session.registry.get('{n}').id"): n for n in ("ok", "no")}
    by_name = {ids[a["task_id"]]: a for a in asks}
    assert by_name["ok"]["tool"] == "Python" and "ok.txt" in by_name["ok"]["preview"]
    tables = kernel.wait_comm(
        "ext",
        "tasks",
        until=lambda ts: ts and [r["pending_approvals"] for r in ts[-1]["tasks"]] == [1, 1],
    )
    assert {r["name"] for r in tables[-1]["tasks"]} == {"ok", "no"}
    # a late frontend sees both pending requests at once
    assert len(kernel.open_comm("ext2")["approvals"]) == 2
    kernel.comm_msg(
        "ext", {"type": "approve", "request_id": by_name["ok"]["request_id"], "decision": "allow"}
    )
    kernel.comm_msg(
        "ext",
        {
            "type": "approve",
            "request_id": by_name["no"]["request_id"],
            "decision": "deny",
            "reason": "not in this notebook",
        },
    )
    kernel.execute("%tasks --wait ok no", timeout=60)
    assert kernel.value("open('ok.txt').read()") == "ok"
    assert kernel.value("__import__('os').path.exists('no.txt')") is False
    assert "not in this notebook" in kernel.value(
        "str(__forkagent__.session.workers.runs["
        "__forkagent__.session.registry.get('no').id].history)"
    )
    done = kernel.wait_comm("ext", "approval_done", until=lambda d: len(d) == 2)
    assert {d["request_id"] for d in done} == {a["request_id"] for a in asks}

    # the tasks panel's stop button
    kernel.execute("%fork --name long `py: 1 + 1`")  # waits for an approval: still running
    kernel.wait_comm("ext", "approval", until=lambda a: len(a) == 3)
    long_id = kernel.value("__forkagent__.session.registry.get('long').id")
    kernel.comm_msg("ext", {"type": "stop", "task_id": long_id})
    kernel.execute("%tasks --wait long", timeout=60)
    assert kernel.value("__forkagent__.session.registry.get('long').status") == "killed"
    assert {"approval", "approval_done"} <= set(kernel.comm_typed("ext"))  # each its type


def test_unanswered_approval_times_out_as_a_denial(kernel: Kernel) -> None:
    kernel.execute("__forkagent__.session")  # set after the session exists: applies live
    kernel.execute("%config ForkAgent.approval_timeout = 1")
    kernel.execute("%fork --name slow `py: open('c.txt', 'w').write('z')`")
    kernel.execute("%tasks --wait slow", timeout=60)
    result = kernel.value("__forkagent__.session.registry.get('slow').result")
    # one clock, the card's: its message names the setting (the gate's own would not)
    assert "nobody answered the approval card within 1 seconds" in result
    assert "(ForkAgent.approval_timeout)" in result
    assert kernel.value("__forkagent__.session.gate.approval_timeout") is None
    assert kernel.value("__import__('os').path.exists('c.txt')") is False


def test_interrupt_cancels_the_turn_only(kernel: Kernel, emulator: Any) -> None:
    kernel.execute("%config ForkAgent.approval_timeout = 60")
    kernel.execute("%fork --name bg `py: 1 + 1`")  # waits for its approval meanwhile
    deadline = time.monotonic() + 30
    while not _approval_buttons(kernel) and time.monotonic() < deadline:
        time.sleep(0.05)
    emulator.faults.next(Fault.delay(ttft=90))  # the answer would come long after the test
    seen = len(emulator.requests)
    msg_id = kernel.start("%%agent\nA slow answer, please.")
    deadline = time.monotonic() + 30
    while len(emulator.requests) <= seen and time.monotonic() < deadline:
        time.sleep(0.05)
    kernel.km.interrupt_kernel()
    # the cell ends on the interrupt, not when the pending response would have arrived
    kernel.drain(until_idle_of=msg_id, timeout=20)
    shown = "".join(
        m["content"]["data"].get("text/markdown", "")
        for m in kernel.iopub
        if m["parent_header"].get("msg_id") == msg_id and "data" in m["content"]
    )
    assert "Interrupted. Background workers keep running." in shown
    # the history stays valid: the prompt is kept, nothing half-made was added
    assert kernel.value("[m['role'] for m in __forkagent__.session.messages]")[-1] == "user"
    assert kernel.value("__forkagent__.session.registry.get('bg').status") == "running"
    after = kernel.run_approving("%%agent\nStill here? `py: 2 + 3`")
    assert after.status == "ok" and "5" in tool_outputs(after.texts()), after.texts()
    kernel.run_approving("%tasks --wait bg", timeout=60)
    assert kernel.value("__forkagent__.session.registry.get('bg').status") == "completed"


def test_notifications_reach_an_open_forkagent_comm(kernel: Kernel) -> None:
    """The JupyterLab extension's side, as the frontend does it: open a comm to the kernel
    target `forkagent`; the task table follows, and finished workers arrive as complete
    notification cells (insert_cell) on it."""
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    comm_id = "frontend-comm-1"
    welcome = kernel.open_comm(comm_id)
    assert welcome["version"] == 2 and welcome["tasks"] == [] and welcome["approvals"] == []
    kernel.execute("%fork --name viacomm `py: 40 + 2`")
    kernel.execute("%tasks --wait", timeout=60)
    kernel.drain()
    task_id = kernel.value("__forkagent__.session.registry.get('viacomm').id")
    # the task table: a full snapshot per message, the last one shows the finished task
    tables = kernel.wait_comm(
        comm_id, "tasks", until=lambda ts: ts and ts[-1]["tasks"][0]["status"] == "completed"
    )
    assert tables[0]["tasks"][0]["status"] == "running"  # the first change is sent at once
    [row] = tables[-1]["tasks"]
    assert row["id"] == task_id and row["name"] == "viacomm" and row["status"] == "completed"
    assert row["cost_usd"] > 0
    # what it holds in context against its model's window, as the runtime measured it
    context = kernel.value(
        "(lambda t: (t.context_tokens, t.context_window))"
        "(__forkagent__.session.registry.get('viacomm'))"
    )
    assert (row["context_tokens"], row["context_window"]) == tuple(context)
    assert 0 < row["context_tokens"] < row["context_window"] and row["compactions"] == 0
    # token counts in the Messages API's words, the same in the row and the notification
    usage = kernel.value(
        "(lambda u: {'input_tokens': u.input_tokens,"
        " 'cache_creation_input_tokens': u.cache_creation_input_tokens,"
        " 'cache_read_input_tokens': u.cache_read_input_tokens, 'output_tokens': u.output_tokens,"
        " 'total_input_tokens': u.total_input_tokens})"
        "(__forkagent__.session.registry.get('viacomm').usage)"
    )
    assert row["usage"] == usage and usage["output_tokens"] > 0
    assert usage["total_input_tokens"] == (
        usage["input_tokens"] + usage["cache_creation_input_tokens"]
        + usage["cache_read_input_tokens"]
    )  # fmt: skip
    [insert] = kernel.comm_data(comm_id, "insert_cell")
    assert insert["task_ids"] == [task_id]
    cell = insert["cell"]
    assert cell["cell_type"] == "code" and cell["source"] == f"%notifications {task_id}"
    assert cell["metadata"]["forkagent"] == {
        "kind": "notification",
        "key": insert["key"],
        "task_ids": [task_id],
    }
    note, answer = cell["outputs"]
    payload = note["data"]["application/vnd.forkagent.notification+json"]
    assert payload["task_id"] == task_id and payload["status"] == "completed"
    assert payload["usage"] == usage
    assert payload["summary"] == 'Worker "viacomm" completed'
    assert f"tokens in {usage['total_input_tokens']:,} " in note["data"]["text/plain"]
    assert "<task-notification>" in payload["notification"]
    assert tool_outputs(payload["result"]) == ["42"], payload["result"]
    # for a frontend without the extension: the summary (the result's first lines), then the
    # XML the parent read, whole in plain text and folded in HTML
    plain = note["data"]["text/plain"]
    summary, xml = plain.split("\n\n<task-notification>", 1)
    assert summary.startswith('[completed] viacomm: Worker "viacomm" completed\ntokens in ')
    assert tool_outputs(summary) == ["42"], plain
    assert "<task-notification>" + xml == payload["notification"]
    page = note["data"]["text/html"]
    shown, folded = page.split("<details class='forkagent-notification-xml'>", 1)
    assert "<b>viacomm</b>" in shown and "task-notification" not in shown
    assert "&lt;task-notification&gt;" in folded.split("</details>", 1)[0]
    assert "reported back" in answer["data"]["text/markdown"]
    # with the extension connected the fallback area is not used
    fallback = [
        m
        for m in kernel.iopub
        if m["msg_type"] == "update_display_data"
        and "<task-notification>" in str(m["content"]["data"].get("text/markdown", ""))
    ]
    assert fallback == []
    # a second frontend connecting later is told the current table at once
    assert kernel.open_comm("frontend-comm-2")["tasks"][0]["status"] == "completed"
    # every message the kernel sent is exactly its protocol type
    assert {"welcome", "tasks", "insert_cell"} <= set(kernel.comm_typed(comm_id))


def test_replay_and_resume_after_a_kernel_restart(kernel: Kernel, emulator: Any) -> None:
    """Re-running an inserted notification cell shows it again from the transcripts without
    calling the model, also in a restarted kernel; `%send` resumes a finished worker there."""
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    kernel.open_comm("c1")
    kernel.execute("%fork --name keeper remember `py: 6 * 7`")
    kernel.execute("%tasks --wait", timeout=60)
    kernel.drain()
    [insert] = kernel.comm_data("c1", "insert_cell")
    calls = len(emulator.api_requests())
    again = kernel.execute(insert["cell"]["source"])
    assert again.status == "ok", again.texts()
    shown = [m["content"]["data"] for m in again.messages if m["msg_type"] == "display_data"]
    assert [list(d) for d in shown] == [list(o["data"]) for o in insert["cell"]["outputs"]]
    assert (
        shown[0]["application/vnd.forkagent.notification+json"]["result"]
        == (
            insert["cell"]["outputs"][0]["data"]["application/vnd.forkagent.notification+json"][
                "result"
            ]
        )
    )
    # shown as inserted: the summary first, the XML folded (HTML) or after it (plain text)
    inserted = insert["cell"]["outputs"][0]["data"]
    assert shown[0]["text/html"] == inserted["text/html"]
    assert shown[0]["text/plain"] == inserted["text/plain"]
    assert shown[0]["text/html"].index("<b>keeper</b>") < shown[0]["text/html"].index("<details")
    assert len(emulator.api_requests()) == calls  # no model call
    bad = kernel.execute("%notifications nosuchtask")
    assert bad.status == "error" and "no recorded notification" in bad.texts()

    kernel.km.restart_kernel(now=True)
    kernel.client.wait_for_ready(timeout=60)
    assert kernel.execute("%load_ext forkagent_jupyter").status == "ok"
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    welcome = kernel.open_comm("c2")
    assert welcome["tasks"] == []  # a new kernel: nothing runs here yet
    replayed = kernel.execute("%notifications keeper")
    assert replayed.status == "ok", replayed.texts()
    assert "42" in tool_outputs(replayed.texts()), replayed.texts()
    [again_note] = [
        m["content"]["data"]
        for m in replayed.messages
        if m["msg_type"] == "display_data"
        and "application/vnd.forkagent.notification+json" in m["content"]["data"]
    ]
    assert again_note["text/html"] == inserted["text/html"]  # the same, read from the transcript
    assert len(emulator.api_requests()) == calls
    # where no await is possible (code, an indented line) the magic starts the same work in
    # the background: its output, and its error, still land in the cell that ran it
    started = kernel.execute(
        't = get_ipython().run_line_magic("notifications", "keeper")\nawait t\n'
        't = get_ipython().run_line_magic("notifications", "nosuchtask")\nawait t'
    )
    assert started.status == "ok", started.texts()
    assert "42" in tool_outputs(started.texts()), started.texts()
    assert "UsageError: %notifications: no recorded notification" in started.texts()
    # `{name}` inserts a notebook variable (our own interpolation, not IPython's expansion)
    resumed = kernel.execute("six = 6\n%send keeper and now `py: {six} * 8`")
    assert resumed.status == "ok", resumed.texts()
    assert "resumed from its transcript" in resumed.texts()
    ui, key = "__forkagent__.ui", "__forkagent__.session.registry.get('keeper').id"
    card = kernel.value(f"{ui}.hub.cards[{key}].model_id")
    box = kernel.value(f"{ui}._run_cards[{ui}.launches[{key}].run].model_id")
    views = _views(resumed)
    assert box in views and card not in views  # the revived card shows once, in its container
    kernel.execute("%tasks --wait", timeout=60)
    assert kernel.value("__forkagent__.session.registry.get('keeper').status") == "completed"
    result = kernel.value("__forkagent__.session.registry.get('keeper').result")
    assert tool_outputs(result) == ["48"], result
    assert len(emulator.api_requests()) > calls
    kernel.drain()
    [second] = kernel.comm_data("c2", "insert_cell")
    assert second["task_ids"] == [kernel.value("__forkagent__.session.registry.get('keeper').id")]


def test_help_is_generated_and_unload_stops_workers(kernel: Kernel) -> None:
    helped = kernel.execute("print(__forkagent__.shell.find_line_magic('fork').__doc__)")
    text = helped.texts()
    assert "--name NAME" in text and "Fork the parent conversation" in text
    kernel.execute("%config ForkAgent.approval_timeout = 60")
    kernel.execute("%fork --name waiting `py: 1 + 1`")  # will wait for an approval
    deadline = time.monotonic() + 30
    while not _approval_buttons(kernel) and time.monotonic() < deadline:
        time.sleep(0.05)
    kernel.execute("__session = __forkagent__.session")
    unloaded = kernel.execute("%unload_ext forkagent_jupyter")
    assert unloaded.status == "ok", unloaded.texts()
    deadline = time.monotonic() + 60
    while kernel.value("[t.status for t in __session.tasks]") != ["killed"]:
        assert time.monotonic() < deadline, "the worker was not stopped"
        time.sleep(0.1)
    gone = kernel.execute("%%agent\nhello")
    assert gone.status == "error" and "UsageError" in gone.reply["content"]["ename"]


def test_an_approval_shows_the_diff_the_edit_writes(
    kernel: Kernel, emulator: Any, tmp_path: Path
) -> None:
    """The preview on an approval (card and Tasks panel) is the tool's own: for an Edit of a
    CRLF file, the diff that is then written, byte for byte."""
    from forkagent_jupyter.emulator.brains import OfflineBrain, ScriptedBrain

    before = b"a = 1\r\nb = 2\r\n"
    (tmp_path / "crlf.txt").write_bytes(before)
    edit = {"file_path": "crlf.txt", "old_string": "a = 1\nb = 2", "new_string": "a = 3\nb = 4"}
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains(
        "fix the file", Reply(({"type": "tool_use", "name": "Edit", "input": edit},)), times=1
    )
    emulator.brain = brain
    kernel.execute("%config ForkAgent.approval_timeout = 60")
    kernel.open_comm("ext")
    kernel.execute("%fork --name fixer fix the file")
    [ask] = kernel.wait_comm("ext", "approval", until=lambda a: len(a) == 1)
    assert ask["tool"] == "Edit" and "-a = 1\r\n" in ask["preview"]
    kernel.comm_msg(
        "ext", {"type": "approve", "request_id": ask["request_id"], "decision": "allow"}
    )
    kernel.execute("%tasks --wait fixer", timeout=60)
    after = (tmp_path / "crlf.txt").read_bytes()
    assert after == b"a = 3\r\nb = 4\r\n"
    check = tmp_path / "check"
    check.mkdir()
    (check / "crlf.txt").write_bytes(before)
    (tmp_path / "approved.patch").write_bytes(ask["preview"].encode())
    subprocess.run(["git", "apply", str(tmp_path / "approved.patch")], cwd=check, check=True)
    assert (check / "crlf.txt").read_bytes() == after
