"""Slash command and skill files read as Claude Code reads them: where they are, their names,
their front matter, their arguments, which file wins a name, and what a bad file says.

The files below are written for these tests in the shapes public ones take (a `/commit`
with `!` lines and `Bash(git add:*)` tools, `argument-hint: [major|minor|patch]`, a skill
with `context: fork` and `agent: Explore`, a block-scalar description, keys Claude Code
ignores)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forkagent_jupyter.runtime.config.command_text import (
    shell_lines,
    split_arguments,
    substitute,
    with_outputs,
)
from forkagent_jupyter.runtime.config.commands import (
    describe,
    looks_like_command,
    parse_invocation,
    parse_tool_list,
    scan_commands,
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


COMMIT = (
    "---\n"
    "description: Create a git commit\n"
    "allowed-tools: Read, Edit, MultiEdit, TodoWrite, Bash(git add:*), Bash(git commit:*)\n"
    "---\n\n"
    "## Context\n\n"
    "- Git status: !`git status`\n"
    "- Git diff (staged and unstaged changes): !`git diff HEAD`\n\n"
    "Commit with the message $ARGUMENTS.\n"
)
WRAP = (
    "---\n"
    "description: Wrap the session — bump versions, draft a commit.\n"
    "argument-hint: [major|minor|patch]\n"
    "---\n\n"
    "Default bump is **patch**; if `$ARGUMENTS` says `major` or `minor`, use that.\n"
)
EXPLORE_SKILL = (
    "---\n"
    "name: creator-analysis\n"
    "description: Analyze a creator's patterns, hooks, formats: builds a profile.\n"
    'argument-hint: "@handle" or "--watchlist" or "[creator name] [platform]"\n'
    "context: fork\n"
    "agent: Explore\n"
    "allowed-tools: Bash, Read, Write, WebSearch, AskUserQuestion\n"
    "---\n\n"
    "# Creator analysis\n\nLook at $0 on $1; notes in ${CLAUDE_SKILL_DIR}/notes.md.\n"
)
BLOCK_SKILL = (
    "---\n"
    "name: skill-code-review\n"
    "aliases:\n  - review\n"
    "description: |\n"
    "  Expert code review with quality assessment.\n"
    "  \n"
    "  Use PROACTIVELY when the user says:\n"
    '  - "review this code"\n'
    "context: fork\n"
    "execution_mode: enforced\n"
    "version: 2\n"
    "---\n\n# Code review\n"
)


def test_commands_and_skills_load_with_names_sources_and_fields(tmp_path: Path) -> None:
    project, home = tmp_path / "p", tmp_path / "home"
    write(project / ".claude/commands/commit.md", COMMIT)
    write(project / ".claude/commands/git/wrap.md", WRAP)
    write(project / ".claude/commands/notes/daily/standup.md", "Write the standup notes.\n")
    write(project / ".claude/commands/README.md", "# These are our commands\n")
    write(project / ".claude/skills/creator-analysis/SKILL.md", EXPLORE_SKILL)
    write(project / ".claude/skills/skill-code-review/SKILL.md", BLOCK_SKILL)
    write(project / ".forkagent/commands/sums.md", "---\ncontext: fork\n---\nSum $ARGUMENTS\n")
    write(home / ".claude/commands/mine.md", "---\ndescription: my own\nmodel: haiku\n---\nx\n")
    scan = scan_commands(project, home)
    assert scan.problems == () and scan.notes == ()
    assert sorted(scan.commands) == [
        "commit",
        "creator-analysis",
        "git:wrap",
        "mine",
        "notes:daily:standup",
        "skill-code-review",
        "sums",
    ]
    commit = scan.commands["commit"]
    assert commit.kind == "command" and commit.scope == "project" and not commit.fork
    assert commit.allowed_tools == (
        "Read",
        "Edit",
        "MultiEdit",
        "TodoWrite",
        "Bash(git add:*)",
        "Bash(git commit:*)",
    )
    assert scan.commands["git:wrap"].argument_hint == "[major|minor|patch]"
    standup = scan.commands["notes:daily:standup"]
    assert standup.description == "Write the standup notes." and standup.text.startswith("Write")
    skill = scan.commands["creator-analysis"]
    assert skill.kind == "skill" and skill.fork and skill.agent == "Explore"
    assert skill.argument_hint == '"@handle" or "--watchlist" or "[creator name] [platform]"'
    assert skill.allowed_tools == ("Bash", "Read", "Write", "WebSearch", "AskUserQuestion")
    review = scan.commands["skill-code-review"]
    assert review.description.startswith("Expert code review") and review.agent is None
    assert scan.commands["sums"].fork
    mine = scan.commands["mine"]
    assert mine.scope == "user" and mine.model == "haiku"
    listing = describe(scan)
    assert "/git:wrap [major|minor|patch]" in listing
    assert "project command, .claude/commands/commit.md" in listing
    assert "user command, ~/.claude/commands/mine.md" in listing
    assert "fork, agent Explore; project skill, .claude/skills/creator-analysis/SKILL.md" in (
        listing
    )
    assert "Expert code review with quality assessment.  [fork;" in listing  # one line


def test_the_same_name_twice_follows_claude_codes_order_and_says_so(tmp_path: Path) -> None:
    project, home = tmp_path / "p", tmp_path / "home"
    write(project / ".claude/commands/review.md", "project's review\n")
    write(home / ".claude/commands/review.md", "my review\n")
    write(project / ".claude/commands/sum.md", "the command\n")
    write(project / ".claude/skills/sum/SKILL.md", "---\ndescription: the skill\n---\nskill\n")
    write(project / ".claude/commands/plot.md", "claude's\n")
    write(project / ".forkagent/commands/plot.md", "ours\n")
    scan = scan_commands(project, home)
    assert scan.commands["review"].text == "my review\n"  # your own beat the project's
    assert scan.commands["sum"].kind == "skill"  # skills beat commands
    assert scan.commands["plot"].text == "ours\n"  # .forkagent beats .claude
    assert sorted(scan.notes) == [
        "/plot: .claude/commands/plot.md is not used; .forkagent/commands/plot.md gives the "
        "same name and comes first (skills before commands, your own before the project's)",
        "/review: .claude/commands/review.md is not used; ~/.claude/commands/review.md gives "
        "the same name and comes first (skills before commands, your own before the "
        "project's)",
        "/sum: .claude/commands/sum.md is not used; .claude/skills/sum/SKILL.md gives the "
        "same name and comes first (skills before commands, your own before the project's)",
    ]


def test_a_bad_file_is_one_line_naming_file_line_and_field(tmp_path: Path) -> None:
    project = tmp_path / "p"
    write(project / ".claude/commands/ok.md", "fine\n")
    write(project / ".claude/commands/bad.md", "---\ndescription: x\nmodel: gpt-4\n---\nx\n")
    write(project / ".claude/commands/open.md", "---\ndescription: x\nno end\n")
    (project / ".claude/commands/bin.md").write_bytes(b"\0\1\2")
    write(project / ".claude/commands/hooked.md", "---\nhooks:\n  Stop: []\n---\nx\n")
    write(project / ".claude/commands/slow.md", "---\neffort: turbo\n---\nx\n")
    scan = scan_commands(project, None)
    assert sorted(scan.commands) == ["hooked", "ok", "slow"]
    lines = {p.name: p.line for p in scan.problems}
    assert lines["bad"].startswith(".claude/commands/bad.md:3: field 'model': unknown model")
    assert lines["open"] == ".claude/commands/open.md:1: front matter has no closing '---' line"
    assert lines["bin"].startswith(".claude/commands/bin.md:1: is a binary file")
    assert scan.notes == (
        ".claude/commands/hooked.md:2: field 'hooks': hooks in a command's front matter are "
        "not run here; the command runs without them",
        ".claude/commands/slow.md:2: field 'effort': 'turbo' is no effort level (low, "
        "medium, high, xhigh, max); the command runs without it",
    )
    assert "not usable (3):" in describe(scan)


def test_arguments_are_put_in_as_claude_code_does() -> None:
    assert split_arguments("a \"b c\" 'd e' $HOME x|y") == ["a", "b c", "d e", "$HOME", "x", "y"]
    assert split_arguments('unclosed "quote here') == ["unclosed", '"quote', "here"]
    text = "All: $ARGUMENTS. First: $0. Second: $1. Also $ARGUMENTS[1]. Missing: [$5]."
    assert substitute(text, 'one "two words"') == (
        'All: one "two words". First: one. Second: two words. Also two words. Missing: [].'
    )
    assert substitute("Fix $issue on $branch ($issue)", "42 hotfix", ["issue", "branch"]) == (
        "Fix 42 on hotfix (42)"
    )
    assert substitute("No placeholder.", "some args") == "No placeholder.\n\nARGUMENTS: some args"
    assert substitute("No placeholder.", "") == "No placeholder."
    assert substitute("Cost $10 of $ARGUMENTS", "x") == "Cost  of x"  # Claude Code's rule too
    assert substitute("$ARGUMENTS", r"back\1 \g<0>") == r"back\1 \g<0>"  # taken literally


def test_a_skill_names_its_folder_and_fills_its_own_variables(tmp_path: Path) -> None:
    write(tmp_path / ".claude/skills/creator-analysis/SKILL.md", EXPLORE_SKILL)
    skill = scan_commands(tmp_path, None).commands["creator-analysis"]
    folder = tmp_path / ".claude/skills/creator-analysis"
    assert skill.expand("@ana tiktok", "sess1") == (
        f"Base directory for this skill: {folder}\n\n\n# Creator analysis\n\n"
        f"Look at @ana on tiktok; notes in {folder}/notes.md.\n"
    )


def test_shell_lines_are_found_and_replaced_in_place() -> None:
    lines = shell_lines(COMMIT)
    assert [line.command for line in lines] == ["git status", "git diff HEAD"]
    block = "Before\n```!\nls -la\n```\nand `not!`this` nor a!`x`"
    assert [line.command for line in shell_lines(block)] == ["ls -la"]
    done = with_outputs(COMMIT, [(lines[0], "clean"), (lines[1], "(no diff)")])
    assert "- Git status: clean\n" in done and "!`" not in done


def test_what_a_slash_prompt_is() -> None:
    assert parse_invocation("/review the totals\nby month") == ("review", "the totals\nby month")
    assert parse_invocation("  /review") == ("review", "")
    assert parse_invocation("review /this") is None
    assert parse_invocation("/") is None
    assert looks_like_command("git:commit") and looks_like_command("review-pr_2")
    assert not looks_like_command("usr/bin/env")  # a path: an ordinary prompt
    assert not looks_like_command("tmp")  # /tmp exists: an ordinary prompt
    assert not looks_like_command("v1.2")


@pytest.mark.parametrize(
    ("value", "tools"),
    [
        ("Read, Grep", ("Read", "Grep")),
        ("Read Grep Glob Bash(git diff *)", ("Read", "Grep", "Glob", "Bash(git diff *)")),
        ("Bash(git add:*), Bash(git commit:*)", ("Bash(git add:*)", "Bash(git commit:*)")),
        (["Read", "Bash(ls, -la)", 3], ("Read", "Bash(ls, -la)")),
        ("", ()),
    ],
)
def test_allowed_tools_split_as_claude_code_splits_them(value: object, tools: tuple[str]) -> None:
    assert parse_tool_list(value) == tools


def test_a_model_only_skill_and_names_that_cannot_be_typed(tmp_path: Path) -> None:
    write(tmp_path / ".claude/skills/legacy/SKILL.md", "---\nuser-invocable: false\n---\nx\n")
    write(tmp_path / ".claude/commands/two words.md", "x\n")
    scan = scan_commands(tmp_path, None)
    assert not scan.commands["legacy"].user_invocable
    assert "model only (user-invocable: false)" in describe(scan)
    assert scan.closest("legac") == []  # not offered to be typed
    [problem] = scan.problems
    assert problem.line == (
        ".claude/commands/two words.md: the command name 'two words' cannot be typed (no "
        "spaces or '/')"
    )
