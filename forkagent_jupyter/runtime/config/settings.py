"""Settings files, read as Claude Code reads them: permission rules, the default mode and the
additional directories.

Files, weakest first (a `.forkagent` file sits just above the `.claude` file of its level):
`~/.claude/settings.json`, `~/.forkagent/settings.json` (user), `.claude/settings.json`,
`.forkagent/settings.json` (project, shared), `.claude/settings.local.json`,
`.forkagent/settings.local.json` (project, personal), the project being the session's work
directory. `permissions.allow`, `ask`, `deny` and `additionalDirectories` add up across files;
`permissions.defaultMode` is the strongest file's. A project file cannot turn on
`bypassPermissions` (anyone, the model included, may have written it): that value is refused
there and honoured only in the user's own file. `hooks` (see `hooks.py`) add up across files;
a command hook of a project file (`.claude/settings.json`, `.forkagent/settings.json`: someone
else's) is used only once the person approved it (`enableAllProjectHooks`: the strongest of
their files; `enabledProjectHooks`, exact commands: add up; read from user and local files
only), else it is in `unapproved_hooks`.
`disableAllHooks: true` in the person's own file turns every hook off (the files' and the
agent files').
The approval of the project's `.mcp.json` servers (`enableAllProjectMcpServers`: the strongest
file's; `enabledMcpjsonServers`, `disabledMcpjsonServers`: add up) is read from the person's own
files only (user and local): the committed project file cannot approve its own servers (its
`disabledMcpjsonServers` still counts).
A `settings.local.json` that git tracks was committed by someone (Claude Code keeps the file out
of git): it is read as a project file, so it approves nothing and its hooks need approving.

The project's files (`.claude/settings.json`, `.claude/settings.local.json` and their
`.forkagent` twins: every file in the work directory, whether git tracks it or not, since a
folder may come with an untracked file, from an archive, or from the model in an earlier
session) are someone else's words until the person trusts the folder (`trust.py`). Until then
what they grant waits, listed in `withheld` (what, file): allow rules, a `defaultMode` wider
than the one in force below it, `additionalDirectories`, hooks that run commands,
`disableAllHooks`, and the approval keys of a local file; what they forbid applies at once:
deny rules, ask rules (an ask rule only ever makes a call asked that would otherwise run), a
narrower `defaultMode` (`plan`, `dontAsk`, or `default` over a wider one), a PreToolUse hook
of a type not run here (it makes calls asked), `disabledMcpjsonServers`. Trusted, they apply
as above, except that a project file's `disableAllHooks` turns off the project's hooks (its
files' and its agent files') and never the person's own (`~/.claude/settings.json`,
`~/.claude/agents`): only the person's own file turns every hook off.

What cannot be honoured (a file that is not JSON, a field of the wrong type, a rule that does
not parse, an unknown mode, a folder that does not exist) is one refused entry naming the file
and why; it never stops the rest. A file is read only when it is a regular file of at most
1 MB whose JSON nests at most 64 levels (`files.py`: a FIFO, `/dev/zero` or a file nested
200,000 levels is one refused entry, and the turn goes on without it). `read_settings` does
blocking I/O: call it on a thread.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeGuard

from ...messages_api.shapes import JSON
from ..executors.confinement.own_git import run_git_sync
from .files import FileRefusedError, read_json
from .hooks import HookEntry, HookTrust, parse_hooks
from .trust import FolderTrust, folder_trust

__all__ = [
    "SETTINGS_MODES",
    "SettingsFile",
    "SettingsRead",
    "committed",
    "hook_trust",
    "narrows",
    "read_settings",
    "settings_files",
    "shown_command",
]

Scope = Literal["user", "project", "local"]
SETTINGS_MODES = ("default", "acceptEdits", "plan", "dontAsk", "bypassPermissions")
MAX_BYTES = 1_000_000


@dataclass(frozen=True)
class SettingsFile:
    path: Path
    scope: Scope


@dataclass
class SettingsRead:
    """What the settings files say, each item with the file it came from."""

    rules: list[tuple[Literal["allow", "ask", "deny"], str, str]] = field(default_factory=list)
    mode: tuple[str, str] | None = None
    directories: list[tuple[Path, str]] = field(default_factory=list)
    refused: list[tuple[str, str, str]] = field(default_factory=list)  # (what, source, why)
    files: list[str] = field(default_factory=list)  # the files found
    hooks: list[HookEntry] = field(default_factory=list)  # every file's, weakest first
    project_hooks: list[HookEntry] = field(default_factory=list)  # those of project files
    unapproved_hooks: list[HookEntry] = field(default_factory=list)  # not run (not approved)
    held_hooks: list[HookEntry] = field(default_factory=list)  # not run (folder not trusted)
    hooks_enable_all: tuple[bool, str] | None = None  # enableAllProjectHooks, its file
    hooks_enabled: list[tuple[str, str]] = field(default_factory=list)  # (command, source)
    hooks_disabled: str | None = None  # the person's file that says disableAllHooks: true
    folder_hooks: list[HookEntry] = field(default_factory=list)  # those of the folder's files
    folder_hooks_off: str | None = None  # the project's (trusted) file that says disableAllHooks
    mcp_enable_all: tuple[bool, str] | None = None  # enableAllProjectMcpServers, its file
    mcp_enabled: list[tuple[str, str]] = field(default_factory=list)  # (server, source)
    mcp_disabled: list[tuple[str, str]] = field(default_factory=list)  # (server, source)
    trust: FolderTrust | None = None  # whether the person trusts the folder (trust.py)
    withheld: list[tuple[str, str]] = field(default_factory=list)  # (what, source) waiting
    """What the folder's files grant that waits until the folder is trusted (`trust.py`)."""

    @property
    def trusted(self) -> bool:
        """Whether what the folder's files grant applies."""
        return self.trust is not None and self.trust.trusted


