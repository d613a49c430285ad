"""`as_of/<T>/cells.csv` (through the views tree, no FUSE) equals tiledb-py's read of the array opened at T,
as a multiset of rows with values, nulls and var-sized cells exact, at every time of each history; a
subarray file equals tiledb-py's read of that subarray; the `fragment` column names the fragment that
wrote each value."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import tiledb

sys.path.insert(0, os.path.dirname(__file__))

from cells_reference import parse_cells_csv, tiledb_rows, view_bytes, view_rows  # noqa: E402
from histories import dense_overlapping, now_ms, overlapping, wait_past  # noqa: E402

from tdbfs.store.array_store import ArrayStore  # noqa: E402

HISTORIES = {
    "plain": dict(),
    "consolidated": dict(consolidate="full"),
    "consolidated_vacuumed": dict(consolidate="full", vacuum=True),
    "partial_col_major": dict(consolidate="partial", order="col-major"),
    "partial_vacuumed_hilbert": dict(consolidate="partial", vacuum=True, order="hilbert"),
    "dups": dict(dups=True),
    "dups_consolidated": dict(dups=True, consolidate="full"),
    "dups_hilbert_vacuumed": dict(dups=True, consolidate="full", vacuum=True, order="hilbert"),
}


@pytest.fixture(scope="module", params=sorted(HISTORIES))
def history(request, tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("hist") / request.param)
    h = overlapping(uri, **HISTORIES[request.param])
    return uri, h


def test_cells_at_every_time_are_tiledbs(history):
    uri, h = history
    store = ArrayStore(uri)
    seen = 0
    for t in h["times"] + [None]:
        expected = tiledb_rows(uri, t)
        got, _ = view_rows(store, uri, t)
        assert got == expected, t
        seen += sum(expected.values())
    assert seen > 200


@pytest.mark.parametrize("sub, ranges", [
    ("x=3..9,s=k1..k3", [[(3, 9)], [("k1", "k3")]]),
    ("x=0..5;20..30", [[(0, 5), (20, 30)], None]),
    ("s=k4", [None, [("k4", "k4")]]),
    ("x=38..63", [[(38, 63)], None]),
])
def test_subarray_files_are_tiledbs(history, sub, ranges):
    uri, h = history
    store = ArrayStore(uri)
    for t in (h["times"][5], h["times"][-1]):
        expected = tiledb_rows(uri, t, ranges)
        got, _ = view_rows(store, uri, t, sub)
        assert got == expected, (t, sub)


def test_fragment_column_names_the_writer(history):
    """Every value is 1000 * write + i: its fragment must be the one written at that write's time (or,
    consolidated, the fragment whose range holds it), and tile the tile of that fragment holding it."""
    uri, h = history
    store = ArrayStore(uri)
    t = h["times"][-1]
    _, sourced = view_rows(store, uri, t)
    assert sourced
    names = {}
    for row, frag, tile in sourced:
        written = h["writes"][row[2] // 1000]
        t1, t2 = (int(v) for v in frag.split("_")[2:4])
        assert t1 <= written <= t2, (row, frag)
        names[frag] = names.get(frag, 0) + 1
        assert int(tile) >= 0
    if not any(k in uri for k in ("consolidated", "vacuumed")):
        assert len(names) >= 3   # write 1 is all deleted in the no-dups and dups histories alike


def test_fragment_and_tile_hold_the_value(tmp_path):
    """The tile named holds the cell: its fragment's cells/tile_K.csv has the row."""
    uri = str(tmp_path / "a")
    h = overlapping(uri, deletes=False, evolve=False)
    store = ArrayStore(uri)
    _, sourced = view_rows(store, uri, h["times"][-1])
    for row, frag, tile in sourced[::7]:
        text = view_bytes(store, f"fragments/{frag}/cells/tile_{tile}.csv").decode()
        assert f'{row[0]},"{row[1].decode()}",{row[2]},' in text


