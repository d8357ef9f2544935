"""One connection to one MCP server, through the official `mcp` SDK (stdio or streamable HTTP).

`McpConnection.start()` launches a task that owns the SDK's context managers (they must be
entered and left in one task): it starts the server (or opens the HTTP session), initializes,
lists the tools, then waits until `close()`. Calls from any task go through `call`. Nothing
here blocks the event loop: the process is spawned by the SDK's async API and the server's
stderr goes to a temporary file opened on a thread (never into a notebook cell).

States: `starting`, `connected`, `failed` (with a one-line `reason`), `closed`. A server that
dies is `failed` from the call that found out on; a call that times out is an error for that
call (the server stays, it may answer the next one).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

import anyio

from ...messages_api.shapes import JSON
from ..config.mcp_config import HttpServer, ServerSpec, StdioServer, tool_name
from ..executors.confinement.listeners import aclosed_ports
from ..executors.confinement.sandbox import confined

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult
    from mcp.types import Tool as ServerTool

__all__ = ["McpCallError", "McpConnection", "McpToolInfo", "State"]

log = logging.getLogger(__name__)

State = Literal["starting", "connected", "failed", "closed"]
MAX_DESCRIPTION = 2048
MAX_NAME = 64  # the API's longest tool name (mcp__server__tool)


class McpCallError(Exception):
    """A call that did not give a result (the text is one line for the model)."""


@dataclass(frozen=True)
class McpToolInfo:
    """A tool a server offers: its own name, description and input schema."""

    name: str
    description: str
    input_schema: dict[str, JSON]


def _line(exc: BaseException) -> str:
    """One line saying what went wrong (an exception group: its first leaf)."""
    while isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:  # type: ignore[attr-defined]
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


def _schema(raw: object) -> dict[str, JSON] | None:
    """The input schema the API can take (an object schema), or None."""
    if not isinstance(raw, dict) or raw.get("type") != "object":
        return None
    schema = {k: v for k, v in raw.items() if k not in ("title", "$schema")}
    if not isinstance(schema.get("properties", {}), dict):
        return None
    return schema


class McpConnection:
    """A live connection to one server (see the module doc)."""

    def __init__(
        self, spec: ServerSpec, *, startup_timeout: float, call_timeout: float, owner: str = ""
    ) -> None:
        self.spec = spec
        self.owner = owner  # "" for the session's servers, else the agent id
        self.startup_timeout = startup_timeout
        self.call_timeout = call_timeout
        self.state: State = "starting"
        self.reason = ""
        self.tools: list[McpToolInfo] = []
        self.skipped: list[str] = []  # tools not offered, each with why
        self._session: ClientSession | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._errlog: IO[str] | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._serve(), name=f"mcp-server-{self.name}"
            )

    async def ready(self, within: float | None = None) -> bool:
        """Wait (at most `within` seconds) until the server is connected or failed; whether
        it is connected."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._ready.wait(), within)
        return self.state == "connected"

    def _fail(self, reason: str) -> None:
        if self.state in ("starting", "connected"):
            self.state = "failed"
            self.reason = reason
        self._ready.set()
        self._stop.set()

    async def _stderr_tail(self) -> str:
        errlog = self._errlog
        if errlog is None:
            return ""

        def tail() -> str:
            errlog.flush()
            errlog.seek(0)
            lines = [x for x in errlog.read()[-4000:].splitlines() if x.strip()]
            return lines[-1].strip()[:200] if lines else ""

        try:
            return await asyncio.to_thread(tail)
        except (OSError, ValueError):
            return ""

    async def _serve(self) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                # in this task (the SDK's scopes must be left in the task that entered them),
                # the timeout around the handshake only (scopes nest)
                session = await self._open(stack)
                with anyio.move_on_after(self.startup_timeout) as scope:
                    await self._handshake(session)
                if scope.cancelled_caught:
                    self._fail(f"did not start within {self.startup_timeout:g} s")
                    return
                self.state = "connected"
                self._ready.set()
                await self._stop.wait()
        except asyncio.CancelledError:
            self._fail("stopped")
            raise
        except Exception as exc:  # any failure of the server or the SDK: one line, never raised
            said = await self._stderr_tail()
            self._fail(_line(exc) + (f" (stderr: {said})" if said else ""))
        finally:
            self._session = None
            if self.state != "failed":
                self.state = "closed"
            self._ready.set()
            if self._errlog is not None:
                errlog, self._errlog = self._errlog, None
                await asyncio.to_thread(errlog.close)

    async def _open(self, stack: contextlib.AsyncExitStack) -> ClientSession:
        """The SDK's session on a started server (or an opened HTTP client)."""
        from mcp import ClientSession

        config = self.spec.config
        if isinstance(config, StdioServer):
            from mcp import StdioServerParameters, stdio_client

            self._errlog = await asyncio.to_thread(tempfile.TemporaryFile, "w+")
            closed = await aclosed_ports()
            command, *args = confined([config.command, *config.args], closed=closed)
            params = StdioServerParameters(
                command=command,
                args=args,
                env={**_base_env(), **config.env},
                cwd=self.spec.cwd,
            )
            read, write = await stack.enter_async_context(stdio_client(params, self._errlog))
        else:
            assert isinstance(config, HttpServer)
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            http = await stack.enter_async_context(
                create_mcp_http_client(headers=dict(config.headers))
            )
            read, write = await stack.enter_async_context(
                streamable_http_client(config.url, http_client=http)
            )
        return await stack.enter_async_context(ClientSession(read, write))

    async def _handshake(self, session: ClientSession) -> None:
        await session.initialize()
        tools: list[ServerTool] = []
        cursor: str | None = None
        for _page in range(50):
            from mcp.types import PaginatedRequestParams

            params_ = PaginatedRequestParams(cursor=cursor) if cursor else None
            listed = await session.list_tools(params=params_)
            tools.extend(listed.tools)
            cursor = listed.next_cursor
            if not cursor:
                break
        self._session = session
        self.tools, self.skipped = [], []
        for tool in tools:
            schema = _schema(tool.input_schema)
            if len(tool_name(self.name, tool.name)) > MAX_NAME:
                self.skipped.append(f"{tool.name}: its name is too long (at most {MAX_NAME})")
                continue
            if schema is None:
                self.skipped.append(f"{tool.name}: its input schema is not an object schema")
                continue
            text = (tool.description or "").strip() or f"Tool {tool.name} of MCP server {self.name}"
            self.tools.append(McpToolInfo(tool.name, text[:MAX_DESCRIPTION], schema))

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """The server's CallToolResult; McpCallError (one line) when there is none."""
        session = self._session
        if self.state != "connected" or session is None:
            why = f": {self.reason}" if self.reason else ""
            raise McpCallError(f"MCP server '{self.name}' is not connected ({self.state}{why}).")
        try:
            return await session.call_tool(tool, arguments, read_timeout_seconds=self.call_timeout)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            line = _line(exc)
            if "timed out" in line.lower():
                raise McpCallError(
                    f"MCP server '{self.name}' did not answer {tool} within "
                    f"{self.call_timeout:g} s."
                ) from None
            if "connection closed" in line.lower() or self._stop.is_set():
                said = await self._stderr_tail()
                self._fail("the server closed the connection" + (f" ({said})" if said else ""))
                raise McpCallError(
                    f"MCP server '{self.name}' failed during {tool}: {self.reason}."
                ) from None
            raise McpCallError(f"MCP server '{self.name}' failed during {tool}: {line}") from None

    async def close(self, within: float = 10.0) -> None:
        """Stop the server (its process ends) and wait for that (bounded)."""
        self._stop.set()
        task = self._task
        if task is None:
            self.state = "closed"
            return
        done, _ = await asyncio.wait({task}, timeout=within)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=5)
        if self.state != "failed":
            self.state = "closed"


_PASSED = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR")


def _base_env() -> dict[str, str]:
    """What a stdio server inherits: the usual variables, no credentials (the SDK's own
    choice, plus the interpreter's folder first on PATH so `python` is this one)."""
    env = {k: os.environ[k] for k in _PASSED if k in os.environ}
    here = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([here, env.get("PATH", "")]).rstrip(os.pathsep)
    return env
