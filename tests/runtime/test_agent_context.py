"""An agent file's skills, memory, initialPrompt and disallowedTools, end to end: what the
agent's requests carry (seen by the emulator), and a memory the agent updates itself being
read by its next run."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain
from forkagent_jupyter.runtime.config.agent_definitions import (
    AgentFileError,
    load_agent_file,
    scan_agents,
)
from forkagent_jupyter.runtime.config.skills_and_memory import memory_folder
from tests.reported import tool_outputs

pytestmark = pytest.mark.anyio


def define(workdir: Path, name: str, front: str) -> None:
    folder = workdir / ".claude" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(f"---\nname: {name}\n{front}\n---\nYou check numbers.\n")


def call(agent_type: str, prompt: str) -> Reply:
    data = {"description": "ask", "prompt": prompt, "subagent_type": agent_type}
    return Reply(({"type": "tool_use", "name": "Agent", "input": data},))


def agent_requests(emulator: Any) -> list[dict[str, Any]]:
    return [
        r.body
        for r in emulator.api_requests()
        if "You check numbers." in json.dumps(r.body.get("system"))
    ]


async def test_skills_memory_initial_prompt_and_disallowed_tools_reach_the_agent(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    skill = tmp_path / ".claude" / "skills" / "sql-style"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: sql-style\ndescription: House SQL style\n---\nAlways alias tables as t1.\n"
    )
    memory = memory_folder("project", "checker", tmp_path, tmp_path / "home")
    assert memory == tmp_path / ".claude" / "agent-memory" / "checker"
    define(
        tmp_path,
        "checker",
        "description: Checks numbers\nskills: [sql-style]\nmemory: project\n"
        "initialPrompt: Read your memory first.\ndisallowedTools: Bash",
    )
    note = str(memory / "MEMORY.md")
    write = {"file_path": note, "content": "- totals live in sales.csv\n"}
    brain = ScriptedBrain(when_empty=OfflineBrain())
    brain.when_last_user_contains("FIRST", call("checker", "save note-this"), times=1)
    brain.when_last_user_contains(
        "note-this", Reply(({"type": "tool_use", "name": "Write", "input": write},)), times=1
    )
    brain.when_last_user_contains("SECOND", call("checker", "check `py: 2 * 21`"), times=1)
    emulator.brain = brain
    session = make_session(auto_respond=False, forking=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # these keys load without a warning
        first = await session.ask("FIRST")
    assert not first.tool_calls[0].is_error
    assert (memory / "MEMORY.md").read_text() == "- totals live in sales.csv\n"
    one = agent_requests(emulator)[0]
    system = one["system"][0]["text"]
    assert system.startswith("You check numbers.")
    assert '<skill name="sql-style">' in system and "Always alias tables as t1." in system
    assert f"persistent memory folder: {memory}" in system
    assert "(empty: nothing remembered yet)" in system
    opening = one["messages"][0]["content"][0]["text"]
    assert opening == "Read your memory first.\n\nsave note-this"
    names = [t["name"] for t in one["tools"]]
    assert "Bash" not in names and "Read" in names and "Write" in names
    # the next run of the agent reads what the last one remembered
    second = await session.ask("SECOND")
    assert not second.tool_calls[0].is_error
    assert tool_outputs(second.tool_calls[0].result) == ["42"], second.tool_calls[0].result
    later = agent_requests(emulator)[-1]["system"][0]["text"]
    assert "<memory>\n- totals live in sales.csv\n</memory>" in later


def test_memory_scopes_and_a_missing_skill(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert memory_folder("user", "a", tmp_path, home) == home / ".claude/agent-memory/a"
    assert memory_folder("local", "a", tmp_path, home) == tmp_path / ".claude/agent-memory-local/a"
    define(tmp_path, "lost", "description: x\nskills: nowhere\nmemory: user")
    (home / ".claude" / "agent-memory" / "lost").mkdir(parents=True)
    (home / ".claude" / "agent-memory" / "lost" / "MEMORY.md").write_text(
        "\n".join(f"line {i}" for i in range(500))
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scan = scan_agents(tmp_path, home)
    agent = scan.agents["lost"]
    assert agent.loaded_skills == ()
    assert any("skill 'nowhere' not found" in str(w.message) for w in caught)
    kept = agent.memory_text.splitlines()
    assert len(kept) == 200 and kept[-1] == "line 199"  # only the first 200 lines


def test_bad_values_name_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.md"
    bad.write_text("---\ndescription: x\nmemory: everywhere\n---\nbody\n")
    with pytest.raises(AgentFileError, match=r"field 'memory'"):
        load_agent_file(bad)
    bad.write_text("---\ndescription: x\nskills: ['../etc']\n---\nbody\n")
    with pytest.raises(AgentFileError, match=r"field 'skills'"):
        load_agent_file(bad)
    bad.write_text("---\ndescription: x\nmemory_text: sneaky\n---\nbody\n")
    with pytest.raises(AgentFileError, match=r"field 'memory_text': not allowed"):
        load_agent_file(bad)
