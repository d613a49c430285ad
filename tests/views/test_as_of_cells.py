"""as_of_cells.CellsFile: a read of many batches gives, piece by piece in any order, the bytes of the whole
file, and its size is exact."""

from __future__ import annotations

import os
import sys

import numpy as np
import tiledb

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "reader"))

from histories import overlapping  # noqa: E402

from tdbfs.reader import read_cells  # noqa: E402
from tdbfs.store.array_store import ArrayStore  # noqa: E402
from tdbfs.views.as_of_cells import CellsFile, batch_rows, header  # noqa: E402


def test_pieces_in_any_order_are_the_whole(tmp_path):
    uri = str(tmp_path / "a")
    h = overlapping(uri, consolidate="partial")
    store = ArrayStore(uri)
    t = h["times"][-1]
    small = CellsFile(lambda: read_cells(store, t, batch_cells=7), lambda: "same", store)
    read = read_cells(store, t)
    whole = header(read) + b"".join(batch_rows(b, read.fragment_names) for b in read.batches())
    assert small.size() == len(whole) and whole.count(b"\n") > 60
    assert small.read(0, len(whole) + 5) == whole
    forward = b"".join(small.read(o, 97) for o in range(0, len(whole), 97))
    assert forward == whole
    backward = [small.read(o, 97) for o in reversed(range(0, len(whole), 97))]
    assert b"".join(reversed(backward)) == whole
    assert len(list(read_cells(store, t, batch_cells=7).batches())) > 8


def test_a_new_write_is_seen(tmp_path):
    """The layout is kept while the files deciding the read stay; a write changes the state."""
    uri = str(tmp_path / "b")
    dom = tiledb.Domain(tiledb.Dim("x", (0, 9), 10, dtype=np.int32))
    tiledb.Array.create(uri, tiledb.ArraySchema(dom, sparse=True, attrs=[tiledb.Attr("a", np.int32)]))
    with tiledb.open(uri, "w") as A:
        A[np.array([1], np.int32)] = {"a": np.array([5], np.int32)}
    store = ArrayStore(uri)
    states = iter(["one", "one", "two", "two"])
    f = CellsFile(lambda: read_cells(store), lambda: next(states), store)
    first = f.read(0, f.size())
    assert first.startswith(b"x,a,fragment,tile\n1,5,")
    with tiledb.open(uri, "w") as A:
        A[np.array([2], np.int32)] = {"a": np.array([6], np.int32)}
    store.forget_vanished([])
    second = f.read(0, 1 << 20)
    assert b"\n2,6," in second
