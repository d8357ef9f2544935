"""Workers that compute, in a real kernel: off the kernel's thread, in their own processes
(parallel, stoppable, isolated), outputs and figures on their cards and to the model, values
pulled back on request, `--shared` for the old behaviour, and clear failures."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest

from .conftest import Kernel

pytestmark = pytest.mark.kernel

SESSION = "__forkagent__.session"


def setup(kernel: Kernel) -> None:
    ok = kernel.execute("from forkagent_jupyter.kernel import api\napi.allow('Python')")
    assert ok.status == "ok", ok.texts()


def status(kernel: Kernel, name: str) -> str:
    return str(kernel.value(f"{SESSION}.registry.get({name!r}).status"))


def wait_until(kernel: Kernel, expr: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = kernel.value(expr)
        if value:
            return value
        time.sleep(0.1)
    raise TimeoutError(expr)


def worker_pid(kernel: Kernel, name: str) -> int:
    return int(
        wait_until(
            kernel, f"{SESSION}.compute.runners[{SESSION}.registry.get({name!r}).id].pid", 30
        )
    )


def alive(kernel: Kernel, pid: int) -> bool:
    return bool(kernel.value(f"__import__('os').path.exists('/proc/{pid}')"))


def test_a_computing_worker_runs_in_its_own_process_and_stop_kills_it(kernel: Kernel) -> None:
    setup(kernel)
    kernel_pid = kernel.value("__import__('os').getpid()")
    started = kernel.execute(
        "%fork --name slow heavy `py: import os, time; print('pid', os.getpid()); time.sleep(60)`"
    )
    assert started.status == "ok", started.texts()
    pid = worker_pid(kernel, "slow")
    assert pid != kernel_pid
    wait_until(kernel, f"{SESSION}.registry.get('slow').current_tool == 'Python'")
    # the kernel answers cells while the worker computes
    reply = kernel.execute("print('am I responsive?')")
    assert "am I responsive?" in reply.texts()
    assert status(kernel, "slow") == "running" and alive(kernel, pid)
    stopped = kernel.execute("%stop slow")
    assert stopped.status == "ok", stopped.texts()
    wait_until(kernel, f"{SESSION}.registry.get('slow').status == 'killed'", 60)
    wait_until(kernel, f"not __import__('os').path.exists('/proc/{pid}')", 60)  # reaped
    # exactly one notification, and the history the worker keeps stays a valid conversation
    kernel.run_approving("%tasks --wait", timeout=60)
    notes = kernel.value(
        f"[x for a in {SESSION}.responder.auto_turns for x in a.notifications if 'slow' in x or "
        f"{SESSION}.registry.get('slow').id in x]"
    )
    assert len(notes) == 1 and "<status>killed</status>" in notes[0]
    history = kernel.value(
        f"[[b.get('type') for b in m['content']] for m in "
        f"{SESSION}.workers.runs[{SESSION}.registry.get('slow').id].history[-2:]]"
    )
    assert "tool_use" in history[0] and "tool_result" in history[1]


def test_a_worker_cannot_rebind_your_names_values_come_back_when_pulled(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("x = 1\ndata = [5, 6, 7]")
    kernel.execute(
        "%fork --name w compute `py: x = 999; data = data[:2]; total = sum(data); "
        "gen = (i for i in data); f = lambda v: v`"
    )
    kernel.run_approving("%tasks --wait w", timeout=60)
    assert status(kernel, "w") == "completed"
    assert kernel.value("x") == 1 and kernel.value("data") == [5, 6, 7]
    pulled = kernel.execute("%tasks --pull w total x")
    assert pulled.status == "ok", pulled.texts()
    assert "pulled from w: total (int 11), x (int 999)" in pulled.texts()
    twice = kernel.execute("%tasks --pull w x x")
    assert "pulled from w: x (int 999)\n" in twice.texts(), twice.texts()  # each name once
    assert kernel.value("(total, x, data)") == (11, 999, [5, 6, 7])
    # api.pull returns copies without binding them
    got = kernel.execute("print(await api.pull('w', 'data'))")
    assert "{'data': [5, 6]}" in got.texts()
    cases = {
        "%tasks --pull w nosuch": "nosuch: not defined in this worker",
        "%tasks --pull w gen": "gen: a generator cannot come back: it is not plain data",
        "%tasks --pull --trust w gen": "gen: generator cannot be pickled",
        "%tasks --trust w gen": "--trust goes with --pull",
        "%tasks --pull nobody x": "No task 'nobody'",
        "%tasks --pull w": "usage: %tasks --pull",
        "%tasks --pull w 'bad name'": '%tasks --pull: "\'bad" is not a variable name',
        "%tasks --pull w os.environ": "%tasks --pull: 'os.environ' is not a variable name",
    }
    for code, expected in cases.items():
        result = kernel.execute(code)
        assert result.status == "error", code
        assert result.reply["content"]["ename"] == "UsageError", code
        assert expected in result.reply["content"]["evalue"], (code, result.reply["content"])
    assert kernel.value("x") == 999  # a failed pull binds nothing


def test_shared_worker_runs_in_your_namespace(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("%fork --shared --name s set it `py: shared_value = 5`")
    kernel.run_approving("%tasks --wait s", timeout=60)
    assert kernel.value("shared_value") == 5
    pulled = kernel.execute("%tasks --pull s shared_value")
    assert "shares the notebook's namespace" in pulled.reply["content"]["evalue"]
    # the setting makes it the default, model-initiated forks included
    kernel.execute("%config ForkAgent.worker_namespace = 'shared'")
    kernel.execute("%%agent --new\nfork: set `py: from_model = 7`")
    kernel.run_approving("%tasks --wait", timeout=60)
    assert kernel.value("from_model") == 7


FIGURE = (
    "`py: import time, matplotlib.pyplot as plt; time.sleep(1); print('drawing'); "
    "plt.plot([1, 3, 2]); plt.title('worker plot'); plt.show()`"
)


def _card_outputs(kernel: Kernel) -> list[dict[str, Any]]:
    """The outputs the worker-output widgets hold now (their last state)."""
    outputs: dict[str, list[dict[str, Any]]] = {}
    for m in kernel.iopub:
        if m["msg_type"] not in ("comm_open", "comm_msg"):
            continue
        data = m["content"].get("data", {})
        state = data.get("state", {})
        if "outputs" in state and (
            m["msg_type"] == "comm_msg"
            or "forkagent-worker-output" in state.get("_dom_classes", [])
        ):
            outputs[m["content"]["comm_id"]] = state["outputs"]
    return [o for outs in outputs.values() for o in outs]


def test_figures_go_to_the_card_and_to_the_model_not_to_the_running_cell(
    kernel: Kernel, emulator: Any
) -> None:
    setup(kernel)
    kernel.execute("%matplotlib inline")
    kernel.execute(f"%fork --name plotter {FIGURE}")
    other = kernel.execute("import asyncio\nawait asyncio.sleep(3)\nprint('other cell')")
    kernel.run_approving("%tasks --wait plotter", timeout=60)
    kernel.drain()
    assert status(kernel, "plotter") == "completed"
    # nothing of the worker's landed in the cell that ran meanwhile
    assert not [m for m in other.messages if m["msg_type"] == "display_data"]
    assert "drawing" not in other.texts()
    outputs = _card_outputs(kernel)
    assert any(o.get("output_type") == "stream" and "drawing" in o["text"] for o in outputs)
    pngs = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1 and base64.b64decode(pngs[0]).startswith(b"\x89PNG")
    # the model saw its own plot: an image block in the tool_result it was sent
    images = [
        block
        for record in emulator.api_requests()
        for message in record.body["messages"]
        if isinstance(message["content"], list)
        for result in message["content"]
        if result.get("type") == "tool_result" and isinstance(result.get("content"), list)
        for block in result["content"]
        if block.get("type") == "image"
    ]
    assert images and images[0]["source"]["media_type"] == "image/png"


def test_a_figure_left_open_and_a_dataframe_show_on_the_card(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': [3, 4]})")
    kernel.execute(
        "%fork --name quiet no show `py: import matplotlib.pyplot as plt; "
        "fig = plt.figure(); plt.bar(['a', 'b'], [1, 2]); display(df.describe()); df.head(1)`"
    )
    kernel.run_approving("%tasks --wait quiet", timeout=60)
    kernel.drain()
    outputs = _card_outputs(kernel)
    assert any("image/png" in o.get("data", {}) for o in outputs)
    tables = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert len(tables) == 2 and "<table" in tables[0]  # display() and the final value


def test_a_worker_process_that_dies_fails_its_task_with_a_clear_message(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("%fork --name exits quit `py: import os; os._exit(3)`")
    kernel.execute("%fork --name crashes crash `py: import ctypes; ctypes.string_at(0)`")
    kernel.run_approving("%tasks --wait", timeout=60)
    errors = {
        name: kernel.value(f"{SESSION}.registry.get({name!r}).error")
        for name in ("exits", "crashes")
    }
    assert status(kernel, "exits") == "failed" and status(kernel, "crashes") == "failed"
    assert "the worker's process exited with code 3 while it ran Python code" in errors["exits"]
    assert "was killed by SIGSEGV" in errors["crashes"]
    notes = kernel.value(
        f"[x for a in {SESSION}.responder.auto_turns for x in a.notifications "
        "if '<status>failed' in x]"
    )
    assert len(notes) == 2
    # nothing else is lost: the kernel and new workers carry on
    kernel.execute("%fork --name after fine `py: 6 * 7`")
    kernel.run_approving("%tasks --wait after", timeout=60)
    assert status(kernel, "after") == "completed"


def test_workers_hold_no_credentials(kernel: Kernel) -> None:
    setup(kernel)
    assert kernel.value("__import__('os').environ['ANTHROPIC_API_KEY']") == "test-key"
    probe = (
        "import os, gc; env = os.environ.get('ANTHROPIC_API_KEY'); "
        "block = open('/proc/self/environ', 'rb').read(); "
        "held = [o for o in gc.get_objects() if getattr(o, 'api_key', None) == 'test-key']; "
        "found = (env, b'test-key' in block, len(held))"
    )
    kernel.execute(f"%fork --name probe look `py: {probe}`")
    kernel.run_approving("%tasks --wait probe", timeout=60)
    kernel.execute("%tasks --pull probe found")
    assert kernel.value("found") == (None, False, 0)


def test_the_parents_code_runs_off_the_loop_thread(kernel: Kernel) -> None:
    """While the parent's own Python computes, the kernel's event loop keeps running (cards,
    approvals, workers): a ticker task on the loop keeps ticking."""
    setup(kernel)
    kernel.execute(
        "import asyncio\nticks = []\n"
        "async def tick():\n    while True:\n"
        "        ticks.append(1)\n        await asyncio.sleep(0.05)\n"
        "ticker = asyncio.get_running_loop().create_task(tick())"
    )
    kernel.execute("before = len(ticks)")
    result = kernel.execute("%%agent\nWork: `py: import time; time.sleep(1.5); 'done'`")
    assert result.status == "ok" and "done" in result.texts()
    assert kernel.value("len(ticks) - before") >= 10
    kernel.execute("ticker.cancel()")


def test_an_interrupt_cancels_the_parents_code_and_leaves_workers(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("%fork --name bg background `py: import time; time.sleep(60)`")
    pid = worker_pid(kernel, "bg")
    msg_id = kernel.start(
        "%%agent\nSlow:\n```python\nimport time\nfor i in range(600):\n    time.sleep(0.05)\n"
        "finished = True\n```"
    )
    time.sleep(2)
    kernel.km.interrupt_kernel()
    kernel.drain(until_idle_of=msg_id, timeout=20)
    shown = json.dumps(
        [m["content"] for m in kernel.iopub if m["parent_header"].get("msg_id") == msg_id]
    )
    assert "Interrupted" in shown
    assert status(kernel, "bg") == "running" and alive(kernel, pid)
    # the parent's code was stopped, not left to run on in the background
    time.sleep(0.5)
    assert kernel.value("'finished' in globals()") is False
    kernel.execute("%stop bg")


def test_max_workers_retires_finished_processes_first(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("%config ForkAgent.max_workers = 1")
    kernel.execute("%fork --name one first `py: a = 1`")
    kernel.run_approving("%tasks --wait one", timeout=60)
    kernel.execute("%fork --name two second `py: b = 2`")
    kernel.run_approving("%tasks --wait two", timeout=60)
    assert kernel.value(f"{SESSION}.compute.processes") == 1
    pulled = kernel.execute("%tasks --pull one a")
    assert "retired to keep within max_workers=1" in pulled.reply["content"]["evalue"]
    assert kernel.execute("%tasks --pull two b").status == "ok"


def test_each_fork_sees_the_namespace_as_it_was_at_its_fork(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("x = 1")
    kernel.execute("%fork --name a see `py: seen = x`")
    kernel.execute("x = 2")
    kernel.execute("%fork --name b see `py: seen = x`\nx = 3")  # assigned after the fork line
    kernel.run_approving("%tasks --wait", timeout=60)
    kernel.execute("%tasks --pull a seen\nfrom_a = seen")
    kernel.execute("%tasks --pull b seen\nfrom_b = seen")
    assert kernel.value("(from_a, from_b, x)") == (1, 2, 3)


def test_what_c_code_in_a_worker_writes_does_not_reach_a_cell(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("%fork --name c write `py: import os; os.write(1, b'FROM-FD-ONE\\n')`")
    kernel.execute("import asyncio\nawait asyncio.sleep(2)")
    kernel.run_approving("%tasks --wait c", timeout=60)
    assert status(kernel, "c") == "completed"
    kernel.drain()
    streams = [m["content"]["text"] for m in kernel.iopub if m["msg_type"] == "stream"]
    assert streams and not any("FROM-FD-ONE" in text for text in streams)


def test_the_cards_stop_button_kills_a_computing_worker(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("%fork --name busy spin `py: import time; time.sleep(60)`")
    pid = worker_pid(kernel, "busy")
    task_id = kernel.value(f"{SESSION}.registry.get('busy').id")
    wait_until(kernel, f"{SESSION}.registry.get('busy').current_tool == 'Python'")
    [button] = kernel.widget_comms(description="Stop", tooltip=f"Stop worker {task_id}")
    kernel.click(button)
    wait_until(kernel, f"{SESSION}.registry.get('busy').status == 'killed'", 60)
    wait_until(kernel, f"not __import__('os').path.exists('/proc/{pid}')", 60)
