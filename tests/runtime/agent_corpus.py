"""A corpus of agent files written for these tests, in the shapes public Claude Code agent
collections take (long one-line descriptions with `: ` and `<example>` blocks, `tools: *`,
Claude Code keys this runtime does not honour yet, collections in subfolders with a README
beside them), and every kind of bad file.

`write_corpus(folder)` writes it and returns what a loader should make of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

GOOD: dict[str, str] = {
    # a long one-line description with unquoted ': ' and <example> blocks
    "code-reviewer.md": (
        "---\n"
        "name: code-reviewer\n"
        "description: Use this agent after a change is written. Examples: <example>Context: "
        "the user finished a parser. user: 'I wrote the parser' assistant: 'I will ask the "
        "code-reviewer agent to look at it' <commentary>A change is done: review it."
        "</commentary></example>\n"
        "tools: Read, Grep, Glob, MultiEdit, WebSearch, mcp__tracker__open_issue\n"
        "model: sonnet\n"
        "color: red\n"
        "---\n"
        "You review changes line by line and report what is wrong, most serious first.\n"
    ),
    # values starting with '*'
    "everything.md": (
        "---\n"
        "name: everything\n"
        "description: **Generalist**: takes any task that needs every tool\n"
        "tools: *\n"
        "model: inherit\n"
        "---\n"
        "You do whatever the task needs.\n"
    ),
    # Claude Code keys a later version honours: notes, never "did you mean"
    "with-extras.md": (
        "---\n"
        "name: with-extras\n"
        "description: Runs the checks the project's hooks define\n"
        "tools: Task, Read, Bash\n"
        "hooks:\n"
        "  PreToolUse:\n"
        "    - matcher: Bash\n"
        "      hooks: [{type: command, command: ./check.sh}]\n"
        "skills: [linting]\n"
        "memory: project\n"
        "mcpServers: [tracker]\n"
        "model: opusplan\n"
        "permissionMode: plan\n"
        "---\n"
        "You run the checks.\n"
    ),
    # a nested collection: category folders, a README beside the agents
    "shop-agents/README.md": "# Shop agents\n\nCopy this folder into .claude/agents/.\n",
    "shop-agents/backend/api-designer.md": (
        "---\n"
        "name: api-designer\n"
        'description: "Designs HTTP APIs: resources, versioning, errors"\n'
        "tools: [Read, Write, Edit, LS, TodoWrite]\n"
        "model: claude-opus-5-5\n"
        "---\n"
        "You design APIs.\n"
    ),
    "shop-agents/legacy/dotnet-4.8-expert.md": (
        "---\nname: dotnet-4.8-expert\ndescription: Maintains .NET 4.8 code\n---\nYou know .NET.\n"
    ),
    "shop-agents/data/sql-pro.md": (
        "---\n"
        "name: sql-pro\n"
        "description: Writes and tunes SQL; use for: slow queries, schema changes\n"
        "tools: Read, Bash\n"
        "model: haiku\n"
        "maxTurns: 30\n"
        "---\n"
        "You write SQL.\n"
    ),
}


@dataclass(frozen=True)
class Bad:
    """A bad file: its text (or bytes), and what its one warning says."""

    content: str | bytes
    line: int | None
    field: str | None
    problem: str


BAD: dict[str, Bad] = {
    "bad-yaml.md": Bad(
        "---\ndescription: lists\ntools:\n  - Read\n - Grep\n---\nbody\n",
        5,
        "tools",
        "front matter is not valid YAML",
    ),
    "no-description.md": Bad(
        "---\nname: no-description\ntools: Read\n---\nbody\n",
        1,
        "description",
        "missing: say in one line what the agent is for",
    ),
    "garbled-tools.md": Bad(
        "---\ndescription: x\ntools: {Read: yes, Grep: no}\n---\nbody\n",
        3,
        "tools",
        "Input should be a valid list",
    ),
    "bogus-mode.md": Bad(
        "---\ndescription: x\npermissionMode: yolo\n---\nbody\n",
        3,
        "permissionMode",
        "Input should be 'default', 'acceptEdits'",
    ),
    "binary.md": Bad(b"---\ndescription: x\n---\n\x00\x01\x02PNG", 1, None, "is a binary file"),
    "latin1.md": Bad("---\ndescription: caf\xe9\n---\n".encode("latin-1"), 2, None, "not UTF-8"),
    "no-front-matter.md": Bad("# Just notes\n\nNo front matter.\n", 1, None, "has no front matter"),
    "negative-turns.md": Bad(
        "---\ndescription: x\nmaxTurns: -3\n---\nbody\n",
        3,
        "maxTurns",
        "Input should be greater than 0",
    ),
    "alias-bomb.md": Bad(  # nine such lines expand to a billion values
        "---\ndescription: x\na: &a [l, l, l, l, l, l, l, l, l, l]\n"
        + "".join(f"{k}: &{k} [{', '.join(['*' + p] * 10)}]\n" for p, k in ("ab", "bc", "cd", "de"))
        + "skills: *e\n---\nbody\n",
        7,
        "e",
        "too large once its YAML aliases are expanded",
    ),
    "unclosed.md": Bad("---\ndescription: x\nbody\n", 1, None, "no closing '---' line"),
    "empty.md": Bad("", 1, None, "has no front matter"),
    "a-list.md": Bad("---\n- Read\n- Grep\n---\n", 2, None, "must be 'key: value' lines"),
    "bad-name.md": Bad(
        "---\nname: two words\ndescription: x\n---\n", 2, "name", "'two words' is not a valid"
    ),
    "dot-name.md": Bad("---\nname: .hidden\ndescription: x\n---\n", 2, "name", "not starting"),
    "unknown-model.md": Bad(
        "---\ndescription: x\nmodel: gpt-4o\n---\n", 4 - 1, "model", "unknown model 'gpt-4o'"
    ),
    "docker.md": Bad(
        "---\ndescription: x\nisolation: docker\n---\n", 3, "isolation", "Input should be"
    ),
    "huge.md": Bad("---\ndescription: x\n---\n" + "x" * 1_100_000, None, None, "at most 1 MB"),
}


@dataclass(frozen=True)
class Corpus:
    folder: Path
    good: list[str]  # agent names that load
    bad: dict[Path, Bad]  # each bad file and its expected warning


def write_corpus(folder: Path) -> Corpus:
    """Write the corpus into `folder` (an agents folder) and return what should load."""
    folder.mkdir(parents=True, exist_ok=True)
    for rel, text in GOOD.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    bad: dict[Path, Bad] = {}
    for rel, spec in BAD.items():
        path = folder / rel
        if isinstance(spec.content, bytes):
            path.write_bytes(spec.content)
        else:
            path.write_text(spec.content, encoding="utf-8")
        bad[path] = spec
    passwd = folder / "passwd.md"
    passwd.symlink_to("/etc/passwd")
    bad[passwd] = Bad("", 1, None, "has no front matter")
    (folder / ".hidden.md").write_text("not read")
    (folder / "notes.txt").write_text("not an agent file")
    good = [
        "api-designer",
        "code-reviewer",
        "dotnet-4.8-expert",
        "everything",
        "sql-pro",
        "with-extras",
    ]
    return Corpus(folder, good, bad)
