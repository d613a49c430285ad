"""timeline.csv on a real mount: every event of a history written with tiledb-py at known
timestamps appears, at its time, with the file that records it, in time order."""

from __future__ import annotations

import csv
import io
import os
import subprocess

import pytest

import history_arrays as history
from tdbfs.views.timeline_views import COLUMNS
from tdbfs.store.timeline import EVENTS

COMMITS_AND_META = dict(consolidation="partial", commits=True, fragment_meta=True, array_meta=True)
VACUUMED = dict(consolidation="full", vacuum=True, commits=True, array_meta=True)


def _rows(mnt) -> list[dict]:
    text = subprocess.run(["cat", str(mnt / "timeline.csv")], capture_output=True, text=True, check=True).stdout
    assert text.splitlines()[0] == ",".join(COLUMNS)
    assert os.stat(mnt / "timeline.csv").st_size == len(text.encode())
    return list(csv.DictReader(io.StringIO(text)))


def _of(rows, event) -> list[dict]:
    return [r for r in rows if r["event"] == event]


def _offset(row, base) -> int:
    return int(row["time_ms"]) - base


@pytest.fixture(scope="module")
def histories(tmp_path_factory):
    root = tmp_path_factory.mktemp("timeline")
    out = {}
    for name, kw in (("commits_meta", COMMITS_AND_META), ("vacuumed", VACUUMED)):
        out[name] = (root / name, history.build_history(root / name, **kw))
    return out


def test_order_and_columns(histories, mount):
    path, base = histories["commits_meta"]
    rows = _rows(mount(path))
    keys = [(int(r["time_ms"]), EVENTS.index(r["event"]), r["subject"], r["file"]) for r in rows]
    assert keys == sorted(keys)
    for r in rows:
        assert r["time_utc"].endswith("Z") and r["time_utc"][:4].isdigit()
        assert int(r["t1"]) <= int(r["t2"])
        assert (path / r["file"]).exists() or r["event"] in ("fragment_vacuumed", "metadata_vacuumed")


def test_each_event_with_its_file(histories, mount):
    path, base = histories["commits_meta"]
    rows = _rows(mount(path))
    frags = sorted(os.listdir(path / "__fragments"))
    written = _of(rows, "fragment_written")
    assert sorted(r["subject"] for r in written) == frags
    assert all(r["file"] == f"__fragments/{r['subject']}" for r in written)
    single = [r for r in written if r["t1"] == r["t2"]]
    assert sorted(_offset(r, base) for r in single) == list(history.WRITES)
    (merged,) = [r for r in written if r["t1"] != r["t2"]]
    assert (int(merged["t1"]) - base, int(merged["t2"]) - base) == (10, 20)
    assert "consolidation of" in merged["detail"]

    schemas = _of(rows, "schema_created") + _of(rows, "schema_evolved")
    assert [r["event"] for r in schemas] == ["schema_created", "schema_evolved"]
    assert _offset(schemas[1], base) == history.EVOLVE
    assert sorted(r["file"] for r in schemas) == sorted(f"__schema/{n}" for n in os.listdir(path / "__schema")
                                                         if n != "__enumerations")

    # the commits were consolidated into one .con, then the .wrt files vacuumed; the fragment consolidated
    # after that has its own .wrt
    (con,) = [n for n in os.listdir(path / "__commits") if n.endswith(".con")]
    committed = _of(rows, "fragment_committed")
    assert sorted(r["subject"] for r in committed) == frags
    for r in committed:
        wrt = f"__commits/{r['subject']}.wrt"
        assert r["file"] == (wrt if (path / wrt).exists() else f"__commits/{con}")
        assert r["time_ms"] == r["t2"]
    consolidated_commits = _of(rows, "commit_consolidated")
    assert {r["file"] for r in consolidated_commits} == {f"__commits/{con}"}
    assert len(consolidated_commits) == len(history.WRITES) + 1    # the four .wrt and the .del

    (delete,) = _of(rows, "delete")
    assert _offset(delete, base) == history.DELETE and delete["file"] == f"__commits/{con}"
    # TileDB stores the negation of `v == 20` as `v <> 20`; commits/*.yaml words it the same way
    assert delete["detail"] == f"deletes cells where NOT(v <> 20); an entry of {con}"

    (vac,) = [n for n in os.listdir(path / "__commits") if n.endswith(".vac")]
    moved = _of(rows, "fragment_consolidated")
    assert sorted(int(r["t2"]) - base for r in moved) == [10, 20]       # the fragments consolidated,
    assert [_offset(r, base) for r in moved] == [20, 20]                 # at the end of the output's range
    assert {(r["file"], r["into"]) for r in moved} == {(f"__commits/{vac}", merged["subject"])}
    assert all(r["detail"].startswith("still on disk") for r in moved)
    assert not _of(rows, "fragment_vacuumed")

    meta = _of(rows, "metadata_written")
    simple = [r for r in meta if r["t1"] == r["t2"]]
    # tiledb-py also deletes its own numpy keys (__np_flat_<key>) at each put
    assert [(_offset(r, base), r["detail"].split(";")[0]) for r in simple] == [
        (10, "put a"), (20, "put b"), (30, "put c"), (50, "put b")]
    assert simple[2]["detail"].endswith(", a")
    (meta_vac,) = [n for n in os.listdir(path / "__meta") if n.endswith(".vac")]
    into = meta_vac[:-4]
    assert [r for r in meta if r["subject"] == into][0]["detail"].startswith("the output of a consolidation")
    assert {(r["file"], r["into"]) for r in _of(rows, "metadata_consolidated")} == {(f"__meta/{meta_vac}", into)}
    assert len(_of(rows, "metadata_consolidated")) == 4

    (fmeta,) = os.listdir(path / "__fragment_meta")
    assert [r["file"] for r in _of(rows, "fragment_meta_consolidated")] == [f"__fragment_meta/{fmeta}"]


