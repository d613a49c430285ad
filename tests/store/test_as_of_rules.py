"""store/as_of.py against TileDB: at every time of an array's history (and between), the fragments
tdbfs says a reader reads give exactly what TileDB reads, and the schema and metadata are TileDB's."""

from __future__ import annotations

import pytest
import tiledb

import history_arrays as history
from tdbfs.format.names import try_parse_name
from tdbfs.store.open_array import open_array
from tdbfs.store.as_of import metadata_as_of, reader_fragments, schema_as_of
from tdbfs.store.timeline import distinct_times, timeline

SCENARIOS = {
    "sparse": dict(),
    "sparse_partial": dict(consolidation="partial"),
    "sparse_partial_vacuumed": dict(consolidation="partial", vacuum=True),
    "sparse_commits_meta": dict(consolidation="partial", commits=True, fragment_meta=True, array_meta=True),
    "sparse_full_all": dict(consolidation="full", vacuum=True, commits=True, fragment_meta=True, array_meta=True),
    "dense": dict(dense=True),
    "dense_partial": dict(dense=True, consolidation="partial"),
    "dense_partial_vacuumed": dict(dense=True, consolidation="partial", vacuum=True),
    "dense_full_meta": dict(dense=True, consolidation="full", fragment_meta=True, array_meta=True),
}


