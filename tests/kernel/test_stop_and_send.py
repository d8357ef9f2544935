"""%stop and %send in a real kernel: one line for what cannot be done, a bulk stop shown in
the notebook but not handed to the agent."""

from __future__ import annotations

import time
from typing import Any

from .conftest import Kernel


def _one_line_usage_error(result: Any, expected: str) -> None:
    assert result.status == "error"
    reply = result.reply["content"]
    assert reply["ename"] == "UsageError", reply
    assert expected in reply["evalue"] and "\n" not in reply["evalue"].strip()
    assert "Traceback" not in result.texts()


def _wait_until(kernel: Kernel, expr: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not kernel.value(expr):
        assert time.monotonic() < deadline, f"not reached: {expr}"
        time.sleep(0.1)


def test_send_to_main_and_stop_of_a_finished_task_are_one_line(kernel: Kernel) -> None:
    assert kernel.execute("%%agent\nHello.").status == "ok"
    _one_line_usage_error(kernel.execute("%send main hi"), "%send: 'main' is the parent")
    assert kernel.value("len(__forkagent__.session.tasks)") == 0  # nothing was started
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    assert kernel.execute("%fork --name quick report `py: 6 * 7`").status == "ok"
    _wait_until(kernel, "all(t.settled for t in __forkagent__.session.tasks)")
    freed = kernel.execute("%stop quick")  # the first frees its process (kept for pulls)
    assert freed.status == "ok" and "quick had finished; its process" in freed.texts()
    _one_line_usage_error(kernel.execute("%stop quick"), "%stop: quick is not running")


def test_stop_all_shows_notifications_without_asking_the_agent(
    kernel: Kernel, emulator: Any
) -> None:
    kernel.execute("%config ForkAgent.approval_timeout = 60")
    for i in range(2):  # each waits for an approval of its Python call
        assert kernel.execute(f"%fork --name w{i} compute `py: {i} + 1`").status == "ok"
    kernel.execute("from forkagent_jupyter.kernel import api as __api")
    _wait_until(kernel, "len(__api.pending()) == 2")
    before = len(emulator.api_requests())
    stopped = kernel.execute("%stop --all")
    assert stopped.status == "ok" and "stopping 2 task(s)" in stopped.texts()
    _wait_until(kernel, "all(t.settled for t in __forkagent__.session.tasks)")
    _wait_until(kernel, "len(__forkagent__.session.responder.auto_turns) == 1")
    assert kernel.value("[t.status for t in __forkagent__.session.tasks]") == ["killed"] * 2
    later = emulator.api_requests()[before:]
    assert not any("<task-notification>" in str(r.body["messages"]) for r in later)
    # the notebook shows both notifications (the launching cells' notification area)
    kernel.drain()
    notes = [
        m["content"]["data"].get("text/markdown", "")
        for m in kernel.iopub
        if m["msg_type"] == "update_display_data"
    ]
    shown = "\n".join(n for n in notes if "<task-notification>" in n)
    assert shown.count("<status>killed</status>") >= 2 and "not sent to the agent" in shown


def test_stop_then_send_in_one_cell_resumes_the_agent(kernel: Kernel) -> None:
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    sleep = "`py: __import__('time').sleep(30)`"
    assert kernel.execute(f"%fork --name w wait {sleep}").status == "ok"
    _wait_until(kernel, "__forkagent__.session.task('w').status == 'running'")
    both = kernel.execute("%stop w\n%send w now report what you have")
    assert both.status == "ok", both.texts()
    assert "it resumes with your message" in both.texts()
    _wait_until(kernel, "__forkagent__.session.task('w').run == 2", timeout=60)
    _wait_until(kernel, "__forkagent__.session.task('w').settled", timeout=60)
    task = "__forkagent__.session.task('w')"
    assert kernel.value(f"{task}.status") == "completed", kernel.value(f"{task}.error")
    history = kernel.value(f"str(__forkagent__.session.workers.runs[{task}.id].history)")
    assert "now report what you have" in history
