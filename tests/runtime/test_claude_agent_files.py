"""Claude Code agent files load here as they load there: bad files never disable the good
ones, YAML is read leniently, subfolders are searched, precedence and model aliases."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import Reply
from forkagent_jupyter.runtime.config.agent_definitions import (
    MODEL_ALIASES,
    AgentFileWarning,
    agent_listing,
    missing_tools,
    resolve_model,
    scan_agents,
)
from tests.reported import tool_outputs

from .agent_corpus import write_corpus

pytestmark = pytest.mark.anyio


def claude_agents(root: Path) -> Path:
    return root / ".claude" / "agents"


def test_each_bad_file_is_one_warning_and_the_rest_load(tmp_path: Path) -> None:
    corpus = write_corpus(claude_agents(tmp_path))
    with pytest.warns(AgentFileWarning) as caught:
        scan = scan_agents(tmp_path, tmp_path / "no-home")
    assert sorted(scan.agents) == sorted([*corpus.good, "general-purpose"])
    by_path = {e.path: e for e in scan.errors}
    assert set(by_path) == set(corpus.bad)  # one error per bad file, no more
    said = [str(w.message) for w in caught]
    for path, bad in corpus.bad.items():
        error = by_path[path]
        message = str(error)
        assert "\n" not in message and bad.problem in message, message
        assert error.line == bad.line and error.field == bad.field, message
        at = f"{path}:{bad.line}: " if bad.line else f"{path}: "
        field = f"field '{bad.field}': " if bad.field else ""
        assert message.startswith(at + field), message
        assert said.count(message) == 1  # said once
    assert not any("README" in s for s in said)  # a collection's README is documentation
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = scan_agents(tmp_path, tmp_path / "no-home")  # read again: nothing said again
    assert sorted(again.agents) == sorted(scan.agents)


def test_lenient_yaml_as_claude_code_reads_it(tmp_path: Path) -> None:
    write_corpus(claude_agents(tmp_path))
    with pytest.warns(AgentFileWarning):
        agents = scan_agents(tmp_path).agents
    reviewer = agents["code-reviewer"]
    assert reviewer.description.startswith("Use this agent after a change is written. Examples:")
    assert "<commentary>A change is done: review it.</commentary>" in reviewer.description
    assert reviewer.tools == [
        "Read",
        "Grep",
        "Glob",
        "MultiEdit",
        "WebSearch",
        "mcp__tracker__open_issue",
    ]
    everything = agents["everything"]
    assert everything.description == "**Generalist**: takes any task that needs every tool"
    assert everything.tools == ["*"]  # `tools: *`: every tool, the agent tools too
    assert agents["sql-pro"].description == (
        "Writes and tunes SQL; use for: slow queries, schema changes"
    )
    # `Task` is Claude Code's old name of Agent
    assert agents["with-extras"].tools == ["Agent", "Read", "Bash"]


def test_subfolders_are_read_and_the_path_is_not_the_identity(tmp_path: Path) -> None:
    folder = claude_agents(tmp_path)
    write_corpus(folder)
    with pytest.warns(AgentFileWarning):
        agents = scan_agents(tmp_path).agents
    assert agents["api-designer"].path == folder / "shop-agents" / "backend" / "api-designer.md"
    assert agents["sql-pro"].source == "project"
    # a user-level collection installed as `cp -r agents ~/.claude/agents/<name>`
    home = tmp_path / "home"
    deep = claude_agents(home) / "collection" / "agents" / "ops"
    deep.mkdir(parents=True)
    (deep / "deployer.md").write_text("---\nname: deployer\ndescription: Deploys\n---\nGo.\n")
    (deep / "cycle").symlink_to(claude_agents(home), target_is_directory=True)  # a loop
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scan = scan_agents(tmp_path, home)
    assert scan.agents["deployer"].source == "user"
    assert [e for e in scan.errors if "deployer" in str(e.path)] == []


def test_claude_code_keys_load_without_notes(tmp_path: Path) -> None:
    folder = claude_agents(tmp_path)
    write_corpus(folder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scan = scan_agents(tmp_path)
    said = [str(w.message) for w in caught if "with-extras.md" in str(w.message)]
    # its hooks, skills, memory (test_hooks.py, test_agent_context.py) and MCP servers
    # (test_mcp_agents.py) are honoured: no key of it is ignored
    assert [s for s in said if "key '" in s] == []
    extras = next(a for a in scan.agents.values() if a.path == folder / "with-extras.md")
    assert extras.mcpServers == ["tracker"]
    assert not any("did you mean" in str(w.message) for w in caught)
    assert not any("'color'" in str(w.message) for w in caught)


def test_model_aliases(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_model("sonnet", "parent") == MODEL_ALIASES["sonnet"]
    assert resolve_model("Opus", "parent") == MODEL_ALIASES["opus"]
    assert resolve_model("haiku", "parent") == MODEL_ALIASES["haiku"]
    assert resolve_model("inherit", "parent") == "parent"
    assert resolve_model("default", "parent") is None  # the session's model
    assert resolve_model("fable", "parent") == "claude-fable-5-2"
    assert resolve_model("best", "parent") == "claude-fable-5-2"
    assert resolve_model("opus[1m]", "parent") == MODEL_ALIASES["opus"]
    assert resolve_model("sonnet[1m]", "parent") == MODEL_ALIASES["sonnet"]
    assert resolve_model("opusplan", "parent", "plan") == MODEL_ALIASES["opus"]
    assert resolve_model("opusplan", "parent", "default") == MODEL_ALIASES["sonnet"]
    assert resolve_model("claude-haiku-4-5", "parent") == "claude-haiku-4-5"
    monkeypatch.setenv("ANTHROPIC_DEFAULT_HAIKU_MODEL", "claude-haiku-4-5-20251001")
    assert resolve_model("haiku", "parent") == "claude-haiku-4-5-20251001"


def test_vertex_and_bedrock_model_ids_load(tmp_path: Path) -> None:
    """A full id of each platform is a model an agent file may name (Vertex writes the date
    after an `@`, README's Backends section); a word that is no alias still fails at load."""
    folder = claude_agents(tmp_path)
    folder.mkdir(parents=True)
    models = {
        "vertex": "claude-sonnet-4-5@20250929",
        "bedrock": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "arn": "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-x",
        "plain": "claude-haiku-4-5",
        "typo": "sonet",
    }
    for name, model in models.items():
        (folder / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: d\nmodel: {model}\n---\nP.\n"
        )
    with pytest.warns(AgentFileWarning):
        scan = scan_agents(tmp_path)
    assert {n: scan.agents[n].model for n in models if n != "typo"} == {
        n: m for n, m in models.items() if n != "typo"
    }
    (typo,) = scan.errors
    assert str(typo) == (
        f"{folder / 'typo.md'}:4: field 'model': unknown model 'sonet': use one of inherit, "
        "sonnet, opus, haiku, fable, default, best, opusplan, or a full model id (claude-...)"
    )


def test_a_tool_with_a_star_spec_is_the_whole_tool(tmp_path: Path) -> None:
    """`tools: ["Read", "Bash(*)"]` (in public collections) gives Bash, as `Bash(*)` means every
    call in a rule; the agent had got no Bash at all, and the listing said so."""
    folder = claude_agents(tmp_path)
    folder.mkdir(parents=True)
    (folder / "deployer.md").write_text(
        '---\nname: deployer\ndescription: d\ntools: ["Read", "Bash(*)", "Task( * )"]\n'
        "disallowedTools: Write(*)\n---\nP.\n"
    )
    agent = scan_agents(tmp_path).agents["deployer"]
    assert agent.tools == ["Read", "Bash", "Agent"] and agent.disallowedTools == ["Write"]
    assert missing_tools(agent, ["Read", "Bash", "Agent", "Write"]) == []


def test_project_wins_over_user_with_a_note_naming_both(tmp_path: Path) -> None:
    home = tmp_path / "home"
    mine = claude_agents(home) / "mine" / "reviewer.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("---\nname: code-reviewer\ndescription: my own\n---\nMine.\n")
    write_corpus(claude_agents(tmp_path))
    with pytest.warns(AgentFileWarning) as caught:
        agents = scan_agents(tmp_path, home).agents
    theirs = claude_agents(tmp_path) / "code-reviewer.md"
    assert agents["code-reviewer"].path == theirs
    note = (
        f"agent 'code-reviewer': {theirs} is used; {mine} defines the same name (project "
        "agents win over user agents)"
    )
    assert note in [str(w.message) for w in caught]


def test_listing_says_which_named_tools_are_not_available(tmp_path: Path) -> None:
    write_corpus(claude_agents(tmp_path))
    with pytest.warns(AgentFileWarning):
        agents = scan_agents(tmp_path).agents
    listing = agent_listing(agents, ["Read", "Grep", "Glob", "Bash", "MultiEdit"])
    line = next(ln for ln in listing.splitlines() if ln.startswith("- code-reviewer:"))
    assert line.endswith(
        "(Tools: Read, Grep, Glob, MultiEdit; not available here: WebSearch, "
        "mcp__tracker__open_issue)"
    )


async def test_bad_files_never_stop_agent_calls(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    """Today's failure: one bad file made every Agent call fail. Now the good agents and the
    built-in one start, and the bad one's call is an error naming its file and field."""
    corpus = write_corpus(claude_agents(tmp_path))
    session = make_session(auto_respond=False)
    emulator.script(
        Reply(
            (
                {
                    "type": "tool_use",
                    "name": "Agent",
                    "input": {
                        "description": "review",
                        "prompt": "Review it `py: 6 * 7`",
                        "subagent_type": "everything",
                    },
                },
                {
                    "type": "tool_use",
                    "name": "Agent",
                    "input": {
                        "description": "general",
                        "prompt": "Count `py: 2 + 2`",
                        "subagent_type": "general-purpose",
                    },
                },
                {
                    "type": "tool_use",
                    "name": "Agent",
                    "input": {
                        "description": "broken",
                        "prompt": "Anything.",
                        "subagent_type": "negative-turns",
                    },
                },
            )
        ),
        when_empty="fallback",
    )
    with pytest.warns(AgentFileWarning):
        turn = await session.ask("Start the agents.")
    sql, general, broken = turn.tool_calls
    assert not sql.is_error and not general.is_error  # both started
    done = {t.kind: t for t in await session.wait(timeout=30)}
    everything, general_purpose = done["everything"], done["general-purpose"]
    assert everything.status == "completed" and general_purpose.status == "completed"
    assert tool_outputs(everything.result or "") == ["42"], everything.result
    assert tool_outputs(general_purpose.result or "") == ["4"], general_purpose.result
    path = next(p for p in corpus.bad if p.name == "negative-turns.md")
    assert broken.is_error
    assert broken.result == (
        f"Agent type 'negative-turns' cannot be used: {path}:3: field 'maxTurns': Input "
        "should be greater than 0"
    )
    first = emulator.api_requests()[0].body
    listing = first["messages"][0]["content"][0]["text"]
    assert "- sql-pro: Writes and tunes SQL; use for: slow queries" in listing
    assert "negative-turns" not in listing


async def test_send_after_restart_with_bad_files_resumes(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    """After a restart `%send` to a named agent resumes it from its transcript even with bad
    files beside its own (it raised the first bad file's YAML error before)."""
    folder = claude_agents(tmp_path)
    folder.mkdir(parents=True)
    (folder / "counter.md").write_text("---\ndescription: counts\ntools: Python\n---\nCount.\n")
    first = make_session(auto_respond=False)
    counter = await first.workers.definition("counter")
    run = first.workers.named(first.main, counter, "Count `py: 1 + 1`", description="count")
    task = first.workers.start(run)
    await first.wait(task.id, timeout=30)
    await first.aclose()
    write_corpus(folder / "more")
    second = make_session(auto_respond=False)
    with pytest.warns(AgentFileWarning):
        reply = await second.send(task.id, "Again `py: 3 * 3`")
    assert "resumed from its transcript" in reply
    [resumed] = await second.wait(timeout=30)
    assert resumed.status == "completed"
    assert tool_outputs(resumed.result or "") == ["9"], resumed.result


def test_warnings_made_errors_do_not_stop_the_scan(tmp_path: Path) -> None:
    corpus = write_corpus(claude_agents(tmp_path / "strict"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as under `python -W error`
        scan = scan_agents(tmp_path / "strict", tmp_path / "no-home")
    assert sorted(scan.agents) == sorted([*corpus.good, "general-purpose"])
    assert len(scan.errors) == len(corpus.bad)
