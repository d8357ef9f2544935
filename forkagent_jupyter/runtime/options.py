"""`SessionOptions`: every setting of a Session, declared and checked in one place.

`Session(model, **settings)` folds its keyword arguments into a `SessionOptions` (or takes one
whole: `Session(options=...)`); `Session.configure(**changes)` changes settings while the
session runs. A field declared `frozen` is fixed when the session starts (the backend, the
working directory, the tools...); every other field is live: the session reads it where it is
used, or pushes it to the part that holds it (`live_settings.apply_setting`).

A new setting is one field here (with its check); the kernel's `%config ForkAgent.NAME` trait
of the same name reaches it without more code (kernel/settings.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any, Generic, Literal, Protocol, TypeVar, overload

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SkipValidation,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from .compaction import check_compact_at
from .errors import UsageError
from .executors import WorkerNamespace
from .mcp_servers import DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT
from .model import CacheTTL, ModelClient, default_model_name
from .model_names import session_model
from .permissions import PermissionMode, PermissionPolicy
from .retry import DEFAULT_STREAM_RETRIES
from .thinking import thinking_param
from .tools.base import Tool
from .tools.services import ToolServices
from .workers import AUTO_BACKGROUND_AFTER

__all__ = ["Configurable", "SessionOptions", "Setting", "option_error"]


class SessionOptions(BaseModel):
    """The settings of one Session (see `Session`'s docstring and README for each)."""

    model_config = ConfigDict(
        arbitrary_types_allowed=True, extra="forbid", validate_assignment=True
    )

    # -- fixed when the session starts ---------------------------------------------------
    api_key: str | None = Field(default=None, frozen=True)
    base_url: str | None = Field(default=None, frozen=True)
    backend: str | None = Field(default=None, frozen=True)
    """"anthropic", "bedrock", "vertex", "foundry", "offline", or None/"" (auto)."""
    client: SkipValidation[ModelClient | None] = Field(default=None, frozen=True)
    """A model client to use instead of a backend's (tests, custom transports)."""
    workdir: str | os.PathLike[str] | None = Field(default=None, frozen=True)
    home: str | os.PathLike[str] | None = Field(default=None, frozen=True)
    namespace: SkipValidation[dict[str, Any] | None] = Field(default=None, frozen=True)
    tools: SkipValidation[Iterable[Tool[Any]] | None] = Field(default=None, frozen=True)
    services: SkipValidation[ToolServices | None] = Field(default=None, frozen=True)
    permission_policy: SkipValidation[PermissionPolicy | None] = Field(default=None, frozen=True)
    # rules are read by the rulebook: one that is not a rule (`42`, `"Bash()"`) is listed as
    # refused with why and never stops the others, so they are not validated here
    allow: SkipValidation[Sequence[str]] = Field(default=(), frozen=True)
    deny: SkipValidation[Sequence[str]] = Field(default=(), frozen=True)
    ask: SkipValidation[Sequence[str]] = Field(default=(), frozen=True)
    transcripts: bool | str | os.PathLike[str] = Field(default=True, frozen=True)
    stagger_forks: bool = Field(default=True, frozen=True)
    mcp_startup_timeout: float = Field(default=DEFAULT_STARTUP_TIMEOUT, frozen=True, gt=0)
    mcp_call_timeout: float = Field(default=DEFAULT_CALL_TIMEOUT, frozen=True, gt=0)

    # -- live: read where used ------------------------------------------------------------
    model: str = Field(default="", validate_default=True)
    """The model id ("" or None: FORKAGENT_MODEL or the built-in default); next turn on."""
    system_prompt: str | None = None
    auto_respond: bool = True
    max_turns: int = Field(default=50, ge=1)
    max_tokens: int = Field(default=8192, ge=1)
    thinking: dict[str, Any] | None = None
    """The API's `thinking` parameter; given as a token budget, "adaptive", "off"/0/None or
    the API's dict (`thinking.thinking_param`)."""
    cache_ttl: CacheTTL = "5m"

    # -- live: pushed to the part that holds them (live_settings.py) ---------------------
    permission_mode: PermissionMode = "default"
    approval_timeout: float | None = Field(default=600.0, gt=0)
    forking: bool = True
    auto_background_after: float | None = Field(default=AUTO_BACKGROUND_AFTER, ge=0)
    max_cost_usd: float | None = None
    stream_retries: int = Field(default=DEFAULT_STREAM_RETRIES, ge=0)
    stream_retry_delay: float = Field(default=0.5, ge=0)
    compact_at: float | None = 0.8
    compact_keep_turns: int = Field(default=2, ge=1)
    context_window: int | None = Field(default=None, ge=1)
    worker_namespace: WorkerNamespace = "isolated"
    max_workers: int = Field(default=16, ge=1)
    worker_memory_mb: int | None = Field(default=None, ge=1)
    """MB finished workers' processes may hold together (None: a quarter of the machine's)."""
    worker_nice: int = Field(default=0, ge=0, le=19)
    reuse_snapshots: bool = False
    """The forks of one cell share one snapshot of the namespace (the host says when it may
    have changed: `Session.namespace_changed`)."""
    executor: Literal["local", "dask"] = "local"
    dask_address: str = ""
    """The Dask scheduler for executor = "dask" ("": the client given to `use_dask`, or a
    local cluster)."""

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, value: Any) -> Any:
        if not value:
            return default_model_name()
        if not isinstance(value, str):
            raise UsageError(f"model: a model id or alias is needed, not {value!r}.")
        try:  # an alias (sonnet, opus, ...) is its model id; an id that cannot be one is refused
            return session_model(value, default_model_name())
        except ValueError as exc:
            raise UsageError(f"model: {exc}.") from None

    @field_validator("backend", mode="before")
    @classmethod
    def _backend(cls, value: Any) -> Any:
        return value or None

    @field_validator("thinking", mode="before")
    @classmethod
    def _thinking(cls, value: Any) -> dict[str, Any] | None:
        return thinking_param(value)

    @field_validator("compact_at", mode="before")
    @classmethod
    def _compact_at(cls, value: Any) -> float | None:
        return check_compact_at(value)

    @field_validator("max_cost_usd", mode="before")
    @classmethod
    def _budget(cls, value: Any) -> Any:
        if value is not None and (isinstance(value, bool) or not _positive(value)):
            raise UsageError(f"max_cost_usd must be a positive number of dollars, not {value!r}.")
        return value

    @field_validator(
        "max_turns",
        "max_tokens",
        "max_workers",
        "stream_retries",
        "compact_keep_turns",
        "context_window",
        "worker_memory_mb",
        "worker_nice",
        mode="before",
    )
    @classmethod
    def _whole(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool | str):  # not read as 1/0 or parsed
            raise UsageError(f"{info.field_name}: a whole number is needed, not {value!r}.")
        return value

    @field_validator(
        "approval_timeout",
        "auto_background_after",
        "stream_retry_delay",
        "mcp_startup_timeout",
        "mcp_call_timeout",
        mode="before",
    )
    @classmethod
    def _seconds(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool | str):  # not read as 1/0 or parsed
            raise UsageError(f"{info.field_name}: a number is needed, not {value!r}.")
        return value

    def changed(self, **changes: Any) -> SessionOptions:
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
    def of(cls, options: SessionOptions | None, settings: dict[str, Any]) -> SessionOptions:
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


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and value > 0


