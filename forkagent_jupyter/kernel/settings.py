"""The `ForkAgent` settings, checked when they are assigned: one line naming the setting and
what it accepts.

`ForkAgent` derives from `CheckedSettings`. Every assignment - `%config
ForkAgent.X = ...`, `c.ForkAgent.X` in a config file, `__forkagent__.settings.X = ...` - is
checked here first, before the session sees it and whether or not the session has started:
a refused value raises `SettingError` (a TraitError, which `%config` shows as one line and
which fails its cell) and the previous value stays.

A setting of the session (a trait named like a `SessionOptions` field) is checked by
`SessionOptions.check`, the one place that decides what a setting takes, for `Session(...)`,
`Session.configure` and `%config` alike; its message is the options' line with the setting's
class name and the value it keeps. A setting of the kernel's own (`headless_approval_timeout`)
is checked from its trait's type (a Bool takes True or False, never 1; an Int or a Float
never a bool, nan or an infinity; an enum one of its values) plus what its tags add:

- `minimum=` / `maximum=`: inclusive bounds of a number;
- `above=`: an exclusive lower bound (`above=0`: positive);
- `choices=`: the allowed strings of a Unicode ("" included if it may be unset);
- `allowed=`: the words the message uses for the allowed values (else derived from the above).

A new setting plugs in by declaring its trait with these tags; nothing else to register.
A trait named like a `SessionOptions` field (runtime/session/options.py) is that session setting: it
is given to the Session when it is made and every later change goes to `Session.configure`
(`session_settings`, `forwarded`); `session=False` in its tags keeps one with the kernel.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import sys
from collections.abc import Iterator
from typing import Any, TypeGuard

from traitlets import (
    Bool,
    CaselessStrEnum,
    Enum,
    Float,
    Int,
    TraitError,
    TraitType,
    Unicode,
    Union,
)
from traitlets.config import Config, Configurable
from traitlets.utils.bunch import Bunch

from ..runtime import default_worker_memory_mb

__all__ = [
    "BACKEND_CHOICES",
    "CheckedSettings",
    "ForkAgent",
    "SettingError",
    "allowed_values",
    "check_setting",
    "fixed_settings",
    "forwarded",
    "session_settings",
]


Trait = TraitType[Any, Any]
"""A setting's trait, whatever the type of its value."""


class SettingError(TraitError):
    """A setting refused at assignment: its message is the one line the person reads."""


def _number(value: object, integral: bool) -> TypeGuard[int | float]:
    if isinstance(value, bool):
        return False
    if integral:
        return isinstance(value, int)
    return isinstance(value, int | float) and math.isfinite(value)


def _option(trait: Trait) -> str | None:
    """The `SessionOptions` field `trait` is checked by (its name), if any."""
    from ..runtime import SessionOptions

    name = getattr(trait, "name", None)
    return name if name in SessionOptions.model_fields else None


def allowed_values(trait: Trait) -> str:
    """The allowed values of `trait`, in words."""
    from ..runtime import SessionOptions

    option = _option(trait)
    if option is not None:
        return SessionOptions.accepts(option, none=bool(trait.allow_none))
    meta = trait.metadata
    if "allowed" in meta:
        return str(meta["allowed"])
    if isinstance(trait, Bool):
        text = "True or False"
    elif isinstance(trait, Enum):
        text = "one of " + ", ".join(repr(v) for v in trait.values or ())
    elif isinstance(trait, Int | Float):
        kind = "a whole number" if isinstance(trait, Int) else "a number"
        low, high, above = meta.get("minimum"), meta.get("maximum"), meta.get("above")
        if above is not None and high is not None:
            text = f"{kind} above {above} and at most {high}"
        elif above is not None:
            text = f"{kind} above {above}"
        elif low is not None and high is not None:
            text = f"{kind} from {low} to {high}"
        elif low is not None:
            text = f"{kind} >= {low}"
        else:
            text = kind
    elif isinstance(trait, Unicode) and "choices" in meta:
        text = "one of " + ", ".join(repr(v) for v in meta["choices"])
    else:
        text = "a string"
    if trait.allow_none:
        text += ", or None"
    return text


