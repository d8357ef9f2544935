"""MCP server configurations, read as Claude Code reads them.

Where servers come from, weakest first (a later one replaces an earlier one of the same name):
the top-level `mcpServers` of `~/.claude.json` (user), the `mcpServers` of the project's entry
in `~/.claude.json` (`projects.<workdir>.mcpServers`: local), and `.mcp.json` in the session's
work directory (project). A project server (a file that comes with the repository, not one the
person wrote) is started only once the person approves it, as in Claude Code:
`enableAllProjectMcpServers: true` or its name in `enabledMcpjsonServers` in their own settings
(`~/.claude/settings.json`, `.claude/settings.local.json`; not the committed
`.claude/settings.json`), and never when a settings file names it in `disabledMcpjsonServers`.
A project server also waits until the person trusts the folder (`trust.py`): approved or
not, none starts in a folder not trusted, and the approval keys of the folder's own local file
count only once it is. An unapproved one does not replace a server of the same name from
`~/.claude.json` (`read_config` returns it apart, with why). An agent file's `mcpServers` adds
servers for that agent's run (`agent_servers`); a server an agent file of the project defines
inline is the project's too, and starts only once approved by the same keys in a trusted
folder (`approval`).

A server is `{"command": ..., "args": [...], "env": {...}}` (stdio; `"type": "stdio"` may be
said) or `{"type": "http", "url": ..., "headers": {...}}` (streamable HTTP). In `command`,
`args`, `env`, `url` and `headers`, `${VAR}` is the environment's VAR and `${VAR:-default}`
falls back to `default`; a VAR that is not set and has no default makes the server refused.
A credential (`secrets.SECRET_ENV_VARS`: `ANTHROPIC_API_KEY` and the like, which no tool or
worker gets) is expanded only for a server the person configured (`~/.claude.json`, their own
agent files): for a project's server it counts as not set, and one line says so.
What cannot be used (a file that is not JSON, a server of the wrong shape) is one line naming
the file and the server; the other servers load. A file is read only when it is a regular file
of bounded size whose JSON nests at most 64 levels (`files.py`). `read_servers` does blocking
I/O: call it on a thread.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...messages_api.shapes import JSON
from ..errors import ConfigError
from ..secrets import SECRET_ENV_VARS
from .files import MAX_CONFIG_BYTES, FileRefusedError, read_json
from .hooks import NOT_TRUSTED_HINT
from .settings import COMMITTED, committed, read_settings
from .trust import CLAUDE_JSON, MAX_CLAUDE_JSON_BYTES

__all__ = [
    "AGENT_APPROVE_HINT",
    "APPROVE_HINT",
    "NOT_TRUSTED",
    "HttpServer",
    "McpConfig",
    "ServerSpec",
    "StdioServer",
    "agent_servers",
    "approval",
    "approve_server",
    "expand",
    "parse_servers",
    "read_config",
    "read_servers",
    "tool_name",
]

MAX_BYTES = MAX_CONFIG_BYTES
NOT_TRUSTED = NOT_TRUSTED_HINT
"""Why a project's server does not start in a folder the person does not trust."""
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_SERVER = re.compile(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*")
"""A server name a rule can name: no `__` and no `_` at either end (`mcp__a__b` names tool b
of server a, so a server `a__b` would be out of reach of a deny of `mcp__a__b`)."""


class StdioServer(BaseModel):
    """A server the session starts as a subprocess and talks to over stdin/stdout."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    type: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)


class HttpServer(BaseModel):
    """A server already running somewhere, reached over streamable HTTP."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    type: Literal["http"]
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)


ServerConfig = StdioServer | HttpServer


@dataclass(frozen=True)
class ServerSpec:
    """One configured server: its name, what it is, where it was configured."""

    name: str
    config: ServerConfig
    source: str
    cwd: Path | None = None


def expand(text: str, env: Mapping[str, str]) -> str:
    """`${VAR}` and `${VAR:-default}` replaced; KeyError(VAR) for a VAR neither set nor
    defaulted."""

    def one(m: re.Match[str]) -> str:
        value = env.get(m.group(1))
        if value is None or (value == "" and m.group(2) is not None):
            if m.group(2) is None:
                raise KeyError(m.group(1))
            return m.group(2)
        return value

    return _VAR.sub(one, text)


def _expanded(raw: dict[str, object], env: Mapping[str, str]) -> dict[str, object]:
    out = dict(raw)
    for key in ("command", "url"):
        text = out.get(key)
        if isinstance(text, str):
            out[key] = expand(text, env)
    args = out.get("args")
    if isinstance(args, list):
        out["args"] = [expand(a, env) if isinstance(a, str) else a for a in args]
    for key in ("env", "headers"):
        table = out.get(key)
        if isinstance(table, dict):
            out[key] = {k: expand(v, env) if isinstance(v, str) else v for k, v in table.items()}
    return out


CREDENTIAL = (
    "is a credential: not given to a server the project configured (configure the server in "
    "~/.claude.json to give it one)"
)