def settings_files(workdir: Path, home: Path) -> list[SettingsFile]:
    """The settings files of a project, weakest first (see the module doc); working in the
    home folder, its `.claude/settings.json` is the person's own file, read once."""
    out: list[SettingsFile] = []
    at_home = workdir.resolve() == home.resolve()
    for base, name, scope in (
        (home, "settings.json", "user"),
        (workdir, "settings.json", "project"),
        (workdir, "settings.local.json", "local"),
    ):
        if at_home and scope == "project":
            continue
        for folder in (".claude", ".forkagent"):
            out.append(SettingsFile(base / folder / name, scope))  # type: ignore[arg-type]
    return out


def _committed(files: list[SettingsFile]) -> set[Path]:
    """The `local` files among `files` that git tracks (someone committed them): the file as
    named (a committed symlink) or what it resolves to (through a committed `.claude` symlink
    too), each asked of the repository it lies in. git runs as the runtime's own git does
    (`executors.confinement.own_git`: confined, nothing the repository's configuration names
    runs); an answer git does not give counts as committed."""
    out: set[Path] = set()
    for file in files:
        if file.scope != "local" or not (file.path.is_symlink() or file.path.exists()):
            continue
        named = file.path.parent.resolve() / file.path.name
        if any(_tracked(p) for p in dict.fromkeys([named, file.path.resolve()])):
            out.add(file.path)
    return out


def committed(path: Path) -> bool:
    """Whether the person's local settings file `path` is in git (so read as the project's:
    an approval written there would not count). Blocking: call it on a thread."""
    return bool(_committed([SettingsFile(path, "local")]))


COMMITTED = (
    "is tracked by git (someone committed it), so it is read as the project's and cannot "
    "approve; approve in ~/.claude/settings.json instead; not changed"
)


def _tracked(path: Path) -> bool:
    try:
        done = run_git_sync("ls-files", "--error-unmatch", "--", str(path), cwd=path.parent)
    except subprocess.TimeoutExpired:
        return True
    if done.code == 127:  # no git (or no such folder): nothing is tracked
        return False
    if done.code == 0:
        return True
    return not ("did not match any file" in done.err or "not a git repository" in done.err)


