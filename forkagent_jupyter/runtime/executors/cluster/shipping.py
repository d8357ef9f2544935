"""What a worker on a cluster gets of the kernel's namespace, and how it travels.

A worker on Dask starts empty. Its snapshot is the kernel's name bindings at the fork (a shallow
copy of the namespace: which object each name meant then). Before each call, the names the code
refers to (every name in its syntax tree, nested functions and comprehensions included) that
the snapshot has and the worker has not received yet are shipped, once per worker:

* small values as cloudpickle pickles with the call (functions and classes defined in the
  notebook travel by value, with the globals they use; modules by name, imported there);
* values larger than `LARGE_BYTES` are scattered to the cluster once per fork group (the forks
  taken while the namespace did not change, e.g. the `%fork` lines of one cell) and each sibling
  gets the cluster's key: the kernel sends the data once however many siblings use it;
* what cannot be pickled (open files, sockets, locks, generators, GPU handles, database
  connections) stays in the kernel; the call says which name was left out and why, and the
  code meets a NameError.

A value is pickled when a worker of its group first uses it: a change made in place to that
object between the fork and that moment is seen. Names reached only through `globals()`,
`eval` or strings are not found.
"""

from __future__ import annotations

import ast
import asyncio
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "LARGE_BYTES",
    "DaskClient",
    "DaskFuture",
    "ShipGroup",
    "Shipment",
    "referenced_names",
]

LARGE_BYTES = 1_000_000
"""A value whose pickle (or estimated size) is larger than this is scattered, not sent inline."""

_SKIPPED = frozenset({"In", "Out", "get_ipython", "exit", "quit", "display", "__forkagent__"})


class DaskFuture(Protocol):
    """What is used of a `distributed.Future` (distributed is untyped in parts)."""

    @property
    def key(self) -> str: ...

    def result(self, timeout: float | None = None) -> object: ...


class ClientLoop(Protocol):
    @property
    def asyncio_loop(self) -> asyncio.AbstractEventLoop: ...


class DaskClient(Protocol):
    """What is used of a `distributed.Client` (distributed is untyped in parts)."""

    @property
    def status(self) -> str: ...

    @property
    def loop(self) -> ClientLoop: ...

    def scheduler_info(self) -> Mapping[str, Mapping[str, object]]: ...

    def submit(self, fn: Callable[..., object], *args: object, **kwargs: object) -> DaskFuture: ...

    def scatter(self, data: list[object], *, broadcast: bool, hash: bool) -> list[DaskFuture]: ...

    def who_has(self, futures: list[DaskFuture]) -> Mapping[str, Sequence[str]]: ...

    def close(self, timeout: float) -> object: ...


def referenced_names(code: str) -> set[str]:
    """Every identifier the code mentions (a superset of the globals it reads)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
    return names


def shippable(name: str) -> bool:
    return name not in _SKIPPED and not (name.startswith("_") and not name.startswith("__"))


@dataclass
class Shipment:
    """What one call sends: pickles, keys of scattered data, and names left out (with why)."""

    blobs: dict[str, bytes] = field(default_factory=dict)
    keys: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    """name -> (key of the scattered data, the Dask workers that held it when scattered)"""
    left_out: dict[str, str] = field(default_factory=dict)

    @property
    def bytes_inline(self) -> int:
        return sum(len(b) for b in self.blobs.values())


@dataclass
class _Packed:
    blob: bytes | None = None
    future: DaskFuture | None = None  # of scattered data
    error: str | None = None
    value: object = None  # held, so the id it was packed under is not reused
    holders: list[str] = field(default_factory=list)


class ShipGroup:
    """The packed values of one fork group, shared by its workers (thread-safe: packing runs
    on worker threads, never on the kernel's event loop)."""

    def __init__(self, client: DaskClient) -> None:
        self.client = client
        self.scattered_bytes = 0
        self.inline_bytes = 0
        self._packed: dict[tuple[str, int], _Packed] = {}
        self._locks: dict[tuple[str, int], threading.Lock] = {}
        self._guard = threading.Lock()

    def pack(self, names: Iterable[str], snapshot: dict[str, object]) -> Shipment:
        shipment = Shipment()
        for name in sorted(names):
            packed = self._pack_one(name, snapshot[name])
            if packed.error is not None:
                shipment.left_out[name] = packed.error
            elif packed.future is not None:
                shipment.keys[name] = (packed.future.key, packed.holders)
            elif packed.blob is not None:
                shipment.blobs[name] = packed.blob
        self.inline_bytes += shipment.bytes_inline
        return shipment

    def _pack_one(self, name: str, value: object) -> _Packed:
        ident = (name, id(value))
        with self._guard:
            lock = self._locks.setdefault(ident, threading.Lock())
        with lock:  # siblings asking for the same value wait for the first one's packing
            found = self._packed.get(ident)
            if found is None:
                found = self._packed[ident] = self._pack_value(value)
            return found

    def _pack_value(self, value: object) -> _Packed:
        import cloudpickle
        from dask.sizeof import sizeof

        try:
            estimate = int(sizeof(value))
        except Exception:
            estimate = 0
        blob = None
        if estimate <= LARGE_BYTES:
            try:
                blob = cloudpickle.dumps(value, protocol=5)
            except Exception as exc:
                return _Packed(error=_why_not(value, exc))
            if len(blob) <= LARGE_BYTES:
                return _Packed(blob=blob, value=value)
        try:
            [future] = self.client.scatter([value], broadcast=False, hash=False)
            holders = list(self.client.who_has([future]).get(future.key, ()))
        except Exception as exc:
            return _Packed(error=_why_not(value, exc))
        self.scattered_bytes += len(blob) if blob is not None else estimate
        return _Packed(future=future, value=value, holders=holders)


def _why_not(value: object, exc: BaseException) -> str:
    return (
        f"a {type(value).__name__} cannot be pickled ({type(exc).__name__}: {exc}); it stays "
        "in the kernel (open files, sockets, locks and GPU handles do not travel)"
    )
