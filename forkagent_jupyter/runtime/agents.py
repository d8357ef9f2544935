"""Named agents: definitions from `.forkagent/agents/*.md` files, and the built-in one.

A definition file is Markdown with YAML front matter; the body is the agent's system prompt:

    ---
    name: reviewer                  # optional: defaults to the file name without `.md`
    description: Reviews a change and reports problems
    tools: Read, Grep, Glob         # a YAML list or a comma-separated string; omit for all
    disallowedTools: [Bash]
    model: inherit
    permissionMode: plan
    background: true
    isolation: worktree
    maxTurns: 20
    ---
    You review code...

Where definitions come from, later ones replacing earlier ones of the same name: the built-in
`general-purpose`, then the user's `<home>/.claude/agents/*.md` and `<home>/.forkagent/agents/*.md`,
then the project's `<workdir>/.claude/agents/*.md` and `<workdir>/.forkagent/agents/*.md`.
Claude Code's agent files are read as they are; within one scope a `.forkagent` file wins over
a `.claude` file of the same name (said once, as an `AgentFileWarning`). Files whose name
starts with `.` are skipped.

`model` takes a model id, `inherit` (the parent's model) or an alias, resolved through
`MODEL_ALIASES`: `sonnet`, `opus` and `haiku` name the current model of that family.

Errors: a file that cannot be used is an `AgentFileError` whose one-line message names the
file and, where there is one, the field; so are two files in one folder that define the same
name. A key this runtime does not use (Claude Code's `color`, `mcpServers`, `hooks`,
`skills`, or a typo) does not reject the file: it is ignored with one `AgentFileWarning`
naming the file and the key (with the key it was probably meant to be).

Two ways to load:

* `load_agents(workdir, home)` returns the definitions and raises the first error
  (`strict=False` skips bad files instead, logging each one);
* `scan_agents(workdir, home)` never raises: it returns the usable definitions together
  with every error, for a UI that lists what is wrong.
"""

from __future__ import annotations

import difflib
import logging
import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from .errors import ConfigError

__all__ = [
    "GENERAL_PURPOSE",
    "MODEL_ALIASES",
    "AgentDefinition",
    "AgentFileError",
    "AgentFileWarning",
    "AgentScan",
    "agent_listing",
    "load_agent_file",
    "load_agents",
    "resolve_model",
    "scan_agents",
    "unknown_agent_message",
]

log = logging.getLogger(__name__)

NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"
_NAME_RULE = "1 to 64 letters, digits, '_' or '-'"
_LOADER_FIELDS = {
    "prompt": "the Markdown body after the front matter is the prompt",
    "source": "it is set by where the file is",
    "path": "it is set by where the file is",
}

MODEL_ALIASES = {
    "sonnet": "claude-sonnet-5-5",
    "opus": "claude-opus-5-5",
    "haiku": "claude-haiku-5-5",
}
"""Model aliases of agent files (Claude Code's), each the current model of its family."""

Source = Literal["built-in", "project", "user"]
PermissionMode = Literal["default", "acceptEdits", "bypassPermissions", "plan", "bubble"]
_Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class AgentFileError(ConfigError):
    """A definition file that cannot be used; the message names the file and the field."""

    def __init__(self, path: Path, field: str | None, problem: str) -> None:
        where = f"{path}: field '{field}': " if field else f"{path}: "
        super().__init__(where + problem)
        self.path = path
        self.field = field
        self.problem = problem


class AgentFileWarning(UserWarning):
    """Something in a definition file was ignored (the message names the file and why)."""


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    """Definitions are read again at each use: say each thing once per process."""
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)
        warnings.warn(message, AgentFileWarning, stacklevel=3)


def resolve_model(name: str | None, parent_model: str) -> str | None:
    """A definition's `model`: None stays None (the session's default), `inherit` is the
    parent's model, an alias is its model id, anything else is taken as a model id."""
    if name is None:
        return None
    if name == "inherit":
        return parent_model
    return MODEL_ALIASES.get(name.lower(), name)


