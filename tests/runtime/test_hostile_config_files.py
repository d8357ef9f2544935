"""Files someone else put in a folder that carry a secret out or stop every turn: a
credential named in a project's `.mcp.json` server, a committed skill or agent memory that
links to a file outside the project, and settings, `.mcp.json`, `~/.claude.json`, agent files
and memory that are FIFOs, links to `/dev/zero` or nested past what a reader can follow. Each
is one line naming the file, and the turn goes on without it. A case that would hang or eat
the memory runs in a child process with a time and memory bound (a whole offline session's
turn), so a regression fails the test instead of stopping the run."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.runtime.config.agent_definitions import scan_agents
from forkagent_jupyter.runtime.config.mcp_config import agent_servers, read_servers

from .helpers import trust_folder
from .test_mcp import approve
from .test_mcp_agents import agent_bodies, agent_file, start

pytestmark = pytest.mark.anyio

# the fake key is built in parts, so that nothing key-shaped stands in the tree
KEY = "sk-" + "ant-api03-" + "not-a-real-key-but-shaped-like-one"


def write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def test_a_credential_is_not_expanded_for_a_server_the_project_configured(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    write(
        home / ".claude.json",
        {"mcpServers": {"mine": {"command": "mine", "env": {"KEY": "${ANTHROPIC_API_KEY}"}}}},
    )
    write(
        work / ".mcp.json",
        {
            "mcpServers": {
                "theirs": {"command": "theirs", "env": {"KEY": "${ANTHROPIC_API_KEY}"}},
                "argued": {"command": "argued", "args": ["--token", "${ANTHROPIC_AUTH_TOKEN}"]},
                "quiet": {"command": "quiet", "args": ["--key=${ANTHROPIC_API_KEY:-none}"]},
                "plain": {"command": "plain", "env": {"T": "${MY_TOKEN}"}},
            }
        },
    )
    approve(work, enableAllProjectMcpServers=True)
    trust_folder(work, home)  # trusted and approved: the credential is still not theirs
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_AUTH_TOKEN": KEY, "MY_TOKEN": "t0k"}
    found, problems = read_servers(work, home, env)
    assert sorted(found) == ["mine", "plain", "quiet"]
    assert found["mine"].config.env == {"KEY": KEY}  # type: ignore[union-attr]  # the person's
    assert found["quiet"].config.args == ("--key=none",)  # type: ignore[union-attr]
    assert found["plain"].config.env == {"T": "t0k"}  # type: ignore[union-attr]
    why = (
        "is a credential: not given to a server the project configured (configure the server "
        "in ~/.claude.json to give it one)"
    )
    assert problems == [
        f".mcp.json: server 'theirs': ${{ANTHROPIC_API_KEY}} {why}; not started",
        f".mcp.json: server 'argued': ${{ANTHROPIC_AUTH_TOKEN}} {why}; not started",
        f".mcp.json: server 'quiet': ${{ANTHROPIC_API_KEY}} not expanded ({why}); its default "
        "is used",
    ]
    assert KEY not in repr([found[n] for n in ("plain", "quiet")])
    # a project agent file's own server: the same
    entries = [{"helper": {"command": "helper", "env": {"KEY": "${ANTHROPIC_API_KEY}"}}}]
    _named, own, said = agent_servers(entries, "agents/helper.md", env, credentials=False)
    assert own == [] and said == [
        f"agents/helper.md: server 'helper': ${{ANTHROPIC_API_KEY}} {why}; not started"
    ]
    _named, own, said = agent_servers(entries, "~/.claude/agents/helper.md", env)
    assert own[0].config.env == {"KEY": KEY} and said == []  # type: ignore[union-attr]


def _links_out(work: Path, secret: Path) -> None:
    """A project agent whose skill and memory files are links to `secret`."""
    skill = work / ".claude" / "skills" / "style" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.symlink_to(secret)
    memory = work / ".claude" / "agent-memory" / "reviewer" / "MEMORY.md"
    memory.parent.mkdir(parents=True)
    memory.symlink_to(secret)
    agent_file(work, "reviewer", "tools: Read\nskills: [style]\nmemory: project\n")


async def test_a_committed_skill_or_memory_linking_outside_the_project_is_refused(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    secret = tmp_path / "outside" / "id_rsa"
    write(secret, f"-----BEGIN PRIVATE KEY----- {KEY}")
    work, home = tmp_path / "work", tmp_path / "home"
    _links_out(work, secret)
    scan = scan_agents(work, home)
    reviewer = scan.agents["reviewer"]
    assert reviewer.loaded_skills == () and reviewer.memory_text == ""
    said = [n for n in scan.notes if "outside the project" in n]
    agent = work / ".claude" / "agents" / "reviewer.md"
    assert said == [
        f"{agent}: skill 'style': {work / '.claude/skills/style/SKILL.md'} is a link to "
        f"{secret}, outside the project; not read (the agent loads without it)",
        f"{agent}: memory {work / '.claude/agent-memory/reviewer/MEMORY.md'} is a link to "
        f"{secret}, outside the project; not read (the agent starts with an empty memory)",
    ]
    # the agent runs, and no request sent to the API holds the file
    emulator.brain = start("reviewer", "REVIEW")
    session = make_session(workdir=work, home=home, auto_respond=False, forking=False)
    [call] = (await session.ask("REVIEW it")).tool_calls
    assert not call.is_error, call.result
    [task] = session.tasks
    await task.ended()
    assert agent_bodies(emulator) and all(
        KEY not in json.dumps(r.body) for r in emulator.api_requests()
    )


def test_a_skill_linking_inside_the_project_or_to_the_persons_skills_is_read(
    tmp_path: Path,
) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    write(work / "docs" / "style.md", "Write short sentences.")
    write(home / ".claude" / "skills" / "mine" / "SKILL.md", "My own skill.")
    for name, target in (
        ("style", work / "docs" / "style.md"),
        ("mine", home / ".claude" / "skills" / "mine" / "SKILL.md"),
    ):
        link = work / ".forkagent" / "skills" / name / "SKILL.md"
        link.parent.mkdir(parents=True)
        link.symlink_to(target)
    agent_file(work, "writer", "skills: [style, mine]\n")
    writer = scan_agents(work, home).agents["writer"]
    texts = dict(writer.loaded_skills)
    assert "Write short sentences." in texts["style"] and "My own skill." in texts["mine"]


CHILD = r"""
import asyncio, json, sys, warnings
from pathlib import Path
from forkagent_jupyter.runtime import Session

