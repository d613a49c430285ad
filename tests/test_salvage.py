"""`tdbfs salvage` and `tdbfs.salvage()` against TileDB itself (tdbfs/salvaging/).

Healthy arrays: TileDB opens the copy, its reads at every time from the newest fragment on equal the
source's (cells and metadata), the copied files are the source's bytes, `tdbfs check` of the copy is
silent, and the source is unchanged. Damaged copies of arrays (a tile that does not decode, a tile
whose values are not those its metadata records, a fragment metadata file overwritten so that TileDB
refuses the whole array): TileDB opens the copy, and the cells it returns are the undamaged twin's,
less exactly the cells of the tiles `salvage.yaml` lists as lost. The cells of a lost tile are found
with TileDB alone: the twin read at the fragment's own time range, in global order, is the fragment's
cells in tile order, `capacity` cells per sparse tile.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

tiledb = pytest.importorskip("tiledb")

import arrays  # noqa: E402
import damage  # noqa: E402
from arrays import ENCRYPTION_KEY, encryption_ctx  # noqa: E402
from mounting import assert_unchanged, snapshot_tree  # noqa: E402

from tdbfs.cli.main import main  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


# -- reading with TileDB ------------------------------------------------------------------------

def _ctx(key):
    return encryption_ctx(key) if key else None


def _table(uri, t, key, order=None) -> list:
    """The cells TileDB returns (dimensions and attributes, by name), one tuple per cell."""
    with tiledb.open(str(uri), timestamp=t, ctx=_ctx(key)) as A:
        kw = {"order": order} if order else {}
        data = A.query(use_arrow=False, coords=True, **kw)[:]
        cut = 1 if A.schema.sparse else A.schema.ndim   # a dense read is shaped like its subarray
    cols = []
    for n in sorted(data):
        v = data[n]
        v = v.reshape((-1,) + v.shape[cut:])
        cols.append([(n, repr(x.tolist() if hasattr(x, "tolist") else x)) for x in v])
    return list(zip(*cols))


def at(cells, names) -> set:
    """The coordinates (values of the fields `names`) of `cells`."""
    return {tuple(v for n, v in cell if n in names) for cell in cells}


def without(cells: collections.Counter, coords: set, names) -> collections.Counter:
    """`cells` less those at `coords`."""
    return collections.Counter({c: k for c, k in cells.items() if next(iter(at([c], names))) not in coords})


def rows(uri, t=None, key=None) -> collections.Counter:
    """The cells TileDB returns, as a multiset of rows."""
    return collections.Counter(_table(uri, t, key))


def ordered_rows(uri, t, key=None) -> list:
    """The cells TileDB returns, in global order."""
    return _table(uri, t, key, "G")


def metadata(uri, t=None, key=None) -> dict:
    with tiledb.open(str(uri), timestamp=t, ctx=_ctx(key)) as A:
        return {k: repr(A.meta[k]) for k in A.meta.keys()}


def times(uri) -> list[int]:
    """Every time named in the array's files (fragments, commits, schemas, metadata)."""
    out = set()
    for folder in ("__fragments", "__commits", "__schema", "__meta"):
        for name in os.listdir(Path(uri) / folder) if (Path(uri) / folder).is_dir() else ():
            parts = name.split(".")[0].split("_")
            if len(parts) >= 4 and parts[2].isdigit() and parts[3].isdigit():
                out.add(int(parts[3]))
    return sorted(out)


def fragment_names(uri) -> list[str]:
    return sorted(os.listdir(Path(uri) / "__fragments"), key=lambda n: (int(n.split("_")[2]), int(n.split("_")[3])))


def salvage_cli(*args, key_file=None) -> tuple[int, str, str]:
    """`tdbfs salvage ...` in this process: (status, stdout, stderr)."""
    import contextlib
    import io
    out, err = io.StringIO(), io.StringIO()
    argv = ["salvage", *map(str, args)] + (["--key-file", str(key_file)] if key_file else [])
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def check_cli(uri, key_file=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "tdbfs", "check", "--jobs", "1", str(uri)]
    return subprocess.run(argv + (["--key-file", str(key_file)] if key_file else []), capture_output=True,
                          text=True, env=env, timeout=120)


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "key"
    path.write_text(ENCRYPTION_KEY)
    return path


