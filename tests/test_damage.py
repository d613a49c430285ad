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


# -- the harness itself: it must see what it is meant to see ---------------------------------------

def test_walker_flags_bad_yaml_csv_leaks_and_special_files(tmp_path):
    """The walker on a plain folder: a YAML that does not parse, a CSV with uneven rows, the outside
    marker in a file and in a name, a FIFO (listed, never opened: the walk does not hang)."""
    (tmp_path / "array.yaml").write_text("problems: []\n")
    (tmp_path / "fragments").mkdir()
    (tmp_path / "bad.yaml").write_text("a: [1, 2\n")
    (tmp_path / "bad.csv").write_text("a,b,c\n1,2,3\n4,5\n")
    (tmp_path / "good.csv").write_text("a,b\n1,2\n")
    (tmp_path / "leak.bin").write_bytes(b"xx" + damage.SECRET.encode() + b"yy")
    (tmp_path / f"{damage.SECRET}.txt").write_text("name only")
    os.mkfifo(tmp_path / "fifo")
    out = damage.walk_mount(tmp_path, op_timeout=5)
    assert out.hung is None and out.crashed is None and out.result is not None
    r = out.result
    assert sorted(p[0] for p in r["parse"]) == ["bad.csv", "bad.yaml"]
    assert {s[0] for s in r["secret"]} >= {"leak.bin", f"{damage.SECRET}.txt"}
    assert r["not_regular"] and r["not_regular"][0][0] == "fifo"
    assert r["first"]["array.yaml"] == "problems: []\n" and r["final"]["array.yaml"] == "problems: []\n"


def test_walk_mount_kills_a_silent_walker_and_names_the_operation(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'S\tread\tfragments/x/tile_0.bin'\nexec sleep 60\n")
    fake.chmod(0o755)
    t0 = __import__("time").monotonic()
    out = damage.walk_mount(tmp_path, python=str(fake), op_timeout=1.5)
    assert out.hung == "read fragments/x/tile_0.bin" and out.result is None
    assert __import__("time").monotonic() - t0 < 10


def test_open_watch_and_safe_snapshot_never_open_special_files(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    os.mknod(tmp_path / "zero", 0o020600, os.makedev(1, 5))
    (tmp_path / "f").write_bytes(b"abc")
    os.symlink("/dev/zero", tmp_path / "link")
    w = damage.OpenWatch([tmp_path / "fifo", tmp_path / "zero"])
    snap = damage.safe_snapshot(tmp_path)
    assert w.events() == []                  # the snapshot opened neither
    assert snap["fifo"][0] == "fifo" and snap["zero"][0] == "dev" and snap["link"] == ("link", "/dev/zero")
    fd = os.open(tmp_path / "fifo", os.O_RDONLY | os.O_NONBLOCK)
    os.close(fd)
    assert ("%s" % (tmp_path / "fifo"), "open") in w.events()
    w.close()
