"""Named agent definitions: parsing `.forkagent/agents/*.md`, overrides, and clear errors."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest

from forkagent_jupyter.runtime.config.agent_definitions import (
    GENERAL_PURPOSE,
    MODEL_ALIASES,
    AgentDefinition,
    AgentFileError,
    AgentFileWarning,
    load_agent_file,
    load_agents,
    resolve_model,
    scan_agents,
    unknown_agent_message,
)
from forkagent_jupyter.runtime.errors import ConfigError

FULL = """\
---
name: reviewer
description: Reviews a change and reports problems
tools: [Read, Grep, Glob]
disallowedTools: Bash, Write
model: inherit
permissionMode: plan
background: true
isolation: worktree
maxTurns: 12
---

You review code.

Report problems only.
"""


def write_agent(folder: Path, filename: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / filename
    path.write_text(text, encoding="utf-8")
    return path


def project_dir(root: Path) -> Path:
    return root / ".forkagent" / "agents"


def test_a_file_with_every_field(tmp_path: Path) -> None:
    path = write_agent(tmp_path, "anything.md", FULL)
    agent = load_agent_file(path)
    assert agent == AgentDefinition(
        name="reviewer",
        description="Reviews a change and reports problems",
        tools=["Read", "Grep", "Glob"],
        disallowedTools=["Bash", "Write"],
        prompt="You review code.\n\nReport problems only.",
        model="inherit",
        permissionMode="plan",
        background=True,
        isolation="worktree",
        maxTurns=12,
        source="project",
        path=path,
    )


def test_defaults_name_from_file_and_tool_strings(tmp_path: Path) -> None:
    text = "---\ndescription: Counts rows\ntools: 'Read,  Python ,'\n---\nCount.\n"
    agent = load_agent_file(write_agent(tmp_path, "row-counter.md", text), source="user")
    assert agent.name == "row-counter"
    assert agent.tools == ["Read", "Python"]
    assert agent.disallowedTools == []
    assert agent.model is None and agent.permissionMode is None and agent.maxTurns is None
    assert agent.background is False and agent.isolation is None
    assert agent.source == "user"
    everything = "---\ndescription: All tools\ntools: '*'\n---\n"
    every = load_agent_file(write_agent(tmp_path, "all.md", everything))
    assert every.tools == ["*"] and every.every_tool  # every tool, the agent tools too


def test_windows_line_endings_and_empty_body(tmp_path: Path) -> None:
    path = tmp_path / "crlf.md"
    path.write_bytes(b"---\r\ndescription: x\r\nmaxTurns: 3\r\n---\r\n")
    agent = load_agent_file(path)
    assert (agent.name, agent.maxTurns, agent.prompt) == ("crlf", 3, "")


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        ("---\ndescription: x\nmaxTurns: 0\n---\nbody\n", "maxTurns", "greater than 0"),
        ("---\ndescription: x\nmaxTurns: -3\n---\nbody\n", "maxTurns", "greater than 0"),
        ("---\ndescription: x\nmaxTurns: many\n---\n", "maxTurns", "valid integer"),
        ("---\ndescription: x\ntools: 5\n---\n", "tools", "valid list"),
        ("---\ndescription: x\ntools: [Read, 7]\n---\n", "tools", "item 2: "),
        ("---\ndescription: x\nbackground: maybe\n---\n", "background", "valid boolean"),
        ("---\ndescription: x\npermissionMode: yolo\n---\n", "permissionMode", "'bubble'"),
        ("---\ndescription: x\nisolation: docker\n---\n", "isolation", "'worktree'"),
        ("---\ndescription: x\nname: two words\n---\n", "name", "'two words' is not a valid"),
        ("---\ndescription: x\nname: " + "n" * 65 + "\n---\n", "name", "1 to 64"),
        ("---\nname: quiet\n---\n", "description", "missing: say in one line"),
        ("---\ndescription: x\nmodel: gpt-5\n---\n", "model", "unknown model 'gpt-5'"),
        ("---\ndescription: x\nmodel: sonnet-max\n---\n", "model", "use one of inherit"),
        ("---\ndescription: '   '\n---\n", "description", "at least 1 character"),
        ("---\ndescription: x\nprompt: hi\n---\n", "prompt", "Markdown body"),
        ("---\ndescription: x\nsource: user\n---\n", "source", "not allowed"),
    ],
)
def test_malformed_fields_name_the_file_and_the_field(
    tmp_path: Path, text: str, field: str, problem: str
) -> None:
    path = write_agent(tmp_path, "broken.md", text)
    with pytest.raises(AgentFileError) as caught:
        load_agent_file(path)
    error = caught.value
    assert isinstance(error, ConfigError)
    assert error.path == path and error.field == field
    message = str(error)
    line = next((n for n, ln in enumerate(text.split("\n"), 1) if ln.startswith(field)), 1)
    at = f"{path}:{line}"
    assert message.startswith(f"{at}: field '{field}': ")
    assert error.line == line
    assert problem in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("no front matter\n", "1: has no front matter (an agent file starts with a '---' line"),
        ("", "1: has no front matter"),
        ("---\ndescription: x\n", "1: front matter has no closing '---' line"),
        ("---\ndescription: x\n  tools: [a\n---\n", "3: field 'description': front matter is "),
        ('---\ndescription: "x\n---\n', "2: field 'description': front matter is not valid"),
        ("---\n- a\n- b\n---\n", "2: front matter must be 'key: value' lines"),
    ],
)
def test_malformed_files_name_the_file(tmp_path: Path, text: str, problem: str) -> None:
    path = write_agent(tmp_path, "broken.md", text)
    with pytest.raises(AgentFileError) as caught:
        load_agent_file(path)
    assert caught.value.path == path
    assert str(caught.value).startswith(f"{path}:{problem}")
    assert "\n" not in str(caught.value)


def test_file_name_that_is_not_a_valid_name(tmp_path: Path) -> None:
    path = write_agent(tmp_path, "my agent.md", "---\ndescription: x\n---\n")
    with pytest.raises(AgentFileError, match=r"field 'name': the file name 'my agent'") as caught:
        load_agent_file(path)
    assert caught.value.field == "name"
    named = write_agent(tmp_path, "my other agent.md", "---\nname: ok\ndescription: x\n---\n")
    assert load_agent_file(named).name == "ok"


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin.md"
    path.write_bytes("---\ndescription: café\n---\n".encode("latin-1"))
    with pytest.raises(AgentFileError, match=r"latin\.md:2: is not UTF-8 text"):
        load_agent_file(path)


def test_built_in_is_always_there(tmp_path: Path) -> None:
    agents = load_agents(tmp_path, tmp_path / "no-home")
    assert list(agents) == ["general-purpose"]
    gp = agents["general-purpose"]
    assert gp is GENERAL_PURPOSE and gp.source == "built-in" and gp.tools is None
    assert gp.description and len(gp.prompt) > 100


def test_project_overrides_user(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    write_agent(project_dir(home), "reviewer.md", "---\ndescription: user's\n---\nUser.\n")
    write_agent(project_dir(home), "helper.md", "---\ndescription: only user\n---\nHelp.\n")
    write_agent(project_dir(work), "reviewer.md", "---\ndescription: project's\n---\nProj.\n")
    with pytest.warns(AgentFileWarning) as caught:
        agents = load_agents(work, home)
    [note] = [str(w.message) for w in caught]
    assert note == (
        f"agent 'reviewer': {project_dir(work) / 'reviewer.md'} is used; "
        f"{project_dir(home) / 'reviewer.md'} defines the same name (project agents win over "
        "user agents)"
    )
    assert sorted(agents) == ["general-purpose", "helper", "reviewer"]
    assert agents["reviewer"].description == "project's"
    assert agents["reviewer"].source == "project"
    assert agents["reviewer"].path == project_dir(work) / "reviewer.md"
    assert agents["helper"].source == "user"
    # a file may replace the built-in one, by name
    gp = write_agent(
        project_dir(work), "gp.md", "---\nname: general-purpose\ndescription: own\n---\n"
    )
    with pytest.warns(AgentFileWarning, match="replaces the built-in agent") as caught:
        assert load_agents(work, home)["general-purpose"].source == "project"
    assert str(caught[0].message) == (
        f"agent 'general-purpose': {gp} replaces the built-in agent of that name"
    )


def test_home_equal_to_workdir_reads_the_folder_once(tmp_path: Path) -> None:
    write_agent(project_dir(tmp_path), "a.md", "---\ndescription: x\n---\n")
    assert load_agents(tmp_path, tmp_path)["a"].source == "project"


def test_strict_raises_lenient_skips_scan_lists(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = project_dir(tmp_path)
    write_agent(folder, "a-good.md", "---\ndescription: fine\n---\nOK.\n")
    bad1 = write_agent(folder, "b-bad.md", "---\ndescription: x\nmaxTurns: 0\n---\n")
    bad2 = write_agent(folder, "c-bad.md", "nothing")
    write_agent(folder, ".hidden.md", "not even front matter")  # skipped
    write_agent(folder, "notes.txt", "not an agent")  # skipped

    with pytest.raises(AgentFileError) as caught, pytest.warns(AgentFileWarning) as said:
        load_agents(tmp_path)
    assert caught.value.path == bad1
    assert [str(w.message) for w in said] == [
        str(caught.value),
        f"{bad2}:1: has no front "
        "matter (an agent file starts with a '---' line, then 'name:' and 'description:' "
        "lines, then '---')",
    ]

    with caplog.at_level(
        logging.WARNING, logger="forkagent_jupyter.runtime.config.agent_definitions"
    ):
        agents = load_agents(tmp_path, strict=False)
    assert sorted(agents) == ["a-good", "general-purpose"]
    assert "b-bad.md:3: field 'maxTurns'" in caplog.text and "c-bad.md" in caplog.text

    scan = scan_agents(tmp_path)
    assert sorted(scan.agents) == ["a-good", "general-purpose"]
    assert [e.path for e in scan.errors] == [bad1, bad2]
    assert [e.field for e in scan.errors] == ["maxTurns", None]


def test_two_files_with_one_name_in_a_folder(tmp_path: Path) -> None:
    folder = project_dir(tmp_path)
    one = write_agent(folder, "one.md", "---\nname: dup\ndescription: first\n---\n")
    two = write_agent(folder, "two.md", "---\nname: dup\ndescription: second\n---\n")
    deeper = write_agent(folder / "sub", "a.md", "---\nname: dup\ndescription: deep\n---\n")
    with pytest.warns(AgentFileWarning) as caught:
        agents, errors, notes = scan_agents(tmp_path)
    assert agents["dup"].description == "first" and errors == []
    said = [str(w.message) for w in caught]
    assert f"agent 'dup': {two} is ignored; {one} defines the same name and comes first" in said
    assert f"agent 'dup': {deeper} is ignored; {one} defines the same name and comes first" in said
    assert set(said) == set(notes)


def test_unknown_agent_message_is_sorted() -> None:
    message = unknown_agent_message("X", ["general-purpose", "b", "a"])
    assert message == "Agent type 'X' not found. Available agents: a, b, general-purpose"
    assert unknown_agent_message("X", []).endswith("Available agents: none")


def test_unknown_keys_are_ignored_with_one_warning(tmp_path: Path) -> None:
    path = write_agent(tmp_path, "typo.md", "---\ndescription: x\nmaxturns: 3\ncolour: red\n---\n")
    with pytest.warns(AgentFileWarning) as caught:
        agent = load_agent_file(path)
    assert agent.maxTurns is None  # the misspelt key did not set anything
    messages = sorted(str(w.message) for w in caught)
    assert messages == [
        f"{path}:3: key 'maxturns' is not used here and was ignored (did you mean 'maxTurns'?)",
        f"{path}:4: key 'colour' is not used here and was ignored",
    ]


CLAUDE_CODE_FILE = """\
---
name: checker
description: Checks numbers
tools: Read, Grep
model: sonnet
color: blue
mcpServers: [files]
---
You check numbers.
"""


def test_claude_code_agent_files_load_as_they_are(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    write_agent(work / ".claude" / "agents", "checker.md", CLAUDE_CODE_FILE)
    write_agent(home / ".claude" / "agents", "mine.md", "---\ndescription: my own\n---\nHi.\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # color is ignored silently, mcpServers honoured
        agents = load_agents(work, home)
    checker = agents["checker"]
    assert checker.mcpServers == ["files"]
    assert checker.tools == ["Read", "Grep"] and checker.source == "project"
    assert resolve_model(checker.model, "parent-model") == MODEL_ALIASES["sonnet"]
    assert resolve_model("inherit", "parent-model") == "parent-model"
    assert resolve_model(None, "parent-model") is None
    assert resolve_model("claude-haiku-4-5", "parent-model") == "claude-haiku-4-5"
    assert agents["mine"].source == "user"


def test_forkagent_wins_over_claude_in_one_scope_said_once(tmp_path: Path) -> None:
    write_agent(tmp_path / ".claude" / "agents", "rev.md", "---\ndescription: claude's\n---\n")
    ours = write_agent(project_dir(tmp_path), "rev.md", "---\ndescription: ours\n---\n")
    with pytest.warns(AgentFileWarning, match=r"\.forkagent wins over \.claude") as caught:
        agents = load_agents(tmp_path, None)
    assert agents["rev"].description == "ours" and agents["rev"].path == ours
    assert len([w for w in caught if "wins over" in str(w.message)]) == 1
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_agents(tmp_path, None)  # read again: not said again