def option_error(exc: ValidationError) -> UsageError:
    """A refused setting in one line: the check's own message when it has one (a UsageError
    raised by a validator), else the field and pydantic's words."""
    error = exc.errors()[0]
    name = ".".join(str(part) for part in error["loc"]) or "setting"
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, UsageError):
        return cause
    if error["type"] == "frozen_field":
        return UsageError(f"{name} is fixed when the session starts; it cannot change now.")
    return UsageError(f"{name} = {error['input']!r} refused: {error['msg'].lower()}.")


class Configurable(Protocol):
    """What has `SessionOptions` and changes them through `configure` (a Session)."""

    options: SessionOptions

    def configure(self, **changes: Any) -> None: ...


T = TypeVar("T")


class Setting(Generic[T]):
    """An attribute of a Session (any `Configurable`) that is one of its `options`: read
    from them, and assigned through `configure` (checked, then applied at once)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> Setting[T]: ...
    @overload
    def __get__(self, obj: Configurable, owner: type) -> T: ...
    def __get__(self, obj: Configurable | None, owner: type) -> Setting[T] | T:
        if obj is None:
            return self
        value: T = getattr(obj.options, self.name)
        return value

    def __set__(self, obj: Configurable, value: Any) -> None:
        obj.configure(**{self.name: value})
