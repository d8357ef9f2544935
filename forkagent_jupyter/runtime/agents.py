"""Named agents: definitions from `.forkagent/agents/*.md` files, and the built-in one.

A definition file is Markdown with YAML front matter; the body is the agent's system prompt:

    ---
    name: reviewer
    description: Reviews a change and reports problems
    tools: Read, Grep, Glob
    model: inherit
    maxTurns: 20
    ---
    You review code...

Files in `~/.forkagent/agents/` (user) are read first, then `<workdir>/.forkagent/agents/`
(project), which override user files of the same name. A malformed file is an
`AgentFileError` naming the file and the field; unknown keys are errors too, so a typo does
not pass silently.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ConfigError

__all__ = [
    "GENERAL_PURPOSE",
    "AgentDefinition",
    "AgentFileError",
    "load_agent_file",
    "load_agents",
    "unknown_agent_message",
]


class AgentFileError(ConfigError):
    """A definition file that cannot be used; the message names the file and the field."""

    def __init__(self, path: Path, field: str | None, problem: str) -> None:
        where = f"{path}: field '{field}': " if field else f"{path}: "
        super().__init__(where + problem)
        self.path = path
        self.field = field


class AgentDefinition(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str = Field(min_length=1)
    tools: list[str] | None = None
    disallowedTools: list[str] = Field(default_factory=list)  # noqa: N815 (file key)
    prompt: str = ""
    model: str | None = None
    permissionMode: (  # noqa: N815
        Literal["default", "acceptEdits", "bypassPermissions", "plan", "bubble"] | None
    ) = None
    background: bool = False
    isolation: Literal["worktree"] | None = None
    maxTurns: int | None = Field(default=None, gt=0)  # noqa: N815
    source: Literal["built-in", "project", "user"] = "project"
    path: Path | None = None

    @field_validator("tools", "disallowedTools", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return value


GENERAL_PURPOSE = AgentDefinition(
    name="general-purpose",
    description="A capable worker for any self-contained task: research, analysis, code.",
    prompt=(
        "You are a worker agent started by another agent for one task. You have only the "
        "task's text as context, so read what you need with your tools before acting. Do the "
        "task completely, then reply once with a concise report: what you found or changed, "
        "the key numbers or file paths, and anything left open."
    ),
    source="built-in",
)


def load_agent_file(path: Path, source: Literal["project", "user"] = "project") -> AgentDefinition:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AgentFileError(path, None, f"cannot be read ({exc.strerror})") from None
    if not text.startswith("---"):
        raise AgentFileError(path, None, "missing front matter (the file must start with '---')")
    head, sep, body = text[3:].partition("\n---")
    if not sep:
        raise AgentFileError(path, None, "front matter is not closed by a '---' line")
    try:
        data = yaml.safe_load(head) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 2})" if mark is not None else ""
        raise AgentFileError(path, None, f"front matter is not valid YAML{line}") from None
    if not isinstance(data, dict):
        raise AgentFileError(path, None, "front matter must be a mapping of keys to values")
    if "prompt" in data or "source" in data or "path" in data:
        bad = next(k for k in ("prompt", "source", "path") if k in data)
        raise AgentFileError(path, bad, "not allowed in front matter")
    data.setdefault("name", path.stem)
    data["prompt"] = body.lstrip("\n").lstrip("-").strip()
    data["source"] = source
    data["path"] = path
    try:
        return AgentDefinition.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or None
        problem = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        raise AgentFileError(path, field, problem) from None


def load_agents(workdir: Path, home: Path | None = None) -> dict[str, AgentDefinition]:
    """Built-in, then user, then project definitions (later ones override earlier ones).
    The first malformed file raises its AgentFileError."""
    agents = {GENERAL_PURPOSE.name: GENERAL_PURPOSE}
    places: list[tuple[Path, Literal["project", "user"]]] = []
    if home is not None:
        places.append((home / ".forkagent" / "agents", "user"))
    places.append((workdir / ".forkagent" / "agents", "project"))
    for folder, source in places:
        if folder.is_dir():
            for file in sorted(folder.glob("*.md")):
                definition = load_agent_file(file, source)
                agents[definition.name] = definition
    return agents


def unknown_agent_message(name: str, available: list[str]) -> str:
    return f"Agent type '{name}' not found. Available agents: {', '.join(sorted(available))}"
