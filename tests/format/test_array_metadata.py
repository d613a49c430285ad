"""parse_array_metadata / merge_metadata against array metadata written by TileDB."""

from __future__ import annotations

import glob
import os
import struct
import time

import numpy as np
import pytest

import tiledb

from tdbfs.format.array_metadata import (
    merge_metadata,
    parse_array_metadata,
)
from tdbfs.format.commits import parse_vacuum_file
from tdbfs.format.errors import FormatError
from tdbfs.format.generic_tile import read_generic_tile
from tdbfs.format.names import parse_timestamped_name
from tdbfs.views.describe.array_metadata import describe_merged_metadata, describe_metadata_record

from corpus import BACKCOMPAT


def meta_files(uri: str, exclude_vacuumed: bool = False):
    """[(name, records)] of every __meta file (optionally without those listed in __meta/*.vac)."""
    d = os.path.join(uri, "__meta")
    names = [n for n in os.listdir(d) if not n.endswith((".vac", ".tmp"))]
    if exclude_vacuumed:
        gone = set()
        for n in os.listdir(d):
            if n.endswith(".vac"):
                with open(os.path.join(d, n), "rb") as f:
                    gone |= set(parse_vacuum_file(f.read(), n))
        names = [n for n in names if f"__meta/{n}" not in gone]
    out = []
    for n in names:
        path = os.path.join(d, n)
        with open(path, "rb") as f:
            out.append((n, parse_array_metadata(read_generic_tile(f.read(), 0, path, "metadata").payload, path)))
    return out


def assert_matches_tiledb(merged, A):
    """Our merged records equal libtiledb's raw (unprefixed-key) metadata view."""
    lo = A.meta._array_or_group
    keys = [lo._get_key_from_index(i) for i in range(lo._metadata_num())]
    assert sorted(keys) == list(merged)
    for k in keys:
        rec = merged[k]
        try:
            value, tdb_type = lo._get_metadata(k, False)
        except tiledb.TileDBError:      # tiledb-py cannot give BOOL / datetime as Python values
            array, tdb_type = lo._get_metadata(k, True)
            assert rec.raw == np.asarray(array).tobytes()
            assert rec.value_type.name == tdb_type.name
            continue
        assert rec.value_type.name == tdb_type.name, k
        if isinstance(value, tuple):
            assert rec.value == list(value), k
        elif rec.value_type.name == "STRING_UTF8" or isinstance(value, (bytes, str)):
            assert rec.value == value, k
        else:
            assert rec.value == value and type(rec.value) is type(value), k


VALUES = {
    "int": 5, "float": 2.5, "str": "héllo wörld", "bytes": b"\x00\x01bytes", "tuple_i": (1, 2, 3),
    "tuple_f": (1.5, -2.5), "bool": True, "empty": "", "big": 2 ** 63 - 1,
    "np_i8": np.array([1, -2], dtype=np.int8), "np_u16": np.array([65535], dtype=np.uint16),
    "np_i32": np.array([-7, 8, 9], dtype=np.int32), "np_u64": np.array([2 ** 64 - 1], dtype=np.uint64),
    "np_f32": np.array([1.5, 2.5], dtype=np.float32), "np_bool": np.array([True, False]),
    "np_dt": np.array(["2020-01-01", "1969-12-31"], dtype="M8[D]"), "np_empty": np.array([], dtype=np.int32),
    "np_2d": np.arange(6, dtype=np.int64).reshape(2, 3),
}