def test_more_than_16_fragments_at_one_time(tmp_path):
    """TileDB sorts fragments by t1 with std::sort: past 16 fragments of equal t1 the winner of a cell all
    wrote is not the last by name (store/std_sort.py)."""
    uri = str(tmp_path / "many")
    dom = tiledb.Domain(tiledb.Dim("x", (0, 9), 10, dtype=np.int32))
    tiledb.Array.create(uri, tiledb.ArraySchema(dom, sparse=True, attrs=[tiledb.Attr("a", np.int32)]))
    t = now_ms() + 1000
    for i in range(20):
        with tiledb.open(uri, "w", timestamp=t) as A:
            A[np.array([1, 2], np.int32)] = {"a": np.array([i, 100 + i], np.int32)}
    store = ArrayStore(uri)
    expected = tiledb_rows(uri, t)
    got, sourced = view_rows(store, uri, t)
    assert got == expected
    names = sorted(os.listdir(Path(uri) / "__fragments"))
    winner = sourced[0][1]
    assert winner != names[-1]     # a stable sort would pick the last name
    wait_past(t)


def test_encrypted(tmp_path):
    key = "0123456789abcdeF0123456789abcdeF"
    uri = str(tmp_path / "enc")
    h = overlapping(uri, key=key, consolidate="full", evolve=False)
    from tdbfs.format.reversers.encryption import parse_key
    store = ArrayStore(uri, key=parse_key(key.encode(), "test"))
    for t in h["times"][1::3]:
        assert view_rows(store, uri, t, key=key)[0] == tiledb_rows(uri, t, key=key)


def test_header_and_empty_read(tmp_path):
    uri = str(tmp_path / "a")
    h = overlapping(uri, evolve=False)
    store = ArrayStore(uri)
    assert view_bytes(store, f"as_of/{h['base'] - 1}/cells.csv") == b"x,s,a,b,b.valid,fragment,tile\n"
    data = view_bytes(store, f"as_of/{h['times'][-1]}/cells/x=0..63.csv")
    assert data == view_bytes(store, f"as_of/{h['times'][-1]}/cells.csv")
    with tiledb.open(uri, timestamp=h["times"][-1]) as A:
        rows, _ = parse_cells_csv(data, A.schema)
    assert sum(rows.values()) > 50


DENSE = {"dense": dict(), "dense_col_major_consolidated": dict(consolidate="full", order="col-major"),
         "dense_partial_vacuumed": dict(consolidate="partial", vacuum=True)}


