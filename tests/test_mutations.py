"""The mutation suite: real arrays from tiledb-py, damaged one way at a time (tests/mutations.py).

For each mutation: the whole view is read in-process with a time limit; nothing but ViewError
(EIO) escapes; every view outside what the damage touches is byte-identical to the undamaged
copy's; the damaged view reads as EIO with a problem naming the damaged file and an offset at
or near the damage; and `tdbfs check` reports it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
import tiledb

import arrays
from mutations import EIO, NAMES, SUMMARIES, SUMMARY_FOLDERS, copy_array, fragment_mutations, time_limit, walk
from tdbfs.check.check import check_array
from tdbfs.problem import Problem
from tdbfs.store import ArrayStore

TIME_LIMIT = 10.0
BYTE_MAPS = ("layout", "hex/")   # item 3's byte maps of a fragment's files


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A sparse array (a0 int32 ZSTD, a1 var string, a2 nullable float64; 4 tiles per fragment,
    2 fragments), its undamaged view, and its mutations by name."""
    built = arrays.make_array(tmp_path_factory.mktemp("mutation_base"), "sparse", ndim=1, cells=10, capacity=3)
    path = str(built.path)
    view, _ = walk(path)
    muts = {m.name: m for m in fragment_mutations(path)}
    assert set(muts) == set(NAMES)
    return path, view, muts


def _damaged(base, name, tmp_path):
    path, clean, muts = base
    m = muts[name]
    dst = copy_array(path, str(tmp_path / "damaged"))
    m.apply(dst)
    return m, dst, clean


def _near(problems, file, near):
    lo, hi = near
    return [p for p in problems if p.file == file and p.offset is not None and lo <= p.offset <= hi
            and not p.within]


@pytest.mark.parametrize("name", NAMES)
def test_mutation(base, name, tmp_path):
    m, dst, clean = _damaged(base, name, tmp_path)
    with time_limit(TIME_LIMIT):
        view, store = walk(dst)           # any exception but ViewError fails here

    # Views that do not depend on the damaged bytes are byte-identical.
    raw = f"{m.fragment}/raw/{os.path.basename(m.file)}"   # the damaged file itself, shown as stored
    # Byte maps of the damaged fragment's files (layout views) map the damaged bytes themselves.
    maps = tuple(f"{m.fragment}/{d}" for d in BYTE_MAPS) if m.fragment else ()
    # A row of cells/ holds every field of the fragment, so damage to any one changes them.
    maps += (f"{m.fragment}/cells",) if m.fragment else ()
    # ... and so do the byte maps of a damaged array-level file (schema/layout/<file>.csv, .../hex/<file>.txt)
    base_name = os.path.basename(m.file)
    own_maps = (f"/layout/{base_name}.csv", f"/hex/{base_name}.txt")
    unchanged = [p for p in clean if p not in SUMMARIES and p != raw and not p.endswith(own_maps)
                 and not any(p.startswith(a) for a in m.affected + maps + SUMMARY_FOLDERS)]
    differ = [p for p in unchanged if view.get(p) != clean[p]]
    assert not differ, f"{name}: views changed that do not depend on the damage: {differ[:5]}"
    if m.affected != ("",):
        assert len(unchanged) > 20, "the mutation should leave most of the tree alone"
        other = [p for p in unchanged if p.startswith("fragments/") and not p.startswith(m.fragment or "-")]
        assert other or not m.fragment, "the other fragment is compared"

    # The damaged view is EIO, with a problem at or near the damaged offset.
    problems = store.all_problems()
    if m.broken:
        assert view.get(m.broken) == EIO, f"{name}: {m.broken} should read as EIO"
    if m.near and m.broken:
        assert _near(problems, m.file, m.near), f"{name}: no problem in {m.file} at {m.near}: {problems}"
    if m.fragment and m.broken and m.broken.startswith(m.fragment) and m.near:
        summary = view.get(m.fragment + "/fragment.yaml")
        assert summary != EIO and b"problems:" in summary and m.file.split("/")[-1].encode() in summary

    # tdbfs check reports it.
    with time_limit(TIME_LIMIT):
        result = check_array(ArrayStore(dst))
    target = m.check_file or m.file
    named = [p for p in result.problems if p.file == target or p.file.startswith(target + "/")]
    assert named, f"{name}: check does not name {target}: {[p.line() for p in result.problems]}"
    if "warning" in m.tags:
        assert result.clean and all(p.severity == "warning" for p in named)
    else:
        assert not result.clean and any(p.severity == "error" for p in named)
    if m.near:
        assert _near(result.problems, m.file, m.near)


