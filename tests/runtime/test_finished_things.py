"""Every finished thing comes back as a notification, after the person's own prompts: a
background Bash command that ends (or seems to wait for input) reports like an agent, and a
prompt that waits for its turn goes before the parent's automatic answer to notifications.
The model is the emulator's (scripted, else the offline model, which runs `py:` snippets)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain, last_user_text
from forkagent_jupyter.runtime.tools.services import ToolServices
from forkagent_jupyter.runtime.tools.shells import ShellRegistry, looks_like_prompt

from .helpers import until

pytestmark = pytest.mark.anyio

WAIT_FOR = "import os, time\nwhile not os.path.exists(FLAG): time.sleep(0.02)"


def _background(command: str, description: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"command": command, "run_in_background": True}
    if description is not None:
        call["description"] = description
    return {"type": "tool_use", "name": "Bash", "input": call}


def _brain(needle: str, *blocks: dict[str, Any]) -> ScriptedBrain:
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains(needle, Reply(blocks), times=1)
    return brain


def _shell_id(result: str) -> str:
    return result.split("as shell ", 1)[1].split(":", 1)[0]


async def test_a_prompt_that_waits_goes_before_the_automatic_answer(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    """A prompt sent while the parent is busy and a worker's report waits goes first; the
    automatic answer to the report follows it (the report is not read with the prompt)."""
    started, go = threading.Event(), threading.Event()
    flag = tmp_path / "worker-may-end"
    session = make_session(namespace={"started": started, "go": go, "WAIT_FOR": WAIT_FOR})
    worker = await session.fork(f"count `py: FLAG = {str(flag)!r}; exec(WAIT_FOR) or 6 * 7`")
    first = asyncio.ensure_future(session.ask("FIRST `py: started.set() or go.wait(60)`"))
    await until(started.is_set)  # the parent's turn runs
    flag.write_text("")
    await session.wait(worker.id, timeout=60)  # its report waits for the parent
    await until(lambda: session.responder.job is not None)
    second = asyncio.ensure_future(session.ask("SECOND prompt"))
    await until(lambda: session.parent.lock.waiting("next") == 1)  # it waits for its turn
    go.set()
    await first
    turn = await second
    await session.idle()
    requests = [r.body for r in emulator.api_requests()]
    said = [last_user_text(b) for b in requests]
    prompt_at = next(i for i, text in enumerate(said) if "SECOND" in text)
    answer_at = next(i for i, text in enumerate(said) if "<task-notification>" in text)
    assert prompt_at < answer_at, [text[:60] for text in said]
    assert "<task-notification>" not in last_user_text(requests[prompt_at])
    assert turn.ok
    [auto] = session.responder.auto_turns  # answered by itself, after the prompt
    assert auto.task_ids == [worker.id]


async def test_a_background_command_that_ends_reports_its_status_exit_code_and_output_file(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    emulator.brain = _brain(
        "START",
        _background("printf 'rows: 42\\n'", "count rows"),
        _background("echo oops; exit 3"),
    )
    session = make_session(auto_respond=False)
    turn = await session.ask("START both")
    counted, failing = (_shell_id(c.result) for c in turn.tool_calls)
    assert all("You will be notified when it ends" in c.result for c in turn.tool_calls)
    await until(lambda: len(session.queue.pending("main")) == 2)
    notes = {c.task_id: c for c in session.queue.pending("main")}
    done, failed = notes[counted], notes[failing]
    assert done.priority == failed.priority == "later"
    assert f"<task-id>{counted}</task-id>" in done.text
    assert f"<tool-use-id>{turn.tool_calls[0].id}</tool-use-id>" in done.text
    assert "<status>completed</status>" in done.text
    assert '<summary>Background command "count rows" completed (exit code 0)</summary>' in done.text
    assert "<status>failed</status>" in failed.text
    assert 'Background command "echo oops; exit 3" failed with exit code 3' in failed.text
    shown = done.text.split("<output-file>", 1)[1].split("</output-file>", 1)[0]
    assert shown == f".forkagent/sessions/{session.session_id}/tasks/{counted}.output"
    await session.store.aflush()
    assert (tmp_path / shown).read_text() == "rows: 42\n"  # the whole output, in its file
    assert done.snapshot is not None and done.snapshot.status == "completed"
    await session.ask("What came back?")  # read with the next prompt (auto_respond is off)
    assert "rows: 42" not in last_user_text(emulator.api_requests()[-1].body)
    assert f"<task-id>{failing}</task-id>" in last_user_text(emulator.api_requests()[-1].body)
    assert session.queue.pending("main") == []


class _StopAndRead:
    """Starts three background commands, then stops the first and reads the second with
    TaskOutput (their ids come from the tool results), then ends its turn."""

    def reply(self, request: Any) -> Reply:
        last = request["messages"][-1]["content"]
        said = json.dumps(last)
        ids = re.findall(r"as shell (b[0-9a-f]{16})", said)
        if "START" in said:
            return Reply(
                (
                    _background("sleep 60"),
                    _background("echo read-here"),
                    _background("echo reported"),
                )
            )
        if len(ids) == 3:
            stop = {"type": "tool_use", "name": "TaskStop", "input": {"shell_id": ids[0]}}
            read = {"type": "tool_use", "name": "TaskOutput", "input": {"task_id": ids[1]}}
            return Reply((stop, read))
        return Reply.text("done")


async def test_a_background_command_stopped_or_read_sends_no_notification(
    emulator: Any, make_session: Any
) -> None:
    emulator.brain = _StopAndRead()
    session = make_session(auto_respond=False)
    turn = await session.ask("START them")
    started, stopped, output = turn.tool_calls[0], *turn.tool_calls[3:]
    sleeper, reader, reported = (_shell_id(c.result) for c in turn.tool_calls[:3])
    assert started.name == "Bash" and "Stopped background shell" in stopped.result
    assert "<status>completed</status>" in output.result and "read-here" in output.result
    await until(lambda: bool(session.queue.pending("main")))
    [note] = session.queue.pending("main")  # only the one nobody stopped or read
    assert note.task_id == reported and "<status>completed</status>" in note.text
    assert session.shells.get(sleeper).status == "killed"
    assert session.shells.get(reader).notified


async def test_a_background_command_that_waits_for_an_answer_says_so(
    emulator: Any, make_session: Any
) -> None:
    question = "printf 'Overwrite existing file? (y/n) '; exec sleep 60"
    emulator.brain = _brain("START", _background(question, "overwrite"))
    shells = ShellRegistry(stall_after=0.3, stall_check=0.05)
    session = make_session(auto_respond=False, services=ToolServices(shells=shells))
    turn = await session.ask("START it")
    shell_id = _shell_id(turn.tool_calls[0].result)
    await until(lambda: bool(session.queue.pending("main")))
    [note] = session.queue.pending("main")
    assert note.priority == "next" and note.task_id == shell_id
    assert "<status>" not in note.text  # it still runs: no end is reported
    assert 'Background command "overwrite" seems to wait for input' in note.text
    assert "Its last output:\nOverwrite existing file? (y/n)" in note.text
    assert "TaskStop" in note.text and shells.get(shell_id).status == "running"


def test_only_a_question_on_the_last_line_looks_like_a_prompt() -> None:
    assert looks_like_prompt("Removing 3 files.\nAre you sure you want to continue? ")
    assert looks_like_prompt("Enter passphrase for key '/root/.ssh/id_ed25519': ")
    assert not looks_like_prompt("Continue? (y/n) y\nbuilding 40%")  # answered, working
    assert not looks_like_prompt("compiling module 3 of 9")
