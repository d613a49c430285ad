"""Seeded damage of real arrays (tests/damage.py): a few hundred damaged copies, each mounted,
walked and read in full, and checked with `tdbfs check`.

For every copy (see damage.run_copy / damage._judge_walk):
- no operation hangs (each stat, readdir, readlink and read returns within damage.OP_TIMEOUT s,
  in a child process that is killed otherwise), and `tdbfs check` returns too;
- only EIO or ENOENT errors; the daemon is alive afterwards (`ls MNT` answers) and its peak RSS
  (VmHWM) stays under damage.RSS_BOUND;
- every file's st_size equals the bytes read; every *.yaml parses, every *.csv has one column count;
- the marker of the files outside the array never appears in any byte, name or link read;
- every EIO is explained by a problem of array.yaml (the fragment's path or a file in it, or the
  array-level file of schema/, commits/, metadata/, fragment_meta/ views);
- every problem has file, structure, offset, message, severity (error|warning);
- listing-level damage (deleted, extra, symlinked, FIFO and device files, truncated data files) is in
  the FIRST read of array.yaml and of the fragment's fragment.yaml;
- the array (and the files outside it) are byte-identical before and after, by lstat and hash,
  without ever opening a FIFO or a device;
- array.yaml's problems after the walk are exactly `tdbfs check --json`'s.

Failures of all copies of a batch are reported together, each with its seed and damage; reproduce
one with `scripts/damage --seed S --count 1`.

Environment: TDBFS_DAMAGE_COUNT (default 270 copies), TDBFS_DAMAGE_SEED (first seed, default 0),
TDBFS_DAMAGE_WORKERS (copies at once, default 4).
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

import damage

COUNT = int(os.environ.get("TDBFS_DAMAGE_COUNT", "270"))
SEED0 = int(os.environ.get("TDBFS_DAMAGE_SEED", "0"))
WORKERS = int(os.environ.get("TDBFS_DAMAGE_WORKERS", "4"))
BATCH = 30      # a multiple of len(damage.FAMILIES): every batch has every family
BATCHES = [(s, min(s + BATCH, SEED0 + COUNT)) for s in range(SEED0, SEED0 + COUNT, BATCH)]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return damage.build_pristine(tmp_path_factory.mktemp("damage_pristine"))


def test_generator_covers_every_family_array_and_file_kind(pristine):
    plans = [damage.plan(s, pristine) for s in range(SEED0, SEED0 + COUNT)]
    assert Counter(d.family for d in plans).keys() == set(damage.FAMILIES)
    assert {d.array for d in plans} == set(damage.PRISTINE_SPECS)
    kinds = {d.kind for d in plans if d.family in damage.BYTE_FAMILIES}
    want = {"schema", "enumeration", "fragment_metadata", "data", "var", "validity", "commit_del", "commit_con",
            "commit_ign", "commit_vac", "meta", "meta_vac", "fragment_meta"}
    if COUNT >= 270:
        assert want <= kinds, f"byte damage never hits {sorted(want - kinds)}"
        targets = {d.action.get("target") for d in plans if d.family == "symlink"}
        assert {"secret_file", "secret_folder", "/etc", "/dev/zero", "fragment_copy_with_secret"} <= targets
        assert {d.action.get("minor") for d in plans if d.family == "chardev"} == {3, 5}
        assert any(d.kind == "folder" for d in plans if d.family == "delete")
    # the same seed, the same damage
    again = [damage.plan(s, pristine) for s in range(SEED0, SEED0 + min(COUNT, 40))]
    assert [str(d) for d in again] == [str(d) for d in plans[:len(again)]]


@pytest.mark.parametrize("name", sorted(damage.PRISTINE_SPECS))
def test_undamaged_copy_walks_clean(pristine, tmp_path, name):
    """The control: an undamaged copy passes every check, with no EIO and no error-level problem."""
    d = damage.Damage(-1, name, "none", "", "none", {"op": "none"}, "no damage (control)")
    r = damage.run_copy(d, pristine, tmp_path)
    if r.failures:
        pytest.fail("\n".join(str(f) for f in r.failures), pytrace=False)
    assert r.walk is not None and r.walk.result is not None
    assert r.walk.result["files"] > 50, f"only {r.walk.result['files']} files read"
    assert r.walk.result["eio"] == [], r.walk.result["eio"][:10]
    errors = [damage.fmt(p) for p in (r.mount_problems or []) if p.get("severity") == "error"]
    assert errors == [], errors


@pytest.mark.parametrize("first,end", BATCHES, ids=[f"seeds_{a}-{b - 1}" for a, b in BATCHES])
def test_damaged_copies(pristine, tmp_path, first, end):
    results = damage.run_many(range(first, end), pristine, tmp_path, workers=WORKERS)
    assert len(results) == end - first
    if any(r.failures for r in results):
        pytest.fail("\n" + damage.report(results, limit_per_category=4), pytrace=False)