def test_every_value_type(tmp_path):
    uri = str(tmp_path / "types")
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 9), tile=10, dtype=np.int32))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, attrs=[tiledb.Attr("a", dtype=np.int32)]))
    with tiledb.open(uri, "w") as A:
        for k, v in VALUES.items():
            A.meta[k] = v
    files = meta_files(uri)
    assert len(files) == 1
    merged = merge_metadata(files)
    with tiledb.open(uri) as A:
        assert_matches_tiledb(merged, A)
        assert set(A.meta.keys()) == set(VALUES)
    # the decoded values, by the key tiledb-py stores them under
    assert merged["int"].value == 5 and merged["int"].value_type.name == "INT64"
    assert merged["float"].value == 2.5 and merged["float"].value_type.name == "FLOAT64"
    assert merged["str"].value == "héllo wörld" and merged["str"].value_count == len("héllo wörld".encode())
    assert merged["bytes"].value == b"\x00\x01bytes" and merged["bytes"].value_type.name == "BLOB"
    assert merged["tuple_i"].value == [1, 2, 3] and merged["tuple_f"].value == [1.5, -2.5]
    assert merged["empty"].value == "" and merged["empty"].value_count == 0
    assert merged["__np_flat_np_i8"].value == [1, -2]
    assert merged["__np_flat_np_u64"].value == 2 ** 64 - 1
    assert merged["__np_flat_np_bool"].value == [True, False]
    assert merged["__np_flat_np_bool"].value_type.name == "BOOL"
    assert merged["__np_flat_np_dt"].value == [18262, -1]
    assert merged["__np_flat_np_dt"].value_type.name == "DATETIME_DAY"
    assert merged["__np_flat_np_empty"].value == [] and merged["__np_flat_np_empty"].value_count == 0
    assert merged["__np_flat_np_2d"].value == [0, 1, 2, 3, 4, 5]
    assert merged["__np_shape_np_2d"].value == [2, 3]
    d = describe_merged_metadata(merged)
    assert d["bytes"] == {"type": "BLOB", "count": 7, "value": "000162797465 73".replace(" ", "")}
    assert d["tuple_f"] == {"type": "FLOAT64", "count": 2, "value": [1.5, -2.5]}
    # tiledb-py writes a deletion record for the keys a value was *not* stored under
    records = files[0][1]
    deleted = {r.key for r in records if r.deleted}
    assert "__np_flat_int" in deleted and "np_i8" in deleted
    assert [r.key for r in records] == sorted(r.key for r in records)   # the writer stores keys sorted
    as_dicts = [describe_metadata_record(r) for r in records]
    assert {"key": "np_i8", "deleted": True} in as_dicts
    assert next(x for x in as_dicts if x["key"] == "int") == {
        "key": "int", "deleted": False, "type": "INT64", "count": 1, "value": 5,
        "value_hex": struct.pack("<q", 5).hex()}


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """Four metadata writes with replacements and deletions; returns (uri, [timestamps])."""
    uri = str(tmp_path_factory.mktemp("history") / "a")
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 9), tile=10, dtype=np.int32))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, attrs=[tiledb.Attr("a", dtype=np.int32)]))
    stamps = []
    steps = [
        {"set": {"k0": 0, "k1": "one", "k2": 2.0, "k3": (3, 3)}},
        {"set": {"k2": "two"}, "del": ["k1"]},
        {"set": {"k1": 11, "k4": b"four"}, "del": ["k3"]},
        {"del": ["k0", "k4"], "set": {"k5": 5}},
    ]
    for step in steps:
        time.sleep(0.003)
        with tiledb.open(uri, "w") as A:
            for k, v in step.get("set", {}).items():
                A.meta[k] = v
            for k in step.get("del", []):
                del A.meta[k]
        stamps.append(max(parse_timestamped_name(n).t2 for n, _ in meta_files(uri)))
    return uri, stamps


def test_merge_follows_timestamps(history):
    uri, stamps = history
    files = meta_files(uri)
    assert len(files) == 4
    expected = [
        {"k0": 0, "k1": "one", "k2": 2.0, "k3": [3, 3]},
        {"k0": 0, "k2": "two", "k3": [3, 3]},
        {"k0": 0, "k1": 11, "k2": "two", "k4": b"four"},
        {"k1": 11, "k2": "two", "k5": 5},
    ]
    for t, exp in zip(stamps, expected):
        upto = [(n, r) for n, r in files if parse_timestamped_name(n).t2 <= t]
        merged = merge_metadata(upto)
        assert {k: v.value for k, v in merged.items() if not k.startswith("__np")} == exp
        with tiledb.open(uri, timestamp=t) as A:
            assert_matches_tiledb(merged, A)
    # order of the input list does not matter: files are applied by timestamp
    assert merge_metadata(list(reversed(files))) == merge_metadata(files)