def _accepts(trait: Trait, value: object) -> bool:
    meta = trait.metadata
    if value is None:
        return bool(trait.allow_none)
    if isinstance(trait, Bool):
        return isinstance(value, bool)
    if isinstance(trait, Enum):
        values = list(trait.values or ())
        if isinstance(trait.values, list | tuple) and all(isinstance(v, str) for v in trait.values):
            if not isinstance(value, str):
                return False
            folded = [v.lower() for v in values]
            caseless = isinstance(trait, CaselessStrEnum)
            return value in values or (caseless and value.lower() in folded)
        return value in values
    if isinstance(trait, Int | Float):
        if not _number(value, isinstance(trait, Int)):
            return False
        low, high, above = meta.get("minimum"), meta.get("maximum"), meta.get("above")
        return (
            (low is None or value >= low)
            and (high is None or value <= high)
            and (above is None or value > above)
        )
    if isinstance(trait, Unicode):
        return isinstance(value, str) and ("choices" not in meta or value in meta["choices"])
    return True


def _quoted(value: object) -> str:
    """`value` as a refusal quotes it: its repr, cut to 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:76] + "...'"


def check_setting(
    label: str,
    trait: Trait,
    value: object,
    current: object,
    given: dict[str, object] | None = None,
) -> None:
    """Raise a one-line SettingError unless `value` is allowed for `trait`: by the session's
    options for theirs (`SessionOptions.check`, with `given`: the settings fixed at the start
    as they stand, which the model's check reads), else by the trait's type and tags."""
    from ..runtime import OptionRefusedError, SessionOptions

    option = _option(trait)
    if option is not None and (value is not None or trait.allow_none):
        try:
            SessionOptions.check(option, value, given)
        except OptionRefusedError as refused:
            if refused.reason is not None:  # the check's own words
                raise SettingError(
                    f"{label} = {_quoted(value)} refused: {refused.reason} "
                    f"(it stays {_quoted(current)})."
                ) from None
        else:
            return
    if option is not None or not _accepts(trait, value):
        raise SettingError(
            f"{label} = {_quoted(value)} refused: it takes {allowed_values(trait)} "
            f"(it stays {_quoted(current)})."
        )
    check = trait.metadata.get("check")
    problem = check(value) if check is not None and value is not None else None
    if problem:
        raise SettingError(
            f"{label} = {_quoted(value)} refused: {problem} (it stays {_quoted(current)})."
        )


class CheckedSettings(Configurable):
    """A Configurable whose settings are checked at every assignment (see the module doc)."""

    _frozen: dict[str, str]
    _collected: list[str] | None
    assigned: set[str]
    """The settings the person assigned (`%config`, a config file, code), whatever the value:
    theirs win over what a settings file would set (the permission mode)."""

    def __init__(self, **kwargs: object) -> None:
        object.__setattr__(self, "_frozen", {})
        object.__setattr__(self, "_collected", None)
        object.__setattr__(self, "assigned", set())
        super().__init__(**kwargs)

    def update_config(self, config: Config) -> None:
        """`%config ForkAgent.NAME = ...`: a refusal is one `UsageError:` line, as a magic's.
        (Raised, IPython's %config logs it with `logging.error`: `ERROR:root:...`, and a
        handler installed on the root logger as a side effect; and it goes on.)"""
        try:
            self._update_config(config)
        except SettingError as exc:
            self.refuse(str(exc))

    @contextlib.contextmanager
    def collecting(self) -> Iterator[list[str]]:
        """Inside, a refusal (`refuse`) is kept in the list yielded instead of printed: the
        `%config` magic (extension.py) raises it after IPython's own %config has run, so the
        cell fails with that one line and "Run all" or papermill stop there."""
        kept: list[str] = []
        object.__setattr__(self, "_collected", kept)
        try:
            yield kept
        finally:
            object.__setattr__(self, "_collected", None)

    def refuse(self, message: str, *, usage: bool = True) -> None:
        """Say that an assignment was refused: kept for the running `%config` (`collecting`),
        else one line on stderr (`UsageError: ` first with `usage`)."""
        if self._collected is not None:
            self._collected.append(message)
        else:
            print(f"UsageError: {message}" if usage else message, file=sys.stderr)

    def _update_config(self, config: Config) -> None:
        """A NAME that is no setting is refused in one line (traitlets warned once per
        process, with a file path, and then said nothing)."""
        mine = config.get(type(self).__name__, {}) if hasattr(config, "get") else {}
        known = sorted(self.traits(config=True))
        for name in mine:
            if name not in known and not name[:1].isupper():  # a subsection is traitlets'
                close = difflib.get_close_matches(name, known, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                raise SettingError(
                    f"{type(self).__name__}.{name}: no such setting{hint}; "
                    f"%config {type(self).__name__} lists them."
                )
        super().update_config(config)

    def freeze(self, name: str, why: str) -> None:
        """From now on an assignment of a different value to `name` is refused with `why`."""
        self._frozen[name] = why

    def __setattr__(self, name: str, value: object) -> None:
        trait = self.traits().get(name) if not name.startswith("_") else None
        if trait is not None and trait.metadata.get("config"):
            current = getattr(self, name)
            label = f"{type(self).__name__}.{name}"
            given = {n: getattr(self, n) for n in fixed_settings(self) if n != name}
            check_setting(label, trait, value, current, given)
            why = self._frozen.get(name)
            if why is not None and value != current:
                raise SettingError(
                    f"{label} = {_quoted(value)} refused: {why} (it stays {_quoted(current)})."
                )
            super().__setattr__(name, value)
            self.assigned.add(name)
            if getattr(self, name) == current:  # traitlets is silent: say it was set all the same
                self.notify_change(
                    Bunch(name=name, old=current, new=current, owner=self, type="change")
                )
            return
        super().__setattr__(name, value)


BACKEND_CHOICES = ("", "anthropic", "bedrock", "vertex", "foundry", "offline")
"""runtime.backends.BACKENDS and "" (unset), written out: importing the runtime here would
make `%load_ext` slow (a test keeps the two the same)."""


class ForkAgent(CheckedSettings):
    """Settings of the forkagent extension, each checked when assigned (settings.py)."""

    model = Unicode(
        "",
        allow_none=True,
        help="Model id or alias (sonnet, opus, haiku, fable; default: FORKAGENT_MODEL or the "
        "built-in default). A name that is no Claude model is refused where the Anthropic API "
        "would get it; another backend or base URL takes it as written, with one line.",
    ).tag(config=True)
    backend = Unicode(
        "",
        allow_none=True,
        help="'anthropic', 'bedrock', 'vertex', 'foundry' or 'offline' (default: 'anthropic' "
        "when the SDK finds credentials, else 'offline').",
    ).tag(config=True)
    permission_mode = CaselessStrEnum(
        ["default", "acceptEdits", "bypassPermissions", "plan", "dontAsk"],
        default_value="default",
        help="How tool calls that write or run code are approved (dontAsk: what no rule "
        "allows is refused without asking).",
    ).tag(config=True)
    auto_respond = Bool(
        True, help="Let the parent answer workers' notifications as they arrive."
    ).tag(config=True)
    forking = Bool(
        True,
        help="An Agent call without subagent_type forks the conversation, and every agent "
        "the model starts runs in the background (its result comes as a notification). "
        "False: such a call starts the general-purpose agent, and a named agent answers in "
        "the call unless the call or its definition asks for the background.",
    ).tag(config=True)
    thinking = Union(
        [Int(), Unicode()],
        default_value=0,
        allow_none=True,
        help="Extended thinking for the parent conversation and its forks: a budget in tokens "
        "(1024 or more; it is added to max_tokens) or 'adaptive'; 0: off. Forks send the "
        "parent's exact setting; named agents follow their definition. %%agent --think N: "
        "one cell.",
    ).tag(config=True)
    auto_background_after = Float(
        120.0,
        allow_none=True,
        help="Seconds the model waits for a synchronous agent (forking = False) before the "
        "agent moves to the background by itself (0 or None: no limit).",
    ).tag(config=True)
    approval_timeout = Float(
        600.0, help="Seconds an approval waits for an answer before it counts as a denial."
    ).tag(config=True, session=False)  # the approval card's clock (approvals/widget_policy.py)
    headless_approval_timeout = Float(
        20.0,
        help="Seconds a worker's approval waits when no frontend can answer it (a notebook "
        "run by nbclient, papermill or nbconvert, without the JupyterLab extension) before it "
        "counts as a denial (a later cell may answer it with api.answer); a line on stderr "
        "says at once how to allow the tool. The parent's own call is refused at once there: "
        "no cell runs while it waits.",
    ).tag(config=True, above=0, maximum=7 * 24 * 3600, session=False)  # as approval_timeout
    max_workers = Int(
        16,
        help="Worker processes alive at once. A finished worker's process is kept for pulls "
        "until a new worker needs its place; a new one waits only while every process "
        "belongs to a running worker.",
    ).tag(config=True)
    worker_namespace = CaselessStrEnum(
        ["isolated", "shared"],
        default_value="isolated",
        help="Where a worker's Python runs: 'isolated' - its own process started from a "
        "snapshot of the kernel at the fork (parallel, stoppable at once, cannot rebind your "
        "names; pull values back with %tasks --pull); 'shared' - a thread in your namespace, "
        "one call at a time (what it assigns is yours at once; it cannot be stopped inside a "
        "C call).",
    ).tag(config=True)
    worker_memory_mb = Int(
        default_worker_memory_mb(),
        allow_none=True,
        help="MB that finished workers' processes (kept for pulls) may hold together, each "
        "counted by what it alone holds; beyond it the least recently used is retired "
        "(default: a quarter of the machine's memory).",
    ).tag(config=True)
    worker_nice = Int(
        5,
        help="Niceness added to worker processes, so the kernel answers first on a busy "
        "machine (0 for none).",
    ).tag(config=True)
    max_cost_usd = Float(
        None,
        allow_none=True,
        help="A cost budget for the session in USD (None: none). When the session's spend "
        "reaches it, running workers stop (killed, the reason in their notification) and new "
        "turns, forks and messages are refused until it is raised.",
    ).tag(config=True)
    cache_ttl = CaselessStrEnum(
        ["5m", "1h"], default_value="5m", help="Prompt-cache lifetime to request."
    ).tag(config=True)
    large_prompt_tokens = Int(
        20_000,
        allow_none=True,
        help="An %%agent prompt, %fork directive or %send message of this many tokens or more "
        "(a large {variable} put in) is said in one line on stderr, its size and cost, before "
        "it is sent (None: never). One that cannot fit the model's context window is refused "
        "whatever this is.",
    ).tag(config=True)
    executor = CaselessStrEnum(
        ["local", "dask"],
        default_value="local",
        help="Where isolated workers' code runs: 'local' - processes forked from the kernel; "
        "'dask' - a process per worker on the Dask cluster at dask_address (or the client "
        'given to api.use_dask). Needs pip install "forkagent-jupyter[dask]".',
    ).tag(config=True)
    dask_address = Unicode(
        "", help="The Dask scheduler's address for executor = 'dask' (tcp://host:8786)."
    ).tag(config=True)
    max_turns = Int(
        50,
        help="Model requests one turn may make (each round of tool calls is one) before it "
        "stops with max_turns: the parent's turns and forks, and named agents whose file "
        "sets no maxTurns; from the next turn on.",
    ).tag(config=True)
    stream_retries = Int(
        3,
        help="Times a reply whose stream breaks off mid-way (dropped connection, "
        "overloaded_error or api_error event) is requested again, with backoff, before the "
        "run fails (0: never).",
    ).tag(config=True)
    compact_at = Float(
        0.8,
        allow_none=True,
        help="Compact a conversation (the parent's and each worker's) before a request whose "
        "prompt plus max_tokens would reach this fraction of the model's context window: a "
        "fork of it writes a summary (read from the prompt cache) that replaces all but the "
        "last turns. None: never (a long session then ends in a context-window error). "
        "%compact compacts the parent now.",
    ).tag(config=True)


def forwarded(settings: CheckedSettings, name: str) -> bool:
    """Whether the setting `name` is the session's (a `SessionOptions` field of that name,
    not tagged `session=False`)."""
    from ..runtime import SessionOptions

    trait = settings.traits(config=True).get(name)
    return (
        trait is not None
        and name in SessionOptions.model_fields
        and trait.metadata.get("session", True)
    )


def fixed_settings(settings: CheckedSettings) -> list[str]:
    """The session's settings that are fixed once it has started (frozen fields)."""
    from ..runtime import SessionOptions

    fields = SessionOptions.model_fields
    return [n for n in settings.traits(config=True) if forwarded(settings, n) and fields[n].frozen]


def session_settings(settings: CheckedSettings) -> dict[str, Any]:
    """The settings the session takes, by name: what `Session(**...)` is given."""
    return {
        name: getattr(settings, name)
        for name in settings.traits(config=True)
        if forwarded(settings, name)
    }
