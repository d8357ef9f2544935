"""What an agent file's `skills` and `memory` put into the agent's context.

`skills: [name, ...]`: each skill's `SKILL.md` is read from the project's
`.claude/skills/<name>/SKILL.md`, else the user's `~/.claude/skills/<name>/SKILL.md`
(`.forkagent/skills` beside each too), and its whole text goes into the agent's system prompt
(Claude Code preloads the skill's content the same way). A skill that is not found is one
note; the agent loads without it. Files the skill lists as resources are not preloaded: the
agent reads them with its tools from the skill's folder, which the prompt names.

`memory: user | project | local`: the agent's memory folder is
`~/.claude/agent-memory/<agent>/` (user), `.claude/agent-memory/<agent>/` (project, shared
through version control) or `.claude/agent-memory-local/<agent>/` (local, personal: keep it
out of git). Its `MEMORY.md` (the first 200 lines, 25,000 characters at most) goes into the
system prompt, with the folder's path; the agent keeps it up to date with Write and Edit.
Project and local folders are inside the work directory; the user folder is outside it, so
writing there needs a rule (`Edit(~/.claude/agent-memory/**)`).

Read at each agent start (on the thread that reads the agent files): an edit counts from the
next agent on. The project's skill files and its memory files (project and local scope) are
someone else's words: one that is a symlink to a file outside the project (or lies in a
folder that is) is not read, in one note (its text would go into the system prompt sent to
the API: `~/.ssh/id_rsa`, the kernel's `/proc/self/environ`); the person's own skill folders
(`~/.claude/skills`, `~/.forkagent/skills`) are as good a target. A file is read only when it
is a regular file (`files.py`: a FIFO never hangs the agent's start).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from .files import FileRefusedError, read_bytes

__all__ = ["MEMORY_LINES", "AgentFields", "context_fields", "memory_folder", "system_text"]

MEMORY_LINES = 200
MEMORY_CHARS = 25_000
SKILL_BYTES = 200_000


class AgentFields(Protocol):
    """What this module reads of an agent definition (`agents.AgentDefinition`)."""

    @property
    def name(self) -> str: ...
    @property
    def path(self) -> Path | None: ...
    @property
    def prompt(self) -> str: ...
    @property
    def skills(self) -> list[str]: ...
    @property
    def memory(self) -> str | None: ...
    @property
    def loaded_skills(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def memory_dir(self) -> Path | None: ...
    @property
    def memory_text(self) -> str: ...


def memory_folder(scope: str, agent: str, workdir: Path, home: Path | None) -> Path:
    """Where the memory of `agent` lives for `scope` (see the module doc)."""
    if scope == "user":
        return (home if home is not None else Path.home()) / ".claude" / "agent-memory" / agent
    if scope == "local":
        return workdir / ".claude" / "agent-memory-local" / agent
    return workdir / ".claude" / "agent-memory" / agent


def _skill(name: str, workdir: Path, home: Path | None) -> tuple[Path, bool] | None:
    """The skill's file, and whether it is the project's (else the person's own)."""
    roots = [(workdir, True)] + ([(home, False)] if home is not None else [])
    for root, theirs in roots:
        for folder in (".claude", ".forkagent"):
            path = root / folder / "skills" / name / "SKILL.md"
            if path.is_symlink() or path.exists():
                return path, theirs
    return None


def _outside(path: Path, workdir: Path, home: Path | None) -> Path | None:
    """Where the project's file `path` really is, when that is outside the project and the
    person's skill folders (None: inside)."""
    real = path.resolve()
    allowed = [workdir.resolve()]
    if home is not None:
        allowed += [(home / f / "skills").resolve() for f in (".claude", ".forkagent")]
    return None if any(real.is_relative_to(a) for a in allowed) else real


def _read(path: Path, limit: int) -> str:
    """At most `limit` bytes of the file, as text; FileRefusedError when it is not a regular
    file; FileNotFoundError when there is none."""
    raw = read_bytes(path, limit, head=True)
    if raw is None:
        raise FileNotFoundError(path)
    return raw.decode("utf-8", errors="replace")


def context_fields(
    definition: AgentFields, workdir: Path, home: Path | None, notes: list[str]
) -> dict[str, object]:
    """The definition's fields that its skills' and memory's texts fill (`loaded_skills`,
    `memory_dir`, `memory_text`; none without skills or memory), read (blocking: on a
    thread)."""
    if not definition.skills and definition.memory is None:
        return {}
    where = str(definition.path or definition.name)
    loaded: list[tuple[str, str]] = []
    for name in definition.skills:
        found = _skill(name, workdir, home)
        if found is None:
            notes.append(
                f"{where}: skill '{name}' not found (.claude/skills/{name}/SKILL.md in the "
                "project or your home folder); the agent loads without it"
            )
            continue
        path, theirs = found
        real = _outside(path, workdir, home) if theirs else None
        if real is not None:
            notes.append(
                f"{where}: skill '{name}': {path} is a link to {real}, outside the project; "
                "not read (the agent loads without it)"
            )
            continue
        try:
            loaded.append((name, f"(folder: {path.parent})\n" + _read(path, SKILL_BYTES)))
        except (OSError, FileRefusedError) as exc:
            notes.append(f"{where}: skill '{name}': {path} cannot be read ({exc})")
    update: dict[str, object] = {"loaded_skills": tuple(loaded)}
    if definition.memory is not None:
        update.update(_memory(definition, workdir, home, where, notes))
    return update


def _memory(
    definition: AgentFields, workdir: Path, home: Path | None, where: str, notes: list[str]
) -> dict[str, object]:
    """The agent's memory folder and the text of its MEMORY.md (see the module doc)."""
    scope = definition.memory or "project"
    folder = memory_folder(scope, definition.name, workdir, home)
    file = folder / "MEMORY.md"
    text = ""
    real = _outside(file, workdir, None) if scope != "user" else None
    if real is not None and (file.is_symlink() or file.exists()):
        notes.append(
            f"{where}: memory {file} is a link to {real}, outside the project; not read (the "
            "agent starts with an empty memory)"
        )
        return {"memory_dir": folder, "memory_text": ""}
    try:
        lines = _read(file, MEMORY_CHARS * 4).splitlines()
        text = "\n".join(lines[:MEMORY_LINES])[:MEMORY_CHARS]
    except FileNotFoundError:
        pass
    except (OSError, FileRefusedError) as exc:
        notes.append(f"{where}: memory {file} cannot be read ({exc})")
    return {"memory_dir": folder, "memory_text": text}


def system_text(definition: AgentFields, fallback: str) -> str:
    """The agent's system prompt: its file's body, then its skills, then its memory."""
    parts = [definition.prompt or fallback]
    for name, text in definition.loaded_skills:
        parts.append(f'<skill name="{name}">\n{text.strip()}\n</skill>')
    if definition.memory_dir is not None:
        folder = definition.memory_dir
        memory = definition.memory_text.strip() or "(empty: nothing remembered yet)"
        parts.append(
            f"# Your memory ({definition.memory} scope)\n"
            f"You have a persistent memory folder: {folder}\n"
            f"What you learn that will help in later runs (conventions, where things are, "
            f"what failed), keep in {folder / 'MEMORY.md'} with Write or Edit; create the "
            "folder's files as needed. Keep MEMORY.md short: only its first "
            f"{MEMORY_LINES} lines are read. Its current content:\n"
            f"<memory>\n{memory}\n</memory>"
        )
    return "\n\n".join(parts)
