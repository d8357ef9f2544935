"""Values pulled back from a worker process: data by default, pickles only when trusted.

The worker encodes each value it is asked for (`encode_pulled`): as data (`datacodec`: plain
data, numpy arrays, pandas frames) when it can; as a pickle only when the person pulling said
`--trust`, because unpickling in the kernel runs whatever code the pickle names, and the worker's
code is the model's. The kernel decodes (`decode_pulled`), and accepts a pickle only when it
asked for one: what the worker claims never decides.
"""

from __future__ import annotations

import asyncio
import pickle
import types
from collections.abc import Sequence

from . import datacodec
from .base import PullError

__all__ = ["decode_pulled", "encode_pulled"]

TRUST_HINT = (
    "it is not plain data, an array or a frame, and unpickling it would run code the worker "
    "chose in your kernel; `%tasks --pull --trust ID NAME` (or `api.pull(..., trust=True)`) "
    "brings it back anyway"
)


def encode_pulled(
    namespace: dict[str, object], names: Sequence[str], trust: bool
) -> tuple[dict[str, tuple[str, bytes]], dict[str, str]]:
    """In the worker: each name's value as ("data", blob) or, trusted, ("pickle", blob)."""
    values: dict[str, tuple[str, bytes]] = {}
    errors: dict[str, str] = {}
    for name in names:
        if name not in namespace:
            errors[name] = "not defined in this worker"
            continue
        value = namespace[name]
        try:
            values[name] = ("data", datacodec.dumps(value))
            continue
        except datacodec.NotDataError as exc:
            if not trust:
                errors[name] = f"{exc} cannot come back: {TRUST_HINT}"
                continue
        except Exception as exc:
            errors[name] = f"a {type(value).__name__} could not be encoded ({exc})"
            continue
        if isinstance(value, (types.FunctionType, type)) and value.__module__ == "__main__":
            kind = "class" if isinstance(value, type) else "function"
            errors[name] = (
                f"a {kind} defined in the worker cannot come back (pickle stores it by name "
                "only); pull the values it computes instead"
            )
            continue
        try:
            values[name] = ("pickle", pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception as exc:
            errors[name] = f"{type(value).__name__} cannot be pickled ({exc})"
    return values, errors


async def decode_pulled(reply: object, names: Sequence[str], trust: bool) -> dict[str, object]:
    """In the kernel: the values of a worker's reply to a pull (PullError names what could
    not come back, or a reply that is not one)."""
    if not isinstance(reply, Sequence) or len(reply) != 2:
        raise PullError("the worker's reply to the pull is malformed")
    encoded, errors = reply
    if type(encoded) is not dict or type(errors) is not dict:
        raise PullError("the worker's reply to the pull is malformed")
    if errors:
        raise PullError("; ".join(f"{name}: {why}" for name, why in errors.items()))
    values: dict[str, object] = {}
    for name in names:
        entry = encoded.get(name)
        if type(entry) is not tuple or len(entry) != 2 or type(entry[1]) not in (bytes, memoryview):
            raise PullError(f"{name}: the worker sent no value for it")
        kind, blob = entry
        if kind == "data":
            try:
                values[name] = await asyncio.to_thread(datacodec.loads, blob)
            except datacodec.BadDataError as exc:
                raise PullError(f"{name}: the worker sent malformed data ({exc})") from None
        elif kind == "pickle" and trust:
            values[name] = await asyncio.to_thread(pickle.loads, blob)
        else:
            raise PullError(f"{name}: the worker sent a pickle that was not asked for")
    return values