def _secrets_named(raw: dict[str, object]) -> list[str]:
    """The credential variables the server's strings name (`${ANTHROPIC_API_KEY}`)."""
    texts: list[str] = []
    for key in ("command", "url"):
        text = raw.get(key)
        if isinstance(text, str):
            texts.append(text)
    for key in ("args",):
        args = raw.get(key)
        if isinstance(args, list):
            texts += [a for a in args if isinstance(a, str)]
    for key in ("env", "headers"):
        table = raw.get(key)
        if isinstance(table, dict):
            texts += [v for v in table.values() if isinstance(v, str)]
    found = {m.group(1) for t in texts for m in _VAR.finditer(t)}
    return sorted(found & set(SECRET_ENV_VARS))


def _one(
    name: str, raw: object, env: Mapping[str, str], credentials: bool = True
) -> ServerConfig | str:
    """The server, or why it cannot be used; without `credentials`, a credential variable
    counts as not set."""
    if not isinstance(raw, dict):
        return "is not an object"
    kind = raw.get("type", "stdio")
    if kind == "streamable-http":
        kind = "http"
    if kind not in ("stdio", "http"):
        return f"type {kind!r} is not supported (stdio or http)"
    if not credentials:
        env = {k: v for k, v in env.items() if k not in SECRET_ENV_VARS}
    try:
        data = _expanded({**raw, "type": kind}, env)
    except KeyError as exc:
        if exc.args[0] in SECRET_ENV_VARS and not credentials:
            return f"${{{exc.args[0]}}} {CREDENTIAL}; not started"
        return f"the environment variable {exc.args[0]} is not set (write ${{VAR:-default}})"
    try:
        if kind == "http":
            return HttpServer.model_validate(data)
        return StdioServer.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(server)"
        return f"field {where}: {err['msg']}"


def parse_servers(
    data: object,
    source: str,
    env: Mapping[str, str],
    cwd: Path | None = None,
    *,
    credentials: bool = True,
) -> tuple[list[ServerSpec], list[str]]:
    """The servers of one `mcpServers` object, and one line per server refused.
    `credentials`: whether a credential variable may be expanded (the person's own servers
    only; see the module doc)."""
    if not isinstance(data, dict):
        return [], [f"{source}: mcpServers is not an object"]
    specs: list[ServerSpec] = []
    problems: list[str] = []
    for name, raw in data.items():
        if not isinstance(name, str) or not _SERVER.fullmatch(name):
            problems.append(
                f"{source}: server {name!r}: a server name is letters, digits, '-' and single "
                "'_' between them"
            )
            continue
        made = _one(name, raw, env, credentials)
        if isinstance(made, str):
            problems.append(f"{source}: server {name!r}: {made}")
            continue
        named = [] if credentials else _secrets_named(raw)
        if named:  # each was defaulted (else the server was refused above)
            shown = ", ".join(f"${{{n}}}" for n in named)
            problems.append(
                f"{source}: server {name!r}: {shown} not expanded ({CREDENTIAL}); its default "
                "is used"
            )
        specs.append(ServerSpec(name, made, source, cwd))
    return specs, problems


def _read_json(path: Path, shown: str, problems: list[str], limit: int = MAX_BYTES) -> JSON:
    try:
        return read_json(path, limit)
    except FileRefusedError as exc:
        problems.append(f"{shown}: {exc}")
        return None


APPROVE_HINT = (
    "to approve a project server, run %mcp approve NAME (it starts at the next turn), or add "
    "its name to enabledMcpjsonServers (or set enableAllProjectMcpServers: true) in "
    ".claude/settings.local.json or ~/.claude/settings.json (read at the next session)"
)


@dataclass
class McpConfig:
    """The servers to start by name, the project's servers not approved (name -> (server,
    why)), and one line per problem."""

    servers: dict[str, ServerSpec]
    unapproved: dict[str, tuple[ServerSpec, str]]
    problems: list[str]


def _approval(
    workdir: Path, home: Path, problems: list[str], trusted: bool | None = None
) -> Callable[[str], str | None]:
    """Why a project server may not start (None: approved), from the person's settings and
    whether the folder is trusted (`trusted`: the session's decision; None: as recorded)."""
    read = read_settings(workdir, home, trusted)
    keys = ("enableAllProjectMcpServers", "enabledMcpjsonServers", "disabledMcpjsonServers")
    problems.extend(f"{src}: {what} {why}" for what, src, why in read.refused if what in keys)
    disabled = dict(read.mcp_disabled)
    enabled = {name for name, _ in read.mcp_enabled}
    every = read.mcp_enable_all is not None and read.mcp_enable_all[0] is True
    folder_trusted = read.trusted

    def why(name: str) -> str | None:
        if name in disabled:
            return f"disabled (disabledMcpjsonServers in {disabled[name]})"
        if not folder_trusted:
            return NOT_TRUSTED
        if every or name in enabled:
            return None
        return "not approved"

    return why


