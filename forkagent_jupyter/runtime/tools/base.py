"""What a tool is, and how one call of it becomes a tool_result.

A tool is a small class: a name, a description, a pydantic input model (its JSON schema is the
`input_schema` the model sees), three properties (`concurrency_safe`, `needs_approval`,
`allowed_in_plan`), and an async `run`. Problems the model should see and can fix (a missing
file, a bad pattern, a non-zero exit) are raised as `ToolError`; they become `is_error`
tool_results. Invalid input and unexpected exceptions are turned into `is_error` results too,
so a tool never ends a run; only cancellation propagates.

Each tool also presents its own calls, the one presentation every view uses: `describe` (one
line: task cards, the Tasks panel, transcripts, the permission log) and `preview` (what a
person approves: for a file change, the unified diff `run` would write, computed from the same
resolved path and the same matching; a call that would fail raises `ToolError` there, and is
refused before anyone is asked).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import traceback
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from ...messages_api.shapes import JSON
from ..errors import RunEndedError
from ..history import Message
from ..secrets import redact
from .services import ToolServices

__all__ = [
    "CallInfo",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutcome",
    "ToolOutput",
    "ToolSet",
    "describe_call",
    "format_validation_error",
]

log = logging.getLogger(__name__)

InputT = TypeVar("InputT", bound=BaseModel)


class ToolError(Exception):
    """A failure the model should read and may correct (becomes an is_error tool_result)."""


@dataclass(frozen=True)
class CallInfo:
    """The call being run: its tool_use id and the calling agent's history, which ends with the
    assistant message that holds the call (the Agent tool forks from it)."""

    tool_use_id: str
    history: list[Message]


@dataclass
class ToolContext:
    """What a tool may touch during one call.

    `workdir` bounds the file tools (the permission layer decides about paths outside it);
    `namespace` is the dict the `Python` tool executes in (in a kernel: the user's namespace);
    `agent_id` names the agent making the call ("main" for the parent conversation);
    `env` is the environment for subprocesses (secrets already removed by the host).
    """

    workdir: Path
    namespace: dict[str, Any] = field(default_factory=dict)
    agent_id: str = "main"
    env: Mapping[str, str] | None = None
    services: ToolServices = field(default_factory=ToolServices)
    call: CallInfo | None = None


@dataclass(frozen=True)
class ToolOutput:
    """What a tool returns when text alone is not all: PNG images the model should see too
    (a figure the code drew)."""

    text: str
    images: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class ToolOutcome:
    """The result of one tool call, ready to become a tool_result block."""

    content: str
    is_error: bool = False
    images: tuple[bytes, ...] = ()


_SPECS: dict[type[object], dict[str, JSON]] = {}


class Tool(ABC, Generic[InputT]):
    """Base class of every tool. Subclasses set the class attributes and implement `run`."""

    name: ClassVar[str]
    description: ClassVar[str]
    input_model: ClassVar[type[BaseModel]]
    concurrency_safe: ClassVar[bool] = False
    """Calls may run at the same time as the other concurrency-safe calls of the same reply
    (they neither change what another call reads nor depend on the order of calls)."""
    needs_approval: ClassVar[bool] = True
    """A call is put to the permission policy unless a rule or the mode allows it; False:
    it runs without asking (deny rules and work-directory containment still apply)."""
    allowed_in_plan: ClassVar[bool] = False
    """The tool may run in plan mode (it changes nothing the plan is about)."""

    def spec(self) -> dict[str, JSON]:
        """The tool's definition as the Messages API takes it (stable key order). Built once
        per tool class: the same bytes every request, and no schema work per request."""
        cached = _SPECS.get(type(self))
        if cached is None:
            schema = self.input_model.model_json_schema()
            schema.pop("title", None)
            cached = {"name": self.name, "description": self.description, "input_schema": schema}
            _SPECS[type(self)] = cached
        return copy.deepcopy(cached)

    def parse(self, raw: Mapping[str, Any]) -> InputT:
        """Validate the model's input; raises pydantic.ValidationError."""
        return self.input_model.model_validate(dict(raw))  # type: ignore[return-value]

    def permission_subject(self, args: InputT) -> str:
        """The string permission rules match against (`Bash(git status:*)` -> the command,
        `Write(src/**)` -> the path). Empty for tools that have none."""
        return ""

    def paths(self, args: InputT, ctx: ToolContext) -> list[Path]:
        """Absolute paths this call would touch (checked against the work dir)."""
        return []

    def describe(self, args: InputT) -> str:
        """One line saying what this call does (use `describe_call`, which also masks secrets
        and keeps it to one line). By default: the name and the permission subject, else the
        first text field of the input."""
        subject = self.permission_subject(args) or next(
            (v for v in args.model_dump().values() if isinstance(v, str) and v.strip()), ""
        )
        return f"{self.name}: {subject}" if subject else self.name

    async def unconfined(self, args: InputT, ctx: ToolContext) -> str | None:
        """Why this call cannot run with the protection it should have on this system (None:
        it can). The gate then asks the person, whatever the rules and the mode say, and
        refuses it where nobody can answer."""
        return None

    async def preview(self, args: InputT, ctx: ToolContext) -> str:
        """The call in full, as a person should review it before approving it. Raises
        ToolError when the call would fail (it is then refused without asking anyone).
        By default: the input as JSON."""
        data = args.model_dump(exclude_defaults=True)
        return json.dumps(data, indent=2, ensure_ascii=False)

    @abstractmethod
    async def run(self, args: InputT, ctx: ToolContext) -> str | ToolOutput:
        """Do the work and return the text the model reads; raise ToolError on failure."""


DESCRIBE_CHARS = 200  # the longest a call's one-line description gets


def describe_call(tool: Tool[Any], args: BaseModel, limit: int = DESCRIBE_CHARS) -> str:
    """The tool's description of a call on one line of at most `limit` characters, secrets
    masked: how every view names a call."""
    text = redact(tool.describe(args))
    lines = [line for line in text.splitlines() if line.strip()] or [tool.name]
    line = " ".join(lines[0].split()) + (" …" if len(lines) > 1 else "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def format_validation_error(tool: str, exc: ValidationError) -> str:
    """One readable line per problem, naming the field."""
    lines = [f"Invalid input for {tool}:"]
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(input)"
        lines.append(f"- {where}: {err['msg']}")
    return "\n".join(lines)


class ToolSet:
    """An ordered set of tools; the order is the order of the `tools` array sent to the API."""

    def __init__(self, tools: Iterable[Tool[Any]] = ()) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        self._specs: list[dict[str, JSON]] | None = None
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool[Any]) -> None:
        if tool.name in self._tools:
            raise ValueError(f"duplicate tool name {tool.name!r}")
        self._tools[tool.name] = tool
        self._specs = None

    def replace(self, tool: Tool[Any]) -> None:
        """Put `tool` in place of the tool of the same name (same position)."""
        if tool.name not in self._tools:
            raise ValueError(f"no tool named {tool.name!r} to replace")
        self._tools[tool.name] = tool
        self._specs = None

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[dict[str, JSON]]:
        if self._specs is None:
            self._specs = [t.spec() for t in self._tools.values()]
        return self._specs

    def describe(self, name: str, raw_input: Mapping[str, Any]) -> str:
        """A call's one line (`describe_call`) from its raw input; just the name when the
        tool is unknown or the input invalid."""
        tool = self._tools.get(name)
        if tool is None:
            return name
        try:
            args = tool.parse(raw_input)
        except ValidationError:
            return name
        return describe_call(tool, args)

    def without(self, names: Iterable[str]) -> ToolSet:
        drop = set(names)
        return ToolSet(t for t in self._tools.values() if t.name not in drop)

    def __iter__(self) -> Iterator[Tool[Any]]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def parse_call(
        self, name: str, raw_input: Mapping[str, Any]
    ) -> tuple[Tool[Any], BaseModel] | ToolOutcome:
        """A call's tool and validated input, or the is_error result the model reads (an
        unknown tool, an invalid input): the one way a call is read, checked or not."""
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools) or "(none)"
            return ToolOutcome(f"Unknown tool {name!r}. Available tools: {known}.", True)
        try:
            return tool, tool.parse(raw_input)
        except ValidationError as exc:
            return ToolOutcome(format_validation_error(name, exc), True)

    async def call(self, name: str, raw_input: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Run one call without permission checks (the caller does those)."""
        parsed = self.parse_call(name, raw_input)
        if isinstance(parsed, ToolOutcome):
            return parsed
        return await run_parsed(*parsed, ctx)


async def run_parsed(tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> ToolOutcome:
    """Run an already validated call, turning every failure except cancellation and errors
    that end the run (`RunEndedError`: a worker process that died) into text."""
    try:
        output = await tool.run(args, ctx)
    except (asyncio.CancelledError, RunEndedError):
        raise
    except ToolError as exc:
        return ToolOutcome(str(exc) or f"{tool.name} failed", True)
    except Exception as exc:
        log.warning("tool %s raised:\n%s", tool.name, redact(traceback.format_exc()))
        return ToolOutcome(redact(f"{tool.name} raised {type(exc).__name__}: {exc}"), True)
    if isinstance(output, ToolOutput):
        return ToolOutcome(output.text or "(no output)", images=output.images)
    return ToolOutcome(output if output else "(no output)")
