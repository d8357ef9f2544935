"""What a folder's files ask for that only a trusted folder gets (`trust.py`): the settings
files' grants (`settings.SettingsRead.withheld`), the `.mcp.json` servers, and the hooks and
MCP servers of the project's agent files. The list is the same whether the folder is trusted
or not (`%trust` shows it either way); a turn in a folder not trusted says it in one line
(`trust.notice`). Blocking I/O: call it on a thread.
"""

from __future__ import annotations

from pathlib import Path

from .agent_definitions import scan_agents
from .hooks import parse_hooks
from .mcp_config import NOT_TRUSTED, agent_servers, read_config
from .settings import SettingsRead, read_settings, shown_command

__all__ = ["folder_asks"]


def folder_asks(
    workdir: Path, home: Path, read: SettingsRead | None = None
) -> list[tuple[str, str]]:
    """(what, file) for everything the folder's files grant (see the module doc); `read`: the
    settings as read for a folder not trusted, if the caller has them."""
    if read is None or read.trusted:
        read = read_settings(workdir, home, trusted=False)
    asks = list(read.withheld)
    config = read_config(workdir, home, trusted=False)
    for name, (spec, why) in sorted(config.unapproved.items()):
        if why == NOT_TRUSTED:  # not one the person's files disable
            asks.append((f"MCP server {name}", spec.source))
    for definition in scan_agents(workdir, home).agents.values():
        if definition.source != "project":
            continue
        where = str(definition.path or definition.name)
        try:
            where = Path(where).relative_to(workdir).as_posix()
        except ValueError:
            pass
        hooks, _refused = parse_hooks(definition.hooks or {}, where)
        asks += [(f"hook {e.event} {shown_command(e.command)}", where) for e in hooks if e.runnable]
        _named, own, _problems = agent_servers(definition.mcpServers, where, credentials=False)
        asks += [(f"MCP server {spec.name}", where) for spec in own]
    return asks