# -- healthy arrays -----------------------------------------------------------------------------

HEALTHY = {
    "dense": ("dense", dict(ndim=2)),
    "sparse": ("sparse", dict(ndim=2, dim_kinds=["string", "int"], cells=8, capacity=3)),
    "duplicates": ("sparse", dict(ndim=1, allows_duplicates=True, cells=6, capacity=2, n_fragments=3)),
    "consolidated": ("consolidated", dict(sparse=True)),
    "consolidated_dense": ("consolidated", dict(sparse=False)),
    "deletes": ("deletes", dict()),
    "commits": ("commits", dict()),
    "schema_evolution": ("schema_evolution", dict()),
    "enumerations": ("enumerations", dict()),
    "metadata": ("metadata", dict(consolidate_meta=True)),
    "all_dtypes": ("all_dtypes", dict(sparse=True)),
    "encrypted": ("encrypted", dict()),
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_a_healthy_array_is_copied_and_tiledb_reads_the_same(tmp_path, name, key_file):
    kind, opts = HEALTHY[name]
    built = arrays.make_array(tmp_path / "src", kind, name=name, **opts)
    src, dest = built.path, tmp_path / "saved"
    key = ENCRYPTION_KEY if kind == "encrypted" else None
    kf = key_file if key else None
    before = snapshot_tree(src)
    code, out, err = salvage_cli(src, dest, key_file=kf)
    assert (code, err) == (0, "")
    assert out.startswith(f"{dest}: ") and " 0 rewritten, 0 lost; " in out and ", 0 lost (0 tiles)" in out
    assert_unchanged(before, snapshot_tree(src))
    report = yaml.safe_load((dest / "salvage.yaml").read_text())
    assert report["totals"]["something_lost"] is False
    assert {f["outcome"] for f in report["fragments"]} == {"copied"}
    # byte for byte: every file of every copied fragment, and each schema
    for f in report["fragments"]:
        for file in os.listdir(src / f["fragment"]):
            assert (dest / f["fragment"] / file).read_bytes() == (src / f["fragment"] / file).read_bytes()
    for rel in report["schemas"]:
        assert (dest / rel).read_bytes() == (src / rel).read_bytes()
    newest = max(int(os.path.basename(f["fragment"]).split("_")[3]) for f in report["fragments"])
    moments = [t for t in times(src) if t >= newest] + [None]
    assert len(moments) >= 2
    for t in moments:
        assert rows(dest, t, key) == rows(src, t, key), f"at {t}"
        assert metadata(dest, t, key) == metadata(src, t, key), f"at {t}"
    assert sum(rows(dest, None, key).values()) > 0
    checked = check_cli(dest, kf)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "warning" not in checked.stdout + checked.stderr
    assert checked.stdout.strip().endswith("files checked)") and ": clean (" in checked.stdout


def test_as_of_an_earlier_time_copies_what_a_reader_then_saw(tmp_path):
    built = arrays.make_array(tmp_path / "src", "sparse", ndim=1, cells=5, capacity=2, n_fragments=3)
    src = built.path
    first_two = int(fragment_names(src)[1].split("_")[3])
    code, out, _ = salvage_cli(src, tmp_path / "saved", "--as-of", first_two)
    assert code == 0
    assert len(os.listdir(tmp_path / "saved" / "__fragments")) == 2
    assert rows(tmp_path / "saved") == rows(src, first_two) != rows(src)


# -- damaged arrays -----------------------------------------------------------------------------

def spoil_tile(path: Path, fragment: str, stem: str, tile: int) -> None:
    """Xor every byte of the chunk data of one tile of `stem`.tdb (damage.layout walks the file)."""
    f = path / "__fragments" / fragment / f"{stem}.tdb"
    data = bytearray(f.read_bytes())
    lay = damage.layout(bytes(data), "data")
    lo, hi, _ = lay.tiles[tile]
    spans = [(s, e) for s, e, _ in lay.chunks if lo <= s and e <= hi]
    assert spans
    for start, end in spans:
        for i in range(start, end):
            data[i] ^= 0x5A
    f.write_bytes(bytes(data))


def fragment_cells(twin: Path, fragment: str, key=None) -> list:
    """The fragment's cells in global order, read by TileDB from the twin at the fragment's time range."""
    p = fragment.split("_")
    return ordered_rows(twin, (int(p[2]), int(p[3])), key)


DAMAGED = {
    # name: (kind, options, which fragment (index by time, or "consolidated"), attribute, tile)
    "sparse_zstd": ("sparse", dict(ndim=2, capacity=3, cells=10, filters="ZSTD"), 0, "a0", 1),
    "sparse_checksum": ("sparse", dict(ndim=2, capacity=3, cells=9, filters="ZSTD+CHECKSUM_SHA256"), 1, "a1", 2),
    "sparse_minmax": ("sparse", dict(ndim=1, capacity=3, cells=9, attrs="int", filters=[]), 0, "a0", 1),
    "consolidated": ("consolidated", dict(sparse=True, cells=5, n_fragments=3), "consolidated", "a0", 1),
    "evolved_first_schema": ("schema_evolution", dict(sparse=True), 0, "a0", 0),
    "encrypted": ("encrypted", dict(sparse=True), 0, "a0", 0),
}


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_a_damaged_sparse_fragment_keeps_every_cell_of_its_sound_tiles(tmp_path, name, key_file):
    kind, opts, which, stem, tile = DAMAGED[name]
    built = arrays.make_array(tmp_path / "src", kind, name=name, **opts)
    src, twin, dest = built.path, tmp_path / "twin", tmp_path / "saved"
    key = ENCRYPTION_KEY if kind == "encrypted" else None
    shutil.copytree(src, twin)
    names = fragment_names(src)
    fragment = [n for n in names if n.split("_")[2] != n.split("_")[3]][0] if which == "consolidated" else names[which]
    files = os.listdir(src / "__fragments" / fragment)
    assert f"{stem}.tdb" in files
    spoil_tile(src, fragment, stem, tile)
    before = snapshot_tree(src)
    code, out, err = salvage_cli(src, dest, key_file=key_file if key else None)
    assert (code, err) == (1, "")
    assert_unchanged(before, snapshot_tree(src))
    report = yaml.safe_load((dest / "salvage.yaml").read_text())
    by_name = {f["fragment"]: f for f in report["fragments"]}
    hit = by_name[f"__fragments/{fragment}"]
    assert hit["outcome"] == "rewritten"
    assert [t["tile"] for t in hit["lost_tiles"]] == [tile]
    assert f"{fragment}/{stem}.tdb:" in hit["lost_tiles"][0]["problem"]
    assert {f["outcome"] for f in report["fragments"] if f is not hit} <= {"copied"}
    assert report["written_by"] == "TileDB " + ".".join(map(str, tiledb.libtiledb.version()))
    # the lost tile's cells, from TileDB's read of the twin: tile k holds cells k*capacity.. of the fragment
    with tiledb.open(str(twin), ctx=_ctx(key)) as A:
        capacity = A.schema.capacity
    cells = fragment_cells(twin, fragment, key)
    lost = cells[tile * capacity:(tile + 1) * capacity]
    assert hit["cells_lost"] == len(lost) == hit["lost_tiles"][0]["cells"] > 0
    assert hit["cells_kept"] == len(cells) - len(lost)
    # every other fragment wrote other coordinates: what is missing is exactly the lost tile's
    dims = [d.name for d in tiledb.ArraySchema.load(str(twin), ctx=_ctx(key)).domain]
    want = rows(twin, None, key)
    assert rows(dest, None, key) == without(want, at(lost, dims), dims) != want
    # the rewrite keeps the fragment's time range and its schema
    for new in hit["written"]:
        assert os.path.basename(new).split("_")[2:4] == fragment.split("_")[2:4]
        assert (dest / "__commits" / (os.path.basename(new) + ".wrt")).is_file()
    assert f"{out.split(':')[0]}" == str(dest)
    assert "1 rewritten, 0 lost; " in out and f"{len(lost)} lost (1 tiles)" in out


def test_a_damaged_dense_fragment_leaves_a_hole_where_its_lost_tile_was(tmp_path):
    # two fragments side by side (rows 1-4 and 5-6), tiles of 2x2 cells
    built = arrays.make_array(tmp_path / "src", "dense", ndim=2, filters="ZSTD",
                              fragments=[[(1, 4), (1, 6)], [(5, 6), (1, 6)]])
    src, twin, dest = built.path, tmp_path / "twin", tmp_path / "saved"
    shutil.copytree(src, twin)
    first = fragment_names(src)[0]
    spoil_tile(src, first, "a0", 1)
    code, out, _ = salvage_cli(src, dest)
    assert code == 1
    report = yaml.safe_load((dest / "salvage.yaml").read_text())
    hit = report["fragments"][0]
    assert hit["outcome"] == "rewritten" and report["fragments"][1]["outcome"] == "copied"
    [lost_tile] = hit["lost_tiles"]
    box = lost_tile["domain"]
    assert box == {"d0": [1, 2], "d1": [3, 4]}   # tile 1 in row-major tile order of extents 2x2
    assert hit["cells_lost"] == 4 and hit["cells_kept"] == 20
    box_cells = {(repr(i), repr(j)) for i in (1, 2) for j in (3, 4)}
    assert without(rows(dest), box_cells, ("d0", "d1")) == without(rows(twin), box_cells, ("d0", "d1"))
    # the hole shows what lies beneath: here nothing, so the fill values
    with tiledb.open(str(dest)) as A:
        hole = A.query(use_arrow=False)[1:3, 3:5]
        fill = A.schema.attr("a0").fill
    assert (hole["a0"] == fill).all()
    with tiledb.open(str(twin)) as B:
        assert (B.query(use_arrow=False)[1:3, 3:5]["a0"] != fill).all()


def test_an_overwritten_fragment_metadata_loses_that_fragment_and_tiledb_opens_the_copy(tmp_path):
    built = arrays.make_array(tmp_path / "src", "sparse", ndim=2, capacity=3, cells=8, n_fragments=3)
    src, twin, dest = built.path, tmp_path / "twin", tmp_path / "saved"
    shutil.copytree(src, twin)
    victim = fragment_names(src)[1]
    md = src / "__fragments" / victim / "__fragment_metadata.tdb"
    md.write_bytes(b"\xff" * md.stat().st_size)
    with pytest.raises(tiledb.TileDBError):
        with tiledb.open(str(src)) as A:
            A.query(use_arrow=False)[:]
    code, out, err = salvage_cli(src, dest)
    assert code == 1 and err == ""
    assert "2 copied, 0 rewritten, 1 lost" in out
    report = yaml.safe_load((dest / "salvage.yaml").read_text())
    lost = [f for f in report["fragments"] if f["outcome"] == "lost"]
    assert [f["fragment"] for f in lost] == [f"__fragments/{victim}"]
    assert lost[0]["why"].startswith(f"__fragments/{victim}/__fragment_metadata.tdb:")
    gone = at(fragment_cells(twin, victim), ("d0", "d1"))
    assert len(gone) == 8 and rows(dest) == without(rows(twin), gone, ("d0", "d1"))
    assert check_cli(dest).returncode == 0


# -- what is refused --------------------------------------------------------------------------

def test_usage_errors_exit_2_and_write_nothing(tmp_path):
    built = arrays.make_array(tmp_path / "src", "sparse", ndim=1, cells=4, n_fragments=1)
    (tmp_path / "there").mkdir()
    assert salvage_cli(built.path, tmp_path / "there")[0] == 2
    assert os.listdir(tmp_path / "there") == []
    code, _, err = salvage_cli(built.path, tmp_path / "new", "--as-of", "yesterday")
    assert code == 2 and "--as-of" in err and len(err.splitlines()) == 1
    code, _, err = salvage_cli(built.path, "s3://bucket/x")
    assert code == 2 and "local folder" in err
    before = snapshot_tree(built.path)
    code, _, err = salvage_cli(built.path, built.path / "__meta" / "saved")
    assert code == 2 and "inside SRC" in err
    assert_unchanged(before, snapshot_tree(built.path))
    assert sorted(os.listdir(tmp_path)) == ["src", "there"]


def test_a_schema_that_does_not_decode_writes_nothing(tmp_path):
    built = arrays.make_array(tmp_path / "src", "sparse", ndim=1, cells=4, n_fragments=1)
    [schema] = [n for n in os.listdir(built.path / "__schema") if (built.path / "__schema" / n).is_file()]
    f = built.path / "__schema" / schema
    data = bytearray(f.read_bytes())
    data[40:] = b"\x00" * (len(data) - 40)
    f.write_bytes(bytes(data))
    code, out, err = salvage_cli(built.path, tmp_path / "saved")
    assert code == 1 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"tdbfs: error: __schema/{schema}:")
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_without_tiledb_py_a_rewrite_names_the_extra(tmp_path):
    built = arrays.make_array(tmp_path / "src", "sparse", ndim=1, capacity=2, cells=4, n_fragments=1,
                              filters="ZSTD")
    spoil_tile(built.path, fragment_names(built.path)[0], "a0", 0)
    code = ("import sys; sys.modules['tiledb'] = None\n"
            "from tdbfs.cli.main import main\n"
            f"sys.exit(main(['salvage', {str(built.path)!r}, {str(tmp_path / 'saved')!r}]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == "tdbfs: error: rewriting a damaged fragment needs tiledb-py: pip install 'tdbfs[salvage]'\n"
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_the_library_returns_the_report_salvage_yaml_holds(tmp_path):
    import tdbfs
    built = arrays.make_array(tmp_path / "src", "encrypted", sparse=True)
    report = tdbfs.salvage(built.path, tmp_path / "saved", key=ENCRYPTION_KEY)
    assert report.exit_code == 0 and report.totals["copied"] == len(fragment_names(built.path))
    assert yaml.safe_load((tmp_path / "saved" / "salvage.yaml").read_text()) == yaml.safe_load(report.yaml())
    assert rows(tmp_path / "saved", None, ENCRYPTION_KEY) == rows(built.path, None, ENCRYPTION_KEY)
    with pytest.raises(tdbfs.SalvageError, match="exists"):
        tdbfs.salvage(built.path, tmp_path / "saved", key=ENCRYPTION_KEY)
    with pytest.raises(tdbfs.SalvageError, match="the array is encrypted with AES-256-GCM"):   # no key: no schema
        tdbfs.salvage(built.path, tmp_path / "keyless")
    assert not (tmp_path / "keyless").exists()
    with pytest.raises(tdbfs.SalvageError, match="inside the source"):
        tdbfs.salvage(built.path, built.path / "saved", key=ENCRYPTION_KEY)
    assert not (built.path / "saved").exists()


# -- the formats TileDB 2.30 still opens (tests/data/backcompat_arrays) ---------------------------------

OLD = ["v01", "v02", "v05", "v07", "v09", "v10", "v13", "v20", "v22"]


def _old_array(tmp_path, folder):
    import corpus
    return corpus.copy_array(dict(corpus.arrays())[folder], tmp_path / folder)


@pytest.mark.parametrize("folder", OLD)
def test_arrays_of_older_formats_are_copied_in_their_own_layout(tmp_path, folder):
    src = _old_array(tmp_path, folder)
    dest = tmp_path / "saved"
    code, out, _ = salvage_cli(src, dest)
    assert code == 0
    report = yaml.safe_load((dest / "salvage.yaml").read_text())
    for f in report["fragments"]:
        assert f["outcome"] == "copied" and (dest / f["fragment"]).is_dir()
        name = os.path.basename(f["fragment"])
        version = int(name.split("_")[-1]) if len(name.split("_")) == 6 else 0
        marker = (dest / "__commits" / f"{name}.wrt") if f["fragment"].startswith("__fragments/") else \
            (dest / f"{name}.ok") if version >= 5 else None
        assert marker is None or marker.is_file()
    assert rows(dest) == rows(src) and sum(rows(src).values()) > 0


@pytest.mark.parametrize("folder, layout", [("v05", "__fragments"), ("v07", "root"), ("v09", "root")])
def test_a_rewritten_fragment_of_an_older_format_reads_the_same(tmp_path, folder, layout):
    """An extra file makes the fragment damaged (a warning is a problem): every tile survives, and the
    rewrite comes out in the format of the schema (TileDB writes formats 7 on in the schema's own;
    format 5 and 6 schemas get format 22 fragments in __fragments/). v07's fragment is a sparse one in a
    dense array: it is written as runs of cells, dense writes."""
    src = _old_array(tmp_path, folder)
    twin = _old_array(tmp_path / "twin", folder)
    [fragment] = [n for n in os.listdir(src) if n.startswith("__") and (src / n).is_dir()
                  and n not in ("__meta", "__schema", "__commits", "__fragments")]
    (src / fragment / "junk.bin").write_bytes(b"x")
    code, out, _ = salvage_cli(src, tmp_path / "saved")
    report = yaml.safe_load((tmp_path / "saved" / "salvage.yaml").read_text())
    [f] = report["fragments"]
    assert f["outcome"] == "rewritten" and f["cells_lost"] == 0 and f["lost_tiles"] == []
    assert code == 0 and "1 rewritten, 0 lost" in out
    version = fragment.split("_")[-1]
    for new in f["written"]:
        if layout == "root":
            assert "/" not in new and new.endswith(f"_{version}") and (tmp_path / "saved" / f"{new}.ok").is_file()
        else:
            assert new.startswith("__fragments/") and new.endswith("_22")
        assert new.split("_")[-4:-2] == fragment.split("_")[2:4]   # the same time range
    assert rows(tmp_path / "saved") == rows(twin)


def test_a_damaged_consolidated_fragment_keeps_the_newest_version_of_each_cell(tmp_path):
    """Consolidation with timestamps keeps every version of a rewritten cell (t.tdb); a reader takes the
    newest. The rewrite cannot keep per-cell times, so it writes what a reader takes, once."""
    src, twin, dest = tmp_path / "src", tmp_path / "twin", tmp_path / "saved"
    import numpy as np
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 99), tile=100, dtype=np.int64))
    attr = tiledb.Attr("a", dtype=np.int64, filters=tiledb.FilterList([tiledb.ZstdFilter()]))
    tiledb.Array.create(str(src), tiledb.ArraySchema(domain=dom, sparse=True, capacity=4, attrs=[attr]))
    for t, coords, value in ((100, range(0, 8), 1), (200, range(0, 4), 2), (300, range(8, 12), 3)):
        with tiledb.open(str(src), "w", timestamp=t) as A:
            A[np.array(coords, np.int64)] = {"a": np.full(len(coords), value, np.int64)}
    tiledb.consolidate(str(src), config=tiledb.Config({"sm.consolidation.mode": "fragments"}))
    shutil.copytree(src, twin)
    [consolidated] = [n for n in fragment_names(src) if n.split("_")[2] != n.split("_")[3]]
    assert "t.tdb" in os.listdir(src / "__fragments" / consolidated)
    spoil_tile(src, consolidated, "a0", 3)   # cells 8..11: tiles hold 0 0 1 1 | 2 2 3 3 | 4..7 | 8..11
    code, out, _ = salvage_cli(src, dest)
    assert code == 1
    report = yaml.safe_load((dest / "salvage.yaml").read_text())
    [f] = report["fragments"]
    assert f["outcome"] == "rewritten" and f["cells_lost"] == 4 and f["cells_not_read_at_T"] == 4
    assert f["cells_kept"] == 8 and f["lost_detail"][0].startswith("per-cell timestamps (t.tdb)")
    want = without(rows(twin), {(repr(d),) for d in range(8, 12)}, ("d",))
    assert rows(dest) == want and sum(want.values()) == 8
    assert {dict(r)["a"] for r in want if dict(r)["d"] in ("0", "1", "2", "3")} == {"2"}
    [new] = f["written"]
    assert os.path.basename(new).split("_")[2:4] == consolidated.split("_")[2:4]