def _shown(path: Path, workdir: Path, home: Path) -> str:
    roots = sorted(((workdir, ""), (home, "~/")), key=lambda r: len(str(r[0])), reverse=True)
    for root, label in roots:  # the closer folder names it
        try:
            return label + path.relative_to(root).as_posix()
        except ValueError:
            continue
    return str(path)


def _read_one(
    file: SettingsFile, source: str, out: SettingsRead, workdir: Path, home: Path, held: bool
) -> None:
    """One file into `out`; `held`: a file of a folder the person does not trust, whose
    grants go to `out.withheld` (see the module doc)."""
    try:
        data = read_json(file.path, MAX_BYTES)
    except FileRefusedError as exc:
        if not str(exc).startswith("cannot be read"):
            out.files.append(source)
        out.refused.append(("the file", source, str(exc)))
        return
    if data is None:
        return
    out.files.append(source)
    if not isinstance(data, dict):
        out.refused.append(("the file", source, "is not a JSON object"))
        return
    _read_mcp_approval(data, file, source, out, held)
    _read_hook_approval(data, file, source, out, held)
    for key, why in NOT_READ.items():
        if key in data:
            out.refused.append((key, source, why))
    off = data.get("disableAllHooks")
    if off is True:
        if held:
            out.withheld.append(("disableAllHooks", source))
        elif file.scope == "user":
            out.hooks_disabled = source
        else:
            out.folder_hooks_off = source
    elif off not in (None, False):
        out.refused.append(("disableAllHooks", source, "is not true or false"))
    if "hooks" in data:
        _read_hooks(data["hooks"], file, source, out, held)
    perms = data.get("permissions", {})
    if not isinstance(perms, dict):
        out.refused.append(("permissions", source, "is not an object"))
        return
    for kind in ("allow", "ask", "deny"):
        values = perms.get(kind, [])
        if not isinstance(values, list):
            out.refused.append((f"permissions.{kind}", source, "is not a list of rules"))
            continue
        for value in values:
            text = value if isinstance(value, str) else repr(value)
            if held and kind == "allow":
                out.withheld.append((f"allow {text}", source))
            else:
                out.rules.append((kind, text, source))
    _read_mode(perms.get("defaultMode"), file, source, out, held)
    dirs = perms.get("additionalDirectories", [])
    if not isinstance(dirs, list):
        out.refused.append(("permissions.additionalDirectories", source, "is not a list"))
        return
    for entry in dirs:
        if not isinstance(entry, str) or not entry.strip():
            out.refused.append((f"additionalDirectories {entry!r}", source, "is not a path"))
            continue
        if held:
            out.withheld.append((f"additionalDirectories {entry}", source))
            continue
        path = home / entry[2:] if entry in ("~", "~/") or entry.startswith("~/") else Path(entry)
        path = path.expanduser()  # `~user/...`
        path = (path if path.is_absolute() else workdir / path).resolve()
        if not path.is_dir():
            out.refused.append((f"additionalDirectories {entry!r}", source, "is not a folder"))
            continue
        out.directories.append((path, source))


def _read_hooks(
    value: JSON, file: SettingsFile, source: str, out: SettingsRead, held: bool
) -> None:
    """A file's `hooks`. Of a folder not trusted, only the checks that make calls asked (a
    PreToolUse hook of a type not run here) apply; the commands wait."""
    hooks, refused = parse_hooks(value, source)
    out.refused.extend(("the hooks", source, why) for why in refused)
    if held:
        for entry in hooks:
            if entry.runnable:
                out.withheld.append((f"hook {entry.event} {shown_command(entry.command)}", source))
                out.held_hooks.append(entry)
        hooks = [e for e in hooks if not e.runnable]
    out.hooks.extend(hooks)
    if file.scope != "user":
        out.folder_hooks.extend(hooks)
    if file.scope == "project":
        out.project_hooks.extend(hooks)


def shown_command(command: str) -> str:
    """A hook's command as a list of what waits shows it (quoted, at most 60 characters)."""
    return repr(command if len(command) <= 60 else command[:57] + "...")


_WIDTH = {"default": 1, "acceptEdits": 2, "bypassPermissions": 3}
"""How much a mode lets through without asking; `plan` and `dontAsk` are both narrower than
`default` and neither is narrower than the other."""


