"""Which hooks someone else wrote wait for the person's approval, and approving them.

A command hook of the project's committed settings or of a project agent file runs only once
the person's own settings approve its exact command, in a folder the person trusts
(`hooks.py`, `settings.py`, `trust.py`). `waiting` lists those that do not run (and the
hooks in force); `approve` adds their commands to `enabledProjectHooks` in the project's
`.claude/settings.local.json` (the person's own file, git-ignored in Claude Code's projects),
keeping its other keys. Both do blocking I/O: call them on a thread.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ConfigError
from .agent_definitions import scan_agents
from .files import FileRefusedError, read_json
from .hooks import HookEntry, parse_hooks
from .settings import COMMITTED, MAX_BYTES, committed, hook_trust, read_settings

__all__ = ["approve", "describe", "waiting"]

LOCAL = Path(".claude") / "settings.local.json"


def waiting(
    workdir: Path, home: Path, trusted: bool | None = None
) -> tuple[list[HookEntry], list[HookEntry], bool]:
    """The settings files' hooks in force, the project's hooks that do not run (its settings
    files' and its agent files': not approved, or the folder not trusted), and whether the
    folder is trusted (`trusted`: the session's own decision, None: `~/.claude.json`'s)."""
    read = read_settings(workdir, home, trusted)
    trust = hook_trust(read)
    found = [*read.unapproved_hooks, *read.held_hooks]
    for definition in scan_agents(workdir, home).agents.values():
        if definition.source != "project" or definition.hooks is None:
            continue
        entries, _refused = parse_hooks(definition.hooks, str(definition.path or definition.name))
        found += [e for e in entries if not trust.allows(e)]
    return read.hooks, found, read.trusted


def approve(workdir: Path, commands: list[str], trusted: bool = True) -> str:
    """Add `commands` to `enabledProjectHooks` in `.claude/settings.local.json` and say so in
    one line (`trusted`: whether the folder is, else the line says they wait for that).
    ConfigError (one line, the file untouched) when the file cannot take them."""
    if not commands:
        return "%hooks: no project hook waits for approval"
    path, shown = workdir / LOCAL, LOCAL.as_posix()
    if committed(path):
        raise ConfigError(f"{shown}: {COMMITTED}")
    try:
        data = read_json(path, MAX_BYTES)
    except FileRefusedError as exc:
        why = "is not JSON" if str(exc).startswith("is not JSON") else str(exc)
        raise ConfigError(f"{shown}: {why}; not changed") from None
    data = {} if data is None else data
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
    when = (
        "they run from the next turn"
        if trusted
        else "they run once this folder is trusted (%trust yes), from the turn after"
    )
    return f"%hooks: approved in {shown} (enabledProjectHooks): {listed}; {when}"


def describe(in_force: list[HookEntry], pending: list[HookEntry], trusted: bool = True) -> str:
    """The text `%hooks` shows."""
    lines = [f"settings files' hooks in force ({len(in_force)}):"]
    lines += [_row(e) for e in in_force]
    if pending and not trusted:
        lines.append(
            f"not run ({len(pending)}): this folder is not trusted; %trust yes trusts it, and "
            "a hook of its committed files needs %hooks approve too:"
        )
        lines += [_row(e) for e in pending]
    elif pending:
        lines.append(f"not approved ({len(pending)}; %hooks approve runs them from the next turn):")
        lines += [_row(e) for e in pending]
    else:
        lines.append("no project hook waits for approval")
    return "\n".join(lines)


def _row(entry: HookEntry) -> str:
    asked = "(not run here: the calls it matches are asked)"
    what = repr(entry.command) if entry.runnable else asked
    return f"  {entry.event} {entry.matcher or '*'}: {what}  {entry.source}"
