"""array.yaml `hints:` against what tiledb-py says of the same arrays."""

from __future__ import annotations

import itertools
import os

import pytest
import tiledb
import yaml

import arrays
import reference
from tdbfs.store import ArrayStore
from tdbfs.views.nodes import resolve
from tdbfs.views.tree import build_root

#: array.yaml's keys before the hints, in order (`checked:` right after `uri`: how far the problems go);
#: they stay, and hints come last
KEYS_BEFORE = ["uri", "checked", "array_type", "latest_schema", "format_versions", "counts", "sizes", "encryption", "problems"]


def summary(path) -> dict:
    node = resolve(build_root(ArrayStore(str(path))), "array.yaml")
    return yaml.safe_load(node.read(0, node.size()))


def hints(path) -> dict:
    doc = summary(path)
    assert list(doc) == KEYS_BEFORE + ["hints"]
    out = {h["hint"]: h for h in doc["hints"]}
    assert list(out) == ["fragment_count", "not_vacuumed", "overlapping_fragments", "format"]
    return out


def tiledb_overlaps(path) -> set[frozenset]:
    """Pairs of the fragments TileDB reads whose non-empty domains intersect on every dimension."""
    info = tiledb.FragmentInfoList(str(path))
    live = [(os.path.basename(u.rstrip("/")), ned) for u, ned in zip(info.uri, info.nonempty_domain)]
    return {frozenset((a, b)) for (a, da), (b, db) in itertools.combinations(live, 2)
            if all(lo1 <= hi2 and lo2 <= hi1 for (lo1, hi1), (lo2, hi2) in zip(da, db))}


def test_overlapping_sparse_fragments(sample_arrays):
    built = sample_arrays["sparse_2d"]
    h = hints(built.path)["overlapping_fragments"]
    want = tiledb_overlaps(built.path)
    assert want  # the sample's fragments scatter cells over the whole domain
    assert h["pairs"] == len(want)
    assert {frozenset(p) for p in h["first_pairs"]} == want
    assert h["fragments_compared"] == len(tiledb.FragmentInfoList(str(built.path)))


@pytest.mark.parametrize("fragments", [
    [[(1, 2), (1, 2)], [(3, 4), (3, 4)], [(5, 6), (1, 6)]],        # none meet
    [[(1, 3), (1, 3)], [(3, 4), (3, 4)], [(1, 6), (6, 6)], [(2, 2), (5, 6)]],  # corners and edges meet
])
def test_dense_overlaps_follow_the_written_domains(array_factory, fragments):
    built = array_factory("dense", ndim=2, extent=2, tiles_per_dim=3, fragments=fragments)
    h = hints(built.path)["overlapping_fragments"]
    want = tiledb_overlaps(built.path)
    assert h["pairs"] == len(want)
    assert {frozenset(p) for p in h.get("first_pairs", [])} == want


def test_many_overlaps_are_counted_and_a_few_named(array_factory):
    built = array_factory("dense", ndim=1, extent=4, tiles_per_dim=2, fragments=[[(1, 8)]] * 6)
    h = hints(built.path)["overlapping_fragments"]
    assert h["pairs"] == len(tiledb_overlaps(built.path)) == 15
    assert len(h["first_pairs"]) == 10


def test_consolidated_not_vacuumed_then_vacuumed(array_factory):
    built = array_factory("consolidated", n_fragments=3)
    h = hints(built.path)
    info = tiledb.FragmentInfoList(str(built.path))
    stale = [os.path.basename(u.rstrip("/")) for u in info.to_vacuum]
    assert h["not_vacuumed"]["fragments"] == len(stale) == 3
    assert h["not_vacuumed"]["bytes"] == sum(
        f.stat().st_size for name in stale for f in reference.fragment_path(built.path, name).iterdir())
    assert h["not_vacuumed"]["vacuum_files"] == 1
    assert h["fragment_count"]["fragments"] == 4
    assert h["fragment_count"]["read_at_open"] == len(info) == 1
    arrays.vacuum(built)
    h = hints(built.path)
    assert h["not_vacuumed"]["fragments"] == 0 and h["not_vacuumed"]["bytes"] == 0
    assert h["fragment_count"]["fragments"] == h["fragment_count"]["read_at_open"] == 1


def test_fragment_count_advice(sample_arrays):
    built = sample_arrays["sparse_2d"]
    h = hints(built.path)["fragment_count"]
    n = len(tiledb.FragmentInfoList(str(built.path)))
    assert h["read_at_open"] == h["fragments"] == n == 2
    assert f"{n} fragments are read at open" in h["says"] and "consolidat" in h["says"]
    assert h["consolidated_footer_files"] == 0


def test_format_and_oldest_release(sample_arrays):
    h = hints(sample_arrays["sparse_2d"].path)["format"]
    version = max(tiledb.FragmentInfoList(str(sample_arrays["sparse_2d"].path)).version)
    assert h["newest_format"] == version == 22
    assert h["oldest_reader"] == "TileDB 2.25 or later"


@pytest.mark.backcompat
@pytest.mark.parametrize("folder, version, release", [("v09", 9, "2.3"), ("v14", 14, "2.10"), ("v03", 3, "1.6")])
def test_format_of_older_arrays(folder, version, release):
    import corpus
    h = hints(corpus.array(folder))["format"]
    assert h["newest_format"] == version
    assert h["oldest_reader"] == f"TileDB {release} or later"
