"""The digests of many fragments made in worker processes (store/digest_pool.py).

* a digest made in a worker equals the one the daemon makes itself, and the summaries it feeds are the
  same bytes with workers as without;
* a fragment with anything to say (damaged metadata, a stray file) or not committed is never taken from a
  worker: the daemon digests it, and records its problems, as it would without workers;
* too few fragments, an object store's array, or workers that cannot start: the daemon digests alone;
* through FUSE, `tdbfs mount` (every core) and `tdbfs mount --jobs 1` serve the same summaries of 1,200
  fragments, the first having digested them in worker processes, which end with the mount.
"""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

import arrays
import tdbfs.store.digest_pool as digest_pool
from tdbfs.store import ArrayStore
from tdbfs.store.fragment_digest import fragment_digest
from tdbfs.views.tree import build_root

from mounting import mounted
from test_many_fragments import add_fragment, age, make_fragments

SUMMARIES = ("array.yaml", "stats.csv", "fragments.svg")


@pytest.fixture
def pool(monkeypatch):
    """Workers from 2 fragments on, 2 of them; the daemon alone again after the test."""
    monkeypatch.setattr(digest_pool, "POOL_MIN_FRAGMENTS", 2)
    monkeypatch.setattr(digest_pool, "CHUNK", 3)
    digest_pool.enable(2)
    yield
    digest_pool.enable(1)


def _render(path, names=SUMMARIES) -> dict[str, bytes]:
    root = build_root(ArrayStore(str(path)))
    return {n: root.child(n).read(0, 1 << 30) for n in names}


def _ahead(store) -> int:
    with store.one_pass(), store.digests.render():
        return digest_pool.digests_ahead(store, store.fragment_paths())


def test_a_worker_makes_the_digest_the_daemon_makes(tmp_path, pool):
    path = tmp_path / "arr"
    make_fragments(path, 9)
    store = ArrayStore(str(path))
    assert _ahead(store) == 9
    mine = ArrayStore(str(path))
    for rel in store.fragment_paths():
        got = store.digests.get(rel)
        assert got is not None, rel
        assert got == fragment_digest(mine, rel), rel
    # interned as the daemon's own are: 9 fragments of one schema share their names
    firsts = [store.digests.get(rel).stats[0] for rel in store.fragment_paths()]
    assert len({id(s.field) for s in firsts}) == 1 and len({id(s.filters) for s in firsts}) == 1


def test_the_summaries_are_the_same_bytes_with_workers(tmp_path, pool):
    path = tmp_path / "arr"
    make_fragments(path, 12)
    with_workers = _render(path)
    digest_pool.enable(1)
    alone = _render(path)
    assert with_workers == alone
    assert b"fragments: 12" in alone["array.yaml"]
    assert alone["stats.csv"].count(b"\nfield,") == 12


KINDS = {
    "sparse_3d_mixed": ("sparse", dict(ndim=3, dim_kinds=["int", "float", "datetime"], cells=12, capacity=5,
                                       n_fragments=4)),
    "sparse_string_dim": ("sparse", dict(ndim=2, dim_kinds=["string", "int"], cells=8, capacity=3, n_fragments=3)),
    "dense_2d": ("dense", dict(ndim=2)),
    "all_dtypes_sparse": ("all_dtypes", dict(sparse=True)),
    "consolidated_sparse": ("consolidated", dict(sparse=True)),
    "schema_evolution": ("schema_evolution", dict()),
    "encrypted": ("encrypted", dict()),
}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_kind_of_array_summarizes_the_same_with_workers(tmp_path, pool, name):
    from tdbfs.format.reversers.keys import parse_key
    from tdbfs.store.open_array import open_array

    kind, options = KINDS[name]
    built = arrays.make_array(tmp_path, kind, name=name, **options)
    key = parse_key(arrays.ENCRYPTION_KEY.encode(), "test") if kind == "encrypted" else None

    def opened():
        return open_array(str(built.path), 64 << 20, key)

    def render():
        root = build_root(opened())
        return {n: root.child(n).read(0, 1 << 30) for n in SUMMARIES}

    for t in range(3 - len(os.listdir(built.path / "__fragments"))):
        add_fragment(built.path, 10 + t)   # a copy of a fragment under another name: two or more
    age(built.path)
    store = opened()
    n = len(store.fragment_paths())
    # workers digest the committed fragments that decode whole and record nothing: with the key, for the
    # encrypted array (without it no footer decodes, and no digest would come back)
    assert 1 <= _ahead(store) <= n
    with_workers = render()
    digest_pool.enable(1)
    alone = render()
    assert with_workers == alone
    assert f"fragments: {n}".encode() in alone["array.yaml"]