def narrows(mode: str, current: str) -> bool:
    """Whether `mode` lets through no more than `current` does."""
    if mode == current:
        return True
    if mode in ("plan", "dontAsk"):
        return current in _WIDTH
    return current in _WIDTH and _WIDTH[mode] < _WIDTH[current]


def _read_mode(mode: JSON, file: SettingsFile, source: str, out: SettingsRead, held: bool) -> None:
    if mode is None:
        return
    if mode not in SETTINGS_MODES:
        out.refused.append(
            (f"defaultMode {mode!r}", source, f"is not one of {', '.join(SETTINGS_MODES)}")
        )
    elif mode == "bypassPermissions" and file.scope != "user":
        out.refused.append(
            (
                "defaultMode 'bypassPermissions'",
                source,
                "a project's file cannot turn it on (set it in ~/.claude/settings.json or "
                "with permission_mode)",
            )
        )
    elif held and not narrows(mode, out.mode[0] if out.mode is not None else "default"):
        out.withheld.append((f"defaultMode {mode}", source))
    else:
        out.mode = (str(mode), source)


NOT_READ = {
    "model": "is not read here: the session's model is ForkAgent.model (or FORKAGENT_MODEL)",
    "env": "is not applied here: the tools run with the kernel's environment, without secrets",
    "apiKeyHelper": "is not run here: the key comes from ANTHROPIC_API_KEY or the backend's own",
}
"""Claude Code settings a person may count on that this session does not honour: each is one
refused entry (shown by %permissions), never dropped silently."""

MCP_APPROVAL_KEYS = ("enableAllProjectMcpServers", "enabledMcpjsonServers")


def _refuse_self_approval(
    data: dict[str, JSON],
    file: SettingsFile,
    source: str,
    out: SettingsRead,
    keys: tuple[str, ...],
    what: str,
) -> None:
    """A project's committed file that says any of the approval `keys` (of its own `what`)
    gets one refused entry per key: only the person's own files approve."""
    if file.scope != "project":
        return
    for key in keys:
        if key in data:
            out.refused.append(
                (
                    key,
                    source,
                    f"a project's committed file cannot approve its own {what} (set it in "
                    ".claude/settings.local.json or ~/.claude/settings.json)",
                )
            )


def _strings(value: JSON) -> TypeGuard[list[str]]:
    """Whether `value` is a list of strings."""
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _read_mcp_approval(
    data: dict[str, JSON], file: SettingsFile, source: str, out: SettingsRead, held: bool
) -> None:
    """The `.mcp.json` approval keys of one file (see the module doc)."""
    _refuse_self_approval(data, file, source, out, MCP_APPROVAL_KEYS, "MCP servers")
    value = data.get("enableAllProjectMcpServers")
    if value is not None and file.scope != "project":
        if not isinstance(value, bool):
            out.refused.append(("enableAllProjectMcpServers", source, "is not true or false"))
        elif held and value is True:
            out.withheld.append(("enableAllProjectMcpServers", source))
        else:
            out.mcp_enable_all = (value, source)
    for key, into in (
        ("enabledMcpjsonServers", out.mcp_enabled),
        ("disabledMcpjsonServers", out.mcp_disabled),
    ):
        names = data.get(key)
        if names is None or (key == "enabledMcpjsonServers" and file.scope == "project"):
            continue
        if not _strings(names):
            out.refused.append((key, source, "is not a list of server names"))
        elif held and key == "enabledMcpjsonServers":
            out.withheld.extend((f"{key} {n}", source) for n in names)
        else:
            into.extend((n, source) for n in names)


HOOK_APPROVAL_KEYS = ("enableAllProjectHooks", "enabledProjectHooks")


