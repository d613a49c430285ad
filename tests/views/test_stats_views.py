"""stats.csv (top and per fragment) against the files on disk, the decoded tile files and tiledb-py."""

from __future__ import annotations

import csv
import io
import os
import shutil

import numpy as np
import pytest

import reference
from tdbfs.store import ArrayStore
from tdbfs.views.nodes import resolve
from tdbfs.views.tree import build_root

SUFFIXES = (".tdb", "_var.tdb", "_validity.tdb")


def read(root, path) -> bytes:
    node = resolve(root, path)
    data = bytes(node.read(0, node.size()))
    assert len(data) == node.size()
    return data


def decoded_tiles(store) -> list:
    """The decoded tiles in the store's cache (2.x and 0.x tile keys)."""
    return [k for k in list(store.cache._items) if k[0] in ("tile", "zero tile")]


def rows_of(data: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(data.decode())))


def field_rows(rows):
    return [r for r in rows if r["row"] == "field"]


def decoded_tile_bytes(root, frag: str, stem: str, kind: str) -> int:
    """What the tile files of one field hold, read (so decoded) through the tree."""
    folder = f"fragments/{frag}/{'dims' if kind in ('dimension', 'coords') else 'attrs'}/{stem}"
    names = [n for n in resolve(root, folder).children() if n.endswith(".bin")]
    return sum(len(read(root, f"{folder}/{n}")) for n in names)


def tiledb_decoded_bytes(cells) -> int:
    """The bytes TileDB's cells of one field take as tiles: values, uint64 offsets, validity bytes."""
    n = len(cells)
    out = n * 8 + len(cells.data) if cells.var else np.ascontiguousarray(cells.values).nbytes
    return out + (n if cells.nullable else 0)


@pytest.mark.parametrize("name", ["sparse_2d", "dense_2d", "all_dtypes_sparse", "all_dtypes_dense",
                                  "sparse_string_dim"])
def test_stats_match_disk_tile_files_and_tiledb(sample_arrays, name):
    built = sample_arrays[name]
    store = ArrayStore(str(built.path))
    root = build_root(store)
    rows = rows_of(read(root, "stats.csv"))
    for frag in reference.list_fragments(built.path):
        read(root, f"fragments/{frag}/stats.csv")
    assert decoded_tiles(store) == []  # neither stats.csv decoded a tile
    mine = field_rows(rows)
    assert {r["fragment"] for r in mine} == set(reference.list_fragments(built.path))
    for frag in reference.list_fragments(built.path):
        ref = reference.fragment_info(built.path, frag)
        cells = reference.fragment_cells(built.path, frag)
        own = [r for r in mine if r["fragment"] == frag]
        assert own, frag
        for r in own:
            on_disk = sum(os.path.getsize(ref.path / (r["stem"] + s)) for s in SUFFIXES
                          if (ref.path / (r["stem"] + s)).exists())
            assert int(r["stored_bytes"]) == on_disk
            assert int(r["cell_count"]) == sum(ref.tile_cell_counts)
            assert int(r["tile_count"]) == len(ref.tile_cell_counts)
            if ref.sparse:
                assert int(r["cell_count"]) == ref.cell_num
            assert int(r["decoded_bytes"]) == decoded_tile_bytes(root, frag, r["stem"], r["kind"])
            if ref.sparse or not cells[r["field"]].var:
                # (a dense tile's var cells outside the written domain hold what the writer put there,
                # not the fill values TileDB's read returns)
                assert int(r["decoded_bytes"]) == tiledb_decoded_bytes(cells[r["field"]])
            assert r["ratio"] == f"{int(r['decoded_bytes']) / int(r['stored_bytes']):.3f}"
    assert decoded_tiles(store)  # the check above can see a decode


def test_totals_add_up_and_fragment_files_repeat_the_top(sample_arrays):
    built = sample_arrays["sparse_2d"]
    root = build_root(ArrayStore(str(built.path)))
    rows = rows_of(read(root, "stats.csv"))
    mine = field_rows(rows)
    totals = {r["field"]: r for r in rows if r["row"] == "field_total"}
    assert set(totals) == {r["field"] for r in mine} == {"a0", "a1", "a2", "d0", "d1"}
    for name, t in totals.items():
        for col in ("tile_count", "cell_count", "stored_bytes", "decoded_bytes"):
            assert int(t[col]) == sum(int(r[col]) for r in mine if r["field"] == name)
    (array,) = [r for r in rows if r["row"] == "array_total"]
    assert rows[-1] is array
    for col in ("tile_count", "stored_bytes", "decoded_bytes"):
        assert int(array[col]) == sum(int(r[col]) for r in mine)
    assert int(array["cell_count"]) == sum(reference.fragment_info(built.path, f).cell_num
                                           for f in reference.list_fragments(built.path))
    for frag in reference.list_fragments(built.path):
        own = rows_of(read(root, f"fragments/{frag}/stats.csv"))
        assert field_rows(own) == [r for r in mine if r["fragment"] == frag]
        assert int(own[-1]["stored_bytes"]) == sum(int(r["stored_bytes"]) for r in field_rows(own))


