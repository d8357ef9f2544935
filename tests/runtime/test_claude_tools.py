"""The tools Claude Code's agent files name: MultiEdit, LS, NotebookEdit, TodoWrite, and
`Task` as the old name of Agent - through the emulator (strict), with the permission gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from forkagent_jupyter.emulator.brains import Reply
from forkagent_jupyter.kernel.cards.hub import card_text
from forkagent_jupyter.runtime.permissions.gate import DenyAll
from forkagent_jupyter.runtime.tools import builtin_tools, claude_code_tools
from forkagent_jupyter.runtime.workers.agent_tools import agent_tools

pytestmark = pytest.mark.anyio


def calls(*uses: tuple[str, dict[str, Any]]) -> Reply:
    return Reply(tuple({"type": "tool_use", "name": n, "input": i} for n, i in uses))


def with_claude_tools(make_session: Any, **kw: Any) -> Any:
    """A session whose parent has Claude Code's tools too (by default only named agents
    whose files name them get them)."""
    return make_session(tools=[*builtin_tools(), *agent_tools(), *claude_code_tools()], **kw)


async def run_calls(emulator: Any, session: Any, *uses: tuple[str, dict[str, Any]]) -> Any:
    emulator.script(calls(*uses), Reply.text("done"))
    return (await session.ask("go")).tool_calls


async def test_multi_edit_applies_all_or_nothing(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    target = tmp_path / "conf.py"
    target.write_text("alpha = 1\nbeta = 2\ngamma = 3\n")
    session = with_claude_tools(make_session)
    ok, bad = await run_calls(
        emulator,
        session,
        (
            "MultiEdit",
            {
                "file_path": "conf.py",
                "edits": [
                    {"old_string": "alpha = 1", "new_string": "alpha = 10"},
                    {"old_string": "alpha = 10\nbeta", "new_string": "alpha = 10\nBETA"},
                ],
            },
        ),
        (
            "MultiEdit",
            {
                "file_path": "conf.py",
                "edits": [
                    {"old_string": "gamma = 3", "new_string": "gamma = 30"},
                    {"old_string": "no such text", "new_string": "x"},
                ],
            },
        ),
    )
    assert not ok.is_error and ok.result.startswith("Edited conf.py (2 edits).")
    assert bad.is_error and bad.result.startswith("Edit 2 of 2: old_string was not found")
    assert "Nothing was changed." in bad.result
    assert target.read_text() == "alpha = 10\nBETA = 2\ngamma = 3\n"  # the second left it


async def test_writing_tools_need_permission_and_edit_rules_cover_them(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    (tmp_path / "src").mkdir()
    code = tmp_path / "src" / "a.py"
    code.write_text("x = 1\n")
    book = tmp_path / "nb.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), book)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("x = 1\n")
    # nobody to ask: a writing tool is refused unless a rule allows it
    session = with_claude_tools(make_session, permission_policy=DenyAll())
    edit = {"file_path": "src/a.py", "edits": [{"old_string": "x = 1", "new_string": "x = 2"}]}
    cell = {"notebook_path": "nb.ipynb", "cell_id": "0", "new_source": "2"}
    multi, notebook = await run_calls(
        emulator, session, ("MultiEdit", edit), ("NotebookEdit", cell)
    )
    assert multi.is_error and notebook.is_error
    assert code.read_text() == "x = 1\n" and "2" not in book.read_text().split('"source"')[1][:8]
    # an Edit deny rule covers MultiEdit and NotebookEdit; acceptEdits allows the rest
    session = with_claude_tools(
        make_session, permission_mode="acceptEdits", deny=["Edit(src/**)", "Write(*.ipynb)"]
    )
    multi, notebook, far = await run_calls(
        emulator,
        session,
        ("MultiEdit", edit),
        ("NotebookEdit", cell),
        ("MultiEdit", {**edit, "file_path": str(outside)}),
    )
    assert multi.is_error and "Edit(src/**)" in multi.result
    assert notebook.is_error and "Write(*.ipynb)" in notebook.result
    assert far.is_error and "outside the work directory" in far.result
    assert code.read_text() == "x = 1\n" and outside.read_text() == "x = 1\n"
    session = with_claude_tools(make_session, permission_mode="acceptEdits")
    [multi] = await run_calls(emulator, session, ("MultiEdit", edit))
    assert not multi.is_error and code.read_text() == "x = 2\n"


async def test_notebook_edit_replace_insert_delete(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_code_cell("print(1)")]
    )
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="1\n")]
    nb.cells[1].execution_count = 1
    path = tmp_path / "analysis.ipynb"
    nbformat.write(nb, path)
    code_id = nb.cells[1].id
    session = with_claude_tools(make_session)
    replaced, inserted, deleted, missing = await run_calls(
        emulator,
        session,
        ("NotebookEdit", {"notebook_path": "analysis.ipynb", "cell_id": code_id,
                          "new_source": "print(2)"}),
        ("NotebookEdit", {"notebook_path": "analysis.ipynb", "cell_id": code_id,
                          "new_source": "## Notes", "cell_type": "markdown",
                          "edit_mode": "insert"}),
        ("NotebookEdit", {"notebook_path": "analysis.ipynb", "cell_id": "cell-0",
                          "edit_mode": "delete"}),
        ("NotebookEdit", {"notebook_path": "analysis.ipynb", "cell_id": "nope",
                          "new_source": "x"}),
    )  # fmt: skip
    assert not replaced.is_error and f"Replaced the source of cell {code_id}" in replaced.result
    assert not inserted.is_error and "Inserted a markdown cell at position 2" in inserted.result
    assert not deleted.is_error and "Deleted cell cell-0" in deleted.result
    assert missing.is_error and "No cell 'nope'" in missing.result
    after = nbformat.read(path, as_version=4)
    nbformat.validate(after)  # still a valid notebook
    assert [c.cell_type for c in after.cells] == ["code", "markdown"]
    assert after.cells[0].source == "print(2)" and after.cells[0].id == code_id
    assert after.cells[0].outputs == [] and after.cells[0].execution_count is None
    assert after.cells[1].source == "## Notes"


async def test_ls_lists_a_folder_and_hides_what_read_rules_deny(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("a\n")
    (tmp_path / "data" / "secret.key").write_text("k\n")
    (tmp_path / "data" / "cache.pyc").write_text("")
    (tmp_path / "data" / "raw").mkdir()
    (tmp_path / "data" / ".git").mkdir()
    session = with_claude_tools(make_session, deny=["Read(**/*.key)"], permission_policy=DenyAll())
    listing, outside = await run_calls(
        emulator,
        session,
        ("LS", {"path": "data", "ignore": ["*.pyc"]}),
        ("LS", {"path": str(tmp_path.parent)}),
    )
    assert not listing.is_error  # reading: no approval needed
    assert listing.result == "data/\n  a.csv\n  raw/"
    assert outside.is_error and "outside the work directory" in outside.result


async def test_todo_write_shows_on_the_card(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "planner.md").write_text(
        "---\nname: planner\ndescription: plans\ntools: TodoWrite, Read, BashOutput, "
        "mcp__jira__create\n---\nPlan.\n"
    )
    session = make_session(auto_respond=False)
    todos = [
        {"content": "Read the data", "status": "completed", "activeForm": "Reading the data"},
        {"content": "Fit the model", "status": "in_progress", "activeForm": "Fitting the model"},
        {"content": "Write the report", "status": "pending", "activeForm": "Writing the report"},
    ]
    emulator.script(calls(("TodoWrite", {"todos": todos})), Reply.text("planned"))
    planner = await session.workers.definition("planner")
    run = session.workers.named(session.main, planner, "Plan it.", description="plan")
    task = session.workers.start(run)
    await session.wait(task.id, timeout=30)
    assert task.status == "completed"
    assert [t.status for t in task.todos] == ["completed", "in_progress", "pending"]
    text = card_text(task)
    assert "[x] Read the data\n    [>] Fitting the model\n    [ ] Write the report" in text
    # the tools its file names that it does not get are said on its card
    assert task.notes == ["not available here: BashOutput, mcp__jira__create"]
    assert "(not available here: BashOutput, mcp__jira__create)" in text
    body = emulator.api_requests()[0].body
    assert [t["name"] for t in body["tools"]] == ["Read", "TodoWrite"]
    # the parent does not carry Claude Code's extra tools: they are for the agents naming them
    extra = {"MultiEdit", "NotebookEdit", "LS", "TodoWrite"}
    assert not extra & set(session.contexts.tools.names())


async def test_task_is_the_old_name_of_agent(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "boss.md").write_text("---\nname: boss\ndescription: delegates\ntools: Task\n---\n")
    session = make_session(deny=["Task(general-purpose)"])
    boss = await session.workers.definition("boss")
    assert boss.tools == ["Agent"]
    [call] = await run_calls(
        emulator,
        session,
        ("Agent", {"description": "d", "prompt": "p", "subagent_type": "general-purpose"}),
    )
    assert call.is_error and "Task(general-purpose)" in call.result
    assert json.dumps(session.tasks) == "[]"