def test_dimension_labels_are_salvaged_as_arrays_of_their_own(tmp_path):
    built = arrays.make_array(tmp_path / "src", "dim_labels")
    src, dest = built.path, tmp_path / "saved"
    [label] = os.listdir(src / "__labels")
    code, out, _ = salvage_cli(src, dest)
    assert code == 0 and "2 fragments: 2 copied" in out   # the array's and the label's
    report = yaml.safe_load((dest / "salvage.yaml").read_text())
    assert report["labels"][label]["fragments"][0]["outcome"] == "copied"
    assert rows(dest / "__labels" / label) == rows(src / "__labels" / label)
    # TileDB reads the array through its label "xl" (a query by label values)
    with tiledb.open(str(src)) as A, tiledb.open(str(dest)) as B:
        assert A.schema.has_dim_label("xl") and B.schema.has_dim_label("xl")
        want, got = A.label_index(["xl"])[-1.0:1.0], B.label_index(["xl"])[-1.0:1.0]
    assert sorted(want) == sorted(got) and len(want["xl"]) > 0
    for k in want:
        assert (want[k] == got[k]).all()
    assert check_cli(dest).returncode == 0


def test_a_big_fragment_is_rewritten_in_batches_of_bounded_size(tmp_path, monkeypatch):
    from tdbfs.salvaging import rewrite
    monkeypatch.setattr(rewrite, "BATCH_BYTES", 1)   # a batch per tile
    built = arrays.make_array(tmp_path / "src", "sparse", ndim=2, capacity=3, cells=10, filters="ZSTD",
                              n_fragments=1)
    twin = shutil.copytree(built.path, tmp_path / "twin")
    [fragment] = fragment_names(built.path)
    spoil_tile(built.path, fragment, "a0", 1)
    code, out, _ = salvage_cli(built.path, tmp_path / "saved")
    report = yaml.safe_load((tmp_path / "saved" / "salvage.yaml").read_text())
    [f] = report["fragments"]
    assert code == 1 and f["cells_kept"] == 7 and f["cells_lost"] == 3
    assert len(f["written"]) == 3   # tiles 0, 2, 3: each its own write of the same time range
    assert {os.path.basename(n).split("_")[2] for n in f["written"]} == {fragment.split("_")[2]}
    lost = fragment_cells(twin, fragment)[3:6]
    assert rows(tmp_path / "saved") == without(rows(twin), at(lost, ("d0", "d1")), ("d0", "d1"))