def test_vacuumed_history(histories, mount):
    """After a full consolidation and vacuum, the .wrt files the .con still lists are ignored (.ign),
    and the one fragment left says its inputs were vacuumed."""
    path, base = histories["vacuumed"]
    mnt = mount(path)
    rows = _rows(mnt)
    (only,) = _of(rows, "fragment_written")
    assert (int(only["t1"]) - base, int(only["t2"]) - base) == (10, 50)
    assert "the fragments it replaced are vacuumed" in only["detail"]
    (ign,) = [n for n in os.listdir(path / "__commits") if n.endswith(".ign")]
    ignored = _of(rows, "commit_ignored")
    assert {r["file"] for r in ignored} == {f"__commits/{ign}"}
    assert sorted(int(r["t2"]) - base for r in ignored) == list(history.WRITES)
    assert {_offset(r, base) for r in ignored} == {50}     # the end of the .ign's own range
    # grep on the mount finds the events of one file
    found = subprocess.run(["grep", "-c", ign, str(mnt / "timeline.csv")], capture_output=True, text=True)
    assert int(found.stdout) == len(ignored)


@pytest.mark.backcompat
def test_store_timeline_of_root_fragments_and_ok_markers():
    """Format < 12 layouts keep fragments at the root with `.ok` markers (real arrays of the
    back-compat corpus): each fragment is written and committed at the t2 of its name."""
    import corpus
    from tdbfs.store.open_array import open_array
    from tdbfs.store.timeline import timeline
    found = 0
    for _, arr in corpus.arrays():
        oks = [n for n in os.listdir(arr) if n.endswith(".ok")]
        if not oks:
            continue
        events = timeline(open_array(arr))
        committed = {e.subject: e for e in events if e.event == "fragment_committed"}
        written = {e.subject: e for e in events if e.event == "fragment_written"}
        for ok in oks:
            e = committed[ok[:-3]]
            assert e.file == ok and e.time_ms == e.t2
            assert written[ok[:-3]].file == ok[:-3]
        found += 1
    assert found >= 3


