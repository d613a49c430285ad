"""array.yaml, stats.csv, timeline.csv and fragments.svg are kept between looks, never stale (issue 38, item 4).

A fragment written by tiledb-py between two looks at each kept summary is in the second look, and a
fragment consolidated and vacuumed away leaves it: each look is byte for byte what a fresh
`tdbfs.open` renders, through a real mount read with cat and through the library. A second look at an
unchanged array decodes no footer (the store counts them), and a new fragment costs its own footer.
Work is counted, never timed.
"""

from __future__ import annotations

import os
import subprocess
import time

import numpy as np
import tiledb
import yaml

import tdbfs
from damage import mount_tracked

SUMMARIES = ("array.yaml", "stats.csv", "timeline.csv", "fragments.svg")
#: the store trusts a listing once its folder's mtime is a tick old (store/base_store.py MTIME_TICK_NS)
TICK_S = 1.1
#: too small for the parsed footers and the renderings: what is kept is the digests
SMALL_CACHE_MB = 1


def _make(path) -> None:
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 999), tile=10, dtype=np.int32))
    schema = tiledb.ArraySchema(domain=dom, sparse=True, capacity=4,
                                attrs=[tiledb.Attr("a", dtype=np.int64, filters=tiledb.FilterList([tiledb.ZstdFilter()]))])
    tiledb.Array.create(str(path), schema)
    for t in (1, 2, 3):
        _write(path, t)


def _write(path, t: int) -> str:
    """A fragment of 5 cells at timestamp t, by tiledb-py; its folder's name."""
    before = set(os.listdir(path / "__fragments")) if (path / "__fragments").exists() else set()
    with tiledb.open(str(path), "w", timestamp=t) as A:
        d = np.arange(10 * t, 10 * t + 5, dtype=np.int32)
        A[d] = {"a": d.astype(np.int64) * 7}
    (new,) = set(os.listdir(path / "__fragments")) - before
    return new


def _fresh(path) -> dict[str, bytes]:
    """What a store opened now renders."""
    with tdbfs.open(path) as A:
        return {name: A.open_view(name) for name in SUMMARIES}


def _cat(mnt, name: str) -> bytes:
    return subprocess.run(["cat", str(mnt / name)], capture_output=True, check=True, timeout=60).stdout


def _fragments_counted(array_yaml: bytes) -> int:
    return yaml.safe_load(array_yaml)["counts"]["fragments"]


def test_each_kept_summary_shows_a_fragment_written_or_vacuumed_between_two_looks(tmp_path):
    path = tmp_path / "arr"
    _make(path)
    time.sleep(TICK_S)
    # no background check: array.yaml's `checked:` is then what a fresh library store says
    with mount_tracked(path, extra_args=["-o", "check=off"]) as mnt, tdbfs.open(path) as lib:
        looks = {"mount": lambda name: _cat(mnt, name), "library": lib.open_view}
        first = {how: {name: look(name) for name in SUMMARIES} for how, look in looks.items()}
        expected = _fresh(path)
        assert first["mount"] == first["library"] == expected
        assert _fragments_counted(expected["array.yaml"]) == 3
        for how, look in looks.items():   # kept: the same again
            assert {name: look(name) for name in SUMMARIES} == first[how], how

        new = _write(path, 4)
        time.sleep(TICK_S)   # past the tick: the summaries kept are looked up, not rendered regardless
        second = {how: {name: look(name) for name in SUMMARIES} for how, look in looks.items()}
        expected = _fresh(path)
        assert second["mount"] == expected, [n for n in SUMMARIES if second["mount"][n] != expected[n]]
        assert second["library"] == expected, [n for n in SUMMARIES if second["library"][n] != expected[n]]
        for how in looks:
            got = second[how]
            assert _fragments_counted(got["array.yaml"]) == 4
            for name in ("stats.csv", "timeline.csv", "fragments.svg"):
                assert new.encode() in got[name] and new.encode() not in first[how][name], (how, name)
            assert got["stats.csv"].count(f"field,{new},".encode()) == 2   # a row for a, one for d

        old = sorted(os.listdir(path / "__fragments"))
        tiledb.consolidate(str(path))
        tiledb.vacuum(str(path))
        live = sorted(os.listdir(path / "__fragments"))
        gone = [n for n in old if n not in live]
        assert len(gone) == 4 and len(live) == 1
        time.sleep(TICK_S)
        third = {how: {name: look(name) for name in SUMMARIES} for how, look in looks.items()}
        expected = _fresh(path)
        assert third["mount"] == expected, [n for n in SUMMARIES if third["mount"][n] != expected[n]]
        assert third["library"] == expected, [n for n in SUMMARIES if third["library"][n] != expected[n]]
        for how in looks:
            got = third[how]
            assert _fragments_counted(got["array.yaml"]) == 1
            assert yaml.safe_load(got["array.yaml"])["problems"] == []
            for name in ("stats.csv", "fragments.svg"):
                assert live[0].encode() in got[name]
                assert not any(n.encode() in got[name] for n in gone), (how, name)


