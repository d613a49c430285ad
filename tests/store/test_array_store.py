"""The store's array-level answers, against what tiledb-py wrote and reads."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tiledb

import arrays
import corpus
from tdbfs.store import ArrayStore, NotAnArrayError
from tdbfs.store.open_array import open_array


def _copy(value):
    """A value of tiledb-py's A.meta, copied: its numpy arrays point into memory freed on close."""
    return np.array(value, copy=True) if isinstance(value, np.ndarray) else value


def _same_value(ours, theirs) -> bool:
    if isinstance(theirs, (bytes, str)):
        return ours == theirs
    return np.asarray(ours).tolist() == np.asarray(theirs).tolist()


@pytest.mark.parametrize("consolidate_meta", [False, True])
def test_merged_metadata_is_what_tiledb_reads(array_factory, consolidate_meta):
    built = array_factory("metadata", consolidate_meta=consolidate_meta)
    store = open_array(str(built.path))
    merged = store.merged_metadata()
    with tiledb.open(built.uri) as A:
        theirs = {k: _copy(A.meta[k]) for k in A.meta.keys()}
    # tiledb-py keeps a numpy array under "__np_flat_<key>"
    ours = {k.removeprefix("__np_flat_"): r.value for k, r in merged.records.items()}
    assert sorted(ours) == sorted(theirs) == sorted(arrays.expected_metadata(built))
    for k, v in theirs.items():
        assert _same_value(ours[k], v), k
    names = [os.path.basename(f) for f in store.metadata_files() if not f.endswith(".vac")]
    vacuumed = store.vacuumed_metadata()
    assert sorted(merged.applied) == sorted(n for n in names if store.metadata_path(n) not in vacuumed)
    assert list(merged.skipped) == sorted(vacuumed)
    if consolidate_meta:
        assert len(vacuumed) == 3 and all(rel.startswith("__meta/") for rel in vacuumed)
        assert len(merged.applied) == 1
    else:
        assert vacuumed == frozenset() and len(merged.applied) == 3
        stamps = [store.timestamped_name(n).t1 for n in merged.applied]
        assert stamps == sorted(stamps) == [op.timestamp for op in built.ops_of("meta")]


def test_file_names_decode_to_their_timestamps(array_factory):
    built = array_factory("sparse", ndim=1, n_fragments=2)
    store = open_array(str(built.path))
    info = tiledb.array_fragments(built.uri)
    want = sorted(ts[0] for ts in info.timestamp_range)
    got = sorted(store.timestamped_name(p).t1 for p in store.fragment_paths())
    assert got == want
    assert store.timestamped_name("__schema/not-a-timestamp") is None


def test_consolidated_footers_name_every_fragment(array_factory):
    built = array_factory("fragment_meta", n_fragments=3)
    store = open_array(str(built.path))
    (meta,) = store.fragment_meta_files()
    assert store.fragment_meta_path(os.path.basename(meta)) == meta
    decoded = store.consolidated_footers(meta)
    assert sorted(d.entry.fragment_name for d in decoded) == sorted(os.path.basename(p) for p in store.fragment_paths())
    for d in decoded:
        assert d.problem is None
        assert d.footer.version == store.fragment(store.fragment_path_of(d.entry.fragment_name)).footer().version


def test_an_encrypted_schema_shows_its_envelope_without_the_key(array_factory):
    built = array_factory("encrypted")
    store = open_array(str(built.path))
    latest = store.latest_schema_file()
    env = store.schema_envelope(latest)
    assert env.header.encryption_type == 1 == store.encryption_type()
    assert env.chunks and all(c.aes_parts for c in env.chunks)


def test_dimension_labels_are_arrays_of_their_own(array_factory):
    built = array_factory("dim_labels")
    store = open_array(str(built.path))
    assert store.has_labels() and store.label_names() == ["l0"]
    label = store.label_store("l0")
    assert type(label) is ArrayStore and label.path == os.path.join(store.path, "__labels", "l0")
    with tiledb.open(built.uri) as A:
        label_uri = A.schema.dim_label("xl").uri
    assert label_uri.rstrip("/").endswith("__labels/l0")
    assert len(label.fragment_paths()) == 1 and label.label_names() == []
    os.mkdir(os.path.join(store.path, "__labels", "empty"))
    with pytest.raises(NotAnArrayError, match="no __schema/"):
        store.label_store("empty")


def test_where_the_array_files_live(array_factory):
    built = array_factory("commits")
    store = open_array(str(built.path))
    assert store.commit_files()
    for rel in store.commit_files():
        assert rel.startswith("__commits/") and store.commit_path(os.path.basename(rel)) == rel
    assert store.commit_path("__1_1_abc_5.ok") == "__1_1_abc_5.ok"     # format < 12: at the root
    assert store.schema_path("__array_schema.tdb") == "__array_schema.tdb"
    assert store.schema_path("__1_1_abc") == "__schema/__1_1_abc"
    assert store.has_enumerations() == os.path.isdir(os.path.join(store.path, "__schema", "__enumerations"))
    assert store.has_labels() == os.path.isdir(os.path.join(store.path, "__labels")) and store.label_names() == []
    enums = open_array(str(array_factory("enumerations").path))
    assert enums.has_enumerations()
    assert [enums.enumeration_path(os.path.basename(f)) for f in enums.enumeration_files()] == enums.enumeration_files()


def _agreeing_stores(tmp_path):
    """Arrays of every way a fragment is marked committed: the corpus of TileDB releases (formats 1-4
    with no marker, root .ok files, __commits/*.wrt) and commits consolidated by tiledb-py (.con beside
    the .wrt files it holds, then alone after vacuuming, then with fragments consolidated on top)."""
    paths = [p for _, p in corpus.arrays()]
    for i, (vacuum_commits, then_fragments) in enumerate([(False, False), (True, False), (True, True)]):
        built = arrays.build_commits(tmp_path / f"commits{i}", vacuum_commits=vacuum_commits,
                                     then_fragments=then_fragments)
        paths.append(str(built.path))
    return paths


def test_the_commit_of_one_fragment_is_the_one_the_map_of_all_gives(tmp_path):
    """commit_file_of(name), made from an lstat or two and the .con files, names the same commit file as
    the map of every fragment (committed_fragment_names), for every fragment and for a name of none."""
    checked = kinds = 0
    seen = set()
    for path in _agreeing_stores(tmp_path):
        store = open_array(path)
        if type(store) is not ArrayStore:
            continue
        full = ArrayStore(path).committed_fragment_names()
        names = store.fragment_names() + ["__1_2_0123456789abcdef0123456789abcdef_22", "__fragment_metadata"]
        assert {n: store.commit_file_of(n) for n in names} == {n: full.get(n) for n in names}, path
        assert all(ArrayStore(path).fragment(rel).is_committed() == (os.path.basename(rel) in full)
                   for rel in store.fragment_paths())
        checked += len(names)
        seen.update(os.path.splitext(c)[1] or "folder" for c in full.values())
        kinds += 1
    assert kinds >= 20 and checked > 40
    assert {".wrt", ".ok", ".con"} <= seen, seen
