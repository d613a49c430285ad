"""array.yaml, stats.csv, timeline.csv and fragments.svg share one pass over the footers (issue 17).

Work is counted, never timed: with a cache too small to hold the parsed footers (as 512 MiB is for
100,000 fragments), reading the four summaries parses each footer once and decodes no tile; they stay
byte for byte what a store with room for everything renders; a committed fragment changed on disk
shows at the next render; a fragment still being written is never kept; the digests kept stay within
their bound in bytes (tracemalloc).
"""

from __future__ import annotations

import collections
import gc
import os
import tracemalloc

import pytest
import tiledb
import yaml

import tdbfs.format.fragment_metadata as fm
from tdbfs.store import ArrayStore
from tdbfs.store.fragment_digest import DIGEST_COST, fragment_digest
from tdbfs.views.nodes import resolve
from tdbfs.views.tree import build_root

from test_many_fragments import CountingStorage, add_fragment, age, make_fragments

SUMMARIES = ("array.yaml", "stats.csv", "timeline.csv", "fragments.svg")
N = 300
#: too small for N parsed footers (a few KiB each), as 512 MiB is for 100,000
SMALL_CACHE = 256 << 10


@pytest.fixture
def footers_parsed(monkeypatch) -> collections.Counter:
    """Footers parsed from now on, by fragment metadata file (the real parser, each call counted)."""
    seen: collections.Counter = collections.Counter()
    real = fm.parse_footer

    def counted(data, rel, *args, **kwargs):
        seen[rel] += 1
        return real(data, rel, *args, **kwargs)

    monkeypatch.setattr(fm, "parse_footer", counted)
    return seen


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    path = tmp_path_factory.mktemp("one_pass") / "arr"
    names = make_fragments(path, N)
    return path, names


def _read(root, path: str) -> bytes:
    node = resolve(root, path)
    data = bytes(node.read(0, node.size()))
    assert len(data) == node.size()
    return data


def _disk_usage(path) -> tuple[int, int]:
    """(bytes, files) under `path` as lstat sees them."""
    sizes = [os.lstat(os.path.join(d, f)).st_size for d, _, files in os.walk(path) for f in files]
    return sum(sizes), len(sizes)


def _summaries(store) -> dict:
    root = build_root(store)
    return {name: _read(root, name) for name in SUMMARIES}


def test_the_four_summaries_parse_each_footer_once(many, footers_parsed, tiles_decoded):
    path, names = many
    storage = CountingStorage(str(path))
    store = ArrayStore(storage, cache_bytes=SMALL_CACHE)
    root = build_root(store)
    got = {}
    for name in SUMMARIES:   # array.yaml first: it makes every digest; the others read no fragment file
        got[name] = _read(root, name)
        if name == "array.yaml":
            assert sorted(footers_parsed) == [f"__fragments/{n}/__fragment_metadata.tdb" for n in names]
            storage.reset()
    assert set(footers_parsed.values()) == {1} and len(footers_parsed) == N
    assert [f for f in storage.read_files if f.startswith("__fragments/")] == []
    assert not any(rel.startswith("__fragments/") for rel in storage.listed)
    assert tiles_decoded == []
    assert store.cache.size_bytes <= SMALL_CACHE and len(store.digests) == N

    # byte for byte what a store holding every parsed footer renders, and what TileDB sees
    assert got == _summaries(ArrayStore(str(path)))
    info = tiledb.array_fragments(str(path))
    rows = [r.split(",") for r in got["stats.csv"].decode().splitlines() if r.startswith("field,")]
    assert sorted((r[1], int(r[6])) for r in rows) == sorted(
        (uri.rsplit("/", 1)[-1], cells) for uri, cells in zip(info.uri, info.cell_num))
    summary = yaml.safe_load(got["array.yaml"])
    assert summary["counts"]["committed_fragments"] == N and summary["problems"] == []
    assert (summary["sizes"]["total_bytes"], summary["sizes"]["files"]) == _disk_usage(path)
    assert got["fragments.svg"].count(b'<rect class="fragment') == N


