"""Terminals. Terminal IPython (no kernel, no loop between cells): the extension refuses in
one line. `jupyter console` (a kernel, no widgets, no extension): approvals are asked on the
stdin channel in the running cell, and only "y"/"yes" or "a"/"always" approve."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain
from forkagent_jupyter.kernel.approvals.terminal import TerminalAsk, terminal_answer
from forkagent_jupyter.kernel.cards.hub import ApprovalPrompt
from forkagent_jupyter.runtime.permissions.gate import PermissionRequest

from .conftest import Execution, Kernel

ROOT = Path(__file__).resolve().parents[2]


def test_terminal_ipython_gets_one_line_and_no_traceback(tmp_path: Path) -> None:
    code = (
        "ip = get_ipython()\n"
        "ip.run_line_magic('load_ext', 'forkagent_jupyter')\n"
        "print('magics:', 'fork' in ip.magics_manager.magics['line'])\n"
    )
    env = {**os.environ, "FORKAGENT_BACKEND": "offline", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "IPython", "--no-banner", "--colors=NoColor", "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "forkagent_jupyter: not loaded - it needs a Jupyter kernel" in out
    assert out.count("forkagent_jupyter: not loaded") == 1
    assert "Traceback" not in out and "magics: False" in out


# -- approvals asked on the stdin channel (jupyter console, qtconsole) -------------------------


def _script(emulator: Any) -> None:
    """The model answers "write N" with a Write of `wN.txt`, and "again N" with a second
    Write of the same file (other content)."""
    brain = ScriptedBrain(when_empty=OfflineBrain())
    for n in range(10):
        for word, content in (("write", "written"), ("again", "again")):
            call = {"file_path": f"w{n}.txt", "content": content}
            reply = Reply(({"type": "tool_use", "name": "Write", "input": call},))
            brain.when_last_user_contains(f"{word} {n}", reply, times=1)
    emulator.brain = brain


@dataclass
class ConsoleRun:
    """One cell run as `jupyter console` runs it, and the input_requests it saw."""

    msg_id: str
    execution: Execution
    asked: list[dict[str, Any]]

    def own(self) -> list[str]:
        """The prompts of the input_requests that belong to this cell."""
        return [
            r["content"]["prompt"]
            for r in self.asked
            if r["parent_header"].get("msg_id") == self.msg_id
        ]


def console_cell(
    kernel: Kernel,
    code: str,
    answers: tuple[str, ...] = (),
    allow_stdin: bool = True,
    metadata: dict[str, Any] | None = None,
    timeout: float = 90,
) -> ConsoleRun:
    """Run a cell and read the stdin channel meanwhile as jupyter console does: each
    input_request of this cell gets the next of `answers` (none left: it is left unanswered);
    one of another cell is dropped; nothing is answered after the cell's reply came."""
    client = kernel.client
    content = {
        "code": code,
        "silent": False,
        "store_history": True,
        "user_expressions": {},
        "allow_stdin": allow_stdin,
        "stop_on_error": True,
    }
    msg = client.session.msg("execute_request", content, metadata=metadata or {})
    client.shell_channel.send(msg)
    msg_id = msg["header"]["msg_id"]
    left, asked = list(answers), []
    reply = None
    deadline = time.monotonic() + timeout
    while reply is None:
        assert time.monotonic() < deadline, f"the cell did not end: {code!r}"
        try:
            request = client.get_stdin_msg(timeout=0.05)
        except queue.Empty:
            request = None
        if request is not None:
            asked.append(request)
            if request["parent_header"].get("msg_id") == msg_id and left:
                client.input(left.pop(0))
        try:
            shell = client.get_shell_msg(timeout=0.05)
        except queue.Empty:
            continue
        if shell["parent_header"].get("msg_id") == msg_id:
            reply = shell
    start = len(kernel.iopub)
    kernel.drain(until_idle_of=msg_id, timeout=timeout)
    mine = [m for m in kernel.iopub[start:] if m["parent_header"].get("msg_id") == msg_id]
    while True:  # what else came on stdin (a console reads it at its next cell and drops it)
        try:
            asked.append(client.get_stdin_msg(timeout=0.2))
        except queue.Empty:
            break
    return ConsoleRun(msg_id, Execution(reply, mine), asked)


def _history(kernel: Kernel, name: str) -> str:
    return str(
        kernel.value(
            f"str(__forkagent__.session.workers.runs["
            f"__forkagent__.session.registry.get({name!r}).id].history)"
        )
    )


