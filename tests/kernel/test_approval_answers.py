"""Answers from a frontend over the `forkagent` comm fail closed: only "allow" or "always"
approves; anything else (a wrong word, a wrong type, a message that is not one) is dropped with
one line in the kernel's log, and nothing is printed into a cell."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain
from forkagent_jupyter.kernel.cards.hub import ApprovalPrompt
from forkagent_jupyter.runtime.permissions.gate import Allow, Deny, PermissionRequest

from .conftest import Kernel

# Answers a buggy or hostile frontend sent that each ran a worker's Write before
JUNK_DECISIONS: list[Any] = [
    "reject",
    "Deny",
    "DENY",
    None,
    "",
    0,
    False,
    ["deny"],
    " deny",
    "Allow",
    "allow ",
    True,
    1,
    {"decision": "allow"},
]
# Well-formed answers with a key the protocol does not name (each approved the call before:
# the extra key was ignored and the "allow" read)
EXTRA_KEYS: list[dict[str, Any]] = [
    {"always_for": "*"},
    {"rule": "Write"},
    {"reason": None, "remember": True},
]
# Messages that are not answers at all (each printed a traceback before)
JUNK_MESSAGES: list[Any] = [
    ["approve"],
    "approve",
    3,
    None,
    {},
    {"type": "approve", "request_id": "abc"},
    {"type": "approve", "request_id": None, "decision": "allow"},
    {"type": "approve", "request_id": 3.7, "decision": "allow"},
    {"type": "stop", "task_id": None},
    {"type": ["approve"], "request_id": "x", "decision": "allow"},
]

KEEP_LOG = """
import logging
class _KeepLog(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []
    def emit(self, record):
        if record.getMessage().startswith("forkagent"):
            self.lines.append(record.getMessage())
_kept = _KeepLog()
get_ipython().kernel.log.addHandler(_kept)
"""


def _writer(emulator: Any) -> None:
    """The model answers "write N" with a Write of `wN.txt` (what a worker asks to approve)."""
    brain = ScriptedBrain(when_empty=OfflineBrain())
    for n in range(3):
        call = {"file_path": f"w{n}.txt", "content": "written"}
        brain.when_last_user_contains(
            f"write {n}", Reply(({"type": "tool_use", "name": "Write", "input": call},)), times=1
        )
    emulator.brain = brain


def _log_lines(kernel: Kernel, at_least: int, timeout: float = 30) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        lines: list[str] = kernel.value("_kept.lines")
        if len(lines) >= at_least or time.monotonic() > deadline:
            return lines
        time.sleep(0.1)


@pytest.mark.kernel
def test_only_allow_or_always_approves_and_junk_prints_nothing(
    kernel: Kernel, emulator: Any, tmp_path: Path
) -> None:
    _writer(emulator)
    kernel.execute("%config ForkAgent.approval_timeout = 120")
    kernel.execute(KEEP_LOG)
    kernel.open_comm("ext")
    kernel.execute("%fork --name w0 write 0")
    [ask] = kernel.wait_comm("ext", "approval", until=lambda a: len(a) == 1)
    request_id = ask["request_id"]
    # a cell is running (awaiting) while the junk arrives: nothing of it may land there
    busy = kernel.start("import asyncio\nawait asyncio.sleep(1.5)")
    time.sleep(0.3)
    for decision in JUNK_DECISIONS:
        kernel.comm_msg("ext", {"type": "approve", "request_id": request_id, "decision": decision})
    for extra in EXTRA_KEYS:
        answer = {"type": "approve", "request_id": request_id, "decision": "allow", **extra}
        kernel.comm_msg("ext", answer)
    kernel.comm_msg("ext", {"type": "stop", "task_id": "w0", "all": True})
    for junk in JUNK_MESSAGES:
        kernel.comm_msg("ext", junk)
    kernel.comm_msg("ext", {"type": "approve", "request_id": "0", "decision": "allow"})
    refused = len(JUNK_DECISIONS) + len(EXTRA_KEYS) + 1 + len(JUNK_MESSAGES)
    expected = refused + 1
    kernel.drain(until_idle_of=busy, timeout=60)
    lines = _log_lines(kernel, expected)
    assert len(lines) == expected, lines
    assert all("\n" not in line for line in lines)  # one line each, no traceback
    dropped = [line for line in lines if "dropped a malformed message" in line]
    assert len(dropped) == refused
    assert sum("Extra inputs are not permitted" in line for line in dropped) == len(EXTRA_KEYS) + 1
    assert "'0', which is not pending, was ignored" in lines[-1]
    assert not [
        m
        for m in kernel.iopub
        if m["msg_type"] in ("stream", "error") and m["parent_header"]["msg_type"] == "comm_msg"
    ]
    busy_out = [m for m in kernel.iopub if m["parent_header"].get("msg_id") == busy]
    assert not [m for m in busy_out if m["msg_type"] in ("stream", "error", "display_data")]
    # the call still waits: nothing of that approved it, nothing denied it
    assert kernel.value("list(__forkagent__.ui.pending)") == [request_id]
    assert set(kernel.comm_typed("ext")) >= {"welcome", "approval"}  # each exactly its type
    assert kernel.value("__forkagent__.session.registry.get('w0').status") == "running"
    assert not (tmp_path / "w0.txt").exists()

    # a well-formed denial denies; a later "allow" for the answered request does nothing
    kernel.comm_msg("ext", {"type": "approve", "request_id": request_id, "decision": "deny"})
    kernel.execute("%tasks --wait w0", timeout=60)
    kernel.comm_msg("ext", {"type": "approve", "request_id": request_id, "decision": "allow"})
    assert "which is not pending" in _log_lines(kernel, expected + 1)[-1]
    assert not (tmp_path / "w0.txt").exists()
    assert "The user denied this call" in kernel.value(
        "str(__forkagent__.session.workers.runs["
        "__forkagent__.session.registry.get('w0').id].history)"
    )

    # "allow" and "always" do approve (the same path, so the junk above could have)
    kernel.execute("%fork --name w1 write 1")
    kernel.execute("%fork --name w2 write 2")
    asks = kernel.wait_comm("ext", "approval", until=lambda a: len(a) == 3)[1:]
    for ask, decision in zip(asks, ("allow", "always"), strict=True):
        kernel.comm_msg(
            "ext", {"type": "approve", "request_id": ask["request_id"], "decision": decision}
        )
    kernel.execute("%tasks --wait w1 w2", timeout=60)
    assert (tmp_path / "w1.txt").read_text() == "written"
    assert (tmp_path / "w2.txt").read_text() == "written"


@pytest.mark.kernel
def test_a_malformed_hello_still_connects(kernel: Kernel) -> None:
    """A comm_open whose data is not a `Hello` is said in the log; the frontend still gets
    its welcome (the comm is the kernel's to keep), and nothing lands in a cell."""
    kernel.execute(KEEP_LOG)
    msg = kernel.client.session.msg(
        "comm_open",
        {"comm_id": "odd", "target_name": "forkagent", "data": ["not", "a", "hello"]},
        metadata={},
    )
    kernel.client.shell_channel.send(msg)
    kernel.wait_comm("odd", "welcome")
    [line] = _log_lines(kernel, 1)
    assert "hello is not valid" in line and "\n" not in line
    assert not [
        m
        for m in kernel.iopub
        if m["msg_type"] in ("stream", "error") and m["parent_header"]["msg_type"] == "comm_open"
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("choice", [*JUNK_DECISIONS, "deny"])
async def test_a_prompt_denies_every_answer_but_allow_and_always(choice: Any) -> None:
    request = PermissionRequest(
        tool_name="Write", input={}, agent_id="a", task_id="t", summary="Write: x"
    )
    prompt = ApprovalPrompt(request)
    prompt.answer(choice)
    decision = prompt.future.result()
    assert isinstance(decision, Deny) and decision.message.startswith("The user denied")
    prompt.answer("allow")  # answered: a second answer changes nothing
    assert prompt.future.result() is decision


@pytest.mark.anyio
@pytest.mark.parametrize(("choice", "remember"), [("allow", False), ("always", True)])
async def test_a_prompt_approves_allow_and_always(choice: str, remember: bool) -> None:
    request = PermissionRequest(
        tool_name="Write", input={}, agent_id="a", task_id="t", summary="Write: x"
    )
    prompt = ApprovalPrompt(request)
    prompt.answer(choice)
    assert prompt.future.result() == Allow(remember=remember)