@pytest.mark.parametrize("name", sorted(DENSE))
def test_dense_cells_at_every_time_are_tiledbs(tmp_path, name):
    """Dense: the non-empty domain at T, the newest covering fragment's value, fill values elsewhere
    (reader/dense.py), against tiledb-py's read of the non-empty domain; subarrays too."""
    uri = str(tmp_path / name)
    h = dense_overlapping(uri, **DENSE[name])
    store = ArrayStore(uri)
    seen = 0
    for t in h["times"] + [None]:
        expected = tiledb_rows(uri, t)
        got, sourced = view_rows(store, uri, t)
        assert got == expected, t
        seen += sum(expected.values())
        for row, frag, tile in sourced:
            assert (frag == "") == (tile == "")
            if row[2] != -7:     # a value written (not the fill): its writer's range holds it
                t1, t2 = (int(v) for v in frag.split("_")[2:4])
                assert t1 <= h["writes"][row[2] // 1000] <= t2, (row, frag)
            elif frag:     # a fill value a consolidated fragment stores (its writes left the cell empty)
                t1, t2 = (int(v) for v in frag.split("_")[2:4])
                assert t1 < t2, (row, frag)
    assert seen > 500
    for sub, ranges in [("x=3..9,y=2..4", [[(3, 9)], [(2, 4)]]), ("x=0..2;10..12", [[(0, 2), (10, 12)], None])]:
        assert view_rows(store, uri, None, sub)[0] == tiledb_rows(uri, None, ranges)


def _corpus_arrays():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import corpus
    import world_arrays
    out = [(f, p) for f, p in corpus.arrays() if f not in corpus.REFUSED]
    out += [(i.path, str(i.location)) for i in world_arrays.items(world_arrays.HEALTHY)
            if i.kind == "array" and not i.path.startswith("backcompat")]
    return out or [("corpus-absent", None)]


@pytest.mark.parametrize("name, path", _corpus_arrays(), ids=[n for n, _ in _corpus_arrays()])
def test_corpus_and_world_arrays(tmp_path, name, path):
    """The back-compat arrays (formats 1-22) and the real-world arrays in tests/data: cells.csv now equals
    tiledb-py's read (of a copy: TileDB only ever sees copies)."""
    import shutil

    import healthy
    if path is None:
        pytest.skip("back-compat corpus absent")
    dst = tmp_path / "copy"
    shutil.copytree(path, dst)
    for foreign in healthy.FOREIGN_FILES.get(name, ()):
        (dst / foreign).unlink(missing_ok=True)
    with tiledb.open(str(dst)) as A:
        ned, dense, first = A.nonempty_domain(), not A.schema.sparse, A.schema.domain.dim(0)
    cells = int(np.prod([int(hi) - int(lo) + 1 for lo, hi in ned])) if dense and ned else 0
    if cells > 200_000:   # a big image: its first rows (the whole of it costs minutes of Python in this test)
        lo, hi = (int(v) for v in ned[0])
        part = (lo, lo + max(1, (hi - lo + 1) * 100_000 // cells))
        expected = tiledb_rows(str(dst), None, [[part]] + [None] * (len(ned) - 1))
        got, _ = view_rows(ArrayStore(str(dst)), str(dst), None, f"{first.name}={part[0]}..{part[1]}")
    else:
        expected = tiledb_rows(str(dst), None)
        got, _ = view_rows(ArrayStore(str(dst)), str(dst), None)
    assert got == expected and sum(expected.values()) > 0 or not ned


def test_through_a_mount(tmp_path, mount):
    """A real mount read with cat: cells.csv and a subarray file as the views tree renders them, with
    `as_of/now/` and a time."""
    import subprocess
    uri = str(tmp_path / "a")
    h = overlapping(uri, consolidate="full")
    mnt = mount(uri)
    store = ArrayStore(uri)
    t = h["times"][-3]
    for path in (f"as_of/{t}/cells.csv", "as_of/now/cells.csv", f"as_of/{t}/cells/x=3..20,s=k2..k5.csv"):
        data = subprocess.run(["cat", str(mnt / path)], capture_output=True, check=True).stdout
        assert data == view_bytes(store, path)
        assert os.stat(mnt / path).st_size == len(data)
    got, _ = parse_cells_csv(subprocess.run(["cat", str(mnt / f"as_of/{t}/cells.csv")], capture_output=True,
                                            check=True).stdout, tiledb.open(uri, timestamp=t).schema)
    assert got == tiledb_rows(uri, t)
    assert "cells" in os.listdir(mnt / f"as_of/{t}") and os.listdir(mnt / f"as_of/{t}/cells") == []
    assert not os.path.exists(mnt / f"as_of/{t}/cells/q=1..2.csv")


SAMPLES = ["dense_1d", "dense_2d", "dense_3d", "dense_2d_colmajor", "sparse_1d", "sparse_2d", "sparse_3d_mixed",
           "sparse_string_dim", "sparse_hilbert", "all_dtypes_sparse", "all_dtypes_dense", "filter_chain",
           "consolidated_sparse", "consolidated_sparse_vacuumed", "consolidated_dense", "deletes", "commits",
           "fragment_meta", "schema_evolution", "enumerations", "dim_labels"]


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_arrays(sample_array, name):
    """Every datatype (fixed and var strings, several values per cell, booleans, datetimes, float and
    datetime dimensions), filters, labels and enumerations: cells.csv now equals tiledb-py's read."""
    uri = str(sample_array(name).path)
    expected = tiledb_rows(uri, None)
    got, _ = view_rows(ArrayStore(uri), uri, None)
    assert got == expected and sum(expected.values()) > 0
