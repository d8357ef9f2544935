"""Named agents: definitions from agent files (Claude Code's and ours), and the built-in one.

A definition file is Markdown with YAML front matter; the body is the agent's system prompt:

    ---
    name: reviewer                  # optional: defaults to the file name without `.md`
    description: Reviews a change and reports problems
    tools: Read, Grep, Glob         # a YAML list or a comma-separated string; omit for all
                                    # but the agent tools; '*' for all, those too
    disallowedTools: [Bash]
    model: inherit
    permissionMode: plan
    background: true
    isolation: worktree
    maxTurns: 20
    skills: [sql-style]             # see skills_and_memory.py (skills, memory)
    memory: project
    initialPrompt: Read your memory first.
    hooks: {...}                    # as in a settings file, for this agent's run (hooks.py)
    ---
    You review code...

Where definitions come from, later ones replacing earlier ones of the same name (Claude
Code's precedence): the built-in `general-purpose`, then the user's `<home>/.claude/agents`
and `<home>/.forkagent/agents`, then the project's `<workdir>/.claude/agents` and
`<workdir>/.forkagent/agents`, each with its subfolders (see `agent_files`: a collection
installed in a subfolder is found; the path does not change an agent's identity, its `name`
does). A definition that replaces another is said once (an `AgentFileWarning` naming both
files); within one scope a `.forkagent` file wins over a `.claude` one, and within one folder
the shallower file (then the first by path) keeps the name.

`model` takes `inherit` (the parent's model), an alias that Claude Code documents (`sonnet`,
`opus`, `haiku`, `fable`, `best`, `opusplan`, `default`, and `[1m]` suffixes; see
`MODEL_ALIASES` and `resolve_model`), or a full model id (`claude-...`, a Bedrock or Vertex
id). Anything else is refused when the file is read.

Tool names: Claude Code's are taken as they are (`Task`, its old name for `Agent`, is read as
`Agent`). A name the session has no tool for is not an error; the listing and the agent's
card say which named tools it does not get.

Bad files: a file that cannot be used is an `AgentFileError` whose one-line message names the
file, the line and the field. It never stops the other files from loading: `scan_agents`
returns it beside the usable definitions and says it once (an `AgentFileWarning`); starting
the agent it would have defined reports it. A key this runtime does not use is ignored with
one warning: an unknown key says the key it was probably meant to be; `color` is ignored
silently (it is only the colour of the agent in Claude Code's terminal). `mcpServers` (names
of configured servers, or `{name: server}` started with the agent) and `requiredMcpServers`
are honoured (`mcp/servers.py`).

Two ways to load:

* `scan_agents(workdir, home)` never raises: the usable definitions, every file error, and
  the notes (overrides, ignored keys);
* `load_agents(workdir, home)` returns the definitions and raises the first error
  (`strict=False` skips bad files instead, logging each one).
"""

from __future__ import annotations

import difflib
import logging
import re
import warnings
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from ..errors import ConfigError
from ..model.names import MODEL_ALIASES, model_problem, resolve_model
from .agent_files import FileProblemError, agent_files, parse_front_matter, read_agent_text
from .hooks import parse_hooks
from .skills_and_memory import context_fields

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
    "missing_tools",
    "model_problem",
    "resolve_model",
    "scan_agents",
    "unknown_agent_message",
]

log = logging.getLogger(__name__)

NAME_PATTERN = r"^[a-zA-Z0-9_-][a-zA-Z0-9_.-]{0,63}$"
_NAME_RULE = "1 to 64 letters, digits, '_', '-' or '.', not starting with '.'"
_LOADER_FIELDS = {
    "prompt": "the Markdown body after the front matter is the prompt",
    "source": "it is set by where the file is",
    "path": "it is set by where the file is",
    "loaded_skills": "it is read from .claude/skills",
    "memory_dir": "it is set by 'memory'",
    "memory_text": "it is read from the memory folder",
}

