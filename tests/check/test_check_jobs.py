"""`tdbfs check --jobs N` (tdbfs/check/work.py, tdbfs/check/pool.py): the same report whatever N.

Real arrays written by tiledb-py, pristine and damaged (tests/mutations.py, tests/damage.py), a
group, an encrypted array and the oldest format are checked in-process (`--jobs 1`) and by pools of
2 and 3 worker processes, with fragments whole and split into tile ranges; the JSON document, the
problem lines and the summary must be the same bytes. Then: a worker's cache stays under its
bound, a worker that dies is one problem and the rest is still checked, and the command line.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tiledb

import arrays
from tdbfs.check import work as check_work
from tdbfs.check.check import SPLIT_BYTES, check_array
from tdbfs.check.pool import ProcessPool
from tdbfs.check.work import HEAD, MIN_WORKER_CACHE_MB, TILES, StoreSpec, new_run, plan, run_task
from tdbfs.frontend.common import open_store

CLI = [sys.executable, "-m", "tdbfs", "check"]
HERE = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def pools():
    with ProcessPool(2) as two, ProcessPool(3) as three:
        yield {2: two, 3: three}


def _report(result) -> str:
    """Everything `tdbfs check` prints, in both forms."""
    return "\n".join([json.dumps(result.to_dict(), indent=1, default=str)]
                     + [p.line() for p in result.problems] + [result.summary()])


def _check(path, executor=None, split: int = SPLIT_BYTES, key=None) -> str:
    store = open_store(str(path), 64, key=key)
    spec = None
    if executor is not None:
        spec = StoreSpec(str(path), MIN_WORKER_CACHE_MB, key=key.reveal() if key is not None else None,
                         run=new_run())
    return _report(check_array(store, None, executor, spec, split))


def assert_same(path, pools, key=None, splits=(SPLIT_BYTES, 1)) -> dict:
    """The --jobs 1 report equals the report of every pool, fragments whole and split (1: every field's
    every tile its own task); returns the --jobs 1 JSON document."""
    one = _check(path, key=key)
    for n, pool in pools.items():
        for split in splits:
            other = _check(path, pool, split, key)
            assert other == one, f"--jobs {n}, split {split}"
    return json.loads(one[:one.index("\n}") + 2])


# -- identity ----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind,options", [
    ("dense", dict(ndim=2, tiles_per_dim=3)),
    ("sparse", dict(ndim=1, cells=10, capacity=3, n_fragments=3)),
    ("sparse", dict(ndim=2, dim_kinds=["string", "int"], cells=8, capacity=3)),
    ("filters", dict(filter="ZSTD+CHECKSUM_SHA256", sparse=True, ndim=2, cells=9, capacity=4)),
    ("consolidated", dict(sparse=True, n_fragments=2, cells=5, fragment_meta=True)),
    ("deletes", dict(n_fragments=2)),
])
def test_pristine_arrays_report_the_same(tmp_path, pools, kind, options):
    built = arrays.make_array(tmp_path, kind, **options)
    doc = assert_same(built.path, pools)
    assert doc["errors"] == 0 and doc["counts"]["fragments"] >= 1 and doc["counts"]["tiles"] > 0


@pytest.fixture(scope="module")
def mutation_base(tmp_path_factory):
    from mutations import fragment_mutations
    built = arrays.make_array(tmp_path_factory.mktemp("jobs_mutations"), "sparse", ndim=1, cells=10, capacity=3)
    return str(built.path), {m.name: m for m in fragment_mutations(str(built.path))}


def _mutation_names():
    from mutations import NAMES
    return NAMES


@pytest.mark.parametrize("name", _mutation_names())
def test_damaged_arrays_report_the_same(mutation_base, pools, tmp_path, name):
    from mutations import copy_array
    path, muts = mutation_base
    dst = copy_array(path, str(tmp_path / "damaged"))
    muts[name].apply(dst)
    doc = assert_same(dst, pools)
    assert doc["problems"], "the damage is reported"


@pytest.fixture(scope="module")
def damage_pristine(tmp_path_factory):
    import damage
    return damage.build_pristine(tmp_path_factory.mktemp("jobs_pristine"))


@pytest.mark.parametrize("seed", range(0, 120, 7))
def test_random_damage_reports_the_same(damage_pristine, pools, tmp_path, seed):
    import damage
    d = damage.plan(seed, damage_pristine)
    root = damage.copy_pristine(damage_pristine[d.array], tmp_path / "copy")
    damage.apply(d, root, tmp_path / "outside")
    try:
        open_store(str(root), 64)
    except Exception:  # noqa: BLE001 -- damage that leaves no array: check cannot run at all (exit 2)
        pytest.skip(f"{d}: not an array any more")
    assert_same(root, pools)


def test_a_group_reports_the_same(tmp_path, pools):
    import groups
    built = groups.build_nested(tmp_path)
    doc = assert_same(built.path, pools)
    assert sorted(m["array"] for m in doc["members"]) == sorted(["d", "s", "mid", str(built.arrays["ext"])])
    assert doc["counts"]["fragments"] == 2 * len(built.arrays) and doc["counts"]["tiles"] > 0   # 2 each


def test_an_encrypted_array_reports_the_same_with_the_key_in_the_workers(tmp_path, pools):
    from tdbfs.format.reversers.keys import parse_key
    built = arrays.make_array(tmp_path, "encrypted", name="sparse")
    key = parse_key(arrays.ENCRYPTION_KEY.encode(), "test")
    doc = assert_same(built.path, pools, key=key)
    assert doc["clean"] and doc["counts"]["tiles"] > 0   # without the key every tile would be a problem


@pytest.mark.parametrize("version", ["v01", "v09", "v22"])
def test_old_formats_report_the_same(tmp_path, pools, version):
    src = HERE / "data" / "backcompat_arrays" / version
    arrays_in = sorted(p.parent for p in src.rglob("__fragments")) or \
        sorted(p.parent for p in src.rglob("__array_schema.tdb"))
    assert arrays_in, f"no array under {src}"
    for path in arrays_in:
        doc = assert_same(path, pools)
        assert doc["counts"]["fragments"] >= 1


def test_a_0x_array_reports_the_same(tmp_path, pools):
    import legacy0x_arrays as Z
    if Z.wheel_library_path() is None:
        pytest.skip("genomicsdb==0.1.6 (its TileDB 0.x library) is not installed")
    (tmp_path / "zero").mkdir()
    corpus = Z.load_corpus(tmp_path / "zero")
    docs = {name: assert_same(path, pools) for name, (path, _spec) in sorted(corpus["arrays"].items())}
    assert docs["sparse_gzip"]["clean"] and docs["sparse_gzip"]["counts"]["tiles"] > 0
    assert not docs["dense_interrupted"]["clean"]


def _many_tiles(path: Path, cells: int = 1 << 16, extent: int = 1 << 10, fragments: int = 2) -> Path:
    """A sparse array whose fragments hold many small tiles of a fixed, a var-sized and a nullable field."""
    dom = tiledb.Domain(tiledb.Dim("d0", domain=(0, cells * fragments), tile=extent, dtype=np.int64))
    zstd = tiledb.FilterList([tiledb.ZstdFilter(level=1)])
    schema = tiledb.ArraySchema(domain=dom, sparse=True, capacity=extent, attrs=[
        tiledb.Attr("a0", dtype=np.int32, filters=zstd),
        tiledb.Attr("a1", dtype=str, var=True, filters=zstd),
        tiledb.Attr("a2", dtype=np.float64, nullable=True, filters=zstd)])
    tiledb.Array.create(str(path), schema)
    for f in range(fragments):
        coords = np.arange(f * cells, (f + 1) * cells, dtype=np.int64)
        with tiledb.open(str(path), "w") as a:
            a[coords] = {"a0": (coords % 977).astype(np.int32), "a1": np.array([f"v{c % 91}" for c in coords], object),
                         "a2": np.ma.masked_array((coords * 0.5).astype(np.float64), mask=coords % 5 == 0)}
    return path


def test_a_big_fragment_split_into_tile_ranges_reports_the_same(tmp_path, pools):
    """Tiles damaged in two fields and two streams of one fragment: with the fragment split into many
    tile ranges, the problems still come in --jobs 1's order (field by field, stream by stream)."""
    from mutations import garbage
    path = _many_tiles(tmp_path / "big")
    store = open_store(str(path), 64)
    frag = store.fragments()[0]
    a0, a1 = frag.field_by_stem("a0"), frag.field_by_stem("a1")
    for field, stream, k in [(a0, "data", 40), (a0, "data", 3), (a1, "var", 17), (a1, "data", 50), (a0, "data", 60)]:
        loc = frag.location(field, k, stream)
        with open(path / loc.file, "r+b") as f:
            f.seek(loc.offset + 8 + 12)   # past the chunk count and the first chunk's header: the ZSTD frame
            f.write(garbage(16, seed=k))
    split = 8 << 10
    tasks = plan(open_store(str(path), 64), StoreSpec(str(path), 64), split)
    heads = [t for t in tasks if t.part == HEAD]
    assert len(heads) == 2 and len([t for t in tasks if t.part == TILES and t.stem == "a0"]) > 4
    doc = assert_same(path, pools, splits=(split, 1))
    tiles = [(p["file"].rsplit("/", 1)[-1], p["structure"]) for p in doc["problems"]]
    assert tiles == [("a0.tdb", "tile 3"), ("a0.tdb", "tile 40"), ("a0.tdb", "tile 60"), ("a1.tdb", "tile 50"),
                     ("a1_var.tdb", "tile 17")], tiles


