"""Settings checked when they are assigned: one line naming the setting and what it accepts.

`ForkAgent` (extension.py) derives from `CheckedSettings`. Every assignment - `%config
ForkAgent.X = ...`, `c.ForkAgent.X` in a config file, `__forkagent__.settings.X = ...` - is
checked here first, before the session sees it and whether or not the session has started:
a refused value raises `SettingError` (a TraitError, which `%config` shows as one line) and
the previous value stays.

The check comes from the trait's type (a Bool takes True or False, never 1; an Int or a Float
never a bool, nan or an infinity; an enum one of its values) plus what its tags add:

- `minimum=` / `maximum=`: inclusive bounds of a number;
- `above=`: an exclusive lower bound (`above=0`: positive);
- `choices=`: the allowed strings of a Unicode ("" included if it may be unset);
- `allowed=`: the words the message uses for the allowed values (else derived from the above).

A new setting plugs in by declaring its trait with these tags; nothing else to register.
"""

from __future__ import annotations

import math
from typing import Any

from traitlets import Bool, CaselessStrEnum, Enum, Float, Int, TraitError, TraitType, Unicode
from traitlets.config import Configurable

__all__ = ["CheckedSettings", "SettingError", "allowed_values", "check_setting"]


class SettingError(TraitError):  # type: ignore[misc]
    """A setting refused at assignment: its message is the one line the person reads."""


def _number(value: Any, integral: bool) -> bool:
    if isinstance(value, bool):
        return False
    if integral:
        return isinstance(value, int)
    return isinstance(value, int | float) and math.isfinite(value)


def allowed_values(trait: TraitType[Any, Any]) -> str:
    """The allowed values of `trait`, in words."""
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


def _accepts(trait: TraitType[Any, Any], value: Any) -> bool:
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


def check_setting(label: str, trait: TraitType[Any, Any], value: Any, current: Any) -> None:
    """Raise a one-line SettingError unless `value` is allowed for `trait`."""
    if not _accepts(trait, value):
        raise SettingError(
            f"{label} = {value!r} refused: it takes {allowed_values(trait)} (it stays {current!r})."
        )


class CheckedSettings(Configurable):  # type: ignore[misc]
    """A Configurable whose settings are checked at every assignment (see the module doc)."""

    _frozen: dict[str, str]

    def __init__(self, **kwargs: Any) -> None:
        object.__setattr__(self, "_frozen", {})
        super().__init__(**kwargs)

    def freeze(self, name: str, why: str) -> None:
        """From now on an assignment of a different value to `name` is refused with `why`."""
        self._frozen[name] = why

    def __setattr__(self, name: str, value: Any) -> None:
        trait = self.traits().get(name) if not name.startswith("_") else None
        if trait is not None and trait.metadata.get("config"):
            current = getattr(self, name)
            label = f"{type(self).__name__}.{name}"
            check_setting(label, trait, value, current)
            why = self._frozen.get(name)
            if why is not None and value != current:
                raise SettingError(f"{label} = {value!r} refused: {why} (it stays {current!r}).")
        super().__setattr__(name, value)