def test_legacy0x_array_timeline(tmp_path_factory):
    """TileDB 0.x (written by GenomicsDB's library): a fragment's name holds the ms it was made at,
    and its __tiledb_fragment.tdb commits it."""
    import legacy0x_arrays as Z
    from tdbfs.store.open_array import open_array
    from tdbfs.views.nodes import resolve
    from tdbfs.views.tree import build_root
    if Z.wheel_library_path() is None:
        pytest.skip("genomicsdb==0.1.6 (its TileDB 0.x library) is not installed; scripts/_setup.sh installs it")
    root = tmp_path_factory.mktemp("zero")
    Z.load_corpus(root)
    checked = 0
    for dirpath, _, files in os.walk(root):
        if "__array_schema.tdb" not in files:
            continue
        text = resolve(build_root(open_array(dirpath)), "timeline.csv").read(0, 1 << 24).decode()
        rows = list(csv.DictReader(io.StringIO(text)))
        frags = [n for n in os.listdir(dirpath)
                 if n.lstrip(".").startswith("__") and os.path.isdir(os.path.join(dirpath, n))]
        assert sorted(r["subject"] for r in _of(rows, "fragment_written")) == sorted(frags)
        for r in rows:
            assert r["time_ms"] == r["subject"].rsplit("_", 1)[1]
            if r["event"] == "fragment_committed":
                assert r["file"] == f"{r['subject']}/__tiledb_fragment.tdb"
            else:
                assert r["detail"].startswith("a hidden folder") == r["subject"].startswith(".")
        assert len(_of(rows, "fragment_committed")) == sum(
            os.path.isfile(os.path.join(dirpath, f, "__tiledb_fragment.tdb")) for f in frags)
        checked += bool(frags)
    assert checked >= 3


def test_each_name_is_parsed_once_per_file_that_bears_it(tmp_path, monkeypatch):
    """A fragment's folder and its commit marker are parsed once each, however many fragments there are:
    the parser's cache keeps a few thousand names, and a second parse of a name the first pass saw
    made 100,000 fragments cost more per fragment than 2,000 (timeline.csv, scripts/bench)."""
    import tdbfs.store.timeline as timeline_module
    from tdbfs.format.names import _parse
    from tdbfs.format.errors import FormatError
    from tdbfs.store.open_array import open_array

    asked = []

    def uncached(name):
        asked.append(name)
        try:
            return _parse(name, "timestamped name")
        except FormatError:
            return None

    import numpy as np
    import tiledb
    path = tmp_path / "three_writes"
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 99), tile=10, dtype=np.int64))
    tiledb.Array.create(str(path), tiledb.ArraySchema(domain=dom, attrs=[tiledb.Attr("a", dtype=np.int32)]))
    for t in (1, 2, 3):
        with tiledb.open(str(path), "w", timestamp=t) as A:
            A[0:10] = {"a": np.arange(10, dtype=np.int32)}
    store = open_array(str(path))
    monkeypatch.setattr(timeline_module, "try_parse_name", uncached)
    events = timeline_module.timeline(store)
    fragments = [os.path.basename(r) for r in store.fragment_paths()]
    markers = [os.path.basename(r) for r in store.commit_files() if r.endswith(".wrt")]
    assert len(fragments) == len(markers) == 3
    assert {e.event for e in events} >= {"fragment_written", "fragment_committed"}
    for name in fragments + markers:
        assert asked.count(name) == 1, name


def test_times_shown_as_datetime_shows_them():
    """iso8601_ms works a day's date out once (strftime per time was 2 s of a 100,000-fragment timeline)."""
    import random
    from datetime import datetime, timezone
    from tdbfs.format.names import iso8601_ms

    def reference(ms):
        try:
            return datetime.fromtimestamp(ms // 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"
        except (OverflowError, OSError, ValueError):
            return None

    rng = random.Random(7)
    values = [0, 999, -1, -86_400_000, 253_402_300_799_999, 253_402_300_800_000, (1 << 64) - 1, -62_135_596_800_001]
    values += [rng.randrange(0, 1 << 64) for _ in range(2000)] + [rng.randrange(0, 4 * 10 ** 12) for _ in range(2000)]
    assert iso8601_ms(1_700_000_000_123) == "2023-11-14T22:13:20.123Z"
    assert [iso8601_ms(v) for v in values] == [reference(v) for v in values]
    assert iso8601_ms((1 << 64) - 1) is None
