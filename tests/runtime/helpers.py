"""Shared by the runtime tests: the emulator's records of fork requests, git, a named
agent that delegates to a fork, a paced session on the emulator, and a wait on a condition."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

from forkagent_jupyter.messages_api.tokens import ByteTokenizer, flatten
from forkagent_jupyter.runtime.loop.fork import FORK_TAG
from forkagent_jupyter.runtime.permissions.gate import AllowAll
from forkagent_jupyter.runtime.session.session import Session


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


def trust_folder(folder: Path, home: Path) -> None:
    """The person trusts `folder`: `projects[<folder>].hasTrustDialogAccepted` in
    `home/.claude.json`, written as Claude Code's trust dialog writes it (other keys kept), so
    what the folder's own files grant applies."""
    path = home / ".claude.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault("projects", {}).setdefault(str(folder.resolve()), {})[
        "hasTrustDialogAccepted"
    ] = True
    home.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))


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


async def until(predicate: Any, timeout: float = 60) -> None:
    """Wait until `predicate()` holds, failing the test after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


def paced_session(base_url: str, workdir: Path, model: str, period: float, **kw: Any) -> Session:
    """A session on the emulator at `base_url` (real SDK over HTTP) that allows every tool and
    answers no prompt, its pacer's rate-limit minute lasting `period` real seconds."""
    session = Session(
        model,
        backend="anthropic",
        api_key="test-key",
        base_url=base_url,
        workdir=workdir,
        home=workdir / "home",
        permission_policy=AllowAll(),
        auto_respond=False,
        **kw,
    )
    session.rate_limits.period = period
    return session
