"""`tdbfs salvage` on the damage suite's copies (tests/damage.py: every family of damage, on every
pristine array): whatever the damage, salvage ends with exit status 0 or 1, never writes the source,
leaves no half-built folder, copies no byte from outside the array (symlinks are never followed), and
what it builds is an array TileDB opens and reads in full. A salvage that says nothing was lost returns
exactly what TileDB returns from the source when it can still read it."""

from __future__ import annotations

import os

import pytest
import yaml

tiledb = pytest.importorskip("tiledb")

import damage  # noqa: E402
from test_salvage import rows, salvage_cli  # noqa: E402

COUNT = int(os.environ.get("TDBFS_SALVAGE_DAMAGE_COUNT", "45"))   # 5 of each family
SEED0 = int(os.environ.get("TDBFS_DAMAGE_SEED", "0"))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return damage.build_pristine(tmp_path_factory.mktemp("salvage_pristine"))


def _readable(uri):
    try:
        return rows(uri)
    except (tiledb.TileDBError, UnicodeDecodeError):
        return None


def _read(uri):
    """rows(uri); for a UTF-8 attribute holding bytes that are not UTF-8 (damage no check can see:
    TileDB stores them as given), tiledb-py cannot make the strings: then TileDB's read of the
    coordinates alone, and "not UTF-8"."""
    try:
        return rows(uri)
    except UnicodeDecodeError:
        with tiledb.open(str(uri)) as A:
            dims = [d.name for d in A.schema.domain]
            A.query(dims=dims, attrs=[], use_arrow=False)[:]
        return "not UTF-8"


@pytest.mark.parametrize("seed", range(SEED0, SEED0 + COUNT))
def test_salvage_of_a_damaged_copy(pristine, tmp_path, seed):
    d = damage.plan(seed, pristine)
    src = damage.copy_pristine(pristine[d.array], tmp_path / "array")
    damage.apply(d, src, tmp_path / "outside")
    before = damage.safe_snapshot(src)
    dest = tmp_path / "saved"
    code, out, err = salvage_cli(src, dest)
    assert damage.diff_snapshots(before, damage.safe_snapshot(src)) == [], str(d)
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith(".saved")) == [], str(d)
    if not dest.exists():   # nothing written: one line saying why
        assert code == 1 and out == "" and len(err.splitlines()) == 1 and err.startswith("tdbfs: error: "), (str(d), err)
        return
    assert code in (0, 1) and err == "", (str(d), err)
    report = yaml.safe_load((dest / "salvage.yaml").read_text())
    assert report["totals"]["something_lost"] is (code == 1), str(d)
    for root, _, files in os.walk(dest):
        for name in files:
            assert damage.SECRET.encode() not in (damage.Path(root) / name).read_bytes(), (str(d), root, name)
    got = _read(dest)   # TileDB opens the copy and reads every cell of it
    if code == 0 and d.family in damage.BYTE_FAMILIES:   # TileDB itself would block on a FIFO
        want = _readable(src)
        if want is not None:
            assert got == want, str(d)