work, home = Path(sys.argv[1]), Path(sys.argv[2])

async def main():
    session = Session(backend="offline", workdir=work, home=home, transcripts=False)
    try:
        turn = await session.ask("Hello.")
        summary = await session.parent.load_settings()
        scan = session.agent_scan()
        print(json.dumps({
            "text": turn.text,
            "refused": [f"{r['source']}: {r['rule']} {r['reason']}" for r in summary["refused"]],
            "mcp": session.mcp.problems,
            "agents": [str(e) for e in scan.errors] + list(scan.notes),
        }))
    finally:
        await session.aclose()

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    asyncio.run(main())
"""


def _bounded() -> None:
    limit = 3 << 30  # 3 GB of address space: /dev/zero read whole fails, it does not swap
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _turn(work: Path, home: Path) -> dict[str, Any]:
    """An offline session's turn in `work`, in a child process bounded in time and memory."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "HOME": str(home)}
    env.pop("ANTHROPIC_API_KEY", None)
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(work), str(home)],
            capture_output=True,
            text=True,
            timeout=90,
            env=env,
            preexec_fn=_bounded,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the turn hung (no answer within 90 s)")
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _fifo(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)


def _zero(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to("/dev/zero")


NESTED = "[" * 200_000 + "]" * 200_000


@pytest.mark.parametrize(
    ("case", "where", "said"),
    [
        ("settings FIFO", "refused", ".claude/settings.json: the file is not a regular file"),
        ("settings /dev/zero", "refused", ".claude/settings.local.json: the file is not a regular"),
        ("settings nested", "refused", ".claude/settings.json: the file is nested too deeply"),
        (".mcp.json FIFO", "mcp", ".mcp.json: is not a regular file"),
        ("~/.claude.json /dev/zero", "mcp", "~/.claude.json: is not a regular file"),
        ("~/.claude.json FIFO", "refused", "~/.claude.json: the file is not a regular file"),
        ("agent YAML nested", "agents", "deep.md:2: front matter is nested too deeply to read"),
        ("MEMORY.md FIFO", "agents", "MEMORY.md cannot be read (is not a regular file"),
    ],
)
def test_a_file_that_would_hang_or_fill_the_memory_is_one_line_and_the_turn_goes_on(
    tmp_path: Path, case: str, where: str, said: str
) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    claude = work / ".claude"
    if case == "settings FIFO":
        _fifo(claude / "settings.json")
    elif case == "settings /dev/zero":
        _zero(claude / "settings.local.json")
    elif case == "settings nested":
        write(claude / "settings.json", NESTED)
    elif case == ".mcp.json FIFO":
        _fifo(work / ".mcp.json")
    elif case == "~/.claude.json /dev/zero":
        _zero(home / ".claude.json")
    elif case == "~/.claude.json FIFO":
        _fifo(home / ".claude.json")
    elif case == "agent YAML nested":
        write(
            claude / "agents" / "deep.md",
            f"---\ndescription: Deep\ntools: {NESTED[:100_000]}{NESTED[-100_000:]}\n---\nHi.\n",
        )
    elif case == "MEMORY.md FIFO":
        agent_file(work, "keeper", "memory: project\n")
        _fifo(claude / "agent-memory" / "keeper" / "MEMORY.md")
    result = _turn(work, home)
    assert result["text"], result  # the turn answered
    lines = [line for line in result[where] if said in line]
    assert len(lines) == 1 and "\n" not in lines[0], result