class AgentDefinition(BaseModel):
    """One named agent. Field names are the front-matter keys, spelled as in the file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    description: _Text
    tools: list[str] | None = None
    """Tool names the agent may use; None means every tool of the session."""
    disallowedTools: list[str] = Field(default_factory=list)  # noqa: N815 (file key)
    prompt: str = ""
    """The agent's system prompt (the file's Markdown body)."""
    model: _Text | None = None
    """A model name, "inherit" (the parent's model), or None (the session's default)."""
    permissionMode: PermissionMode | None = None  # noqa: N815
    background: bool = False
    isolation: Literal["worktree"] | None = None
    maxTurns: int | None = Field(default=None, gt=0)  # noqa: N815
    namespace: Literal["isolated", "shared"] | None = None
    """Where its Python runs: its own process from a snapshot (isolated) or the notebook's
    namespace (shared); None means the session's setting."""
    source: Source
    path: Path | None = None

    @field_validator("tools", "disallowedTools", mode="before")
    @classmethod
    def _tool_list(cls, value: Any) -> Any:
        """Accept "Read, Grep" as well as a YAML list; ["*"] means every tool."""
        if isinstance(value, str):
            value = value.split(",")
        if isinstance(value, list):
            value = [v.strip() if isinstance(v, str) else v for v in value]
            value = [v for v in value if v != ""]
        return value

    @field_validator("tools")
    @classmethod
    def _star_means_all(cls, value: list[str] | None) -> list[str] | None:
        return None if value is not None and "*" in value else value


GENERAL_PURPOSE = AgentDefinition(
    name="general-purpose",
    description=(
        "A capable worker for any self-contained task: research, data analysis, code changes. "
        "It starts with only the prompt you give it, so say everything it needs."
    ),
    prompt=(
        "You are a worker agent. Another agent handed you one task, and the task text is all "
        "the context you get: look up what you need with your tools instead of guessing. "
        "Work until the task is done, checking your results where you can. Then reply once "
        "with a short report for the agent that started you: the answer or what you changed, "
        "the numbers, names and file paths that matter, and anything you could not finish. "
        "No preamble and no suggestions beyond the task."
    ),
    source="built-in",
)


class AgentScan(NamedTuple):
    """What `scan_agents` found: the usable definitions and the files that are not."""

    agents: dict[str, AgentDefinition]
    errors: list[AgentFileError]


def _split_front_matter(path: Path, text: str) -> tuple[str, str]:
    """(YAML text, body) of a definition file."""
    lines = text.removeprefix("\ufeff").split("\n")
    if lines[0].rstrip() != "---":
        raise AgentFileError(path, None, "missing front matter (the file must start with '---')")
    for i, line in enumerate(lines[1:], start=1):
        if line.rstrip() == "---":
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :])
    raise AgentFileError(path, None, "front matter has no closing '---' line")


