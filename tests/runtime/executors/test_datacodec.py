"""What a worker sends back is data: values round-trip without pickle, objects that are not
data are refused when encoded, and a hostile blob is refused when decoded (never run)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import pickle
import struct
from typing import Any

import numpy as np
import pandas as pd
import pytest

from forkagent_jupyter.runtime.executors.base import Display, ExecResult, StreamText
from forkagent_jupyter.runtime.executors.datacodec import (
    BadDataError,
    NotDataError,
    dumps,
    loads,
)

ran: list[str] = []


class Evil:
    def __reduce__(self) -> Any:
        return (ran.append, ("code ran",))


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "n": [1, 2, 3],
            "s": ["x", "y", None],
            "cat": pd.Categorical(["u", "v", "u"], categories=["v", "u", "w"], ordered=True),
            "when": pd.date_range("2024-03-30", periods=3, tz="Europe/Paris"),
            "nullable": pd.array([1, None, 3], dtype="Int64"),
            "f": [1.5, np.nan, 2.0],
            "obj": [{"k": 1}, [1], None],
            "span": pd.to_timedelta([1, 2, 3], unit="s"),
        }
    )


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        2**80,
        -1.5,
        "text",
        b"\x00raw",
        bytearray(b"ba"),
        [1, (2, 3), {4}],
        {"a": frozenset([1]), 2: None},
        1 + 2j,
        decimal.Decimal("1.10"),
        dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),
        dt.date(2024, 1, 2),
        dt.timedelta(days=1, microseconds=3),
        ("output", StreamText("stderr", "x")),
        ExecResult("out", "err", "3", None, (b"\x89PNG",)),
        Display({"text/plain": "x", "image/png": "AAA="}, {"isolated": True}),
    ],
)
def test_plain_data_and_records_round_trip(value: Any) -> None:
    assert loads(dumps(value)) == value


def test_arrays_and_frames_round_trip_with_their_dtypes() -> None:
    df = frame()
    for value in (df, df.set_index(["n", "s"]), df["cat"], df["when"], df.describe()):
        back = loads(dumps(value))
        assert back.equals(value)
        if isinstance(value, pd.DataFrame):
            assert list(back.dtypes) == list(value.dtypes)
            assert back.index.equals(value.index) and back.columns.equals(value.columns)
        else:
            assert back.dtype == value.dtype and back.name == value.name
    array = np.arange(12, dtype="<i4").reshape(3, 4)
    back = loads(dumps(array))
    assert back.dtype == array.dtype and (back == array).all() and back.flags.writeable
    assert loads(dumps(np.float32(2.5))) == np.float32(2.5)
    assert loads(dumps(np.array(["a", 1, None], dtype=object))).tolist() == ["a", 1, None]


@pytest.mark.parametrize(
    "value",
    [
        Evil(),
        [Evil()],
        {"k": Evil()},
        np.array([Evil()], dtype=object),
        pd.DataFrame({"a": [Evil()]}),
        lambda: 0,
        (i for i in range(2)),
    ],
)
def test_what_is_not_data_is_refused_when_encoded(value: Any) -> None:
    with pytest.raises(NotDataError):
        dumps(value)


def blob(tree: Any, *buffers: bytes) -> bytes:
    head = json.dumps(tree).encode()
    parts = [b"FKD1", struct.pack("!I", len(head)), head, struct.pack("!I", len(buffers))]
    for buffer in buffers:
        parts += [struct.pack("!Q", len(buffer)), buffer]
    return b"".join(parts)


@pytest.mark.parametrize(
    "data",
    [
        pickle.dumps(Evil()),
        b"",
        b"FKD1",
        blob(["rec", "Evil", {}]),
        blob(["rec", "StreamText", {"name": "stdout", "text": "x", "extra": 1}]),
        blob(["ndarray", "O", [1], 0], b"\x00" * 8),
        blob(["ndarray", "<f8", [2], 0], b"\x00" * 8),
        blob(["ndarray", "<f8", [-1], 0], b""),
        blob(["B", 3]),
        blob(["no_such_tag"]),
        blob(["__class__"]),
        blob({"dict": "at the top"}),
        blob(["extension", "object", []]),
        blob(["L", [["L", [["L", []]]]]] * 1),
        blob(["timedelta", 10**30, 0, 0]),
        blob(["dataframe", ["rangeindex", 0, 1, 1, None], ["index", ["numpy", 1], None], []]),
        blob(["D", [["k"]]]),
    ],
)
def test_a_hostile_blob_is_refused_and_runs_nothing(data: bytes) -> None:
    try:
        loads(data)
    except BadDataError:
        pass
    else:  # the one well-formed blob above decodes to plain data
        assert data == blob(["L", [["L", [["L", []]]]]])
    assert ran == []


def test_deep_nesting_is_refused_not_a_crash() -> None:
    head = ('["L",[' * 5000 + "1" + "]]" * 5000).encode()
    data = b"FKD1" + struct.pack("!I", len(head)) + head + struct.pack("!I", 0)
    with pytest.raises(BadDataError):
        loads(data)


def test_arrow_tables_and_polars_frames_round_trip_as_arrow() -> None:
    pa = pytest.importorskip("pyarrow")
    table = pa.table(
        {"s": ["a", None, "ccc"], "i": [1, 2, None], "d": pa.array([1, 2, 1]).dictionary_encode()}
    )
    back = loads(dumps(table))
    assert type(back) is pa.Table and back.equals(table) and back.schema == table.schema
    pl = pytest.importorskip("polars")
    frame = pl.DataFrame({"k": ["x", "y", None], "v": [1.5, None, 3.0]})
    frame = frame.with_columns(pl.col("k").cast(pl.Categorical).alias("c"))
    got = loads(dumps({"frame": frame, "series": frame["v"]}))
    assert type(got["frame"]) is pl.DataFrame and got["frame"].equals(frame)
    assert got["frame"].schema == frame.schema
    assert type(got["series"]) is pl.Series and got["series"].equals(frame["v"])
    assert got["series"].name == "v"


def test_a_hostile_arrow_stream_is_refused() -> None:
    pa = pytest.importorskip("pyarrow")
    good = dumps(pa.table({"s": ["ab", "cd", "ef"]}))
    offsets = struct.pack("<4i", 0, 2, 4, 6)
    assert good.count(offsets) == 1
    past_the_end = good.replace(offsets, struct.pack("<4i", 0, 2, 4, 1 << 30))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, pa.schema([("s", pa.string())])) as writer:
        writer.write_table(pa.table({"s": ["ab", "cd", "ef"]}))
    truncated = blob(["arrow", 0], bytes(sink.getvalue())[:-40])
    for data in (past_the_end, truncated, blob(["arrow", 0], b"not arrow at all")):
        with pytest.raises(BadDataError):
            loads(data)
    assert ran == []


def test_period_and_interval_columns_round_trip() -> None:
    frame = pd.DataFrame(
        {
            "month": pd.period_range("2024-01", periods=3, freq="M"),
            "bin": pd.interval_range(0, 3, closed="left"),
            "span": pd.IntervalIndex.from_breaks(pd.date_range("2024", periods=4, freq="D")),
        }
    )
    back = loads(dumps(frame))
    assert back.equals(frame) and list(back.dtypes) == list(frame.dtypes)
    index = pd.period_range("2024Q1", periods=2, freq="Q")
    assert loads(dumps(index)).equals(index) and loads(dumps(index[0])) == index[0]
    for bad in (blob(["period", "1", "M"]), blob(["interval", 0, 1, "sideways"])):
        with pytest.raises(BadDataError):
            loads(bad)
