"""`SessionOptions`: every setting of a Session, declared and checked in one place.

`Session(model, **settings)` folds its keyword arguments into a `SessionOptions` (or takes one
whole: `Session(options=...)`); `Session.configure(**changes)` changes settings while the
session runs. A field declared `frozen` is fixed when the session starts (the backend, the
working directory, the tools...); every other field is live: the session reads it where it is
used, or pushes it to the part that holds it (`LiveSettings.apply`, live_settings.py).

A new setting is one field here (with its check); the kernel's `%config ForkAgent.NAME` trait
of the same name reaches it without more code (kernel/settings.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from types import NoneType, UnionType
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SkipValidation,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.config import JsonDict

from ..errors import UsageError
from ..executors import WorkerNamespace
from ..loop.thinking import thinking_param
from ..mcp.servers import DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT
from ..model.backends import BACKENDS, Backend
from ..model.client import CacheTTL, ModelClient, default_model_name
from ..model.names import foreign_model, session_model, tell_once
from ..model.retry import DEFAULT_STREAM_RETRIES
from ..permissions.gate import PermissionPolicy
from ..tools.base import Tool
from ..tools.services import ToolServices
from ..workers.workers import AUTO_BACKGROUND_AFTER

__all__ = [
    "OptionRefusedError",
    "RefusalError",
    "SessionOptions",
    "option_error",
    "quoted",
]


SessionMode = Literal["default", "acceptEdits", "bypassPermissions", "plan", "dontAsk"]
"""The modes a person sets (`bubble` is a worker's, given by its agent definition)."""

MAX_SECONDS = 7 * 24 * 3600
"""The longest wait a seconds setting takes (a week): longer is no limit, which is None."""

_SECONDS: JsonDict = {"kind": "a number of seconds"}


class SessionOptions(BaseModel):
    """The settings of one Session (see `Session`'s docstring and README for each).

    Strict: a flag takes True or False (never "no" or 1), a count a whole number (never a
    bool or 2.0), a number is finite and within its bounds; a refused value is one line naming
    the setting, the value and what it takes (`accepts`). `%config ForkAgent.*` is checked
    here too (`check`)."""

    model_config = ConfigDict(
        arbitrary_types_allowed=True,
        extra="forbid",
        validate_assignment=True,
        strict=True,
        allow_inf_nan=False,
    )

    # -- fixed when the session starts ---------------------------------------------------
    api_key: str | None = Field(default=None, frozen=True)
    base_url: str | None = Field(default=None, frozen=True)
    backend: Backend | None = Field(
        default=None,
        frozen=True,
        json_schema_extra={
            "accepts": "one of " + ", ".join(map(repr, BACKENDS)) + ", or ''/None "
            "(by the credentials)"
        },
    )
    """"anthropic", "bedrock", "vertex", "foundry", "offline", or None/"" (auto)."""
    client: SkipValidation[ModelClient | None] = Field(default=None, frozen=True)
    """A model client to use instead of a backend's (tests, custom transports)."""
    workdir: str | os.PathLike[str] | None = Field(
        default=None, frozen=True, json_schema_extra={"accepts": "a folder, or None"}
    )
    home: str | os.PathLike[str] | None = Field(
        default=None, frozen=True, json_schema_extra={"accepts": "a folder, or None"}
    )
    namespace: SkipValidation[dict[str, Any] | None] = Field(default=None, frozen=True)
    tools: SkipValidation[Iterable[Tool[Any]] | None] = Field(default=None, frozen=True)
    services: SkipValidation[ToolServices | None] = Field(default=None, frozen=True)
    permission_policy: SkipValidation[PermissionPolicy | None] = Field(default=None, frozen=True)
    # rules are read by the rulebook: one that is not a rule (`42`, `"Bash()"`) is listed as
    # refused with why and never stops the others, so they are not validated here
    allow: SkipValidation[Sequence[str]] = Field(default=(), frozen=True)
    deny: SkipValidation[Sequence[str]] = Field(default=(), frozen=True)
    ask: SkipValidation[Sequence[str]] = Field(default=(), frozen=True)
    transcripts: bool | str | os.PathLike[str] = Field(
        default=True, frozen=True, json_schema_extra={"accepts": "True, False or a folder"}
    )
    stagger_forks: bool = Field(default=True, frozen=True)
    mcp_startup_timeout: float = Field(
        default=DEFAULT_STARTUP_TIMEOUT,
        frozen=True,
        gt=0,
        le=MAX_SECONDS,
        json_schema_extra=_SECONDS,
    )
    mcp_call_timeout: float = Field(
        default=DEFAULT_CALL_TIMEOUT, frozen=True, gt=0, le=MAX_SECONDS, json_schema_extra=_SECONDS
    )

    # -- live: read where used ------------------------------------------------------------
    model: str = Field(
        default="", validate_default=True, json_schema_extra={"accepts": "a model id or alias"}
    )
    """The model id ("" or None: FORKAGENT_MODEL or the built-in default); next turn on."""
    system_prompt: str | None = None
    auto_respond: bool = True
    max_turns: int = Field(default=50, ge=1)
    max_tokens: int = Field(default=8192, ge=1)
    thinking: dict[str, Any] | None = Field(
        default=None,
        json_schema_extra={
            "accepts": "0, None or 'off' (off), a budget of 1024 tokens or more, 'adaptive', or "
            "the API's thinking dict"
        },
    )
    """The API's `thinking` parameter; given as a token budget, "adaptive", "off"/0/None or
    the API's dict (`thinking.thinking_param`)."""
    cache_ttl: CacheTTL = "5m"
    large_prompt_tokens: int | None = Field(
        default=20_000,
        ge=1,
        json_schema_extra={"kind": "a number of tokens", "none": "or None (never said)"},
    )
    """A prompt, directive or message of this many tokens or more is said in one line (its
    size and cost) before it is sent (`loop/prompt_size.py`); one that cannot fit the
    context window is refused whatever this is."""

    # -- live: pushed to the part that holds them (live_settings.py) ---------------------
    permission_mode: SessionMode = "default"
    trusted: bool | None = Field(
        default=None, json_schema_extra={"accepts": "True, False, or None (as ~/.claude.json says)"}
    )
    """Whether what the work directory's own files grant applies (`config/trust.py`): None
    as `~/.claude.json` records it; True or False for this session only."""
    approval_timeout: float | None = Field(
        default=600.0, gt=0, le=MAX_SECONDS, json_schema_extra=_SECONDS
    )
    forking: bool = True
    auto_background_after: float | None = Field(
        default=AUTO_BACKGROUND_AFTER,
        ge=0,
        le=MAX_SECONDS,
        json_schema_extra={**_SECONDS, "none": "or None (0 or None: no limit)"},
    )
    max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        json_schema_extra={"accepts": "a positive number of dollars, or None for no budget"},
    )
    stream_retries: int = Field(default=DEFAULT_STREAM_RETRIES, ge=0, le=100)
    stream_retry_delay: float = Field(default=0.5, ge=0, le=MAX_SECONDS, json_schema_extra=_SECONDS)
    compact_at: float | None = Field(
        default=0.8,
        gt=0,
        le=1,
        json_schema_extra={
            "kind": "a fraction of the context window",
            "none": "or None to never compact",
        },
    )
    compact_keep_turns: int = Field(default=2, ge=1)
    context_window: int | None = Field(default=None, ge=1)
    worker_namespace: WorkerNamespace = "isolated"
    max_workers: int = Field(default=16, ge=1)
    worker_memory_mb: int | None = Field(default=None, ge=1)
    """MB finished workers' processes may hold together (None: a quarter of the machine's)."""
    worker_nice: int = Field(default=0, ge=0, le=19)
    reuse_snapshots: bool = False
    """The forks of one cell share one snapshot of the namespace (the host says when it may
    have changed: `session.compute.namespace_changed()`)."""
    executor: Literal["local", "dask"] = "local"
    dask_address: str = ""
    """The Dask scheduler for executor = "dask" ("": the client given to `use_dask`, or a
    local cluster)."""

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, value: Any, info: ValidationInfo) -> Any:
        """An alias (sonnet, opus, ...) is its model id; an id that cannot be one is refused;
        a name that is no Claude model is refused where the Anthropic API would get it, and
        taken with one line elsewhere (`names.foreign_model`: the backend, base URL and
        client, declared above, are known here)."""
        if value is None or value == "":
            return default_model_name()
        if not isinstance(value, str):
            return value  # refused as not a string
        try:
            model = session_model(value, default_model_name())
            said = foreign_model(
                value,
                backend=info.data.get("backend"),
                base_url=info.data.get("base_url"),
                client=info.data.get("client") is not None,
            )
        except ValueError as exc:
            raise RefusalError(str(exc)) from None
        if said is not None:
            tell_once(said)
        return model

    @field_validator("backend", mode="before")
    @classmethod
    def _backend(cls, value: Any) -> Any:
        return None if isinstance(value, str) and value == "" else value

    @field_validator("thinking", mode="before")
    @classmethod
    def _thinking(cls, value: Any) -> dict[str, Any] | None:
        return thinking_param(value)

    @field_validator("permission_mode", "cache_ttl", "worker_namespace", "executor", mode="before")
    @classmethod
    def _any_case(cls, value: Any, info: ValidationInfo) -> Any:
        """A choice in any case (`acceptedits`), as `%config` has always read it."""
        if isinstance(value, str) and info.field_name is not None:
            annotation = cls.model_fields[info.field_name].annotation
            for choice in get_args(annotation):
                if isinstance(choice, str) and choice.lower() == value.lower():
                    return choice
        return value

    @classmethod
    def accepts(cls, name: str, none: bool = True) -> str:
        """What the setting `name` takes, in words (`none=False`: leaving None out)."""
        field = cls.model_fields[name]
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if "accepts" in extra:
            return str(extra["accepts"])
        annotation = field.annotation
        union = get_origin(annotation) in (Union, UnionType)
        kinds = [a for a in get_args(annotation) if a is not NoneType] if union else [annotation]
        takes_none = union and NoneType in get_args(annotation)
        kind = kinds[0] if len(kinds) == 1 else None
        if kind is bool:
            text = "True or False"
        elif kind in (int, float):
            text = str(extra.get("kind") or ("a whole number" if kind is int else "a number"))
            text += _bounds(field.metadata)
        elif get_origin(kind) is Literal:
            text = "one of " + ", ".join(repr(v) for v in get_args(kind))
        elif kind is str:
            text = "a string"
        else:
            text = "a value of its type"
        if takes_none and none:
            text += ", " + str(extra.get("none") or "or None")
        return text

    @classmethod
    def check(cls, name: str, value: object, given: Mapping[str, object] | None = None) -> object:
        """The value the setting `name` holds when given `value`, or a one-line UsageError
        naming the setting, the value and what it takes (the check `%config` uses). `given`:
        the settings fixed at the start as they stand (the model's check depends on the
        backend)."""
        try:
            return getattr(cls.model_validate({**(given or {}), name: value}), name)
        except ValidationError as exc:
            raise option_error(exc) from None

    def changed(self, **changes: object) -> SessionOptions:
        """A copy with `changes`, each checked (a UsageError in one line when one is refused:
        an unknown name, a field fixed at the start, a value the field does not take)."""
        new = self.model_copy()
        for name, value in changes.items():
            if name not in type(self).model_fields:
                known = ", ".join(n for n, f in type(self).model_fields.items() if not f.frozen)
                raise UsageError(f"no setting {name!r}; the settings that can change: {known}.")
            try:
                setattr(new, name, value)
            except ValidationError as exc:
                raise option_error(exc) from None
        return new

    @classmethod
    def of(cls, options: SessionOptions | None, settings: Mapping[str, object]) -> SessionOptions:
        """`options` (default: all defaults) with `settings` (Session's keyword arguments)
        applied: the one place they become options. An unknown keyword is a TypeError, as
        for any call; a refused value a UsageError."""
        unknown = [name for name in settings if name not in cls.model_fields]
        if unknown:
            raise TypeError(f"Session() got an unexpected keyword argument {unknown[0]!r}")
        try:
            base = options if options is not None else cls()
            return cls.model_validate({**dict(base), **settings})
        except ValidationError as exc:
            raise option_error(exc) from None