def _until_asked(kernel: Kernel, timeout: float = 60) -> ConsoleRun:
    """Run short cells (none answering) until one is asked a question."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = console_cell(kernel, "x = 1")
        if run.own():
            return run
        time.sleep(0.2)
    raise TimeoutError("no approval was asked on stdin")


@pytest.mark.kernel
def test_console_answers_approve_only_yes_or_always(
    kernel: Kernel, emulator: Any, tmp_path: Path
) -> None:
    _script(emulator)
    kernel.execute("%config ForkAgent.approval_timeout = 120")
    # the parent's own call, in its %%agent cell
    turn = console_cell(kernel, "%%agent\nwrite 9", answers=("yes",))
    [question] = turn.own()
    assert question.startswith("forkagent: the parent asks to run Write ")
    assert "w9.txt" in question and question.endswith("[n]o: ")
    assert "(answer before this cell ends, or it is asked again in the next;" in question
    assert (tmp_path / "w9.txt").read_text() == "written"
    # workers: the question comes in the cell that runs while (or after) they ask
    answers = {"w0": "y", "w1": "n", "w2": "reject", "w3": "", "w4": "Y E S", "w5": "\x04"}
    for n, (name, answer) in enumerate(answers.items()):
        console_cell(kernel, f"%fork --name {name} write {n}")
        run = console_cell(kernel, f"%tasks --wait {name}", answers=(answer,))
        [question] = run.own()
        assert question.startswith(f"forkagent: worker {name} asks to run Write "), question
        assert f"w{n}.txt" in question
        assert run.execution.status == "ok", run.execution.texts()
    assert (tmp_path / "w0.txt").read_text() == "written"
    for n, name in enumerate(answers):
        if name == "w0":
            continue
        assert not (tmp_path / f"w{n}.txt").exists(), name
        assert "The user denied this call: answered " in _history(kernel, name)
    assert "answered 'reject' in the terminal" in _history(kernel, "w2")
    assert "answered 'Y E S' in the terminal" in _history(kernel, "w4")
    assert kernel.value("__forkagent__.ui.pending") == {}


@pytest.mark.kernel
def test_a_question_whose_cell_ended_is_asked_again_in_the_next_cell(
    kernel: Kernel, emulator: Any, tmp_path: Path
) -> None:
    _script(emulator)
    kernel.execute("%config ForkAgent.approval_timeout = 120")
    fork = console_cell(kernel, "%fork --name w0 write 0")
    shown = [
        m["content"]["data"].get("text/plain", "")
        for m in fork.execution.messages
        if m["msg_type"] == "display_data"
    ]
    assert shown and not [t for t in shown if t.endswith(" object>")], shown  # no bare reprs
    first = _until_asked(kernel)  # a short cell: asked, it ends before any answer
    [question] = first.own()
    assert "worker w0 asks to run Write" in question and "w0.txt" in question
    assert kernel.value("[p.request.tool_name for p in __forkagent__.ui.pending.values()]") == [
        "Write"
    ]
    assert not (tmp_path / "w0.txt").exists()
    # %tasks lists it, and its cell is asked again (it ends before an answer too)
    listed = console_cell(kernel, "%tasks")
    assert listed.own() == [question]
    plain = [
        m["content"]["data"]["text/plain"]
        for m in listed.execution.messages
        if m["msg_type"] == "display_data" and "text/plain" in m["content"]["data"]
    ]
    assert "approval waiting: worker w0 asks to run Write w0.txt (1 lines)" in plain[-1], plain
    assert not (tmp_path / "w0.txt").exists()
    # the next cell is asked the same, and its answer counts
    again = console_cell(kernel, "%tasks --wait w0", answers=("y",))
    assert again.own() == [question]
    assert (tmp_path / "w0.txt").read_text() == "written"
    assert kernel.value("__forkagent__.session.registry.get('w0').status") == "completed"


@pytest.mark.kernel
def test_always_remembers_exactly_that_call(kernel: Kernel, emulator: Any, tmp_path: Path) -> None:
    _script(emulator)
    kernel.execute("%config ForkAgent.approval_timeout = 120")
    console_cell(kernel, "%fork --name w0 write 0")
    run = console_cell(kernel, "%tasks --wait w0", answers=("a",))
    [question] = run.own()
    assert (tmp_path / "w0.txt").read_text() == "written"
    # the same call again (another worker, same file): not asked
    console_cell(kernel, "%fork --name w0b again 0")
    again = console_cell(kernel, "%tasks --wait w0b")
    assert again.own() == [] and (tmp_path / "w0.txt").read_text() == "again"
    # another file: asked
    console_cell(kernel, "%fork --name w1 write 1")
    other = console_cell(kernel, "%tasks --wait w1", answers=("n",))
    assert len(other.own()) == 1 and "w1.txt" in other.own()[0]
    assert not (tmp_path / "w1.txt").exists()
    log = kernel.value(
        "[(e['decision'], e['by'], e['rule']) for e in __forkagent__.session.gate.log "
        "if e['tool'] == 'Write']"
    )
    [(_, _, rule)] = [entry for entry in log if entry[:2] == ("allow", "policy")]
    assert rule == "Write(/w0.txt)" and f"[a]lways ({rule}, this session)" in question
    assert log == [("allow", "policy", rule), ("allow", "rule", rule), ("deny", "policy", None)]


@pytest.mark.kernel
def test_nothing_is_asked_on_stdin_without_a_console(
    kernel: Kernel, emulator: Any, tmp_path: Path
) -> None:
    _script(emulator)
    kernel.execute("%config ForkAgent.approval_timeout = 120")
    kernel.execute("%config ForkAgent.headless_approval_timeout = 120")
    # nbclient, papermill (allow_stdin false) and a notebook frontend (it names the cell)
    console_cell(kernel, "%fork --name w0 write 0", allow_stdin=False)
    quiet = []
    deadline = time.monotonic() + 60
    while True:
        probe = console_cell(kernel, "print(len(__forkagent__.ui.pending))", allow_stdin=False)
        quiet.append(probe)
        if probe.execution.texts().strip().splitlines()[-1] == "1":
            break
        assert time.monotonic() < deadline, "no approval was requested"
        time.sleep(0.2)
    for _ in range(3):
        quiet.append(console_cell(kernel, "x = 1", allow_stdin=False))
        quiet.append(console_cell(kernel, "x = 2", metadata={"cellId": "c1"}))
    quiet.append(console_cell(kernel, "%tasks", allow_stdin=False))
    assert [run.asked for run in quiet] == [[]] * len(quiet)
    assert not (tmp_path / "w0.txt").exists()
    # the same kernel asks a console (so the checks above could fail)
    run = console_cell(kernel, "%tasks --wait w0", answers=("y",))
    assert len(run.own()) == 1 and (tmp_path / "w0.txt").exists()
    # with the JupyterLab extension connected, it answers: a console cell is not asked
    kernel.open_comm("ext")
    console_cell(kernel, "%fork --name w1 write 1")
    [ask] = kernel.wait_comm("ext", "approval", until=lambda a: len(a) == 1, timeout=60)
    with_ext = console_cell(kernel, "x = 3")
    assert with_ext.asked == []
    kernel.comm_msg(
        "ext", {"type": "approve", "request_id": ask["request_id"], "decision": "allow"}
    )
    assert console_cell(kernel, "%tasks --wait w1").asked == []
    assert (tmp_path / "w1.txt").read_text() == "written"


@pytest.mark.kernel
def test_approval_timeout_still_applies_in_a_console(
    kernel: Kernel, emulator: Any, tmp_path: Path
) -> None:
    _script(emulator)
    kernel.execute("%config ForkAgent.approval_timeout = 3")
    console_cell(kernel, "%fork --name w0 write 0")
    run = console_cell(kernel, "%tasks --wait w0")  # asked, never answered
    assert len(run.own()) == 1
    assert "within 3 seconds (ForkAgent.approval_timeout)" in _history(kernel, "w0")
    assert not (tmp_path / "w0.txt").exists()
    assert console_cell(kernel, "x = 1").asked == []  # decided: not asked again


@pytest.mark.parametrize(
    ("typed", "decision"),
    [
        ("y", "allow"),
        ("Yes", "allow"),
        (" y\n", "allow"),
        ("a", "always"),
        ("ALWAYS", "always"),
        ("n", "deny"),
        ("no", "deny"),
        ("", "deny"),
        ("reject", "deny"),
        ("Y E S", "deny"),
        ("yy", "deny"),
        ("ya", "deny"),
        ("\x04", "deny"),
        ("allow", "deny"),
        (None, "deny"),
        (1, "deny"),
        (True, "deny"),
        (["y"], "deny"),
        ({"value": "y"}, "deny"),
    ],
)
def test_a_typed_answer_approves_only_when_it_says_yes_or_always(
    typed: object, decision: str
) -> None:
    assert terminal_answer(typed, has_rule=True) == decision


def test_always_without_a_rule_denies() -> None:
    """As the card's "Allow for session" button is disabled when no rule names the call."""
    assert terminal_answer("a", has_rule=False) == "deny"
    assert terminal_answer("y", has_rule=False) == "allow"