def test_a_fragment_with_something_to_say_is_digested_by_the_daemon(tmp_path, pool):
    path = tmp_path / "arr"
    names = make_fragments(path, 8)
    frags = path / "__fragments"
    # damaged metadata, a stray file, no commit: none of them comes from a worker
    meta = frags / names[1] / "__fragment_metadata.tdb"
    data = meta.read_bytes()
    meta.unlink()   # hard-linked to the other fragments' file: a copy of its own, then cut short
    meta.write_bytes(data[: len(data) // 2])
    (frags / names[2] / "stray.txt").write_bytes(b"not TileDB's")
    (path / "__commits" / f"{names[3]}.wrt").unlink()
    age(path)
    store = ArrayStore(str(path))
    kept = _ahead(store)
    assert kept == 5
    for name in names[1:4]:
        assert store.digests.get(f"__fragments/{name}") is None, name
    with_workers = _render(path)
    digest_pool.enable(1)
    alone = _render(path)
    assert with_workers == alone
    yaml_text = alone["array.yaml"].decode()
    assert "stray.txt" in yaml_text and names[1] in yaml_text


def test_the_daemon_digests_alone_when_workers_would_not_pay_or_cannot_start(tmp_path, pool, monkeypatch, caplog):
    path = tmp_path / "arr"
    make_fragments(path, 6)
    monkeypatch.setattr(digest_pool, "POOL_MIN_FRAGMENTS", 7)
    assert _ahead(ArrayStore(str(path))) == 0   # too few
    monkeypatch.setattr(digest_pool, "POOL_MIN_FRAGMENTS", 2)
    digest_pool.enable(1)
    assert _ahead(ArrayStore(str(path))) == 0   # --jobs 1
    digest_pool.enable(2)

    def no_processes(workers):
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(digest_pool, "_process_pool", no_processes)
    store = ArrayStore(str(path))
    assert _ahead(store) == 0
    assert "digesting them here" in caplog.text
    assert len(store.digests) == 0
    digest_pool.enable(1)
    alone = _render(path)
    digest_pool.enable(2)
    assert _render(path) == alone   # the loop digested every fragment itself


def _forkservers() -> set[int]:
    out = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"multiprocessing.forkserver" in f.read():
                        out.add(int(pid))
            except OSError:
                pass
    return out


def test_a_mount_digests_many_fragments_in_workers_and_serves_the_same_summaries(tmp_path):
    path = tmp_path / "arr"
    make_fragments(path, 1200)
    before = _forkservers()
    got = {}
    for jobs in ("default", "1"):
        log = tmp_path / f"daemon-{jobs}.log"
        extra = ["--log", str(log)] + ([] if jobs == "default" else ["--jobs", jobs])
        with mounted(path, extra_args=extra) as mnt:
            got[jobs] = {n: subprocess.run(["cat", str(mnt / n)], capture_output=True, check=True).stdout
                         for n in SUMMARIES}
        text = log.read_text()
        if jobs == "default" and (os.cpu_count() or 1) > 1:
            assert re.search(r"1200 fragments digested in [2-9]\d* worker processes", text), text
        else:
            assert "worker processes" not in text, text
    assert got["default"] == got["1"]
    assert b"fragments: 1200" in got["1"]["array.yaml"]
    assert got["1"]["stats.csv"].count(b"\nfield,") == 1200
    # the workers' fork server ends with its daemon
    for _ in range(100):
        if not _forkservers() - before:
            break
        time.sleep(0.1)
    assert not _forkservers() - before


@pytest.mark.parametrize("cores, jobs", [(None, 1), (1, 1), (2, 2), (8, 8), (64, 8)])
def test_a_mount_starts_a_worker_per_core_up_to_eight(monkeypatch, cores, jobs):
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert digest_pool.default_jobs() == jobs


def test_tdbfs_cat_renders_with_workers_as_the_mount_does(tmp_path, monkeypatch, capsysbinary):
    from tdbfs.cli.main import main
    from tdbfs.store import fragment_overview

    path = tmp_path / "arr"
    make_fragments(path, 1000)
    monkeypatch.setattr(digest_pool, "default_jobs", lambda: 2)
    made = []
    real = fragment_overview.digests_ahead
    monkeypatch.setattr(fragment_overview, "digests_ahead", lambda store, rels: made.append(real(store, rels)))
    try:
        assert main(["cat", str(path), "array.yaml"]) == 0
    finally:
        digest_pool.enable(1)
    with_workers = capsysbinary.readouterr().out
    assert made[0] == 1000 and sum(made) == 1000   # every digest from the workers, once
    assert b"fragments: 1000" in with_workers
    assert with_workers == _render(path, ("array.yaml",))["array.yaml"]