def _bounds(metadata: list[object]) -> str:
    """A number's bounds in words: " >= 1", " above 0 and at most 1", " from 0 to 19"."""
    low = next((m.ge for m in metadata if isinstance(m, annotated_types.Ge)), None)
    above = next((m.gt for m in metadata if isinstance(m, annotated_types.Gt)), None)
    high = next((m.le for m in metadata if isinstance(m, annotated_types.Le)), None)
    if low is not None and high is not None:
        return f" from {low} to {high}"
    lower = f" >= {low}" if low is not None else f" above {above}" if above is not None else ""
    if high is None:
        return lower
    return f"{lower} and at most {high}" if lower else f" at most {high}"


class RefusalError(ValueError):
    """A check's own reason for refusing a value (said instead of what the setting takes)."""


class OptionRefusedError(UsageError):
    """A refused setting: its one line, and its parts for a caller that words it its own way
    (`%config`): the setting, the value, and the check's reason (None: what it takes)."""

    def __init__(self, line: str, name: str, value: object, reason: str | None) -> None:
        super().__init__(line)
        self.name, self.value, self.reason = name, value, reason


def quoted(value: object) -> str:
    """`value` as a refusal quotes it: its repr, cut to 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:76] + "...'"


def option_error(exc: ValidationError) -> UsageError:
    """A refused setting in one line: the setting, the value and what it takes (or the
    check's own reason)."""
    error = exc.errors()[0]
    name = str(error["loc"][0]) if error["loc"] else "setting"  # not the union's branch
    if error["type"] == "frozen_field":
        return UsageError(f"{name} is fixed when the session starts; it cannot change now.")
    value = error["input"]
    cause = (error.get("ctx") or {}).get("error")
    reason = str(cause) if isinstance(cause, RefusalError) else None
    if name in SessionOptions.model_fields:
        said = reason or f"it takes {SessionOptions.accepts(name)}"
    else:
        said = error["msg"].lower()
    return OptionRefusedError(f"{name} = {quoted(value)} refused: {said}.", name, value, reason)