def test_undamaged_copy_checks_clean(base, tmp_path):
    path, clean, _ = base
    result = check_array(ArrayStore(path))
    assert result.clean and not result.problems, [p.line() for p in result.problems]
    assert result.counts["fragments"] == 2 and result.counts["tiles"] >= 2 * 4 * 5


def test_overwritten_metadata_tiledb_refuses_tdbfs_shows_the_rest(base, tmp_path):
    """The issue's case: TileDB refuses the whole array, tdbfs shows the other fragment unchanged."""
    m, dst, clean = _damaged(base, "overwritten_fragment_metadata", tmp_path)
    with pytest.raises(tiledb.TileDBError):
        with tiledb.open(dst) as A:
            A[:]
    view, store = walk(dst)
    other = [p for p in clean if p.startswith("fragments/") and not p.startswith(m.fragment)]
    assert any(p.endswith("tile_0.bin") for p in other)
    assert all(view[p] == clean[p] for p in other)
    # The other fragment's cells are what TileDB read from it before the damage.
    first_tile = next(p for p in sorted(other) if p.endswith("attrs/a0/tile_0.bin"))
    assert np.frombuffer(view[first_tile], "<i4").size == 3
    assert view[m.fragment + "/footer.yaml"] == EIO


def test_cli_check_exit_codes_and_json(base, tmp_path):
    m, dst, _ = _damaged(base, "huge_chunk_filtered_length", tmp_path)
    cmd = [sys.executable, "-m", "tdbfs", "check"]
    res = subprocess.run(cmd + ["--json", dst], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    assert not doc["clean"] and doc["errors"] >= 1
    assert _near([Problem(**p) for p in doc["problems"]], m.file, m.near)
    res = subprocess.run(cmd + [dst], capture_output=True, text=True, timeout=60)
    lines = res.stdout.splitlines()
    assert res.returncode == 1 and any(l.startswith(m.file + ":") for l in lines) and "problems" in lines[-1]
    assert res.stderr == ""                       # no progress bar when stderr is not a terminal
    res = subprocess.run(cmd + [base[0]], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "clean" in res.stdout
    res = subprocess.run(cmd + [str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "not a TileDB array" in res.stderr


def test_huge_length_fields_allocate_nothing_big(base, tmp_path):
    """Length fields claiming 2^64 bytes are checked against the file before anything is allocated."""
    path, _, muts = base
    dst = copy_array(path, str(tmp_path / "a"))
    for name in ("huge_gtile_persisted_size", "huge_chunk_unfiltered_length", "huge_tile_chunk_count"):
        muts[name].apply(dst)
    walk(dst)   # warm imports so that the measure is about decoding
    tracemalloc.start()
    try:
        walk(dst)
        check_array(ArrayStore(dst))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"peak {peak} bytes"


def test_fuse_mount_of_damaged_array_keeps_serving(base, tmp_path, mount):
    m, dst, clean = _damaged(base, "overwritten_fragment_metadata", tmp_path)
    mnt = mount(dst)
    out = subprocess.run(["find", str(mnt)], capture_output=True, text=True, timeout=60)
    # find lists everything it can; the damaged fragment's folders that cannot be built say EIO.
    assert m.fragment.split("/")[-1] in out.stdout and "attrs/a0/tile_0.bin" in out.stdout
    assert all("Input/output error" in line for line in out.stderr.splitlines())
    bad = subprocess.run(["cat", str(mnt / m.fragment / "footer.yaml")], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "Input/output error" in bad.stderr
    other = next(p for p in sorted(clean) if p.startswith("fragments/") and not p.startswith(m.fragment)
                 and p.endswith("attrs/a0/tile_0.bin"))
    good = subprocess.run(["cat", str(mnt / other)], capture_output=True, timeout=30)
    assert good.returncode == 0 and good.stdout == clean[other]
    summary = (mnt / "array.yaml").read_text()
    assert "__fragment_metadata.tdb" in summary and "problems" in summary