def test_a_big_dense_fragment_is_rewritten_tile_by_tile(tmp_path, monkeypatch):
    from tdbfs.salvaging import rewrite
    monkeypatch.setattr(rewrite, "BATCH_BYTES", 1)
    built = arrays.make_array(tmp_path / "src", "dense", ndim=2, filters="ZSTD", fragments=[[(1, 6), (1, 6)]])
    twin = shutil.copytree(built.path, tmp_path / "twin")
    [fragment] = fragment_names(built.path)
    (built.path / "__fragments" / fragment / "junk.bin").write_bytes(b"x")   # damaged, every tile sound
    code, out, _ = salvage_cli(built.path, tmp_path / "saved")
    [f] = yaml.safe_load((tmp_path / "saved" / "salvage.yaml").read_text())["fragments"]
    assert code == 0 and f["outcome"] == "rewritten" and f["cells_kept"] == 36 and len(f["written"]) == 9
    assert rows(tmp_path / "saved") == rows(twin)


def test_a_committed_fragment_whose_folder_is_gone_is_lost(tmp_path):
    built = arrays.make_array(tmp_path / "src", "sparse", ndim=1, cells=4, n_fragments=2)
    twin = shutil.copytree(built.path, tmp_path / "twin")
    gone = fragment_names(built.path)[0]
    shutil.rmtree(built.path / "__fragments" / gone)
    with pytest.raises(tiledb.TileDBError):
        tiledb.open(str(built.path))
    code, out, _ = salvage_cli(built.path, tmp_path / "saved")
    assert code == 1 and "1 copied, 0 rewritten, 1 lost" in out
    fragments = yaml.safe_load((tmp_path / "saved" / "salvage.yaml").read_text())["fragments"]
    assert [f["outcome"] for f in fragments] == ["lost", "copied"]
    assert fragments[0]["why"] == f"__fragments/{gone}:-: fragment: committed, but its folder is not there"
    lost = at(fragment_cells(twin, gone), ("d0",))
    assert rows(tmp_path / "saved") == without(rows(twin), lost, ("d0",)) != rows(twin)