# -- memory ------------------------------------------------------------------------------------

def _big_dense(path: Path, cells: int = 12 << 20, extent: int = 1 << 18) -> Path:
    """A dense array of 48 MiB decoded (int32, ZSTD), in 1 MiB tiles over 3 fragments."""
    dom = tiledb.Domain(tiledb.Dim("d0", domain=(0, cells - 1), tile=extent, dtype=np.int64))
    schema = tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("a0", dtype=np.int32, filters=tiledb.FilterList([tiledb.ZstdFilter(level=1)]))])
    tiledb.Array.create(str(path), schema)
    third = cells // 3
    for f in range(3):
        with tiledb.open(str(path), "w") as a:
            a[f * third:(f + 1) * third] = (np.arange(f * third, (f + 1) * third) % 1013).astype(np.int32)
    return path


@pytest.fixture(scope="module")
def big_dense(tmp_path_factory):
    return _big_dense(tmp_path_factory.mktemp("jobs_big") / "dense")


def test_a_workers_cache_stays_under_its_bound(big_dense):
    """A worker's store gets the spec's cache_mb: after checking 48 MiB of tiles its cache holds less."""
    spec = StoreSpec(str(big_dense), MIN_WORKER_CACHE_MB, run=new_run())
    tasks = plan(open_store(str(big_dense), 64), spec, 4 << 20)
    decoded = 0
    for task in tasks:
        result = run_task(spec, task)
        assert not result.fragment_problems and not result.store_problems
        decoded += result.counts.get("tiles", 0) << 20
    cache = check_work._store[1].cache
    assert decoded == 48 << 20 and cache.capacity == MIN_WORKER_CACHE_MB << 20
    assert 0 < cache.size_bytes <= MIN_WORKER_CACHE_MB << 20