def times_to_try(store) -> list[int]:
    """Every distinct time of the timeline, the ms before each, 0 and one after the last."""
    times = distinct_times(timeline(store))
    return sorted({0, times[-1] + 1} | set(times) | {t - 1 for t in times})


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def built(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("as_of") / request.param
    base = history.build_history(path, **SCENARIOS[request.param])
    return request.param, str(path), base


def test_fragments_read_at_each_time_are_tiledbs(built):
    name, uri, base = built
    store = open_array(uri)
    dense = SCENARIOS[name].get("dense", False)
    tried = 0
    for t in times_to_try(store):
        listed = reader_fragments(store, t).fragments
        names = [rel.rsplit("/", 1)[-1] for rel in listed]
        for n in map(try_parse_name, names):
            # TileDB's range rule (ArrayDirectory::timestamps_overlap, [0, T]): a fragment outside it is
            # one TileDB does not read, whatever the isolated copy below says
            assert (n.t2 if dense else n.t1) <= t, (t, n.name)
        assert history.isolated_read(uri, names, t) == history.read_at(uri, t), (name, t - base, names)
        tried += bool(names)
    assert tried >= 4
    # fragment info loads what a reader at `now` reads (fragment_info.cc)
    now = {f.uri.rstrip("/").rsplit("/", 1)[-1] for f in tiledb.FragmentInfoList(uri)}
    assert {rel.rsplit("/", 1)[-1] for rel in reader_fragments(store, history.arrays.now_ms()).fragments} == now


def test_partial_consolidation_rules(tmp_path):
    """Between the two writes a partial consolidation covers: sparse readers take the consolidated
    fragment (filtered by its cells' timestamps); dense readers keep the first write."""
    for dense in (False, True):
        uri = str(tmp_path / f"dense_{dense}")
        base = history.build_history(tmp_path / f"dense_{dense}", dense=dense, consolidation="partial")
        store = open_array(uri)
        at = reader_fragments(store, base + 15)
        n = [try_parse_name(rel.rsplit("/", 1)[-1]) for rel in at.fragments]
        assert [(x.t1 - base, x.t2 - base) for x in n] == ([(10, 10)] if dense else [(10, 20)])
        assert [try_parse_name(r.rsplit("/", 1)[-1]).t1 - base for r in at.replaced] == ([] if dense else [10])
        assert history.read_at(uri, base + 15) == history.isolated_read(uri, [x.name for x in n], base + 15)


def test_schema_in_force_is_tiledbs(built):
    _, uri, base = built
    store = open_array(uri)
    seen = set()
    for t in times_to_try(store):
        rel = schema_as_of(store, t)
        ours = [a.name for a in store.schema(rel).attributes]
        assert ours == history.schema_attrs_at(uri, t), t - base
        seen.add(tuple(ours))
    assert seen == {("v",), ("v", "extra")}


def test_metadata_as_of_is_tiledbs(built):
    _, uri, base = built
    store = open_array(uri)
    seen = []
    for t in times_to_try(store):
        merged = metadata_as_of(store, t)
        ours = {k: r.value for k, r in merged.records.items()}
        assert ours == history.metadata_at(uri, t), t - base
        seen.append(ours)
    assert {"a": 1} in seen and {"b": 5, "c": 3} in seen and {} in seen


@pytest.mark.backcompat
def test_fragments_now_are_fragment_infos_in_the_corpus():
    """TileDB's fragment info lists what a reader at `now` reads (fragment_info.cc loads
    filtered_fragment_uris(dense) as Array::open does): the same set, on arrays of formats 1 to 22
    (fragments at the root with and without `.ok`, `__fragments/` with `.wrt`)."""
    import corpus
    compared = 0
    for folder, arr in corpus.arrays():
        if folder in corpus.REFUSED:
            continue
        try:
            theirs = {u.rstrip("/").rsplit("/", 1)[-1] for u in (f.uri for f in tiledb.FragmentInfoList(arr))}
        except tiledb.TileDBError:
            continue   # TileDB refuses it: nothing to compare with
        store = open_array(arr)
        ours = {rel.rsplit("/", 1)[-1] for rel in reader_fragments(store, history.arrays.now_ms()).fragments}
        assert ours == theirs, folder
        compared += bool(theirs)
    assert compared >= 10


def test_damaged_commit_files_and_schema_are_problems(tmp_path):
    """A .vac that is not UTF-8 and a truncated schema: the timeline still renders (the .vac's
    events are missing, a problem names it), as_of/<T>/ answers EIO for what needs the schema, and
    the rest stays served."""
    import shutil
    from tdbfs.views.nodes import ViewError, resolve
    from tdbfs.views.tree import build_root
    src = tmp_path / "a"
    base = history.build_history(src, consolidation="partial")
    (vac,) = (src / "__commits").glob("*.vac")
    vac.write_bytes(b"\xff\xfe not a path\n")
    store = open_array(str(src))
    events = timeline(store)
    assert not [e for e in events if e.event == "fragment_consolidated"]
    assert any(p.file == f"__commits/{vac.name}" and p.structure == "vacuum file" for p in store.findings())
    # without the .vac, a reader at the end reads every fragment, the consolidated one too
    assert len(reader_fragments(store, base + 60).fragments) == 5

    dst = tmp_path / "b"
    shutil.copytree(src, dst)
    # a committed fragment whose folder is gone: TileDB would fail to open the array at T
    gone = sorted((dst / "__fragments").iterdir())[-1]
    shutil.rmtree(gone)
    assert reader_fragments(open_array(str(dst)), base + 60).missing == (f"__fragments/{gone.name}",)
    evolved = sorted(p for p in (dst / "__schema").glob("__*") if p.is_file())[-1]
    evolved.write_bytes(evolved.read_bytes()[:20])
    store = open_array(str(dst))
    root = build_root(store)
    for path in (f"as_of/{base + 60}/schema.yaml", f"as_of/{base + 60}/fragments"):
        node = resolve(root, path)
        with pytest.raises(ViewError):
            node.read(0, 1 << 20) if hasattr(node, "read") else node.children()
    assert resolve(root, f"as_of/{base + 10}/fragments").children()   # the first schema is whole
    assert resolve(root, "timeline.csv").read(0, 1 << 20).count(b"\n") == len(timeline(store)) + 1


def test_without_a_schema_a_reader_reads_nothing(tmp_path):
    """TileDB refuses to open an array without a schema file: as_of/<T>/ then lists no fragment, has
    no schema.yaml (as schema/ has no current.yaml) and says so in reader.yaml."""
    import yaml
    from tdbfs.views.nodes import resolve
    from tdbfs.views.tree import build_root
    base = history.build_history(tmp_path / "a")
    for f in (tmp_path / "a" / "__schema").iterdir():
        if f.is_file():
            f.unlink()
    store = open_array(str(tmp_path / "a"))
    assert reader_fragments(store, base + 60).fragments == ()
    moment = resolve(build_root(store), f"as_of/{base + 60}")
    assert sorted(moment.children()) == ["fragments", "metadata.yaml", "reader.yaml"]
    assert moment.child("fragments").children() == {}
    reader = yaml.safe_load(moment.child("reader.yaml").read(0, 1 << 20))
    assert reader["schema"] is None and reader["fragments_read"] == []
    assert not [p for p in store.problems.items if p.file == "__schema"]
