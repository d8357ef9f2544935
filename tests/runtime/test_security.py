"""Permissions in the loop, the work-dir boundary, and the API key never leaking."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from forkagent_jupyter.emulator import Emulator
from forkagent_jupyter.emulator.brains import Reply
from forkagent_jupyter.runtime.permissions.gate import AllowAll
from forkagent_jupyter.runtime.session.session import Session
from forkagent_jupyter.runtime.tools import builtin_tools
from forkagent_jupyter.runtime.tools.base import Tool, ToolContext

pytestmark = pytest.mark.anyio

SECRET = "sk-" + "ant-api03-SECRETSECRETSECRETSECRET-0123456789abcdef"  # fake


class LeakyInput(BaseModel):
    what: str


class LeakyTool(Tool[LeakyInput]):
    """A buggy tool whose exception carries the key."""

    name: ClassVar[str] = "Boom"
    description: ClassVar[str] = "Fails with the key in its error."
    input_model = LeakyInput

    async def run(self, args: LeakyInput, ctx: ToolContext) -> str:
        raise RuntimeError(f"bad auth {os.environ['ANTHROPIC_API_KEY']}")


def call(name: str, **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": input}


async def test_mutating_tools_need_permission_in_default_mode(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    (tmp_path / "f.txt").write_text("old")
    session = make_session(permission_policy=None)
    emulator.script(
        Reply(
            (
                call("Write", file_path="new.txt", content="x"),
                call("Edit", file_path="f.txt", old_string="old", new_string="new"),
                call("Bash", command="touch made-by-bash"),
                call("Python", code="open('made-by-python', 'w').write('x')"),
                call("Read", file_path="f.txt"),
            )
        ),
        Reply.text("ok"),
    )
    turn = await session.ask("do things")
    results = {c.name: c for c in turn.tool_calls}
    for name in ("Write", "Edit", "Bash", "Python"):
        assert results[name].is_error, name
        assert "needs the user's approval" in results[name].result
    assert not results["Read"].is_error and "old" in results["Read"].result
    assert not (tmp_path / "new.txt").exists() and (tmp_path / "f.txt").read_text() == "old"
    assert not (tmp_path / "made-by-bash").exists()
    assert not (tmp_path / "made-by-python").exists()
    assert {e["tool"]: e["decision"] for e in session.gate.log}["Write"] == "deny"


async def test_file_tools_stay_inside_the_workdir(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("secret data")
    (work / "link").symlink_to(outside)
    session = make_session(workdir=work, permission_mode="bypassPermissions")
    emulator.script(
        Reply(
            (
                call("Read", file_path="../outside.txt"),
                call("Read", file_path=str(outside)),
                call("Read", file_path="link"),
                call("Write", file_path="../escape.txt", content="x"),
            )
        ),
        Reply.text("ok"),
    )
    turn = await session.ask("look around")
    for c in turn.tool_calls:
        assert c.is_error and "outside the work directory" in c.result, c
        assert "secret data" not in c.result
    assert not (tmp_path / "escape.txt").exists()

    allowed = make_session(workdir=work, allow=[f"Read(/{tmp_path}/*.txt)"])
    emulator.script(Reply((call("Read", file_path="link"),)), Reply.text("ok"))
    turn = await allowed.ask("read the link")
    assert not turn.tool_calls[0].is_error and "secret data" in turn.tool_calls[0].result


async def test_the_api_key_never_appears(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    (tmp_path / "notes.txt").write_text(f"my key is {SECRET}\n")
    with Emulator(strict=True, api_keys={SECRET}) as emu:
        session = Session(
            backend="anthropic",
            base_url=emu.base_url,
            workdir=tmp_path,
            permission_policy=AllowAll(),
            tools=[*builtin_tools(), LeakyTool()],
        )
        emu.script(
            Reply(
                (
                    call("Bash", command="env; echo key=$ANTHROPIC_API_KEY"),
                    call("Python", code="import os; print(os.environ['ANTHROPIC_API_KEY'])"),
                    call(
                        "Python",
                        code="import os; raise ValueError(os.environ['ANTHROPIC_API_KEY'])",
                    ),
                    call("Read", file_path="notes.txt"),
                    call("Grep", pattern="key", output_mode="content"),
                    call("Boom", what="x"),
                )
            ),
            Reply.text("done"),
        )
        turn = await session.ask("show me the key")
        await session.aclose()
        emu.check()
    everything = [
        json.dumps(session.messages),
        json.dumps([c.__dict__ for c in turn.tool_calls]),
        turn.text,
        caplog.text,
        json.dumps(session.gate.log),
    ]
    for text in everything:
        assert SECRET not in text
    results = [c.result for c in turn.tool_calls]
    assert all("[redacted]" in r for r in results[1:]), results
    assert "key=\n" in results[0] or "key=" in results[0]  # Bash never had it


JUPYTER = {  # what docker-stacks and JupyterHub put in the server's (and kernel's) environment
    "JUPYTER_TOKEN": "5f0c" * 12,
    "JUPYTERHUB_API_TOKEN": "hub-api-" + "a1" * 16,
    "JPY_API_TOKEN": "jpy-api-" + "b2" * 16,
    "JUPYTERHUB_OAUTH_ACCESS_SCOPES": '["access:servers!server=alice/"]',
    "JUPYTERHUB_COOKIE_SECRET": "cookie-" + "c3" * 16,
    "JUPYTERHUB_CRYPT_KEY": "crypt-" + "d4" * 16,
}
NOT_SECRET = {
    "JUPYTERHUB_USER": "alice",
    "JUPYTERHUB_API_URL": "http://hub:8081/hub/api",
    "JUPYTERHUB_SSL_KEYFILE": "/etc/jupyterhub/internal-ssl/server.key",
    "JPY_SESSION_NAME": "/home/alice/analysis.ipynb",
}


async def test_jupyters_tokens_are_credentials(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The Jupyter server's and JupyterHub's tokens reach no program the runtime starts and
    are masked wherever the API key is."""
    from forkagent_jupyter.runtime.secrets import redact, scrubbed_env
    from forkagent_jupyter.runtime.tools.shell import BashTool

    from .tools.helpers import call as run_tool

    for name, value in {**JUPYTER, **NOT_SECRET}.items():
        monkeypatch.setenv(name, value)
    env = scrubbed_env()
    assert not set(JUPYTER) & set(env) and set(NOT_SECRET) <= set(env)
    assert not set(JUPYTER) & set(scrubbed_env({**JUPYTER, "PATH": "/bin"}))
    out = await run_tool(BashTool(), ToolContext(workdir=tmp_path), command="env")
    assert not [name for name in JUPYTER if name in out.content], out.content
    assert "JUPYTERHUB_USER=alice" in out.content
    for name, value in JUPYTER.items():
        assert redact(f"{name} is {value}.") == f"{name} is [redacted].", name
    assert redact("alice's notebook") == "alice's notebook"