def _cache_of_worker(spec, task):
    """run_task, then what the worker's store cache holds (bound, bytes), from the worker's own process."""
    result = run_task(spec, task)
    cache = check_work._store[1].cache
    return result, cache.capacity, cache.size_bytes, os.getpid()


def test_worker_processes_keep_their_bound(big_dense, pools):
    spec = StoreSpec(str(big_dense), MIN_WORKER_CACHE_MB, run=new_run())
    tasks = plan(open_store(str(big_dense), 64), spec, 4 << 20)
    seen = list(pools[2].run(_cache_of_worker, spec, tasks))
    assert sorted(r.index for r, *_ in seen) == list(range(len(tasks)))
    assert sum(r.counts.get("tiles", 0) for r, *_ in seen) == 48
    assert len({pid for *_, pid in seen}) == 2 and os.getpid() not in {pid for *_, pid in seen}
    assert all(cap == MIN_WORKER_CACHE_MB << 20 and 0 <= held <= cap for _, cap, held, _ in seen)


def _store_before_the_task(spec, task):
    """Which array this worker's store was opened from before the task came (pickled spec), and its pid."""
    return (check_work._store[0] if check_work._store is not None else None), os.getpid()


def test_a_pool_given_the_spec_opens_the_array_in_every_worker_before_the_first_task(tmp_path):
    """`tdbfs check --jobs N` starts its workers with the spec, so they import and open the array while
    the parent plans; the report is still --jobs 1's."""
    built = arrays.make_array(tmp_path, "sparse", ndim=1, cells=10, capacity=3, n_fragments=3)
    spec = StoreSpec(str(built.path), MIN_WORKER_CACHE_MB, run=new_run())
    with ProcessPool(2, spec) as pool:
        tasks = plan(open_store(str(built.path), 64), spec, SPLIT_BYTES)
        seen = list(pool.run(_store_before_the_task, spec, tasks * 2))
        assert os.getpid() not in {pid for _, pid in seen}
        assert [opened for opened, _ in seen] == [pickle.dumps(spec)] * 6
        assert _check(built.path, pool) == _check(built.path)
    assert "clean (3 fragments" in _check(built.path)


# -- a worker that dies --------------------------------------------------------------------------

def _killed_on_second_fragment(spec, task):
    if task.index == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return run_task(spec, task)


def _out_of_memory_on_first_fragment(spec, task):
    if task.index == 0:
        raise MemoryError("no room for the tile")
    return run_task(spec, task)


