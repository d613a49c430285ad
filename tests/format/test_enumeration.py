"""parse_enumeration / describe_enumeration against enumerations written by TileDB."""

from __future__ import annotations

import glob
import os
import struct

import numpy as np
import pytest

import tiledb

from tdbfs.format.datatypes import VAR_NUM
from tdbfs.format.enumeration import parse_enumeration
from tdbfs.views.describe.enumeration import describe_enumeration
from tdbfs.format.errors import FormatError
from tdbfs.format.generic_tile import read_generic_tile
from tdbfs.format.names import parse_timestamped_name
from tdbfs.format.schema import parse_schema

from corpus import BACKCOMPAT


def payload(path: str) -> bytes:
    with open(path, "rb") as f:
        return read_generic_tile(f.read(), 0, path, "enumeration").payload


def latest_schema(uri):
    d = os.path.join(uri, "__schema")
    names = sorted((n for n in os.listdir(d) if n != "__enumerations"),
                   key=lambda n: parse_timestamped_name(n).sort_key)
    path = os.path.join(d, names[-1])
    return parse_schema(payload(path), path)


def enumerations_of(uri):
    """name → decoded Enumeration, following the latest schema's references."""
    out = {}
    for ref in latest_schema(uri).enumerations:
        path = os.path.join(uri, "__schema", "__enumerations", ref.file_name)
        e = parse_enumeration(payload(path), path)
        assert e.name == ref.name and e.path_name == ref.file_name
        out[e.name] = e
    return out


ENUMS = [
    ("utf8", False, ["red", "green", "blue", "", "ünïcode"]),
    ("ints", True, np.array([-5, 0, 7, 2 ** 40], dtype=np.int64)),
    ("small", False, np.array([1, 2, 3], dtype=np.uint8)),
    ("floats", True, np.array([1.5, -2.25, 1e10], dtype=np.float32)),
    ("bools", False, [True, False]),
    ("bytes", False, [b"ab", b"c", b""]),
]


@pytest.fixture(scope="module")
def enum_array(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("enums") / "a")
    enums = [tiledb.Enumeration(n, o, v) for n, o, v in ENUMS]
    attrs = [tiledb.Attr(f"a_{n}", dtype=np.int32, enum_label=n) for n, _, _ in ENUMS]
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 9), tile=10, dtype=np.int32))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, attrs=attrs, enums=enums))
    return uri


def test_values_match_tiledb(enum_array):
    ours = enumerations_of(enum_array)
    assert set(ours) == {n for n, _, _ in ENUMS}
    with tiledb.open(enum_array) as A:
        for name, e in ours.items():
            t = A.enum(name)
            assert e.version == 0
            assert e.ordered == t.ordered
            assert e.cell_val_num == t.cell_val_num
            assert e.datatype.name == t.type.name
            expected = list(t.values())
            if e.datatype.is_string:
                expected = [v.decode() if isinstance(v, bytes) else str(v) for v in expected]
                assert list(e.values) == expected
            else:
                assert list(e.values) == [v.item() for v in expected]


def test_decoded_shapes_and_dict(enum_array):
    ours = enumerations_of(enum_array)
    utf8 = ours["utf8"]
    assert utf8.datatype.name == "STRING_UTF8" and utf8.cell_val_num == VAR_NUM
    assert utf8.values == ("red", "green", "blue", "", "ünïcode")
    assert utf8.offsets == (0, 3, 8, 12, 12)
    assert utf8.data == "redgreenblueünïcode".encode()
    d = describe_enumeration(utf8)
    assert d["datatype"] == "STRING_UTF8" and d["cell_val_num"] == "var" and d["ordered"] is False
    assert d["values"] == ["red", "green", "blue", "", "ünïcode"] and d["value_count"] == 5
    assert d["offsets"] == [0, 3, 8, 12, 12] and d["data_size"] == len(utf8.data)

    ints = ours["ints"]
    assert ints.offsets is None and ints.values == (-5, 0, 7, 2 ** 40) and ints.ordered
    assert describe_enumeration(ints)["values"] == [-5, 0, 7, 2 ** 40]
    assert "offsets" not in describe_enumeration(ints)
    assert ours["floats"].values == (1.5, -2.25, 1e10) and ours["floats"].datatype.name == "FLOAT32"
    assert ours["bools"].values == (True, False) and ours["bools"].datatype.name == "BOOL"
    assert ours["bytes"].values == ("ab", "c", "")
    assert list(describe_enumeration(ours["small"])) == [
        "version", "name", "path_name", "datatype", "cell_val_num", "ordered", "data_size", "value_count", "values"]