def _parse_yaml(path: Path, head: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or type(exc).__name__
        where = f"line {mark.line + 2}: " if mark is not None else ""  # +1 for '---', +1 base
        problem = f"front matter is not valid YAML ({where}{problem})"
        raise AgentFileError(path, None, problem) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AgentFileError(path, None, "front matter must be 'key: value' lines")
    return {str(k): v for k, v in data.items()}


def _validation_problem(path: Path, exc: ValidationError) -> AgentFileError:
    errors = exc.errors()
    first = errors[0]
    loc = [str(p) for p in first["loc"]]
    field = loc[0] if loc else None
    if first["type"] == "extra_forbidden" and field is not None:
        keys = [k for k in AgentDefinition.model_fields if k not in _LOADER_FIELDS]
        close = difflib.get_close_matches(field, keys, n=1)
        problem = "unknown key" + (f" (did you mean '{close[0]}'?)" if close else "")
    else:
        problem = first["msg"]
        if first["type"] == "string_pattern_mismatch" and field == "name":
            problem = f"{first['input']!r} is not a valid name ({_NAME_RULE})"
        position = first["loc"][1] if len(first["loc"]) > 1 else None
        if isinstance(position, int):
            problem = f"item {position + 1}: {problem}"
    if len(errors) > 1:
        problem += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return AgentFileError(path, field, problem)


def load_agent_file(path: Path, source: Literal["project", "user"] = "project") -> AgentDefinition:
    """Parse one definition file; every problem is an `AgentFileError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise AgentFileError(path, None, "is not UTF-8 text") from None
    except OSError as exc:
        raise AgentFileError(path, None, f"cannot be read ({exc.strerror})") from None
    head, body = _split_front_matter(path, text)
    data = _parse_yaml(path, head)
    for key, why in _LOADER_FIELDS.items():
        if key in data:
            raise AgentFileError(path, key, f"not allowed in front matter ({why})")
    if "name" not in data:
        data["name"] = path.stem
        if not re.fullmatch(NAME_PATTERN, path.stem):
            raise AgentFileError(
                path,
                "name",
                f"the file name {path.stem!r} is not a valid name ({_NAME_RULE}); "
                "rename the file or set 'name'",
            )
    known = set(AgentDefinition.model_fields) - set(_LOADER_FIELDS)
    for key in [k for k in data if k not in known and k != "name"]:
        close = difflib.get_close_matches(key, sorted(known), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        _warn_once(f"{path}: key '{key}' is not used here and was ignored{hint}")
        del data[key]
    data.update(prompt=body.strip("\n").rstrip(), source=source, path=path)
    try:
        return AgentDefinition.model_validate(data)
    except ValidationError as exc:
        raise _validation_problem(path, exc) from None


def _folders(workdir: Path, home: Path | None) -> list[tuple[Path, Literal["project", "user"]]]:
    """The folders to read, in order: user (`.claude`, then `.forkagent`), then project."""
    places: list[tuple[Path, Literal["project", "user"]]] = []
    scopes: list[tuple[Path, Literal["project", "user"]]] = []
    if home is not None and Path(home).resolve() != Path(workdir).resolve():
        scopes.append((Path(home), "user"))
    scopes.append((Path(workdir), "project"))  # the work dir is the home dir: read it once
    for base, source in scopes:
        places.append((base / ".claude" / "agents", source))
        places.append((base / ".forkagent" / "agents", source))
    return places


def scan_agents(workdir: Path, home: Path | None = None) -> AgentScan:
    """All usable definitions (built-in, then user, then project) and every file error."""
    agents = {GENERAL_PURPOSE.name: GENERAL_PURPOSE}
    errors: list[AgentFileError] = []
    scope_files: dict[tuple[str, str], Path] = {}  # (scope, name) -> the file that defined it
    for folder, source in _folders(workdir, home):
        if not folder.is_dir():
            continue
        seen: dict[str, Path] = {}
        for file in sorted(folder.glob("*.md")):
            if file.name.startswith(".") or not file.is_file():
                continue
            try:
                definition = load_agent_file(file, source)
            except AgentFileError as exc:
                errors.append(exc)
                continue
            if definition.name in seen:
                errors.append(
                    AgentFileError(
                        file,
                        "name",
                        f"{definition.name!r} is already defined by {seen[definition.name].name}",
                    )
                )
                continue
            seen[definition.name] = file
            earlier = scope_files.get((source, definition.name))
            if earlier is not None:
                _warn_once(
                    f"agent '{definition.name}': {file} is used; {earlier} defines the same "
                    "name and is ignored (.forkagent wins over .claude)"
                )
            scope_files[(source, definition.name)] = file
            agents[definition.name] = definition
    return AgentScan(agents, errors)


def load_agents(
    workdir: Path, home: Path | None = None, *, strict: bool = True
) -> dict[str, AgentDefinition]:
    """Definitions by name: built-in, then user, then project (later ones win).

    With `strict` (the default) the first bad file raises its `AgentFileError`; without it,
    bad files are left out and logged. `scan_agents` returns the errors instead."""
    agents, errors = scan_agents(workdir, home)
    if errors and strict:
        raise errors[0]
    for error in errors:
        log.warning("agent definition skipped: %s", error)
    return agents


def unknown_agent_message(name: str, available: Iterable[str]) -> str:
    """The error for an agent type that is not defined, listing the defined ones."""
    names = ", ".join(sorted(available)) or "none"
    return f"Agent type '{name}' not found. Available agents: {names}"


def agent_listing(agents: dict[str, AgentDefinition]) -> str:
    """What the model is told of the named agents it can start with the Agent tool. It goes
    into the conversation (a user turn's first block, when it changed since it was last
    said), not into the tool's description: the tools head every request's cached prefix, so
    an agent file added mid-session would otherwise make the whole prefix a cache miss."""
    lines = [
        "<system-reminder>",
        "Agent types available to the Agent tool (its subagent_type):",
    ]
    for name in sorted(agents):
        agent = agents[name]
        tools = ", ".join(agent.tools) if agent.tools is not None else "all tools"
        if agent.disallowedTools:
            tools += " except " + ", ".join(agent.disallowedTools)
        mode = "; runs in the background" if agent.background else ""
        lines.append(f"- {name}: {agent.description} (Tools: {tools}{mode})")
    lines.append("</system-reminder>")
    return "\n".join(lines)
