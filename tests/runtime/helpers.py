"""Shared by the runtime tests: the emulator's records of fork requests, git, and a named
agent that delegates to a fork."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from forkagent_jupyter.messages_api.tokens import ByteTokenizer, flatten
from forkagent_jupyter.runtime.fork import FORK_TAG


def breakpoint_tokens(body: dict[str, Any]) -> list[int]:
    """Cumulative token counts at each cache breakpoint of a request body."""
    out, total = [], 0
    for block in flatten(body, ByteTokenizer()):
        total += block.tokens
        if block.cache_control is not None:
            out.append(total)
    return out


def first_fork_requests(emulator: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(body, usage) of each fork's first request: its last message holds the directive."""
    usage = {e.request_id: e.usage for e in emulator.ledger.entries()}
    out = []
    for rec in emulator.api_requests():
        body = rec.body
        last = body["messages"][-1]
        texts = [b.get("text", "") for b in last["content"] if b.get("type") == "text"]
        if any(f"<{FORK_TAG}>" in t for t in texts) and rec.request_id in usage:
            out.append((body, usage[rec.request_id]))
    return out


def dumps(body: dict[str, Any]) -> str:
    return json.dumps(body, ensure_ascii=False)


def git(cwd: Path, *args: str) -> str:
    """Run git in `cwd`; its stdout, stripped (a failure raises)."""
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def make_repo(path: Path) -> Path:
    """A git repository at `path` with one commit (`data.csv`)."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "T")
    (path / "data.csv").write_text("a,b\n1,2\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "init")
    return path


async def start_lead(session: Any, workdir: Path) -> Any:
    """A named agent `lead` (its file written under `workdir`) that forks a child worker;
    started, its task returned."""
    agents = workdir / ".forkagent" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "lead.md").write_text(
        "---\ndescription: delegates\ntools: Agent, Python\n---\nYou delegate.\n"
    )
    lead = await session.workers.definition("lead")
    run = session.workers.named(
        session.main, lead, "Delegate.\nfork: child work `py: 5 * 5`", description="lead"
    )
    return session.workers.start(run)