class _Failing:
    """A real pool whose workers run `fn` (which dies on one task) instead of run_task."""

    def __init__(self, pool, fn):
        self.pool, self.fn = pool, fn

    def run(self, _fn, spec, tasks):
        return self.pool.run(self.fn, spec, tasks)


@pytest.mark.parametrize("fn,why", [(_killed_on_second_fragment, "its process was killed by SIGKILL (out of memory?)"),
                                    (_out_of_memory_on_first_fragment, "MemoryError: no room for the tile")])
def test_a_worker_that_dies_is_one_problem_and_the_rest_is_checked(tmp_path, pools, fn, why):
    built = arrays.make_array(tmp_path, "sparse", ndim=1, cells=10, capacity=3, n_fragments=3)
    store = open_store(str(built.path), 64)
    frags = store.fragment_paths()
    victim = frags[1] if fn is _killed_on_second_fragment else frags[0]
    spec = StoreSpec(str(built.path), MIN_WORKER_CACHE_MB, run=new_run())
    result = check_array(store, None, _Failing(pools[2], fn), spec)
    assert [p.line() for p in result.problems] == [f"{victim}:-: check: worker died while checking {victim}: {why}"]
    assert result.counts["fragments"] == 2 and not result.clean
    clean = check_array(open_store(str(built.path), 64))
    assert clean.clean and result.counts["tiles"] == clean.counts["tiles"] * 2 // 3
    # the pool still works after it broke
    assert _check(built.path, pools[2]) == _report(clean)


# -- the command line ---------------------------------------------------------------------------

def _cli(*args, **kw):
    return subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True, timeout=300, **kw)


def test_cli_output_is_the_same_for_any_jobs(mutation_base, tmp_path):
    from mutations import copy_array
    path, muts = mutation_base
    dst = copy_array(path, str(tmp_path / "damaged"))
    muts["garbage_compressed_bytes"].apply(dst)
    muts["delete_var_file"].apply(dst)
    one, two = _cli("--jobs", 1, dst), _cli("--jobs", 2, dst)
    assert one.returncode == two.returncode == 1
    assert two.stdout == one.stdout and "a0.tdb" in one.stdout and "_var.tdb" in one.stdout
    one, three = _cli("--json", "-j", 1, dst), _cli("--json", "-j", 3, dst)
    assert three.stdout == one.stdout and json.loads(one.stdout)["errors"] >= 2
    assert "Traceback" not in two.stderr + three.stderr


@pytest.mark.parametrize("jobs", ["0", "-2", "many"])
def test_cli_jobs_must_be_positive(mutation_base, jobs):
    res = _cli("--jobs", jobs, mutation_base[0])
    assert res.returncode == 2 and "--jobs" in res.stderr and "Traceback" not in res.stderr


def test_cli_dask_and_jobs_are_exclusive(mutation_base):
    res = _cli("--jobs", 2, "--dask", "tcp://127.0.0.1:1", mutation_base[0])
    assert res.returncode == 2 and "exclusive" in res.stderr


def test_cli_progress_bar_counts_fragments_tiles_and_bytes(tmp_path):
    import re

    from terminal import run_with_terminal_stderr
    built = arrays.make_array(tmp_path, "sparse", ndim=1, cells=10, capacity=3, n_fragments=3)
    doc = json.loads(_cli("--json", "-j", 1, built.path).stdout)
    res, seen = run_with_terminal_stderr(CLI + ["-j", "2", str(built.path)], timeout=300)
    assert res.returncode == 0 and b"#" not in res.stdout
    last = seen.decode().split("\r\x1b[K")[-2]   # the last bar drawn, before the line is cleared
    m = re.fullmatch(r"\[#{30}\] 3/3 fragments, (\d+) tiles, [\d.]+ KiB  done", last)
    assert m, last
    assert int(m.group(1)) == doc["counts"]["tiles"]


def test_default_jobs_every_core_unless_workers_cannot_pay_for_their_start(tmp_path, monkeypatch):
    import tdbfs.cli.check_command as check_command
    built = arrays.make_array(tmp_path, "sparse", ndim=1, cells=10, capacity=3, n_fragments=3)
    store = open_store(str(built.path), 64)
    assert check_command._default_jobs(store) == 1
    size = sum(f.stat().st_size for f in (built.path / "__fragments").rglob("*") if f.is_file())
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(check_command, "WORKER_START_BYTES", (size + 1) // 2)  # two workers win past >= size
    assert check_command._default_jobs(store) == 1
    monkeypatch.setattr(check_command, "WORKER_START_BYTES", size // 2 - 1)
    assert check_command._default_jobs(store) == 2
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert check_command._default_jobs(store) == 1