def approve_server(workdir: Path, name: str) -> str:
    """Add `name` to `enabledMcpjsonServers` in the project's `.claude/settings.local.json` (the
    person's own file; the other keys kept) and say so in one line (what that changes in a
    running session: `McpServers.approve`). ConfigError (one line, the file untouched) when the
    name or the file cannot take it. Blocking: call it on a thread."""
    if not _SERVER.fullmatch(name):
        raise ConfigError(f"{name!r} is not a server name")
    path = workdir / ".claude" / "settings.local.json"
    shown = ".claude/settings.local.json"
    if committed(path):
        raise ConfigError(f"{shown}: {COMMITTED}")
    problems: list[str] = []
    data = _read_json(path, shown, problems)
    if problems:
        raise ConfigError(problems[0] + "; not changed")
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{shown}: is not a JSON object; not changed")
    names = data.get("enabledMcpjsonServers", [])
    if not isinstance(names, list):
        raise ConfigError(f"{shown}: enabledMcpjsonServers is not a list; not changed")
    if name not in names:
        data["enabledMcpjsonServers"] = [*names, name]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
    return f"MCP server '{name}' approved in {shown} (enabledMcpjsonServers)"


AGENT_APPROVE_HINT = (
    "to approve it, add its name to enabledMcpjsonServers (or set "
    "enableAllProjectMcpServers: true) in .claude/settings.local.json or "
    "~/.claude/settings.json, or run %mcp approve NAME; it starts at the agent's next launch"
)


def approval(workdir: Path, home: Path, trusted: bool | None = None) -> Callable[[str], str | None]:
    """Why a server the project defines (in `.mcp.json` or inline in a project agent file)
    may not start (None: approved), from the person's settings and the folder's trust.
    Blocking: call it on a thread."""
    return _approval(workdir, home, [], trusted)


def read_servers(
    workdir: Path, home: Path, env: Mapping[str, str] | None = None, trusted: bool | None = None
) -> tuple[dict[str, ServerSpec], list[str]]:
    """The servers to start by name (see the module doc), and one line per problem."""
    config = read_config(workdir, home, env, trusted)
    return config.servers, config.problems


def read_config(
    workdir: Path, home: Path, env: Mapping[str, str] | None = None, trusted: bool | None = None
) -> McpConfig:
    """The configured servers (see the module doc and `McpConfig`); `trusted`: the
    session's decision on the folder (None: as `~/.claude.json` records it)."""
    env = os.environ if env is None else env
    problems: list[str] = []
    found: dict[str, ServerSpec] = {}
    user = _read_json(home / CLAUDE_JSON, f"~/{CLAUDE_JSON}", problems, MAX_CLAUDE_JSON_BYTES)
    layers: list[tuple[JSON, str, bool]] = []  # (mcpServers, source, the project's)
    if isinstance(user, dict):
        if "mcpServers" in user:
            layers.append((user["mcpServers"], "~/.claude.json", False))
        projects = user.get("projects")
        project = projects if isinstance(projects, dict) else {}
        entry = project.get(str(workdir))
        if isinstance(entry, dict) and "mcpServers" in entry:
            layers.append((entry["mcpServers"], f"~/.claude.json (project {workdir})", False))
    elif user is not None:
        problems.append("~/.claude.json: is not a JSON object")
    shared = _read_json(workdir / ".mcp.json", ".mcp.json", problems)
    if isinstance(shared, dict):
        layers.append((shared.get("mcpServers", {}), ".mcp.json", True))
    elif shared is not None:
        problems.append(".mcp.json: is not a JSON object")
    unapproved: dict[str, tuple[ServerSpec, str]] = {}
    approval = _approval(workdir, home, problems, trusted) if shared is not None else None
    for data, source, theirs in layers:
        specs, refused = parse_servers(data, source, env, workdir, credentials=not theirs)
        problems.extend(refused)
        for spec in specs:
            why = approval(spec.name) if approval is not None and theirs else None
            if why is None:
                found[spec.name] = spec
            else:
                unapproved[spec.name] = (spec, why)
    return McpConfig(found, unapproved, problems)


def agent_servers(
    entries: object,
    source: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    *,
    credentials: bool = True,
) -> tuple[list[str], list[ServerSpec], list[str]]:
    """An agent file's `mcpServers`: (names of configured servers it uses, its own servers,
    problems). Each entry is a server name or `{name: server}`; a mapping of names to servers
    is read the same way. `credentials`: False for a project's agent file (see the module
    doc)."""
    env = os.environ if env is None else env
    if entries is None:
        return [], [], []
    if isinstance(entries, dict):
        entries = [{k: v} for k, v in entries.items()]
    if not isinstance(entries, list):
        return [], [], [f"{source}: mcpServers is not a list"]
    named: list[str] = []
    own: list[ServerSpec] = []
    problems: list[str] = []
    for entry in entries:
        if isinstance(entry, str):
            named.append(entry)
        elif isinstance(entry, dict):
            specs, refused = parse_servers(entry, source, env, cwd, credentials=credentials)
            own.extend(specs)
            problems.extend(refused)
        else:
            problems.append(f"{source}: mcpServers entry {entry!r} is not a name or a server")
    return named, own, problems


def tool_name(server: str, tool: str) -> str:
    """The name the model sees: `mcp__<server>__<tool>`, characters the API does not take in a
    tool name made `_`."""
    return f"mcp__{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"