def test_any_summary_first_then_the_others_parse_nothing(many, footers_parsed):
    path, _names = many
    for first in ("stats.csv", "fragments.svg"):
        footers_parsed.clear()
        root = build_root(ArrayStore(str(path), cache_bytes=SMALL_CACHE))
        _read(root, first)
        assert len(footers_parsed) == N and set(footers_parsed.values()) == {1}
        for name in SUMMARIES:
            _read(root, name)
        assert len(footers_parsed) == N and set(footers_parsed.values()) == {1}


def test_a_new_fragment_costs_one_footer_and_a_changed_one_shows(tmp_path, footers_parsed):
    path = tmp_path / "arr"
    names = make_fragments(path, 40)
    root = build_root(ArrayStore(str(path), cache_bytes=SMALL_CACHE))
    before = {name: _read(root, name) for name in SUMMARIES}
    assert len(footers_parsed) == 40
    footers_parsed.clear()

    # a committed fragment loses a data file (its own link: the copies share the others), a new one comes
    victim = names[7]
    os.unlink(path / "__fragments" / victim / "a0.tdb")
    new = add_fragment(path, 1000)
    age(path)
    after = {name: _read(root, name) for name in SUMMARIES}
    # the new fragment's footer (the changed one's is still parsed in its fragment object, among the 256 kept)
    assert list(footers_parsed) == [f"__fragments/{new}/__fragment_metadata.tdb"]
    problems = yaml.safe_load(after["array.yaml"])["problems"]
    assert [(p["file"], p["message"]) for p in problems] == [
        (f"__fragments/{victim}/a0.tdb", "file missing (4 tiles of a0 are in it)")]
    assert new.encode() in after["stats.csv"] and new.encode() not in before["stats.csv"]
    sizes = yaml.safe_load(after["array.yaml"])["sizes"]   # the folders listed for the findings, counted again
    assert (sizes["total_bytes"], sizes["files"]) == _disk_usage(path)
    # what a fresh store renders (the victim's stored bytes too), and `tdbfs check` finds, in the same words
    assert _summaries(ArrayStore(str(path))) == after
    assert [p.to_dict() for p in ArrayStore(str(path)).findings()] == problems


def test_a_fragment_being_written_is_never_kept(tmp_path):
    path = tmp_path / "arr"
    make_fragments(path, 5)
    new = add_fragment(path, 50)
    marker = path / "__commits" / f"{new}.wrt"
    os.unlink(marker)   # written, not committed yet
    age(path)
    store = ArrayStore(str(path))
    root = build_root(store)
    first = yaml.safe_load(_read(root, "array.yaml"))
    assert first["counts"]["committed_fragments"] == 5
    assert [p["message"] for p in first["problems"]] == [
        "no commit marks this fragment: TileDB ignores it (a write that did not finish, or a lost commit file)"]
    assert store.digests.get(f"__fragments/{new}") is None and len(store.digests) == 5
    marker.touch()
    age(path)
    second = yaml.safe_load(_read(root, "array.yaml"))
    assert second["counts"]["committed_fragments"] == 6 and second["problems"] == []
    assert store.digests.get(f"__fragments/{new}") is not None
    # and a digest made now is the one a fresh store makes
    assert fragment_digest(store, f"__fragments/{new}") == fragment_digest(ArrayStore(str(path)), f"__fragments/{new}")


def test_the_digests_kept_stay_within_their_bound(many):
    path, _names = many
    tracemalloc.start()
    try:
        store = ArrayStore(str(path), cache_bytes=SMALL_CACHE)
        _read(build_root(store), "array.yaml")
        assert len(store.digests) == N and store.digests.size_bytes <= store.digests.capacity
        gc.collect()
        with_digests = tracemalloc.get_traced_memory()[0]
        store.digests.forget_except(())   # what the digests alone hold is what dropping them frees
        gc.collect()
        held = with_digests - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(store.digests) == store.digests.size_bytes == 0
    # charged at least what they hold, a few hundred bytes each: 100,000 fit in the default table (128 MiB)
    assert 0 < held <= DIGEST_COST * N, held


def test_a_small_table_drops_the_oldest_and_renders_the_same(many):
    path, _names = many
    store = ArrayStore(str(path), cache_bytes=SMALL_CACHE)
    store.digests.capacity = DIGEST_COST * 50
    got = _summaries(store)
    assert len(store.digests) <= 50
    assert got == _summaries(ArrayStore(str(path)))