def test_a_second_look_decodes_no_footer_and_a_new_fragment_costs_its_own(tmp_path):
    path = tmp_path / "arr"
    _make(path)
    time.sleep(TICK_S)
    with tdbfs.open(path, cache_mb=SMALL_CACHE_MB) as lib:
        store = lib.store
        assert store.footers_decoded == 0
        first = {name: lib.open_view(name) for name in SUMMARIES}
        assert store.footers_decoded == 3   # one footer per fragment, for the four summaries
        for name in SUMMARIES:
            assert lib.open_view(name) == first[name]
        assert store.footers_decoded == 3
        store.cache.clear()   # the renderings and parsed footers gone: the digests are kept apart
        assert {name: lib.open_view(name) for name in SUMMARIES} == first
        assert store.footers_decoded == 3

        new = _write(path, 4)
        time.sleep(TICK_S)
        second = {name: lib.open_view(name) for name in SUMMARIES}
        assert store.footers_decoded == 4   # the new fragment's footer alone
        assert second == _fresh(path)
        assert new.encode() in second["stats.csv"] and _fragments_counted(second["array.yaml"]) == 4


def test_array_yaml_again_for_more_checked_lists_no_fragment_folder_again(tmp_path):
    """array.yaml is rendered again whenever the background check marks more as checked; with the
    listings, commits and problems as they were, the fragment folders a whole render listed are not
    listed again (100,000 of them: the whole pass again). A change of the listings lists them again,
    and a fragment damaged since then shows."""
    from test_many_fragments import CountingStorage, add_fragment, make_fragments

    from tdbfs.store import ArrayStore
    from tdbfs.views.nodes import resolve
    from tdbfs.views.tree import build_root

    path = tmp_path / "arr"
    names = make_fragments(path, 30)
    time.sleep(TICK_S)   # __schema/__enumerations too: the summaries are kept only for listings a tick old
    storage = CountingStorage(str(path))
    store = ArrayStore(storage)
    node = resolve(build_root(store), "array.yaml")

    def look() -> dict:
        return yaml.safe_load(bytes(node.read(0, node.size())))

    first = look()
    assert first["checked"]["metadata"] == "0 of 30 fragments" and first["problems"] == []
    assert len({rel for rel in storage.listed if rel.startswith("__fragments/")}) == 30
    storage.listed.clear()
    store.checked.mark_fragment(store.fragment(f"__fragments/{names[0]}"), tiles=False)
    second = look()   # rendered again: it says more is checked
    assert second["checked"]["metadata"] == "1 of 30 fragments"
    assert dict(second, checked=None) == dict(first, checked=None)
    assert [rel for rel in storage.listed if rel.startswith("__fragments/")] == []

    # a data file of a committed fragment removed, and a new fragment: the listings changed, every
    # fragment folder is listed again and the damage shows
    victim = names[3]
    os.unlink(path / "__fragments" / victim / "a0.tdb")
    add_fragment(path, 1000)
    time.sleep(TICK_S)
    third = look()
    assert len({rel for rel in storage.listed if rel.startswith("__fragments/")}) == 31
    assert [(p["file"], p["message"]) for p in third["problems"]] == [
        (f"__fragments/{victim}/a0.tdb", "file missing (4 tiles of a0 are in it)")]
    assert third["counts"]["fragments"] == 31


def test_array_yaml_is_rendered_once_while_the_background_check_moves_on(tmp_path, monkeypatch):
    """A background check marks fragments as checked all through a render of many fragments; array.yaml is
    served as rendered (its `checked:` then says less than is checked by the end, never more), not rendered
    again and again; a look once more is checked renders it anew."""
    import itertools

    from test_many_fragments import make_fragments

    import tdbfs.views.array_views as array_views
    from tdbfs.store import ArrayStore
    from tdbfs.views.nodes import resolve
    from tdbfs.views.tree import build_root

    path = tmp_path / "arr"
    names = make_fragments(path, 5)
    time.sleep(TICK_S)
    store = ArrayStore(str(path))
    node = resolve(build_root(store), "array.yaml")
    renders = []
    real = array_views.array_summary
    marks = itertools.cycle(names)

    def render_while_checking(s):
        renders.append(1)
        out = real(s)
        # the check moves on meanwhile (a mark after the render took `checked:`), as it does between any
        # two of 100,000 fragments
        s.checked.mark_fragment(s.fragment(f"__fragments/{next(marks)}"), tiles=False)
        s.checked.background("metadata", running=False)   # shown at once (store/checked.py STATE_TICK_S)
        return out

    monkeypatch.setattr(array_views, "array_summary", render_while_checking)
    first = yaml.safe_load(bytes(node.fresh()))   # one rendering per open, as the front ends take it
    assert len(renders) == 1
    assert first["checked"]["metadata"] == "0 of 5 fragments" and first["problems"] == []
    second = yaml.safe_load(bytes(node.fresh()))   # kept: it says less than is checked, never more
    assert len(renders) == 1 and second == first
    store.checked.mark_fragment(store.fragment(f"__fragments/{next(marks)}"), tiles=False)
    store.checked.background("metadata", running=True)
    third = yaml.safe_load(bytes(node.fresh()))
    assert len(renders) == 2 and third["checked"]["metadata"] == "2 of 5 fragments"
    assert dict(third, checked=None) == dict(first, checked=None)
