"""Values from a worker process as data: decoding them never runs code the worker chose.

Everything a worker sends to the kernel (its outputs, results, reports, and the values a pull
brings back) is encoded here instead of pickled: unpickling runs whatever callable the pickle
names, so a worker could otherwise run code in the kernel just by writing a frame on its
socket. What can be encoded: plain data (None, bool, int, float, complex, str, bytes, lists,
tuples, dicts, sets, dates and times, Decimal), numpy arrays and scalars (not of object dtype,
except arrays of plain data), pandas DataFrames, Series and indexes whose columns are such
arrays (or categoricals, or extension arrays of plain data), Arrow tables and polars
DataFrames and Series (as an Arrow IPC stream: data, checked in full when read), and this
package's own output records. Anything else raises `NotDataError` when encoded, and
`BadDataError` when a blob claims it.

A blob: b"FKD1", a 4-byte length, a JSON tree, then each binary buffer the tree refers to by
number (8-byte length, bytes). In the tree, JSON scalars stand for themselves; everything
else is a list headed by a tag.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import importlib
import json
import struct
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ...messages_api.shapes import JSON
from .base import ClearOutput, Display, ExecResult, StreamText

if TYPE_CHECKING:
    import numpy
    import numpy.typing as npt
    import polars

__all__ = ["BadDataError", "NotDataError", "dumps", "loads"]

_MAGIC = b"FKD1"
_U32 = struct.Struct("!I")
_U64 = struct.Struct("!Q")
_MAX_DEPTH = 200
_RECORDS: dict[str, type] = {
    "StreamText": StreamText,
    "Display": Display,
    "ClearOutput": ClearOutput,
    "ExecResult": ExecResult,
}


class NotDataError(TypeError):
    """The value is not plain data, an array or a frame (it could only come back pickled)."""


class BadDataError(ValueError):
    """A blob that is not a well-formed encoding of data."""


def dumps(value: object) -> bytes:
    """`value` as a blob; NotDataError names the first part that is not data."""
    buffers: list[bytes] = []
    tree = _Encoder(buffers).encode(value, 0)
    head = json.dumps(tree, separators=(",", ":"), allow_nan=True).encode()
    parts = [_MAGIC, _U32.pack(len(head)), head, _U32.pack(len(buffers))]
    for buffer in buffers:
        parts += [_U64.pack(len(buffer)), buffer]
    return b"".join(parts)


def loads(blob: bytes | bytearray | memoryview, views: bool = False) -> object:
    """The value a blob encodes; BadDataError for anything malformed (never runs its code).
    With `views`, a bytes value comes back as a read-only memoryview of `blob` (no copy: a
    pulled value nested in a worker's message is not copied before it is decoded)."""
    view = memoryview(blob)
    try:
        if bytes(view[:4]) != _MAGIC:
            raise BadDataError("not a data blob")
        (size,) = _U32.unpack_from(view, 4)
        head = bytes(view[8 : 8 + size])
        at = 8 + size
        (count,) = _U32.unpack_from(view, at)
        at += 4
        buffers: list[memoryview] = []
        for _ in range(count):
            (length,) = _U64.unpack_from(view, at)
            at += 8
            if at + length > len(view):
                raise BadDataError("a buffer runs past the end")
            buffers.append(view[at : at + length])
            at += length
        tree = json.loads(head)
        return _Decoder(buffers, views).decode(tree, 0)
    except BadDataError:
        raise
    except Exception as exc:  # anything malformed is refused the same way
        raise BadDataError(f"malformed data ({type(exc).__name__}: {exc})") from None


def _loaded(name: str) -> bool:
    """Whether the code has imported `name` (a value of its types can exist only then)."""
    return sys.modules.get(name) is not None


class _Encoder:
    def __init__(self, buffers: list[bytes]) -> None:
        self.buffers = buffers

    def buffer(self, data: bytes) -> int:
        self.buffers.append(data)
        return len(self.buffers) - 1

    def encode(self, value: object, depth: int) -> JSON:
        if depth > _MAX_DEPTH:
            raise NotDataError("nested too deeply")
        kind = type(value)
        if value is None or type(value) is bool or type(value) is int or type(value) is str:
            return value
        if kind is float:
            return ["f", repr(value)]
        nested = depth + 1
        if type(value) is list:
            return ["L", [self.encode(v, nested) for v in value]]
        if type(value) is tuple:
            return ["T", [self.encode(v, nested) for v in value]]
        if type(value) is dict:
            return [
                "D",
                [[self.encode(k, nested), self.encode(v, nested)] for k, v in value.items()],
            ]
        if type(value) is set or type(value) is frozenset:
            return ["S" if kind is set else "F", [self.encode(v, nested) for v in value]]
        if type(value) is bytes or type(value) is bytearray:
            return ["B" if kind is bytes else "BA", self.buffer(bytes(value))]
        if type(value) is complex:
            return ["C", repr(value.real), repr(value.imag)]
        if kind is decimal.Decimal:
            return ["Dec", str(value)]
        if type(value) is dt.datetime or type(value) is dt.date or type(value) is dt.time:
            tz = getattr(value, "tzinfo", None)
            if tz not in (None, dt.timezone.utc) and not isinstance(tz, dt.timezone):
                raise NotDataError(f"a {kind.__name__} with the time zone {tz!r}")
            return [kind.__name__, value.isoformat()]
        if type(value) is dt.timedelta:
            return ["timedelta", value.days, value.seconds, value.microseconds]
        if kind in _RECORDS.values() and dataclasses.is_dataclass(value):
            fields = {
                f.name: self.encode(getattr(value, f.name), nested)
                for f in dataclasses.fields(value)
            }
            return ["rec", kind.__name__, fields]
        return self.encode_library(value, nested)

    def encode_library(self, value: object, depth: int) -> JSON:
        if _loaded("numpy"):
            import numpy as np

            if type(value) is np.ndarray:
                return self.array(value, depth)
            if isinstance(value, np.generic) and value.dtype.kind not in "OV":
                return ["npscalar", value.dtype.str, self.buffer(value.tobytes())]
        if _loaded("pandas"):
            pd = _pandas()
            item: Any = value  # of the untyped pandas, when it is one
            if item is pd.NA:
                return ["na"]
            if item is pd.NaT:
                return ["nat"]
            if type(item) is pd.Timestamp:
                return ["timestamp", item.isoformat(), _tz_name(item.tz)]
            if type(item) is pd.Timedelta:
                return ["pdtimedelta", int(item.value)]
            if type(item) is pd.Period:
                return ["period", int(item.ordinal), item.freqstr]
            if type(item) is pd.Interval:
                left, right = self.encode(item.left, depth), self.encode(item.right, depth)
                return ["interval", left, right, item.closed]
            if type(item) is pd.DataFrame:
                columns = [self.values(item.iloc[:, i], depth) for i in range(item.shape[1])]
                return [
                    "dataframe",
                    self.index(item.index, depth),
                    self.index(item.columns, depth),
                    columns,
                ]
            if type(item) is pd.Series:
                return [
                    "series",
                    self.index(item.index, depth),
                    self.values(item, depth),
                    self.encode(item.name, depth),
                ]
            if isinstance(item, pd.Index):
                return self.index(item, depth)
        arrow = _arrow_of(value)
        if arrow is not None:
            return [arrow[0], self.buffer(_ipc_stream(arrow[1]))]
        kind = type(value)
        where = "" if kind.__module__ == "builtins" else f"{kind.__module__}."
        raise NotDataError(f"a {where}{kind.__qualname__}")

    def array(self, value: npt.NDArray[numpy.generic], depth: int) -> JSON:
        if value.dtype.kind == "O":
            return [
                "ndobject",
                list(value.shape),
                [self.encode(v, depth) for v in value.ravel().tolist()],
            ]
        if value.dtype.kind == "V" or value.dtype.hasobject:
            raise NotDataError(f"a numpy array of dtype {value.dtype}")
        import numpy as np

        data = np.ascontiguousarray(value).tobytes()
        return ["ndarray", value.dtype.str, list(value.shape), self.buffer(data)]

    def values(self, series: Any, depth: int) -> JSON:
        """The values of a Series or Index (of the untyped pandas), with their dtype."""
        import numpy as np

        pd = _pandas()

        array = series.array
        dtype = series.dtype
        if isinstance(dtype, pd.CategoricalDtype):
            return [
                "categorical",
                self.array(np.asarray(array.codes), depth),
                self.index(dtype.categories, depth),
                bool(dtype.ordered),
            ]
        if isinstance(dtype, np.dtype):
            return ["numpy", self.array(series.to_numpy(), depth)]
        items = series.to_numpy(dtype=object).tolist()
        return ["extension", str(dtype), [self.encode(v, depth) for v in items]]

    def index(self, index: Any, depth: int) -> JSON:
        """A pandas Index (pandas is untyped)."""
        pd = _pandas()

        if type(index) is pd.RangeIndex:
            return [
                "rangeindex",
                index.start,
                index.stop,
                index.step,
                self.encode(index.name, depth),
            ]
        if isinstance(index, pd.MultiIndex):
            levels = [self.index(index.get_level_values(i), depth) for i in range(index.nlevels)]
            return ["multiindex", levels, [self.encode(n, depth) for n in index.names]]
        return ["index", self.values(index, depth), self.encode(index.name, depth)]


def _arrow_of(value: object) -> tuple[str, object] | None:
    """An Arrow table or a polars frame/series as (its tag, an Arrow table); None otherwise."""
    pa = sys.modules.get("pyarrow")
    if pa is not None and type(value) is pa.Table:
        return "arrow", value
    if _loaded("polars"):
        import polars as pl

        if type(value) is pl.DataFrame:
            return "polars", value.to_arrow()
        if type(value) is pl.Series:
            return "polarseries", value.to_frame().to_arrow()
    return None


def _ipc_stream(table: Any) -> bytes:
    """An Arrow table (pyarrow is untyped) as an IPC stream."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def _read_ipc(data: memoryview) -> object:
    """An Arrow IPC stream read and validated in full (offsets and lengths inside their
    buffers: nothing read later can run past them)."""
    try:
        import pyarrow as pa
    except ImportError:
        raise BadDataError("an Arrow table, and pyarrow is not installed here") from None
    table = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
    table.validate(full=True)
    return table


def _tz_name(tz: object) -> str | None:
    return None if tz is None else str(tz)


class _Decoder:
    def __init__(self, buffers: list[memoryview], views: bool = False) -> None:
        self.buffers = buffers
        self.views = views

    def decode(self, node: object, depth: int) -> object:
        if depth > _MAX_DEPTH:
            raise BadDataError("nested too deeply")
        if node is None or type(node) in (bool, int, str):
            return node
        if type(node) is not list or not node or type(node[0]) is not str:
            raise BadDataError(f"unexpected node {type(node).__name__}")
        tag, args, nested = node[0], node[1:], depth + 1
        simple = _SIMPLE.get(tag)
        if simple is not None:
            return simple(self, args, nested)
        method = getattr(self, f"tag_{tag}", None)
        if method is None:
            raise BadDataError(f"unknown tag {tag!r}")
        return method(args, nested)

    def items(self, node: object, depth: int) -> list[object]:
        if type(node) is not list:
            raise BadDataError("expected a list")
        return [self.decode(v, depth) for v in node]

    def blob(self, index: object) -> bytes:
        return bytes(self.view(index))

    def view(self, index: object) -> memoryview:
        if type(index) is not int:
            raise BadDataError("a buffer reference must be a number")
        return self.buffers[index].toreadonly()

    def tag_rec(self, args: list[object], depth: int) -> object:
        name, fields = args
        record = _RECORDS.get(name) if type(name) is str else None
        if record is None or type(fields) is not dict:
            raise BadDataError(f"unknown record {name!r}")
        known = {f.name for f in dataclasses.fields(record)}
        if not set(fields) <= known:
            raise BadDataError(f"unknown fields of {name}")
        return record(**{k: self.decode(v, depth) for k, v in fields.items()})

    def tag_ndarray(self, args: list[object], depth: int) -> object:
        import numpy as np

        descr, shape, ref = args
        dtype = _dtype(descr)
        view = np.frombuffer(self.view(ref), dtype=dtype).reshape(_shape(shape))
        return view.copy()  # one copy (numpy's: the GIL is let go), writable, its own memory

    def tag_ndobject(self, args: list[object], depth: int) -> object:
        import numpy as np

        shape, items = args
        values = self.items(items, depth)
        array = np.empty(len(values), dtype=object)
        array[:] = values
        return array.reshape(_shape(shape))

    def tag_npscalar(self, args: list[object], depth: int) -> object:
        import numpy as np

        descr, ref = args
        return np.frombuffer(self.blob(ref), dtype=_dtype(descr))[0]

    def tag_na(self, args: list[object], depth: int) -> object:
        pd = _pandas()

        return pd.NA

    def tag_nat(self, args: list[object], depth: int) -> object:
        pd = _pandas()

        return pd.NaT

    def tag_timestamp(self, args: list[object], depth: int) -> object:
        pd = _pandas()

        text, tz = _strs(args, 2)
        stamp = pd.Timestamp(text)
        if tz is not None and stamp.tz is not None:
            try:
                stamp = stamp.tz_convert(tz)
            except Exception:
                pass  # a fixed offset stays one
        return stamp

    def tag_pdtimedelta(self, args: list[object], depth: int) -> object:
        pd = _pandas()

        (value,) = args
        if type(value) is not int:
            raise BadDataError("a Timedelta is a number of nanoseconds")
        return pd.Timedelta(value, unit="ns")

    def values(self, node: object, depth: int) -> tuple[object, object]:
        """(values, dtype) for a Series or Index."""
        import numpy as np

        pd = _pandas()

        if type(node) is not list or not node:
            raise BadDataError("expected values")
        kind = node[0]
        if kind == "numpy":
            array = self.decode(node[1], depth)
            if not isinstance(array, np.ndarray):
                raise BadDataError("expected an array")
            return array, array.dtype
        if kind == "categorical":
            codes = self.decode(node[1], depth)
            categories = self.index(node[2], depth)
            if not isinstance(codes, np.ndarray) or codes.dtype.kind != "i":
                raise BadDataError("categorical codes must be integers")
            values = pd.Categorical.from_codes(codes, categories=categories, ordered=bool(node[3]))
            return values, values.dtype
        if kind == "extension":
            name = node[1]
            if type(name) is not str:
                raise BadDataError("an extension dtype is named by a string")
            dtype = pd.api.types.pandas_dtype(name)
            if isinstance(dtype, np.dtype) and dtype.kind == "O":
                raise BadDataError("object arrays are sent as numpy values")
            return pd.array(self.items(node[2], depth), dtype=dtype), dtype
        raise BadDataError(f"unknown values {kind!r}")

    def index(self, node: object, depth: int) -> Any:
        """A pandas Index (pandas is untyped)."""
        pd = _pandas()

        if type(node) is not list or not node:
            raise BadDataError("expected an index")
        kind = node[0]
        if kind == "rangeindex":
            start, stop, step = node[1:4]
            if not all(type(n) is int for n in (start, stop, step)):
                raise BadDataError("a RangeIndex is made of numbers")
            return pd.RangeIndex(start, stop, step, name=self.decode(node[4], depth))
        if kind == "multiindex":
            levels = [self.index(level, depth + 1) for level in node[1]]
            return pd.MultiIndex.from_arrays(levels, names=self.items(node[2], depth))
        if kind == "index":
            values, dtype = self.values(node[1], depth + 1)
            return pd.Index(values, dtype=dtype, name=self.decode(node[2], depth), copy=False)
        raise BadDataError(f"unknown index {kind!r}")

    def tag_index(self, args: list[object], depth: int) -> object:
        return self.index(["index", *args], depth)

    def tag_rangeindex(self, args: list[object], depth: int) -> object:
        return self.index(["rangeindex", *args], depth)

    def tag_multiindex(self, args: list[object], depth: int) -> object:
        return self.index(["multiindex", *args], depth)

    def tag_series(self, args: list[object], depth: int) -> object:
        pd = _pandas()

        index, values, name = args
        data, dtype = self.values(values, depth)
        return pd.Series(
            data, index=self.index(index, depth), dtype=dtype, name=self.decode(name, depth)
        )

    def tag_arrow(self, args: list[object], depth: int) -> object:
        return _read_ipc(self.view(args[0]))

    def tag_polars(self, args: list[object], depth: int) -> polars.DataFrame | polars.Series:
        try:
            import polars as pl
        except ImportError:
            raise BadDataError("a polars DataFrame, and polars is not installed here") from None
        return pl.from_arrow(_read_ipc(self.view(args[0])))

    def tag_polarseries(self, args: list[object], depth: int) -> object:
        import polars as pl

        frame = self.tag_polars(args, depth)
        if not isinstance(frame, pl.DataFrame) or frame.width != 1:
            raise BadDataError("a polars Series must be one column")
        return frame.to_series()

    def tag_period(self, args: list[object], depth: int) -> object:
        ordinal, freq = args
        if type(ordinal) is not int or type(freq) is not str:
            raise BadDataError("a Period is an ordinal and a frequency")
        return _pandas().Period(ordinal=ordinal, freq=freq)

    def tag_interval(self, args: list[object], depth: int) -> object:
        left, right, closed = args
        if closed not in ("left", "right", "both", "neither"):
            raise BadDataError("an Interval is closed left, right, both or neither")
        return _pandas().Interval(self.decode(left, depth), self.decode(right, depth), closed)

    def tag_dataframe(self, args: list[object], depth: int) -> object:
        pd = _pandas()

        index_node, columns_node, columns = args
        index = self.index(index_node, depth)
        names = self.index(columns_node, depth)
        if type(columns) is not list or len(columns) != len(names):
            raise BadDataError("a DataFrame's columns do not match their names")
        series = {}
        for i, node in enumerate(columns):
            data, dtype = self.values(node, depth)
            series[i] = pd.Series(data, index=index, dtype=dtype, copy=False)
        frame = pd.DataFrame(series, index=index) if series else pd.DataFrame(index=index)
        frame.columns = names
        return frame


def _dtype(descr: object) -> numpy.dtype[numpy.generic]:
    import numpy as np

    if type(descr) is not str:
        raise BadDataError("a dtype is named by a string")
    dtype = np.dtype(descr)
    if dtype.hasobject or dtype.kind == "V":
        raise BadDataError(f"dtype {descr} is not plain data")
    return dtype


def _shape(shape: object) -> tuple[int, ...]:
    if type(shape) is not list or not all(type(n) is int and n >= 0 for n in shape):
        raise BadDataError("a shape is a list of sizes")
    return tuple(shape)


def _strs(args: list[object], count: int) -> list[str | None]:
    strings = [a for a in args if a is None or type(a) is str]
    if len(args) != count or len(strings) != count:
        raise BadDataError("expected strings")
    return strings


def _text(args: list[object]) -> str:
    (text,) = _strs(args, 1)
    if text is None:
        raise BadDataError("expected a string")
    return text


def _int(value: object) -> int:
    if not isinstance(value, (int, float, str)):
        raise BadDataError("expected a number")
    return int(value)


def _float(text: object) -> float:
    if type(text) is not str:
        raise BadDataError("a float is written as text")
    return float(text)


_Tag = Callable[[_Decoder, list[object], int], object]
"""Decodes the arguments of a node headed by its tag."""


def _when(kind: type[dt.datetime] | type[dt.date] | type[dt.time]) -> _Tag:
    def decode(self: _Decoder, args: list[object], depth: int) -> object:
        return kind.fromisoformat(_text(args))

    return decode


def _container(build: Callable[[list[object]], object]) -> _Tag:
    def decode(self: _Decoder, args: list[object], depth: int) -> object:
        (items,) = args
        return build(self.items(items, depth))

    return decode


def _dict(self: _Decoder, args: list[object], depth: int) -> object:
    (pairs,) = args
    if type(pairs) is not list or not all(type(p) is list and len(p) == 2 for p in pairs):
        raise BadDataError("a dict is a list of pairs")
    return {self.decode(k, depth): self.decode(v, depth) for k, v in pairs}


_SIMPLE: dict[str, _Tag] = {
    "f": lambda self, args, depth: _float(args[0]),
    "C": lambda self, args, depth: complex(_float(args[0]), _float(args[1])),
    "Dec": lambda self, args, depth: decimal.Decimal(_text(args)),
    "L": _container(list),
    "T": _container(tuple),
    "S": _container(set),
    "F": _container(frozenset),
    "D": _dict,
    "B": lambda self, args, depth: self.view(args[0]) if self.views else self.blob(args[0]),
    "BA": lambda self, args, depth: bytearray(self.blob(args[0])),
    "datetime": _when(dt.datetime),
    "date": _when(dt.date),
    "time": _when(dt.time),
    "timedelta": lambda self, args, depth: dt.timedelta(*[_int(a) for a in args[:3]]),
}


def _pandas() -> ModuleType:
    """pandas (untyped: what is read of it is not checked)."""
    return importlib.import_module("pandas")