def test_consolidated_metadata_and_vac(history, tmp_path):
    import shutil
    uri = str(tmp_path / "copy")
    shutil.copytree(history[0], uri)
    tiledb.consolidate(uri, config=tiledb.Config({"sm.consolidation.mode": "array_meta"}))
    vacs = glob.glob(os.path.join(uri, "__meta", "*.vac"))
    assert len(vacs) == 1
    with open(vacs[0], "rb") as f:
        entries = parse_vacuum_file(f.read(), vacs[0])
    assert len(entries) == 4 and all(e.startswith("__meta/__") for e in entries)
    assert {e.split("/")[1] for e in entries} == {n for n, _ in meta_files(history[0])}
    live = meta_files(uri, exclude_vacuumed=True)
    assert len(live) == 1
    with tiledb.open(uri) as A:
        assert_matches_tiledb(merge_metadata(live), A)
        # the consolidated file holds only live keys: no deletion records
        assert not any(r.deleted for r in live[0][1])
        assert_matches_tiledb(merge_metadata(meta_files(uri)), A)


@pytest.mark.backcompat
def test_backcompat_metadata():
    v4 = merge_metadata(meta_files(glob.glob(f"{BACKCOMPAT}/v04/*")[0]))
    assert {k: r.value for k, r in v4.items()} == {
        "key1": 25, "key2": [25, 26, 27, 28], "key3": pytest.approx(25.1),
        "key4": [pytest.approx(25.1), pytest.approx(26.2), pytest.approx(27.3), pytest.approx(28.4)],
        "key5": "This is TileDb array metadata"}
    assert v4["key3"].value_type.name == "FLOAT32"
    v9 = merge_metadata(meta_files(glob.glob(f"{BACKCOMPAT}/v09/*")[0]))
    assert v9["data"].value == [123, 456, 789] and v9["text"].value_type.name == "STRING_ASCII"
    # two files, the later one rewrites "version"
    v3 = merge_metadata(meta_files(glob.glob(f"{BACKCOMPAT}/v03/*")[0]))
    assert v3["version"].value == 2 and v3["tile_capacity"].value == 10000
    assert v3["extra_attributes"].value == "" and v3["extra_attributes"].value_type.name == "CHAR"
    for d in glob.glob(f"{BACKCOMPAT}/*/*/__meta"):
        assert merge_metadata(meta_files(os.path.dirname(d)))


def _record(key: bytes, dtype: int, count: int, value: bytes) -> bytes:
    return struct.pack("<I", len(key)) + key + b"\x00" + struct.pack("<BI", dtype, count) + value


def test_corruption():
    good = _record(b"abc", 0, 2, struct.pack("<ii", 1, 2)) + _record(b"z", 4, 3, b"xyz")
    recs = parse_array_metadata(good, "m")
    assert [(r.key, r.value, r.offset) for r in recs] == [("abc", [1, 2], 0), ("z", "xyz", 21)]
    for cut in range(len(good)):
        if cut in (0, 21):          # record boundaries: fewer records, still valid
            assert len(parse_array_metadata(good[:cut], "m")) == (cut > 0)
            continue
        with pytest.raises(FormatError) as e:
            parse_array_metadata(good[:cut], "__meta/x")
        assert e.value.file == "__meta/x"
        left = cut - e.value.offset   # the field straddling the cut starts here
        assert left >= 0, (cut, str(e.value))
        # a count whose items do not fit points at the count, a u32 (the number that cannot be right)
        assert f"only {left} remain" in e.value.message or f"exceeds the {left - 4} bytes" in e.value.message, \
            (cut, str(e.value))
    with pytest.raises(FormatError) as e:
        parse_array_metadata(_record(b"k", 77, 1, b"\x00"), "m")
    assert e.value.offset == 4 + 1 + 1 and "datatype" in e.value.message
    with pytest.raises(FormatError) as e:     # a count far beyond the payload
        parse_array_metadata(_record(b"k", 1, 0x10000000, b""), "m")
    assert "exceeds" in e.value.message