def test_extend_writes_a_new_file(tmp_path):
    uri = str(tmp_path / "ext")
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 9), tile=10, dtype=np.int32))
    tiledb.Array.create(uri, tiledb.ArraySchema(
        domain=dom, sparse=True, attrs=[tiledb.Attr("a", dtype=np.uint8, enum_label="e")],
        enums=[tiledb.Enumeration("e", False, ["x", "y"])]))
    before = enumerations_of(uri)["e"]
    with tiledb.open(uri) as A:
        extended = A.enum("e").extend(["z"])
    se = tiledb.ArraySchemaEvolution()
    se.extend_enumeration(extended)
    se.array_evolve(uri)
    after = enumerations_of(uri)["e"]
    assert before.values == ("x", "y") and after.values == ("x", "y", "z")
    assert before.path_name != after.path_name
    assert len(os.listdir(os.path.join(uri, "__schema", "__enumerations"))) == 2
    with tiledb.open(uri) as A:
        assert list(A.enum("e").values()) == list(after.values)


@pytest.mark.backcompat
def test_backcompat_enumerations():
    files = sorted(glob.glob(f"{BACKCOMPAT}/v2[01]/*/__schema/__enumerations/*"))
    assert len(files) == 8
    decoded = {os.path.basename(f): parse_enumeration(payload(f), f) for f in files}
    for name, e in decoded.items():
        assert e.path_name == name and e.version == 0 and e.trailing_bytes == 0
    a3 = next(e for e in decoded.values() if e.name == "a3_enum")
    assert a3.datatype.name == "INT32" and a3.values == (1000, 2000, 3000, 4000)
    # TileDB-MariaDB test data: var-sized INT16 values of 2 bytes each
    a0 = next(e for e in decoded.values() if e.name == "a0_enum")
    assert a0.offsets == (0, 2, 4, 6) and a0.values == (25957, 26214, 26471, 26728)
    # INT64 values of 2 bytes cannot be decoded: kept as bytes, shown in hex
    a2 = next(e for e in decoded.values() if e.name == "a2_enum")
    assert a2.values == (b"ii", b"jj", b"kk", b"ll")
    assert describe_enumeration(a2)["values"] == ["6969", "6a6a", "6b6b", "6c6c"]
    genes = [e for e in decoded.values() if e.name == "gene_symbol" and e.values]
    assert len(genes) == 1 and genes[0].values[:3] == ("A1BG", "A1BG-AS1", "A1CF")
    assert len(genes[0].values) == 57316
    empty = [e for e in decoded.values() if not e.values]
    assert {e.name for e in empty} == {"gene_symbol", "feature_type"}


def _build(version=0, name=b"e", path=b"__p_0", dtype=12, cvn=VAR_NUM, data=b"abc", offsets=(0, 1)):
    out = struct.pack("<I", version) + struct.pack("<I", len(name)) + name + struct.pack("<I", len(path)) + path
    out += struct.pack("<BIB", dtype, cvn, 0) + struct.pack("<Q", len(data)) + data
    if cvn == VAR_NUM:
        out += struct.pack("<Q", 8 * len(offsets)) + b"".join(struct.pack("<Q", o) for o in offsets)
    return out


def test_corruption():
    good = _build()
    assert parse_enumeration(good, "f").values == ("a", "bc")
    for cut in range(len(good)):
        with pytest.raises(FormatError) as e:
            parse_enumeration(good[:cut], "f")
        left = cut - e.value.offset   # the field straddling the cut starts here
        assert left >= 0 and f"only {left} remain" in e.value.message, (cut, str(e.value))
    with pytest.raises(FormatError) as e:
        parse_enumeration(_build(version=1), "f")
    assert e.value.offset == 0 and "version" in e.value.message
    with pytest.raises(FormatError) as e:
        parse_enumeration(_build(dtype=99), "f")
    assert "datatype" in e.value.message and e.value.offset == 4 + 4 + 1 + 4 + 5
    with pytest.raises(FormatError) as e:
        parse_enumeration(_build(offsets=(0, 9)), "f")
    assert "beyond" in e.value.message
    with pytest.raises(FormatError) as e:
        parse_enumeration(_build(dtype=0, cvn=1, data=b"\x01\x00\x00"), "f")
    assert "multiple" in e.value.message