def _read_hook_approval(
    data: dict[str, JSON], file: SettingsFile, source: str, out: SettingsRead, held: bool
) -> None:
    """The project-hook approval keys of one file: the person's files only (see the doc)."""
    _refuse_self_approval(data, file, source, out, HOOK_APPROVAL_KEYS, "hooks")
    if file.scope == "project":
        return
    value = data.get("enableAllProjectHooks")
    if value is not None:
        if not isinstance(value, bool):
            out.refused.append(("enableAllProjectHooks", source, "is not true or false"))
        elif held and value is True:
            out.withheld.append(("enableAllProjectHooks", source))
        else:
            out.hooks_enable_all = (value, source)
    commands = data.get("enabledProjectHooks")
    if commands is not None:
        if not _strings(commands):
            out.refused.append(("enabledProjectHooks", source, "is not a list of commands"))
        elif held:
            out.withheld.extend(
                (f"enabledProjectHooks {shown_command(c)}", source) for c in commands
            )
        else:
            out.hooks_enabled.extend((c, source) for c in commands)


def hook_trust(read: SettingsRead) -> HookTrust:
    """What the person approved of the project's hooks, from their own files, and whether
    the folder is trusted (nothing runs when the person's file says disableAllHooks; none of
    the project's when a trusted project file does)."""
    every = read.hooks_enable_all is not None and read.hooks_enable_all[0] is True
    commands = frozenset(c for c, _ in read.hooks_enabled)
    return HookTrust(
        every,
        commands,
        disabled_by=read.hooks_disabled,
        folder_trusted=read.trusted,
        project_off_by=read.folder_hooks_off,
    )


def read_settings(workdir: Path, home: Path, trusted: bool | None = None) -> SettingsRead:
    """Read every settings file of the project (blocking: call it on a thread). `trusted`:
    the session's own decision on the folder (None: as `~/.claude.json` records it)."""
    trust = folder_trust(workdir, home, trusted)
    out = SettingsRead(trust=trust)
    out.refused.extend(("the file", "~/.claude.json", p.partition(": ")[2]) for p in trust.problems)
    files = settings_files(workdir, home)
    committed = _committed(files)
    for file in files:
        if file.path in committed:  # someone else's, whatever its name says
            file = SettingsFile(file.path, "project")
        held = file.scope != "user" and not trust.trusted
        _read_one(file, _shown(file.path, workdir, home), out, workdir, home, held)
    if out.hooks_disabled is not None:  # every hook off: none runs, none waits for approval
        out.hooks, out.project_hooks, out.folder_hooks, out.held_hooks = [], [], [], []
        return out
    if out.folder_hooks_off is not None:  # the project's hooks off, never the person's
        folder = {id(e) for e in out.folder_hooks}
        out.hooks = [e for e in out.hooks if id(e) not in folder]
        out.project_hooks, out.folder_hooks = [], []
    trust_of_hooks = hook_trust(out)
    theirs = {id(e) for e in out.project_hooks if not trust_of_hooks.allows(e)}
    out.unapproved_hooks = [e for e in out.hooks if id(e) in theirs]
    out.hooks = [e for e in out.hooks if id(e) not in theirs]
    return out


def describe(data: dict[str, Any]) -> str:
    """The text `%permissions` shows for `PermissionGate.summary()`."""
    lines = [f"Permission mode: {data['mode']} ({data['mode_source']})"]
    for kind in ("deny", "ask", "allow"):
        rules = data[kind]
        lines.append(f"{kind} ({len(rules)}):")
        width = max((len(r["rule"]) for r in rules), default=0)
        lines.extend(f"  {r['rule']:<{width}}  {r['source']}" for r in rules)
    if data["directories"]:
        lines.append("additional directories:")
        lines.extend(f"  {d['path']}  {d['source']}" for d in data["directories"])
    if data["refused"]:
        lines.append(f"refused ({len(data['refused'])}):")
        lines.extend(
            f"  {r['kind']} {r['rule']}  {r['source']}: {r['reason']}" for r in data["refused"]
        )
    withheld = data.get("withheld") or []
    if withheld:
        lines.append(
            f"not applied until this folder is trusted ({len(withheld)}; %trust yes trusts it):"
        )
        lines.extend(f"  {w['what']}  {w['source']}" for w in withheld)
    if data["files"]:
        lines.append("settings files read: " + ", ".join(data["files"]))
    else:
        lines.append("no settings file found (~/.claude/settings.json, .claude/settings.json, ...)")
    return "\n".join(lines)