@pytest.mark.anyio
async def test_the_question_shows_what_the_model_wrote_escaped_and_clipped() -> None:
    """A preview written by the model cannot redraw the terminal (escape sequences, carriage
    returns, bidirectional overrides are shown escaped) nor flood it."""
    evil = "ok\x1b[2K\r\x1b[1Aharmless\u202eabc\x07"
    content = "\n".join([evil, *(f"row {i}" for i in range(100)), "x" * 1000])
    request = PermissionRequest(
        tool_name="Write",
        input={"file_path": "a\x1b[8m.txt", "content": content},
        agent_id="a",
        task_id="t1",
        summary="Write a\x1b[8m.txt (102 lines)",
        preview=content,
        suggested_rule="Write(/a\x1b[8m.txt)",
    )
    ask = TerminalAsk(kernel=None, connected=lambda: False)
    question = ask.question(ApprovalPrompt(request))
    assert not any(c in question for c in "\x1b\r\u202e\x07")
    assert "  ok\\x1b[2K\\r\\x1b[1Aharmless\\u202eabc\\x07\n" in question
    assert "asks to run Write a\\x1b[8m.txt (102 lines)\n" in question
    assert "[a]lways (Write(/a\\x1b[8m.txt), this session)" in question
    assert "  row 38\n" in question and "row 39" not in question
    assert "... (62 more lines)\n" in question
    assert question.startswith("forkagent: worker t1 asks to run ")
    assert question.endswith(
        "Allow Write? [y]es / [a]lways (Write(/a\\x1b[8m.txt), this session) / [n]o: "
    )


