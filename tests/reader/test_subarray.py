"""parse_subarray: the subarray of `as_of/<T>/cells/<subarray>.csv`, typed in each dimension's type."""

from __future__ import annotations

import numpy as np
import pytest
import tiledb

from tdbfs.reader.subarray import SubarrayError, format_subarray, parse_subarray
from tdbfs.store.array_store import ArrayStore


@pytest.fixture(scope="module")
def schema(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("sub") / "a")
    dom = tiledb.Domain(tiledb.Dim("d0", (0, 100), 10, dtype=np.int32),
                        tiledb.Dim("f", (0.0, 10.0), 1.0, dtype=np.float64),
                        tiledb.Dim("s", dtype="ascii"))
    tiledb.Array.create(uri, tiledb.ArraySchema(dom, sparse=True, attrs=[tiledb.Attr("a", np.int32)]))
    store = ArrayStore(uri)
    return store.schema(store.latest_schema_file())


def test_ranges_typed_per_dimension(schema):
    assert parse_subarray("d0=1..3;7..9,f=-0.5..2.5,s=a%2Cb..z", schema) == (
        ((1, 3), (7, 9)), ((-0.5, 2.5),), ((b"a,b", b"z"),))
    assert parse_subarray("f=1e0..2,d0=-5..-1", schema) == (((-5, -1),), ((1.0, 2.0),), None)
    assert parse_subarray("d0=5,s=..m", schema) == (((5, 5),), None, ((None, b"m"),))


def test_format_reads_back(schema):
    sub = parse_subarray("d0=1..3;7..9,f=0.5..2.5,s=a%2Cb..", schema)
    assert format_subarray(sub, schema) == "d0=1..3;7..9,f=0.5..2.5,s=a%2Cb.."
    assert parse_subarray(format_subarray(sub, schema), schema) == sub


@pytest.mark.parametrize("text, words", [
    ("d0=1..x", "'x' is not an integer ('d0' is INT32)"),
    ("q=1..2", "no dimension 'q' (the dimensions are d0, f, s)"),
    ("d0=5..1", "starts after it ends"),
    ("d0=1..2,d0=3..4", "named twice"),
    ("d0", "expected <dim>=<lo>..<hi>"),
    ("f=nan..1", "finite"),
    ("d0=1..", "needs both ends"),
    ("d0=1..99999999999", "does not fit 'd0' (INT32)"),
    ("", "empty subarray"),
])
def test_errors_name_the_part(schema, text, words):
    with pytest.raises(SubarrayError) as e:
        parse_subarray(text, schema)
    assert words in str(e.value)
    if text:
        assert repr(text.split(",")[-1]) in str(e.value) or repr(text.split(",")[0]) in str(e.value)