Source = Literal["built-in", "project", "user"]
PermissionMode = Literal["default", "acceptEdits", "bypassPermissions", "plan", "dontAsk", "bubble"]
_Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]

_WHOLE_TOOL = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\(\s*\*\s*\)$")
TOOL_ALIASES = {"Task": "Agent"}
"""Claude Code's older tool names, read as the tool they name now."""
CLAUDE_CODE_LATER: dict[str, str] = {}
"""Claude Code keys this runtime does not honour yet: ignored with a note that says so."""
SILENTLY_IGNORED = frozenset({"color"})
"""Claude Code keys that mean nothing here (the agent's colour in Claude Code's terminal)."""


class AgentFileError(ConfigError):
    """A definition file that cannot be used. The message names the file, the line (when
    known) and the field: `path:line: field 'maxTurns': problem`. `name` is the agent name
    the file would have defined (its `name`, else its file name)."""

    def __init__(
        self,
        path: Path,
        field: str | None,
        problem: str,
        *,
        line: int | None = None,
        name: str | None = None,
    ) -> None:
        where = f"{path}:{line}: " if line is not None else f"{path}: "
        if field:
            where += f"field '{field}': "
        super().__init__(where + problem)
        self.path = path
        self.field = field
        self.problem = problem
        self.line = line
        self.name = name


class AgentFileWarning(UserWarning):
    """Something in a definition file was ignored (the message names the file and why)."""


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    """Definitions are read again at each use: say each thing once per process."""
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)
        try:
            warnings.warn(message, AgentFileWarning, stacklevel=3)
        except AgentFileWarning:  # warnings made errors (-W error): still never stop a scan
            pass


