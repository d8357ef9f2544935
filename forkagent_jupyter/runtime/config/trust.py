"""Workspace trust: whether the person trusts the folder a session works in, recorded where
Claude Code records it.

A folder's own files (`.claude/settings.json`, `.claude/settings.local.json`, their
`.forkagent` twins, `.mcp.json`, the project's agent files) may have been written by anyone:
whoever made the repository, the archive, or the model in an earlier session. Until the person
trusts the folder, what those files grant waits (allow rules, a wider mode, additional
directories, hooks that run commands, MCP servers, the approval keys, disableAllHooks) and
what they forbid applies at once (deny and ask rules, a narrower mode, disabledMcpjsonServers);
`settings.py` and `mcp_config.py` say which is which. Trust unlocks only what the folder asks:
a project's hooks and `.mcp.json` servers still need the person's approval, as before.

Trust is `projects[<absolute path>].hasTrustDialogAccepted: true` in `~/.claude.json`, where
Claude Code's trust dialog writes it, so a folder trusted in one is trusted in the other. As
Claude Code decides for a folder whose files grant something: the folder's own entry counts,
and so does the entry of the git repository it is in (its root; for a linked worktree, its
main checkout, when that checkout's records point back at the worktree). A parent folder
that is no git root does not: Claude Code walks up the parents only for a folder that grants
nothing, and here trust matters only for one that does. The git root is found from the
`.git` entries on disk; no git command runs.

`Session(trusted=True)` (or False) decides for one session without recording anything;
`record_trust` records it (`%trust yes`, `Session.trust`). The file is read and written as
`files.py` reads configuration (a regular file of bounded size); a write keeps every other key
and replaces the file atomically. Everything here does blocking I/O: call it on a thread.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from .files import FileRefusedError, read_bytes

__all__ = [
    "CLAUDE_JSON",
    "MAX_CLAUDE_JSON_BYTES",
    "FolderTrust",
    "describe",
    "folder_trust",
    "git_root",
    "notice",
    "record_trust",
    "trusted_paths",
]

CLAUDE_JSON = ".claude.json"
MAX_CLAUDE_JSON_BYTES = 64_000_000
"""`~/.claude.json` is the person's own file, and Claude Code keeps per-project history in
it: it grows past the few MB of a settings file. Still a bound (and a regular file only)."""
TRUST_KEY = "hasTrustDialogAccepted"
HOW = "%trust yes trusts it (from the next turn)"
"""How a person trusts the folder, said wherever a grant waits."""


@dataclass(frozen=True)
class FolderTrust:
    """Whether `folder` is trusted, and why (one phrase)."""

    folder: Path
    trusted: bool
    why: str
    problems: tuple[str, ...] = field(default=())
    """`~/.claude.json` could not be read: one line each (the folder then counts as not
    trusted)."""


_cache: dict[tuple[int, int, int, int], frozenset[str]] = {}


def trusted_paths(home: Path) -> tuple[frozenset[str], list[str]]:
    """The folders `~/.claude.json` records as trusted, and one line per problem reading it
    (a file that cannot be read trusts nothing)."""
    path = home / CLAUDE_JSON
    try:
        seen = path.stat()
    except OSError:
        return frozenset(), []
    key = (seen.st_dev, seen.st_ino, seen.st_size, seen.st_mtime_ns)
    if key in _cache:
        return _cache[key], []
    try:
        data = _load(path)
    except ConfigError as exc:
        return frozenset(), [str(exc)]
    projects = data.get("projects") if isinstance(data, dict) else None
    found = frozenset(
        str(name)
        for name, entry in (projects.items() if isinstance(projects, dict) else ())
        if isinstance(entry, dict) and entry.get(TRUST_KEY) is True
    )
    _cache.clear()
    _cache[key] = found
    return found, []


def _load(path: Path) -> object:
    """`~/.claude.json`'s value (`{}` when there is none); ConfigError (one line) when it
    cannot be read."""
    try:
        raw = read_bytes(path, MAX_CLAUDE_JSON_BYTES)
    except FileRefusedError as exc:
        raise ConfigError(f"~/{CLAUDE_JSON}: {exc}") from None
    if raw is None:
        return {}
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ConfigError(f"~/{CLAUDE_JSON}: is nested too deeply to read") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"~/{CLAUDE_JSON}: is not JSON ({exc})") from None


def git_root(folder: Path) -> Path | None:
    """The root of the git repository `folder` is in (a linked worktree's main checkout when
    the main repository's records point back at that worktree), or None."""
    for here in (folder, *folder.parents):
        dot = here / ".git"
        try:
            if dot.is_dir():
                return here
            if dot.is_file():
                return _main_checkout(dot) or here
        except OSError:
            return None
    return None


def _main_checkout(dot: Path) -> Path | None:
    """For a worktree's `.git` file: its main checkout, if the main repository lists this
    worktree (`<gitdir>/gitdir` names this `.git` file). A `.git` file anyone can write; the
    main repository's records only its owner: without the link back, the worktree is a
    repository of its own."""
    try:
        text = (read_bytes(dot, 4096) or b"").decode("utf-8").strip()
        if not text.startswith("gitdir:"):
            return None
        gitdir = (dot.parent / text.removeprefix("gitdir:").strip()).resolve()
        back = (read_bytes(gitdir / "gitdir", 4096) or b"").decode("utf-8").strip()
        if not back or Path(back).resolve() != dot.resolve():
            return None
        common = (read_bytes(gitdir / "commondir", 4096) or b"").decode("utf-8").strip()
        main = (gitdir / common).resolve() if common else gitdir.parent.parent
    except (FileRefusedError, OSError, UnicodeDecodeError, ValueError):
        return None
    return main.parent if main.name == ".git" else None


def folder_trust(workdir: Path, home: Path, override: bool | None = None) -> FolderTrust:
    """Whether the person trusts `workdir` (see the module doc); `override` (True or False):
    the session's own decision, which wins."""
    folder = workdir.resolve()
    if override is True:
        return FolderTrust(folder, True, "trusted for this session (trusted=True)")
    if override is False:
        return FolderTrust(folder, False, "not trusted in this session (trusted=False)")
    paths, problems = trusted_paths(home)
    if str(folder) in paths:
        return FolderTrust(folder, True, f"trusted (~/{CLAUDE_JSON}, {folder})")
    root = git_root(folder)
    if root is not None and str(root) in paths:
        why = f"trusted: its git repository is (~/{CLAUDE_JSON}, {root})"
        return FolderTrust(folder, True, why)
    return FolderTrust(folder, False, "not trusted", tuple(problems))


def record_trust(workdir: Path, home: Path) -> str:
    """Record in `~/.claude.json` that the person trusts `workdir` (its other keys kept; the
    file replaced atomically) and say so in one line. ConfigError (one line, the file
    untouched) when the file cannot take it."""
    folder = workdir.resolve()
    path = home / CLAUDE_JSON
    target = path.resolve() if path.is_symlink() else path  # a dotfile linked elsewhere
    try:
        data = _load(target)
    except ConfigError as exc:
        raise ConfigError(f"{exc}; not changed") from None
    if not isinstance(data, dict):
        raise ConfigError(f"~/{CLAUDE_JSON}: is not a JSON object; not changed")
    projects = data.setdefault("projects", {})
    if not isinstance(projects, dict):
        raise ConfigError(f"~/{CLAUDE_JSON}: projects is not an object; not changed")
    entry = projects.setdefault(str(folder), {})
    if not isinstance(entry, dict):
        raise ConfigError(
            f"~/{CLAUDE_JSON}: projects[{str(folder)!r}] is not an object; not changed"
        )
    if entry.get(TRUST_KEY) is True:
        return f"{folder} is trusted already (~/{CLAUDE_JSON})"
    entry[TRUST_KEY] = True
    try:
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    except (RecursionError, ValueError):
        raise ConfigError(f"~/{CLAUDE_JSON}: cannot be written back; not changed") from None
    _write(target, text)
    return (
        f"trusted {folder} (~/{CLAUDE_JSON}: projects[...].{TRUST_KEY}); what its files grant "
        "applies from the next turn"
    )


def _write(target: Path, text: str) -> None:
    """`text` into `target` through a new file beside it, renamed over it (a reader sees the
    old file or the new one, never half of one); its permissions kept (0600 for a new one)."""
    try:
        mode = target.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    except OSError as exc:
        raise ConfigError(
            f"~/{CLAUDE_JSON}: cannot be read ({exc.strerror}); not changed"
        ) from None
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), mode)
        try:
            os.write(fd, text.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        tmp.chmod(mode)
        tmp.replace(target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigError(
            f"~/{CLAUDE_JSON}: cannot be written ({exc.strerror or exc}); not changed"
        ) from None


MAX_LISTED = 12


def _listed(asks: list[tuple[str, str]]) -> str:
    """`asks` (what, source) grouped by source: "allow Bash, allow Python (.claude/settings.json);
    ..."."""
    by_source: dict[str, list[str]] = {}
    for what, source in asks:
        by_source.setdefault(source, []).append(what)
    parts: list[str] = []
    left = MAX_LISTED
    for source, whats in by_source.items():
        shown = whats[: max(left, 1)]
        more = len(whats) - len(shown)
        left -= len(shown)
        parts.append(", ".join(shown) + (f" and {more} more" if more else "") + f" ({source})")
    return "; ".join(parts)


def notice(trust: FolderTrust, asks: list[tuple[str, str]]) -> str | None:
    """The one line a turn says when the folder is not trusted and its files ask for
    something (None otherwise)."""
    if trust.trusted or not asks:
        return None
    return (
        f"this folder ({trust.folder}) is not trusted, so what its files grant is not "
        f"applied: {_listed(asks)}. Their deny and ask rules apply. %trust shows it; {HOW}"
    )


def describe(trust: FolderTrust, asks: list[tuple[str, str]]) -> str:
    """The text `%trust` shows: the folder, whether it is trusted and why, and what its files
    ask for (applied or waiting)."""
    lines = [f"{trust.folder}: {trust.why}"]
    lines += [f"  {p}" for p in trust.problems]
    if not asks:
        lines.append("its files ask for nothing that needs trust")
        return "\n".join(lines)
    state = "applied" if trust.trusted else f"not applied until the folder is trusted; {HOW}"
    lines.append(f"what its files grant ({len(asks)}; {state}):")
    lines += [f"  {what}  {source}" for what, source in asks]
    if not trust.trusted:
        lines.append("their deny rules, ask rules and narrower modes apply already")
    return "\n".join(lines)
