"""Which hooks someone else wrote wait for the person's approval, and approving them.

A command hook of the project's committed settings or of a project agent file runs only once
the person's own settings approve its exact command (`hooks.py`, `settings.py`). `waiting`
lists those not approved (and the hooks in force); `approve` adds their commands to
`enabledProjectHooks` in the project's `.claude/settings.local.json` (the person's own file,
git-ignored in Claude Code's projects), keeping its other keys. Both do blocking I/O: call
them on a thread.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ConfigError
from .agent_definitions import scan_agents
from .hooks import HookEntry, parse_hooks
from .settings import COMMITTED, MAX_BYTES, committed, hook_trust, read_settings

__all__ = ["approve", "describe", "waiting"]

LOCAL = Path(".claude") / "settings.local.json"


def waiting(workdir: Path, home: Path) -> tuple[list[HookEntry], list[HookEntry]]:
    """The settings files' hooks in force, and the project's hooks not approved (its
    settings files' and its agent files')."""
    read = read_settings(workdir, home)
    trust = hook_trust(read)
    found = list(read.unapproved_hooks)
    for definition in scan_agents(workdir, home).agents.values():
        if definition.source != "project" or definition.hooks is None:
            continue
        entries, _refused = parse_hooks(definition.hooks, str(definition.path or definition.name))
        found += [e for e in entries if not trust.allows(e)]
    return read.hooks, found


def approve(workdir: Path, commands: list[str]) -> str:
    """Add `commands` to `enabledProjectHooks` in `.claude/settings.local.json` and say so in
    one line. ConfigError (one line, the file untouched) when the file cannot take them."""
    if not commands:
        return "%hooks: no project hook waits for approval"
    path, shown = workdir / LOCAL, LOCAL.as_posix()
    if committed(path):
        raise ConfigError(f"{shown}: {COMMITTED}")
    try:
        raw = path.read_bytes()[: MAX_BYTES + 1]
    except FileNotFoundError:
        raw = b"{}"
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot be read ({exc.strerror or exc}); not changed") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ConfigError(f"{shown}: is not JSON; not changed") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{shown}: is not a JSON object; not changed")
    known = data.get("enabledProjectHooks", [])
    if not isinstance(known, list):
        raise ConfigError(f"{shown}: enabledProjectHooks is not a list; not changed")
    added = [c for c in dict.fromkeys(commands) if c not in known]
    data["enabledProjectHooks"] = [*known, *added]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    listed = "; ".join(repr(c) for c in dict.fromkeys(commands))
    return (
        f"%hooks: approved in {shown} (enabledProjectHooks): {listed}; they run from the next turn"
    )


def describe(in_force: list[HookEntry], pending: list[HookEntry]) -> str:
    """The text `%hooks` shows."""
    lines = [f"settings files' hooks in force ({len(in_force)}):"]
    lines += [_row(e) for e in in_force]
    if pending:
        lines.append(f"not approved ({len(pending)}; %hooks approve runs them from the next turn):")
        lines += [_row(e) for e in pending]
    else:
        lines.append("no project hook waits for approval")
    return "\n".join(lines)


def _row(entry: HookEntry) -> str:
    asked = "(not run here: the calls it matches are asked)"
    what = repr(entry.command) if entry.runnable else asked
    return f"  {entry.event} {entry.matcher or '*'}: {what}  {entry.source}"