@pytest.mark.anyio
async def test_a_long_line_is_clipped_and_no_rule_offers_no_always() -> None:
    request = PermissionRequest(
        tool_name="Bash",
        input={"command": "echo " + "y" * 1000},
        agent_id="a",
        task_id=None,
        summary="Bash: echo yyy…",
        preview="echo " + "y" * 1000,
    )
    question = TerminalAsk(kernel=None, connected=lambda: False).question(ApprovalPrompt(request))
    assert f"  echo {'y' * 295}... (705 more characters)\n" in question
    assert question.startswith("forkagent: the parent asks to run Bash: echo yyy…\n")
    assert question.endswith("Allow Bash? [y]es / [n]o: ") and "[a]lways" not in question


@pytest.mark.anyio
async def test_a_call_asked_in_every_mode_says_why_on_one_line() -> None:
    request = PermissionRequest(
        tool_name="Write",
        input={"file_path": ".bashrc\x1b[8m", "content": "x"},
        agent_id="a",
        task_id=None,
        summary="Write .bashrc (1 lines)",
        preview="+x",
        reason=".bashrc\x1b[8m runs later without being asked (a shell runs it when it starts)",
    )
    question = TerminalAsk(kernel=None, connected=lambda: False).question(ApprovalPrompt(request))
    assert question.startswith(
        "forkagent: the parent asks to run Write .bashrc (1 lines)\n  (.bashrc\\x1b[8m runs "
        "later without being asked (a shell runs it when it starts))\n  +x\n"
    )


@pytest.mark.anyio
async def test_a_reply_to_a_question_decided_elsewhere_does_not_answer_the_next() -> None:
    """A console sends its reply with no parent, and keeps showing a question that was decided
    elsewhere: the "y" typed there must not approve the next question, which it never showed.
    A real Session over a real zmq ROUTER/DEALER pair stands for the kernel's stdin channel."""
    import asyncio
    from types import SimpleNamespace

    import zmq
    from jupyter_client.session import Session

    context = zmq.Context()
    router, dealer = context.socket(zmq.ROUTER), context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.IDENTITY, b"console")
    router.bind("inproc://stdin-test")
    dealer.connect("inproc://stdin-test")
    session = Session(key=b"k")
    parent = session.msg("execute_request", {"code": "%tasks --wait"})
    kernel = SimpleNamespace(
        _allow_stdin=True,
        stdin_socket=router,
        session=session,
        get_parent=lambda _channel: parent,
        _parent_ident={"shell": [b"console"]},
    )

    def prompt(tool: str) -> ApprovalPrompt:
        request = PermissionRequest(
            tool_name=tool, input={}, agent_id="a", task_id="t1", summary=tool, preview=""
        )
        return ApprovalPrompt(request)

    def asked(timeout: float = 30) -> str:
        assert dealer.poll(int(timeout * 1000)), "nothing was asked"
        _idents, msg = session.recv(dealer)
        assert msg is not None and msg["msg_type"] == "input_request"
        return str(msg["content"]["prompt"])

    try:
        ask = TerminalAsk(kernel, connected=lambda: False)
        ask.cell_started()
        first, second = prompt("Write"), prompt("Bash")
        ask.add(first)
        ask.add(second)
        assert "Allow Write?" in asked()
        first.answer("deny", "answered on the card")  # decided elsewhere
        await asyncio.sleep(0.3)
        session.send(dealer, "input_reply", {"value": "y"})  # typed at the Write prompt
        shown = await asyncio.to_thread(asked)
        assert "Allow Bash?" in shown
        assert not second.future.done()  # the "y" answered nothing
        session.send(dealer, "input_reply", {"value": "n"})
        decision = await asyncio.wait_for(second.future, 30)
        assert type(decision).__name__ == "Deny"
    finally:
        dealer.close(0)
        router.close(0)
        context.term()