class AgentDefinition(BaseModel):
    """One named agent. Field names are the front-matter keys, spelled as in the file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    description: _Text
    tools: list[str] | None = None
    """Tool names the agent may use. None (no list) means every tool of the session but the
    agent tools (Agent, SendMessage, TaskStop, TaskOutput); `["*"]` means every tool of the
    session, the agent tools too."""
    disallowedTools: list[str] = Field(default_factory=list)  # noqa: N815 (file key)
    prompt: str = ""
    """The agent's system prompt (the file's Markdown body)."""
    model: _Text | None = None
    """A model name, "inherit" (the parent's model), or None (the session's default)."""
    permissionMode: PermissionMode | None = None  # noqa: N815
    background: bool = False
    isolation: Literal["worktree"] | None = None
    maxTurns: int | None = Field(default=None, gt=0)  # noqa: N815
    thinking: int | Literal["adaptive", "off"] | None = None
    """Extended thinking for the agent: a budget in tokens (1024 or more), "adaptive", or
    none (its requests then leave thinking out, as the reference's named agents do)."""
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    """The API's `output_config.effort` for the agent's requests."""
    namespace: Literal["isolated", "shared"] | None = None
    """Where its Python runs: its own process from a snapshot (isolated) or the notebook's
    namespace (shared); None means the session's setting."""
    skills: list[str] = Field(default_factory=list)
    """Skills preloaded into the agent's context (`skills_and_memory.py`)."""
    memory: Literal["user", "project", "local"] | None = None
    """The agent's memory folder, read into its system prompt (`skills_and_memory.py`)."""
    initialPrompt: _Text | None = None  # noqa: N815
    """Put before the first prompt the agent is given."""
    loaded_skills: tuple[tuple[str, str], ...] = ()
    memory_dir: Path | None = None
    memory_text: str = ""
    mcpServers: list[str | dict[str, object]] | None = None  # noqa: N815
    """MCP servers for this agent: names of configured servers, or `{name: server}` started
    with the agent and stopped when it ends (a mapping of names to servers is read the same
    way)."""
    requiredMcpServers: list[str] = Field(default_factory=list)  # noqa: N815
    """Servers that must be up: the Agent call waits for them (bounded) or fails."""
    hooks: dict[str, object] | None = None
    """Hooks for this agent's run only, as in a settings file (see `hooks.py`); its `Stop`
    hooks run when it ends (`SubagentStop`)."""
    source: Source
    path: Path | None = None

    @field_validator("hooks")
    @classmethod
    def _hooks(cls, value: dict[str, object] | None) -> dict[str, object] | None:
        if value is not None:
            _entries, refused = parse_hooks(value, "the agent file")
            if refused:
                raise ValueError(refused[0].replace(" in the agent file", ""))
        return value

    @field_validator("mcpServers", mode="before")
    @classmethod
    def _servers(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, dict):
            value = [{k: v} for k, v in value.items()]
        if isinstance(value, list):
            for entry in value:
                if isinstance(entry, dict) and not all(isinstance(v, dict) for v in entry.values()):
                    raise ValueError(f"a server is an object of its settings ({entry!r})")
        return value

    @field_validator("requiredMcpServers", mode="before")
    @classmethod
    def _required(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        return value

    def own_servers(self) -> list[str]:
        """The names of the servers this agent's file defines itself."""
        return [k for e in self.mcpServers or [] if isinstance(e, dict) for k in e]

    @field_validator("skills", mode="before")
    @classmethod
    def _skill_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, list) and not all(
            isinstance(v, str) and re.fullmatch(NAME_PATTERN, v) for v in value
        ):
            raise ValueError(f"skill names are {_NAME_RULE} ({value!r})")
        return value

    @field_validator("tools", "disallowedTools", mode="before")
    @classmethod
    def _tool_list(cls, value: Any) -> Any:
        """Accept "Read, Grep" as well as a YAML list; ["*"] means every tool; `Bash(*)` is
        `Bash` (every call, as in a permission rule)."""
        if isinstance(value, str):
            value = value.split(",")
        if isinstance(value, list):
            value = [v.strip() if isinstance(v, str) else v for v in value]
            value = [_WHOLE_TOOL.sub(r"\1", v) if isinstance(v, str) else v for v in value]
            value = [TOOL_ALIASES.get(v, v) if isinstance(v, str) else v for v in value]
            value = [v for v in value if v != ""]
        return value

    @field_validator("thinking")
    @classmethod
    def _thinking_budget(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1024:
            raise ValueError("a thinking budget is at least 1024 tokens")
        return value

    @field_validator("tools")
    @classmethod
    def _star_means_all(cls, value: list[str] | None) -> list[str] | None:
        return ["*"] if value is not None and "*" in value else value

    @property
    def every_tool(self) -> bool:
        """Its list is `*`: every tool of the session, the agent tools too."""
        return self.tools == ["*"]


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
    """What `scan_agents` found: the usable definitions, the files that are not, and the
    notes (a definition that replaced another, keys that were ignored)."""

    agents: dict[str, AgentDefinition]
    errors: list[AgentFileError]
    notes: tuple[str, ...] = ()

    def broken(self, name: str) -> AgentFileError | None:
        """The error of a file that would have defined agent `name`."""
        return next((e for e in self.errors if e.name == name), None)


def _field_line(fm_lines: dict[str, int], field: str | None) -> int | None:
    return fm_lines.get(field) if field else None


def _validation_problem(
    path: Path, exc: ValidationError, fm_lines: dict[str, int], name: str | None
) -> AgentFileError:
    errors = exc.errors()
    first = errors[0]
    loc = [str(p) for p in first["loc"]]
    field = loc[0] if loc else None
    problem = first["msg"]
    if first["type"] == "string_pattern_mismatch" and field == "name":
        problem = f"{first['input']!r} is not a valid name ({_NAME_RULE})"
    if first["type"] == "missing" and field == "description":
        problem = "missing: say in one line what the agent is for (the model reads it)"
    position = first["loc"][1] if len(first["loc"]) > 1 else None
    if isinstance(position, int):
        problem = f"item {position + 1}: {problem}"
    if len(errors) > 1:
        problem += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    line = _field_line(fm_lines, field) or 1  # a missing key: where the front matter starts
    return AgentFileError(path, field, problem, line=line, name=name)


def _agent_file(
    path: Path, source: Literal["project", "user"], notes: list[str]
) -> AgentDefinition:
    """Parse one definition file; every problem is an `AgentFileError`; keys that were
    ignored go to `notes`."""
    path = Path(path)
    stem = path.stem
    try:
        parsed = parse_front_matter(read_agent_text(path))
    except FileProblemError as exc:
        raise AgentFileError(path, exc.key, exc.problem, line=exc.line, name=stem) from None
    data, lines = dict(parsed.data), parsed.lines
    given = data.get("name")
    name = given if isinstance(given, str) else stem
    for key, why in _LOADER_FIELDS.items():
        if key in data:
            problem = f"not allowed in front matter ({why})"
            raise AgentFileError(path, key, problem, line=lines.get(key), name=name)
    if "name" not in data:
        data["name"] = stem
        if not re.fullmatch(NAME_PATTERN, stem):
            raise AgentFileError(
                path,
                "name",
                f"the file name {stem!r} is not a valid name ({_NAME_RULE}); "
                "rename the file or set 'name'",
                line=1,
                name=name,
            )
    known = set(AgentDefinition.model_fields) - set(_LOADER_FIELDS)
    for key in [k for k in data if k not in known and k != "name"]:
        del data[key]
        if key in SILENTLY_IGNORED:
            continue
        at = f"{path}:{lines[key]}" if key in lines else str(path)
        if key in CLAUDE_CODE_LATER:
            what = CLAUDE_CODE_LATER[key]
            notes.append(
                f"{at}: key '{key}' ({what}) is not supported here yet and was ignored; "
                "the agent loads without it"
            )
            continue
        close = difflib.get_close_matches(key, sorted(known), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        notes.append(f"{at}: key '{key}' is not used here and was ignored{hint}")
    model = data.get("model")
    if isinstance(model, str):
        unknown = model_problem(model)
        if unknown is not None:
            raise AgentFileError(path, "model", unknown, line=lines.get("model"), name=name)
    data.update(prompt=parsed.body.strip("\n").rstrip(), source=source, path=path)
    try:
        return AgentDefinition.model_validate(data)
    except ValidationError as exc:
        raise _validation_problem(path, exc, lines, name) from None


def load_agent_file(path: Path, source: Literal["project", "user"] = "project") -> AgentDefinition:
    """Parse one definition file; every problem is an `AgentFileError`, each ignored key
    one `AgentFileWarning`."""
    notes: list[str] = []
    try:
        return _agent_file(path, source, notes)
    except RecursionError:  # a value nested deeper than a reader can follow
        raise AgentFileError(
            path, None, "is nested too deeply to read", name=Path(path).stem
        ) from None
    finally:
        for note in notes:
            _warn_once(note)


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


def _replaced(name: str, new: AgentDefinition, old: AgentDefinition) -> str:
    if old.path is None:
        return f"agent '{name}': {new.path} replaces the built-in agent of that name"
    why = (
        "project agents win over user agents"
        if (new.source, old.source) == ("project", "user")
        else ".forkagent wins over .claude"
    )
    return f"agent '{name}': {new.path} is used; {old.path} defines the same name ({why})"


def scan_agents(workdir: Path, home: Path | None = None) -> AgentScan:
    """All usable definitions (built-in, then user, then project), every file error and
    every note. Never raises; each error and note is said once (an `AgentFileWarning`)."""
    agents = {GENERAL_PURPOSE.name: GENERAL_PURPOSE}
    errors: list[AgentFileError] = []
    notes: list[str] = []
    for folder, source in _folders(workdir, home):
        if not folder.is_dir():
            continue
        seen: dict[str, Path] = {}
        for file in agent_files(folder):
            try:
                definition = _agent_file(file, source, notes)
            except AgentFileError as exc:
                errors.append(exc)
                continue
            except RecursionError:  # a value nested deeper than a reader can follow
                errors.append(
                    AgentFileError(file, None, "is nested too deeply to read", name=file.stem)
                )
                continue
            name = definition.name
            if name in seen:
                notes.append(
                    f"agent '{name}': {file} is ignored; {seen[name]} defines the same name "
                    "and comes first"
                )
                continue
            seen[name] = file
            context = context_fields(definition, Path(workdir), home, notes)
            if context:
                definition = definition.model_copy(update=context)
            earlier = agents.get(name)
            if earlier is not None:
                notes.append(_replaced(name, definition, earlier))
            agents[name] = definition
    for message in [*notes, *(str(e) for e in errors)]:
        _warn_once(message)
    return AgentScan(agents, errors, tuple(notes))


def load_agents(
    workdir: Path, home: Path | None = None, *, strict: bool = True
) -> dict[str, AgentDefinition]:
    """Definitions by name: built-in, then user, then project (later ones win).

    With `strict` (the default) the first bad file raises its `AgentFileError`; without it,
    bad files are left out (each said once). `scan_agents` returns the errors instead."""
    agents, errors, _notes = scan_agents(workdir, home)
    if errors and strict:
        raise errors[0]
    return agents


def unknown_agent_message(name: str, available: Iterable[str]) -> str:
    """The error for an agent type that is not defined, listing the defined ones."""
    names = ", ".join(sorted(available)) or "none"
    return f"Agent type '{name}' not found. Available agents: {names}"


def missing_tools(agent: AgentDefinition, available: Collection[str]) -> list[str]:
    """The tools `agent`'s list names that it does not get here (no such tool in the
    session: an MCP tool, a tool this runtime does not have)."""
    if agent.tools is None or agent.every_tool:
        return []
    denied = set(agent.disallowedTools)
    own = tuple(f"mcp__{name}" for name in agent.own_servers())
    return [
        t
        for t in agent.tools
        if t not in available
        and t not in denied
        and not (t.startswith("mcp__") and _names_mcp(t, available, own))
    ]


def _names_mcp(entry: str, available: Collection[str], own: tuple[str, ...]) -> bool:
    """Whether a tool-list entry `mcp__...` names a tool of `available` or of a server the
    agent's file defines (started with the agent)."""
    if any(entry == o or entry.startswith(o + "__") for o in own):
        return True
    if entry.endswith("__*") or entry.count("__") == 1:  # the whole server
        prefix = entry.removesuffix("*").removesuffix("__") + "__"
        return any(a.startswith(prefix) for a in available)
    return entry in available


def agent_listing(
    agents: dict[str, AgentDefinition], available: Collection[str] | None = None
) -> str:
    """What the model is told of the named agents it can start with the Agent tool. It goes
    into the conversation (a user turn's first block, when it changed since it was last
    said), not into the tool's description: the tools head every request's cached prefix, so
    an agent file added mid-session would otherwise make the whole prefix a cache miss.
    With `available` (the session's tool names), an agent is listed with the tools it gets,
    and those its file names that it does not get are said."""
    lines = [
        "<system-reminder>",
        "Agent types available to the Agent tool (its subagent_type):",
    ]
    for name in sorted(agents):
        agent = agents[name]
        missing = missing_tools(agent, available) if available is not None else []
        if agent.tools is None:
            tools = "all tools"
        elif agent.every_tool:
            tools = "all tools, Agent, SendMessage, TaskStop and TaskOutput too"
        else:
            given = [t for t in agent.tools if t not in missing]
            tools = ", ".join(given) or "none"
        if agent.disallowedTools:
            tools += " except " + ", ".join(agent.disallowedTools)
        if missing:
            tools += "; not available here: " + ", ".join(missing)
        mode = "; runs in the background" if agent.background else ""
        lines.append(f"- {name}: {agent.description} (Tools: {tools}{mode})")
    lines.append("</system-reminder>")
    return "\n".join(lines)