def test_filters_are_named_per_stream(array_factory):
    built = array_factory("filters", filter="BITSHUFFLE+ZSTD")
    rows = {r["field"]: r for r in field_rows(rows_of(read(build_root(ArrayStore(str(built.path))), "stats.csv")))}
    schema = built.schema()
    assert [type(f).__name__ for f in schema.attr("a0").filters] == ["BitShuffleFilter", "ZstdFilter"]
    zstd = f"BITSHUFFLE|ZSTD(level={schema.attr('a0').filters[1].level})"
    assert rows["a0"]["filters"] == zstd
    assert rows["a1"]["filters"] == f"offsets: {zstd}; values: {zstd}"
    assert rows["a2"]["filters"] == f"data: {zstd}; validity: {zstd}"
    assert rows["a3"]["filters"] == f"offsets: {zstd}; values: {zstd}; validity: {zstd}"


def test_a_damaged_fragment_gets_an_error_row_and_the_others_still_show(sample_arrays, tmp_path):
    src = sample_arrays["sparse_2d"]
    path = tmp_path / "copy"
    shutil.copytree(src.path, path)
    bad, good = reference.list_fragments(path)[:2]
    md = reference.fragment_path(path, bad) / "__fragment_metadata.tdb"
    md.write_bytes(md.read_bytes()[:40])
    store = ArrayStore(str(path))
    root = build_root(store)
    rows = rows_of(read(root, "stats.csv"))
    (err,) = [r for r in rows if r["fragment"] == bad]
    assert err["error"] and err["stored_bytes"] == ""
    assert {r["field"] for r in rows if r["fragment"] == good} == {"a0", "a1", "a2", "d0", "d1"}
    assert any(p.file.startswith(f"__fragments/{bad}") for p in store.findings())


@pytest.mark.backcompat
@pytest.mark.parametrize("version", ["v01", "v03", "v05", "v07", "v09", "v10", "v13", "v14", "v17", "v22"])
def test_every_format_decodes_to_what_stats_say(version):
    import corpus
    for array in [corpus.array(version)]:
        store = ArrayStore(str(array))
        root = build_root(store)
        rows = field_rows(rows_of(read(root, "stats.csv")))
        assert rows and all(r["error"] == "" for r in rows)
        assert decoded_tiles(store) == []
        for r in rows:
            frag_dir = store.fragment_path_of(r["fragment"])
            files = dict(store.fragment(frag_dir).files())
            stem = r["stem"]
            assert int(r["stored_bytes"]) == sum(os.path.getsize(os.path.join(array, frag_dir, n))
                                                 for n in files if n in (stem + s for s in SUFFIXES))
            assert int(r["decoded_bytes"]) == decoded_tile_bytes(root, r["fragment"], stem, r["kind"])


@pytest.fixture(scope="module")
def zero_corpus(tmp_path_factory):
    import legacy0x_arrays as Z
    if Z.wheel_library_path() is None:
        pytest.skip("genomicsdb==0.1.6 (its TileDB 0.x library) is not installed; scripts/_setup.sh installs it")
    return Z.load_corpus(tmp_path_factory.mktemp("zero"))


def test_tiledb_0x_arrays(zero_corpus):
    """TileDB 0.x (GenomicsDB): the same columns from the book-keeping, against the library's reads."""
    from tdbfs.store.legacy0x import Legacy0xArrayStore
    checked = set()
    for name, (path, spec) in zero_corpus["arrays"].items():
        store = Legacy0xArrayStore(str(path))
        root = build_root(store)
        rows = field_rows(rows_of(read(root, "stats.csv")))
        assert decoded_tiles(store) == []
        for frag in {r["fragment"] for r in rows}:
            oracle = zero_corpus["cells"].get((str(path), frag))
            if oracle is None:
                continue  # not committed: the library does not read it
            cells = len(oracle["__coords"]) if not spec.dense else len(oracle[spec.attrs[0].name])
            for r in (r for r in rows if r["fragment"] == frag):
                on_disk = sum(os.path.getsize(os.path.join(path, frag, r["field"] + s))
                              for s in (".tdb", "_var.tdb") if os.path.exists(os.path.join(path, frag, r["field"] + s)))
                assert int(r["stored_bytes"]) == on_disk, (name, frag, r)
                assert int(r["cell_count"]) == cells, (name, frag, r)
                assert int(r["decoded_bytes"]) == decoded_tile_bytes(root, frag, r["stem"], r["kind"]), (name, r)
                checked.add((name, r["field"]))
    assert {name for name, _ in checked} >= {"sparse_gzip", "sparse_none", "dense_none", "dense_codecs",
                                              "sparse_consolidated"}
    assert ("sparse_none", "a2") in checked and ("sparse_gzip", "__coords") in checked
    assert decoded_tiles(store)  # the check of each array can see a decode
