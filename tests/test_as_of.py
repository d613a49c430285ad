"""as_of/<T>/ on a real mount, against what tiledb-py reads when it opens the array at T.

For each T (listed or typed), the fragments `ls as_of/<T>/fragments` shows are exactly those TileDB
reads: a copy of the array holding only them reads, in TileDB, the same cells as the array itself
(tests/history_arrays.py). schema.yaml and metadata.yaml are TileDB's schema and metadata at T.
"""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml

import history_arrays as history

SCENARIOS = {
    "sparse": dict(consolidation="partial", commits=True, fragment_meta=True, array_meta=True),
    "dense": dict(dense=True, consolidation="partial"),
}


def run(*cmd) -> str:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def histories(tmp_path_factory):
    root = tmp_path_factory.mktemp("as_of")
    return {name: (root / name, history.build_history(root / name, **kw)) for name, kw in SCENARIOS.items()}


def _times(mnt) -> list[int]:
    rows = run("cat", mnt / "timeline.csv").splitlines()[1:]
    return sorted({int(r.split(",", 1)[0]) for r in rows if r.split(",", 1)[0]})


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_fragments_at_listed_and_typed_times(histories, mount, name):
    path, base = histories[name]
    mnt = mount(path)
    listed = run("ls", mnt / "as_of").split()
    times = _times(mnt)
    assert listed == sorted(str(t) for t in times) == sorted(listed, key=str)
    typed = [0, base + 15, base + 35, times[-1] + 1_000_000]
    assert not set(map(str, typed)) & set(listed)
    seen = set()
    for t in times + typed:
        folder = mnt / "as_of" / str(t) / "fragments"
        names = run("ls", folder).split()
        assert history.isolated_read(str(path), names, t) == history.read_at(str(path), t), (name, t - base)
        for n in names:
            assert os.readlink(folder / n) == f"../../../fragments/{n}"
            assert run("cat", folder / n / "fragment.yaml") == run("cat", mnt / "fragments" / n / "fragment.yaml")
        reader = yaml.safe_load(run("cat", mnt / "as_of" / str(t) / "reader.yaml"))
        assert sorted(reader["fragments_read"]) == names and reader["fragments_missing"] == []
        assert reader["array_type"] == name and reader["timestamp"] == t
        seen.add(tuple(names))
    assert len(seen) >= 4 and () in seen      # nothing, then each write or consolidation in turn


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_schema_and_metadata_at_each_time(histories, mount, name):
    path, base = histories[name]
    mnt = mount(path)
    for t in _times(mnt) + [base + 27]:
        text = run("cat", mnt / "as_of" / str(t) / "schema.yaml")
        schema = yaml.safe_load(text)
        assert [a["name"] for a in schema["attributes"]] == history.schema_attrs_at(str(path), t), t - base
        # the same rendering as schema/<file>.yaml of the schema in force
        assert text == run("cat", mnt / "schema" / (schema["file"].rsplit("/", 1)[-1] + ".yaml"))
        meta = yaml.safe_load(run("cat", mnt / "as_of" / str(t) / "metadata.yaml"))
        assert {k: v["value"] for k, v in meta["metadata"].items()} == history.metadata_at(str(path), t), t - base
    last = _times(mnt)[-1]
    assert run("cat", mnt / "as_of" / str(last) / "metadata.yaml") == run("cat", mnt / "metadata" / "merged.yaml")


def test_only_whole_milliseconds_name_a_time(histories, mount):
    path, base = histories["sparse"]
    mnt = mount(path)
    for bad in ("abc", "1.5", "-1", "007", "+5", str(1 << 64), f"{base}x", " 5"):
        with pytest.raises(FileNotFoundError):
            os.stat(mnt / "as_of" / bad)
    assert sorted(os.listdir(mnt / "as_of" / str((1 << 64) - 1))) == [
        "cells", "cells.csv", "fragments", "metadata.yaml", "reader.yaml", "schema.yaml"]
    assert sorted(os.listdir(mnt / "as_of" / "now")) == sorted(os.listdir(mnt / "as_of" / str((1 << 64) - 1)))
    assert os.listdir(mnt / "as_of" / "0" / "fragments") == []


def test_cli_shows_the_same(histories, mount):
    """`tdbfs ls` (no FUSE) lists the same fragments as the mount."""
    import sys
    path, base = histories["sparse"]
    mnt = mount(path)
    t = base + 35
    cli = run(sys.executable, "-m", "tdbfs.cli", "ls", path, f"as_of/{t}/fragments").split()
    assert cli == run("ls", mnt / "as_of" / str(t) / "fragments").split() and len(cli) == 2


def test_a_write_in_the_past_shows_while_mounted(tmp_path, mount):
    """A fragment written while mounted, at a timestamp before T, joins as_of/<T>/ at once, and the
    timeline gains its time."""
    import numpy as np
    import tiledb
    path = tmp_path / "a"
    base = history.build_history(path)
    mnt = mount(path)
    t = base + 35
    before = run("ls", mnt / "as_of" / str(t) / "fragments").split()
    reader_before = run("cat", mnt / "as_of" / str(t) / "reader.yaml")
    with tiledb.open(str(path), "w", timestamp=base + 33) as A:
        A[np.array([77], dtype=np.int32)] = {"v": np.array([33], dtype=np.int32),
                                             "extra": np.array([330], dtype=np.int32)}
    after = run("ls", mnt / "as_of" / str(t) / "fragments").split()
    (new,) = set(after) - set(before)
    assert new.startswith(f"__{base + 33}_{base + 33}_") and set(before) < set(after)
    reader_after = yaml.safe_load(run("cat", mnt / "as_of" / str(t) / "reader.yaml"))
    assert reader_after["fragments_read"] == sorted(after) != yaml.safe_load(reader_before)["fragments_read"]
    assert os.stat(mnt / "as_of" / str(t) / "reader.yaml").st_size == len(run("cat", mnt / "as_of" / str(t) / "reader.yaml"))
    assert str(base + 33) in run("ls", mnt / "as_of").split()
    assert history.isolated_read(str(path), after, t) == history.read_at(str(path), t)
