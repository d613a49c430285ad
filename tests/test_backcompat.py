"""Every array of the back-compat corpus (formats 1-22, see its INDEX.md), decoded and compared with TileDB.

The corpus ships with the repository in tests/data/backcompat_arrays (sources and
licences: tests/data/SOURCES.md); tests/corpus.py finds it ($TDBFS_BACKCOMPAT_ARRAYS
may point at another copy). The tests that read it are marked `backcompat` and call
`corpus.require()`, which skips them, saying why, only if the folder is missing.
Arrays are copied to a temporary folder first: tdbfs and tiledb-py only ever open
the copies, nothing is written under the corpus folder.

* every fragment: fragment.yaml / footer.yaml / rtree against tiledb-py's fragment
  info (format version, cell count, non-empty domain, MBRs), no problem reported;
* every stored field of every fragment, tile by tile (legacy `__coords` both as
  stored and split per dimension): the decoded cells equal TileDB's read of the
  fragment;
* every file of every tree is readable, with no problem reported;
* the two arrays TileDB refuses show their tree, with a problem saying why;
* schemas and array metadata of every version against tiledb-py;
* INDEX.md's expected values, and one legacy array through a real FUSE mount.

Hand-made minimal cases for what no sample covers (formats 12 and 16, the
encryption fields of a generic tile header) are at the end, each commented
with the docs/format.md section it follows.
"""

from __future__ import annotations

import errno
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import tiledb
import yaml

import corpus
import reference
from corpus import BACKCOMPAT
from tdbfs.format.generic_tile import pre_format_header, read_generic_tile_header
from tdbfs.store import ArrayStore
from tdbfs.views.nodes import DirNode, FileNode, ViewError, resolve
from tdbfs.views.tree import build_root

# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

_COPIES: dict = {}
_REFS: dict = {}


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    """folder -> a private copy of that corpus array (made on first use)."""
    base = tmp_path_factory.mktemp("backcompat")

    class Copies(dict):
        def __missing__(self, folder):
            src = dict(corpus.arrays())[folder]
            self[folder] = corpus.copy_array(src, base / folder)
            return self[folder]

    return Copies()


def _read(root, path: str) -> bytes:
    node = resolve(root, path)
    data = node.read(0, node.size() + 1)
    assert len(data) == node.size(), f"{path}: read {len(data)} bytes, stat says {node.size()}"
    return data


def _yaml(root, path: str):
    return yaml.safe_load(_read(root, path))


def _plain(v):
    if isinstance(v, (bytes, np.bytes_)):
        return v.decode()
    if hasattr(v, "item"):
        return v.item()
    return v


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a == pytest.approx(b) or (a != a and b != b)
    return a == b


def _fragment_infos(path) -> dict:
    """Fragment name -> (version, cell_num, non-empty domain, MBRs or None) as tiledb-py reports them."""
    out = {}
    with tiledb.open(str(path)) as A:
        sparse = A.schema.sparse
    fl = tiledb.FragmentInfoList(str(path), include_mbrs=sparse)
    for k in range(len(fl)):
        name = os.path.basename(fl.uri[k].rstrip("/"))
        mbrs = [[tuple(r) for r in m] for m in fl.mbrs[k]] if sparse else None
        out[name] = (int(fl.version[k]), int(fl.cell_num[k]), [tuple(r) for r in fl.nonempty_domain[k]], mbrs)
    return out


def _reference(folder: str, path: Path, frag_name: str, dense: bool, ned) -> tuple[dict, np.ndarray | None]:
    """TileDB's cells of the (only) fragment in stored order, and for dense fragments the mask of
    cells inside its non-empty domain (TileDB reads fill values elsewhere, the file holds what the
    writer put there)."""
    key = (folder, frag_name)
    if key not in _REFS:
        if dense:
            cells, mask = _read_dense(path, ned)
        else:
            # The whole array is this one fragment; its cells in global order (what the tiles hold).
            cells = reference._read_sparse(path, 0, 2 ** 63 - 1)
            mask = None
        _REFS[key] = (cells, mask)
    return _REFS[key]


def _read_dense(path: Path, ned) -> tuple[dict, np.ndarray]:
    """A dense fragment's cells as stored: its non-empty domain expanded to whole space tiles, tile
    after tile, cells in cell order; parts of a tile outside the domain padded with the fill value.
    (Like reference.fragment_cells, which does not handle the corpus's anonymous attribute.)
    Fixed-size, non-nullable attributes only, which is what the corpus's dense fragments hold."""
    with tiledb.open(str(path)) as A:
        schema = A.schema
        attrs = [schema.attr(k) for k in range(schema.nattr)]
        assert all(not a.isvar and not a.isnullable for a in attrs)
        dims = list(schema.domain)
        order = "F" if schema.cell_order == "col-major" else "C"
        chunks: dict = {a.name: [] for a in attrs}
        for tile in reference._dense_tiles(schema, ned):
            full = tuple(hi - lo + 1 for lo, hi in tile)
            clipped = [(lo, min(hi, int(d.domain[1]))) for (lo, hi), d in zip(tile, dims)]
            res = A.query(order="C")[tuple(slice(lo, hi + 1) for lo, hi in clipped)]
            if not isinstance(res, dict):          # one anonymous attribute: tiledb-py returns the array
                res = {attrs[0].name: res}
            for a in attrs:
                v = np.asarray(res[a.name])
                if v.shape != full:
                    padded = np.empty(full, v.dtype)
                    padded[...] = np.asarray(a.fill).astype(v.dtype).reshape(-1)[0] if not v.dtype.names \
                        else np.asarray(a.fill).view(v.dtype).reshape(-1)[0]
                    padded[tuple(slice(0, n) for n in v.shape)] = v
                    v = padded
                chunks[a.name].append(v.reshape(-1, order=order))
        cells = {a.name: reference._to_field(a.name, "attr", a, np.concatenate(chunks[a.name])) for a in attrs}
        return cells, _inside_mask(schema, ned)


def _inside_mask(schema, ned) -> np.ndarray:
    """Per cell in stored (tile, then cell) order: is it inside the fragment's non-empty domain?"""
    masks = []
    order = "F" if schema.cell_order == "col-major" else "C"
    for tile in reference._dense_tiles(schema, ned):
        grids = np.meshgrid(*[np.arange(lo, hi + 1) for lo, hi in tile], indexing="ij")
        inside = np.ones(grids[0].shape, bool)
        for g, (lo, hi) in zip(grids, ned):
            inside &= (g >= int(lo)) & (g <= int(hi))
        masks.append(inside.reshape(-1, order=order))
    return np.concatenate(masks)


def _accepted() -> list[tuple[str, str]]:
    return [(f, p) for f, p in corpus.arrays() if f not in corpus.REFUSED]


def _field_cases() -> list:
    """(folder, fragment, attrs|dims, stem, field name) for every stored field, legacy __coords split
    per dimension too; read with the code under test at collection (it only parses metadata)."""
    cases = []
    for folder, path in _accepted():
        try:
            store = ArrayStore(path)
            root = build_root(store)
            for frag in store.fragments():
                base = f"fragments/{frag.name}"
                for kind in ("attrs", "dims"):
                    for stem in resolve(root, f"{base}/{kind}").children():
                        cases.append(pytest.param(folder, frag.name, kind, stem, id=f"{folder}-{kind}-{stem}"))
        except Exception:  # shows as a failing case, not a collection error
            cases.append(pytest.param(folder, None, None, None, id=f"{folder}-unlisted"))
    return cases or [pytest.param(None, None, None, None, id="corpus-absent")]


def _fragment_folders() -> list[str]:
    return [f for f, p in _accepted() if ArrayStore(p).fragment_paths()] or ["corpus-absent"]


# ---------------------------------------------------------------------------
# every fragment's metadata against tiledb-py
# ---------------------------------------------------------------------------

@pytest.mark.backcompat
@pytest.mark.parametrize("folder", _fragment_folders())
def test_fragment_metadata_matches_tiledb(folder, copies):
    corpus.require()
    path = copies[folder]
    root = build_root(ArrayStore(str(path)))
    infos = _fragment_infos(path)
    listed = sorted(resolve(root, "fragments").children())
    assert listed == sorted(infos), "tdbfs lists the fragments TileDB lists"
    for name, (version, cell_num, ned, mbrs) in infos.items():
        base = f"fragments/{name}"
        frag = _yaml(root, f"{base}/fragment.yaml")
        footer = _yaml(root, f"{base}/footer.yaml")
        assert frag["problems"] == [], frag["problems"]
        assert frag["version"] == footer["version"] == version and "format_version" not in frag
        assert frag["cell_count"] == cell_num
        assert frag["committed"] is True
        want = [[_plain(v) for v in r] for r in ned]
        assert footer["non_empty_domain"] == want
        assert list(frag["non_empty_domain"].values()) == want
        assert frag["files"] == {p.name: p.stat().st_size for p in (path / name if (path / name).is_dir()
                                 else path / "__fragments" / name).iterdir()}
        # Fields a version has, and only those (a field the version lacks is left out of footer.yaml).
        assert ("array_schema_name" in footer) == (version >= 10)
        assert ("has_timestamps" in footer) == (version >= 14)
        assert ("has_delete_meta" in footer) == (version >= 15)
        assert ("file_validity_sizes" in footer) == (version >= 7)
        assert ("footer_length" in footer) == (version >= 3)
        if version >= 3:
            g = footer["generic_tile_offsets"]
            assert ("tile_min_offsets" in g) == (version >= 11)
            assert ("processed_conditions" in g) == (version >= 16)
        else:
            assert "legacy_fragment_metadata" in footer
        assert ("fragment_statistics" in frag) == (version >= 12)
        assert ("processed_conditions" in frag) == (version >= 16)
        if mbrs is not None:
            assert frag["type"] == "sparse" and footer["sparse_tile_num"] == frag["tile_count"] == len(mbrs)
            levels = sorted(n for n in resolve(root, f"{base}/rtree").children() if n.endswith(".csv"))
            rows = _read(root, f"{base}/rtree/{levels[-1]}").decode().splitlines()[1:]
            assert len(rows) == len(mbrs)
            for row, mbr in zip(rows, mbrs):
                got = row.split(",")[1:]
                expected = [_plain(x) for pair in mbr for x in pair]
                assert len(got) == len(expected)
                for g, e in zip(got, expected):
                    assert g == str(e) or float(g) == pytest.approx(float(e)), f"{name} MBR {row}: {expected}"
    # One number for a fragment's format version everywhere: array.yaml's list is TileDB's versions (a
    # format-1 fragment named `__<uuid>_<ms>` is format 1, not the 2 such a name suggests), and the
    # format hint's newest is at least the newest of them.
    summary = _yaml(root, "array.yaml")
    versions = sorted({v for v, *_ in infos.values()})
    assert summary["format_versions"]["fragments"] == versions
    (hint,) = [h for h in summary["hints"] if h["hint"] == "format"]
    assert hint["newest_format"] == max(versions + summary["format_versions"]["schemas"])


# ---------------------------------------------------------------------------
# every tile of every field against tiledb-py
# ---------------------------------------------------------------------------

@pytest.mark.backcompat
@pytest.mark.parametrize("folder,frag_name,kind,stem", _field_cases())
def test_field_tiles_match_tiledb(folder, frag_name, kind, stem, copies):
    corpus.require()
    assert frag_name is not None, f"{folder}: its fragments and fields could not be listed"
    path = copies[folder]
    root = build_root(ArrayStore(str(path)))
    base = f"fragments/{frag_name}"
    folder_path = f"{base}/{kind}/{stem}"
    info = _yaml(root, f"{folder_path}/info.yaml")
    footer = _yaml(root, f"{base}/footer.yaml")
    ntiles = info["tile_count"]
    listing = resolve(root, folder_path).children()
    assert f"tile_{ntiles - 1}.bin" in listing and f"tile_{ntiles}.bin" not in listing
    tiles = {s: [_read(root, f"{folder_path}/tile_{k}{s}") for k in range(ntiles)]
             for s in (".bin", ".var.bin", ".validity.bin") if f"tile_0{s}" in listing}
    cells, mask = _reference(folder, path, frag_name, footer["dense"], footer["non_empty_domain"])
    if stem == "__coords":
        # All dimensions in one tile: compared through the per-dimension split below, and here
        # by its text view (one [d0, d1, ...] line per cell).
        dims = info["dimensions"]
        text = b"".join(_read(root, f"{folder_path}/tile_{k}.txt") for k in range(ntiles)).decode().splitlines()
        want = np.stack([cells[d].values for d in dims], axis=1).tolist()
        assert [yaml.safe_load(line) for line in text] == want
        assert sum(len(t) for t in tiles[".bin"]) == len(want) * len(dims) * cells[dims[0]].values.itemsize
        return
    ref = cells[info["name"]]
    valid = np.ones(len(ref), bool) if not info["nullable"] else ref.validity.astype(bool)
    keep = valid if mask is None else valid & mask
    if info["cell_val_num"] == "var":
        got = []
        for offsets_raw, values in zip(tiles[".bin"], tiles[".var.bin"]):
            offsets = np.frombuffer(offsets_raw, "<u8").astype(np.int64)
            assert len(offsets) == 0 or offsets[0] == 0, "offsets restart at 0 in every tile"
            ends = list(offsets[1:]) + [len(values)]
            got += [values[s:e] for s, e in zip(offsets, ends)]
        assert len(got) == len(ref.cells)
        bad = [i for i in np.flatnonzero(keep) if got[i] != ref.cells[i]]
        assert not bad, f"cells {bad[:5]}: {[got[i] for i in bad[:3]]} != {[ref.cells[i] for i in bad[:3]]}"
    else:
        got = b"".join(tiles[".bin"])
        want = ref.fixed_bytes()
        assert len(got) == len(want), f"{len(got)} decoded bytes, TileDB read {len(want)}"
        g = np.frombuffer(got, np.uint8).reshape(len(ref), -1)
        w = np.frombuffer(want, np.uint8).reshape(len(ref), -1)
        assert np.array_equal(g[keep], w[keep])
    if info["nullable"]:
        got_v = np.frombuffer(b"".join(tiles[".validity.bin"]), np.uint8) != 0
        sel = np.ones(len(got_v), bool) if mask is None else mask
        assert np.array_equal(got_v[sel], valid[sel])


# ---------------------------------------------------------------------------
# every file of every tree
# ---------------------------------------------------------------------------

def _walk(root) -> tuple[int, dict]:
    """Read every file; (files read, {path: reason} of those that read as an I/O error)."""
    failed, count = {}, 0

    def walk(node, path):
        nonlocal count
        try:
            kids = node.children()
        except ViewError as exc:
            failed[path + "/"] = str(exc)
            return
        for name, kid in kids.items():
            p = f"{path}/{name}" if path else name
            if isinstance(kid, DirNode):
                walk(kid, p)
            elif isinstance(kid, FileNode):
                count += 1
                try:
                    size = kid.size()
                    assert len(kid.read(0, size)) == size, p
                except ViewError as exc:
                    failed[p] = str(exc)

    walk(root, "")
    return count, failed


@pytest.mark.backcompat
@pytest.mark.parametrize("folder", [f for f, _ in corpus.arrays()] or ["corpus-absent"])
def test_every_file_of_the_tree_reads(folder, copies):
    """Every file reads and no problem is reported; the two arrays TileDB refuses fail only
    because of what makes them refused."""
    corpus.require()
    store = ArrayStore(str(copies[folder]))
    root = build_root(store)
    count, failed = _walk(root)
    assert count >= 4        # README, array.yaml, a schema and its current.yaml at least
    problems = _yaml(root, "array.yaml")["problems"]
    if folder in corpus.REFUSED:
        why = corpus.REFUSED[folder]
        assert failed and problems
        assert any(why in p["message"] for p in problems), problems
        return
    assert not failed, failed
    # v09 keeps a README.md in the array folder (as its source archive does): an extra file, a warning
    assert [p for p in problems if p["severity"] == "error"] == [], problems
    assert all(p["structure"] == "extra file" for p in problems), problems


@pytest.mark.backcompat
@pytest.mark.parametrize("folder", sorted(corpus.REFUSED))
def test_refused_arrays_say_which_version_and_why(folder, copies):
    """TileDB refuses these two; tdbfs shows the tree, names the version found and why it stops."""
    corpus.require()
    path = copies[folder]
    with pytest.raises(tiledb.TileDBError):
        tiledb.open(str(path)).close()
    root = build_root(ArrayStore(str(path)))
    top = set(root.children())
    assert {"README.txt", "array.yaml", "schema", "fragments"} <= top
    (name,) = resolve(root, "fragments").children()
    base = f"fragments/{name}"
    with pytest.raises(ViewError):
        _read(root, f"{base}/footer.yaml")
    frag = _yaml(root, f"{base}/fragment.yaml")
    summary = _yaml(root, "array.yaml")
    if folder == "experimental_UINT32_MAX":
        assert frag["version"] == 0xFFFFFFFF and frag["name_version"] == 3
        expected = "0xffffffff"
        why = "experimental TileDB build"
    else:
        assert frag["name_version"] == 1 and frag["uuid"] == "b4cae15e1a294904a1296510c34f19ec"
        expected = "TileDB <= 1.3"
        why = "30-byte header"
    for problems in (frag["problems"], summary["problems"]):
        assert any(expected in p["message"] and why in p["message"] and "not decoded" in p["message"]
                   for p in problems), problems
    assert frag["t1"] > 0 and frag["t1_iso"].startswith("20")
    assert "format_version" not in frag and "cell_count" not in frag
    # raw/ stays readable, byte for byte.
    on_disk = path / name if (path / name).is_dir() else path / "__fragments" / name
    for f in resolve(root, f"{base}/raw").children():
        assert _read(root, f"{base}/raw/{f}") == (on_disk / f).read_bytes()


@pytest.mark.backcompat
def test_pre_format_header_recognised_only_where_it_fits():
    """§2.1: the TileDB <= 1.3 header is 30 bytes followed by one blob that ends the file."""
    corpus.require()
    data = (Path(BACKCOMPAT) / "v0_pre_format_1.3.0/dense_array_v1_3_0/__array_schema.tdb").read_bytes()
    old = pre_format_header(data)
    assert old == {"compressed_size": len(data) - 30, "tile_size": 99, "datatype": "CHAR", "cell_size": 1,
                   "compressor": "GZIP", "level": 1}
    assert pre_format_header(data + b"\0") is None           # the blob must end the file
    modern = (Path(BACKCOMPAT) / "v01/non_split_coords_v1_4_0/__array_schema.tdb").read_bytes()
    assert pre_format_header(modern) is None
    assert read_generic_tile_header(modern, 0, "s", "array schema").version == 1


# ---------------------------------------------------------------------------
# schemas and array metadata of every version
# ---------------------------------------------------------------------------

@pytest.mark.backcompat
@pytest.mark.parametrize("folder", [f for f, _ in _accepted()] or ["corpus-absent"])
def test_schema_and_metadata_match_tiledb(folder, copies):
    corpus.require()
    path = copies[folder]
    root = build_root(ArrayStore(str(path)))
    link = resolve(root, "schema/current.yaml")
    current = _yaml(root, f"schema/{link.target}")
    with tiledb.open(str(path)) as A:
        schema = A.schema
        meta = {k: A.meta[k] for k in A.meta.keys()}
        meta = {k: (np.array(v, copy=True) if isinstance(v, np.ndarray) else v) for k, v in meta.items()}
    assert current["array_type"] == ("sparse" if schema.sparse else "dense")
    if schema.sparse:
        assert current["capacity"] == schema.capacity
    assert [a["name"] for a in current["attributes"]] == [schema.attr(i).name for i in range(schema.nattr)]
    dims = current["domain"]["dimensions"]
    assert [d["name"] for d in dims] == [d.name for d in schema.domain]
    for a, ta in zip(current["attributes"], (schema.attr(i) for i in range(schema.nattr))):
        assert bool(a.get("nullable", False)) == bool(ta.isnullable), a["name"]
        assert (a["cell_val_num"] == "var") == bool(ta.isvar), a["name"]
    merged = _yaml(root, "metadata/merged.yaml")["metadata"]
    assert sorted(merged) == sorted(meta)
    for k, v in meta.items():
        got = merged[k]["value"]
        if isinstance(v, np.ndarray) or isinstance(got, list):
            assert np.allclose(np.asarray(got, float), np.asarray(v, float)), k
        elif isinstance(v, float):
            assert got == pytest.approx(v), k
        else:
            assert _plain(got) == _plain(v), k


# ---------------------------------------------------------------------------
# INDEX.md's expected values
# ---------------------------------------------------------------------------

def _cells_by_coords(root, frag: str) -> dict:
    """(d0, d1) -> a, from the legacy __coords split and attribute a."""
    base = f"fragments/{frag}"
    names = [n for n in resolve(root, f"{base}/dims").children() if n != "__coords"]
    cols = [np.frombuffer(_read(root, f"{base}/dims/{n}/tile_0.bin"), "<i4").tolist() for n in names]
    a = np.frombuffer(_read(root, f"{base}/attrs/a/tile_0.bin"), "<i4").tolist()
    return dict(zip(zip(*cols), a))


@pytest.mark.backcompat
def test_index_expected_values_of_formats_1_and_2(copies):
    """INDEX.md: v1 a = 1..4 at (1,10)..(4,10), zipped __coords; v2 (1,1)=1, (2,3)=3, (2,4)=2, unzipped."""
    corpus.require()
    root = build_root(ArrayStore(str(copies["v01"])))
    (frag,) = resolve(root, "fragments").children()
    assert _cells_by_coords(root, frag) == {(1, 10): 1, (2, 10): 2, (3, 10): 3, (4, 10): 4}
    assert _yaml(root, f"fragments/{frag}/dims/__coords/info.yaml")["coords_layout"].startswith("zipped")
    assert _read(root, f"fragments/{frag}/dims/__coords/tile_0.bin") == \
        np.array([1, 10, 2, 10, 3, 10, 4, 10], "<i4").tobytes()      # as stored: x1,y1,x2,y2,...
    d2 = _yaml(root, f"fragments/{frag}/dims/d2/info.yaml")
    assert d2["name"] == "d2" and d2["derived_from"] == "__coords.tdb"
    assert _read(root, f"fragments/{frag}/dims/d2/tile_0.txt") == b"10\n10\n10\n10\n"
    root = build_root(ArrayStore(str(copies["v02"])))
    (frag,) = resolve(root, "fragments").children()
    assert _cells_by_coords(root, frag) == {(1, 1): 1, (2, 3): 3, (2, 4): 2}
    assert _yaml(root, f"fragments/{frag}/dims/__coords/info.yaml")["coords_layout"].startswith("unzipped")
    footer = _yaml(root, f"fragments/{frag}/footer.yaml")
    assert footer["version"] == 2 and footer["non_empty_domain"] == [[1, 2], [1, 4]]
    assert footer["file_sizes"] == [32, 106] and "footer_length" not in footer


@pytest.mark.backcompat
def test_index_zero_var_chunks_and_schema_only_arrays(copies):
    """INDEX.md: v10 holds one cell with an empty string dimension (a var tile of 0 chunks); v4 and
    v11 are schema (and metadata) only."""
    corpus.require()
    root = build_root(ArrayStore(str(copies["v10"])))
    (frag,) = resolve(root, "fragments").children()
    base = f"fragments/{frag}/dims/d0"
    assert _read(root, f"{base}/tile_0.var.bin") == b""
    assert np.frombuffer(_read(root, f"{base}/tile_0.bin"), "<u8").tolist() == [0]
    assert _read(root, f"{base}/tile_0.txt") == b'""\n'
    assert _read(root, f"fragments/{frag}/attrs/a0/tile_0.txt") == b"1\n"
    for folder in ("v04", "v11_schema_only"):
        root = build_root(ArrayStore(str(copies[folder])))
        assert resolve(root, "fragments").children() == {}
        assert _yaml(root, "array.yaml")["problems"] == []


# ---------------------------------------------------------------------------
# a legacy array through a real mount
# ---------------------------------------------------------------------------

@pytest.mark.backcompat
def test_legacy_array_through_the_mount(copies, mount, tmp_path):
    corpus.require()
    path = corpus.copy_array(str(copies["v01"]), tmp_path)   # a copy of our own: mounted, never written
    before = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    mnt = mount(path)
    (frag,) = os.listdir(mnt / "fragments")
    dims = mnt / "fragments" / frag / "dims"
    assert sorted(os.listdir(dims)) == ["__coords", "d1", "d2"]
    assert (dims / "d1" / "tile_0.bin").read_bytes() == np.array([1, 2, 3, 4], "<i4").tobytes()
    assert os.stat(dims / "d2" / "tile_0.bin").st_size == 16
    footer = yaml.safe_load((mnt / "fragments" / frag / "footer.yaml").read_bytes())
    assert footer["version"] == 1 and footer["sparse_tile_num"] == 1
    refused = corpus.copy_array(str(copies["experimental_UINT32_MAX"]), tmp_path)
    mnt2 = mount(refused)
    (frag2,) = os.listdir(mnt2 / "fragments")
    with pytest.raises(OSError) as e:
        (mnt2 / "fragments" / frag2 / "footer.yaml").read_bytes()
    assert e.value.errno == errno.EIO
    assert b"experimental TileDB build" in (mnt2 / "array.yaml").read_bytes()
    assert before == {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}


# ---------------------------------------------------------------------------
# hand-made minimal cases for what no sample covers
# ---------------------------------------------------------------------------

def _gtile(payload: bytes, version: int, filters: bytes = b"", nfilters: int = 0, encryption: int = 0) -> bytes:
    """A generic tile (§2.1) with one unfiltered chunk (§2.2): empty pipeline unless `filters` given."""
    pipeline = struct.pack("<II", 65536, nfilters) + filters
    chunk = struct.pack("<QIII", 1, len(payload), len(payload), 0) + payload
    return (struct.pack("<IQQBQBI", version, len(chunk), len(payload), 4, 1, encryption, len(pipeline))
            + pipeline + chunk)


def _patched_fragment(tmp_path, src: Path, old_v: int, new_v: int, extra_gtile: bytes | None = None) -> Path:
    """The array at `src` copied with its one fragment relabelled as format `new_v`: the folder
    suffix, its commit marker and the footer's version field (§5.4) changed; `extra_gtile`, if
    given, is inserted before the footer and its offset appended as the footer's last u64 (§5.3)."""
    dst = corpus.copy_array(str(src), tmp_path / f"v{new_v}")
    (frag_dir,) = [p for p in (dst / "__fragments").iterdir() if p.is_dir()]
    new_name = frag_dir.name[: -len(str(old_v))] + str(new_v)
    frag_dir = frag_dir.rename(frag_dir.parent / new_name)
    for marker in (dst / "__commits").iterdir():
        marker.rename(marker.parent / (new_name + ".wrt"))
    fmd = frag_dir / "__fragment_metadata.tdb"
    data = fmd.read_bytes()
    (footer_len,) = struct.unpack("<Q", data[-8:])
    start = len(data) - 8 - footer_len
    footer = bytearray(data[start:-8])
    assert struct.unpack_from("<I", footer)[0] == old_v
    footer[0:4] = struct.pack("<I", new_v)
    body = data[:start]
    if extra_gtile is not None:
        footer += struct.pack("<Q", len(body))
        body += extra_gtile
    fmd.write_bytes(body + bytes(footer) + struct.pack("<Q", len(footer)))
    return dst


@pytest.mark.backcompat
def test_format_12_fragment_level_statistics(tmp_path):
    """§5.3/§5.5, §6.2: format 12 added the fragment min/max/sum/null-count generic tile; 13 only
    changed DICTIONARY on ASCII strings, which the v13 sample does not use, so its fragment
    relabelled 12 is a faithful v12 fragment. Statistics are checked against the tiles."""
    corpus.require()
    src = Path(dict(corpus.arrays())["v13"])
    arr = _patched_fragment(tmp_path, src, 13, 12)
    root = build_root(ArrayStore(str(arr)))
    (frag,) = resolve(root, "fragments").children()
    assert frag.endswith("_12")
    summary = _yaml(root, f"fragments/{frag}/fragment.yaml")
    footer = _yaml(root, f"fragments/{frag}/footer.yaml")
    assert summary["problems"] == [] and summary["version"] == footer["version"] == 12
    assert "has_timestamps" not in footer and "processed_conditions" not in footer["generic_tile_offsets"]
    stats = summary["fragment_statistics"]
    counts = np.concatenate([np.frombuffer(_read(root, f"fragments/{frag}/attrs/a2/tile_{k}.bin"), "<i4")
                             for k in range(summary["tile_count"])])
    name = summary["fields"]["a2"]
    assert stats[name] == {"min": int(counts.min()), "max": int(counts.max()), "sum": int(counts.sum())}
    with tiledb.open(str(src)) as A:  # TileDB's own read of the unmodified sample agrees
        assert A.query(attrs=[name])[:][name].sum() == counts.sum()


@pytest.mark.backcompat
def test_format_16_processed_conditions(tmp_path):
    """§5.3-§5.5: format 16 appended a processed-conditions generic tile (`u64 n, n x {u64 len,
    bytes}`) whose offset is the footer's last field. Built on the v15 sample (same layout
    otherwise) with one condition name."""
    corpus.require()
    src = Path(dict(corpus.arrays())["v15"])
    cond = b"__1700000000000_1700000000000_0123456789abcdef0123456789abcdef_16.del"
    payload = struct.pack("<Q", 1) + struct.pack("<Q", len(cond)) + cond
    arr = _patched_fragment(tmp_path, src, 15, 16, _gtile(payload, 16))
    root = build_root(ArrayStore(str(arr)))
    (frag,) = resolve(root, "fragments").children()
    summary = _yaml(root, f"fragments/{frag}/fragment.yaml")
    footer = _yaml(root, f"fragments/{frag}/footer.yaml")
    assert summary["problems"] == [] and footer["version"] == 16
    assert footer["has_delete_meta"] is False
    assert isinstance(footer["generic_tile_offsets"]["processed_conditions"], int)
    assert summary["processed_conditions"] == [cond.decode()]
    # The data tiles are untouched: still the v15 values.
    orig = build_root(ArrayStore(str(src)))
    (ofrag,) = resolve(orig, "fragments").children()
    assert _read(root, f"fragments/{frag}/attrs/a0/tile_0.bin") == _read(orig, f"fragments/{ofrag}/attrs/a0/tile_0.bin")


def test_encryption_fields_of_a_generic_tile_header():
    """§2.1, §8 #4: an encrypted array's generic tiles say encryption_type 1 and serialise the
    pipeline [GZIP level 1, AES_256_GCM (id 11, no options)] in the header."""
    payload = zlib.compress(b"x" * 10)
    filters = struct.pack("<BIBi", 1, 5, 1, 1) + struct.pack("<BI", 11, 0)
    data = _gtile(payload, 22, filters, 2, encryption=1)
    h = read_generic_tile_header(data, 0, "__schema/s", "array schema")
    assert h.version == 22 and h.encryption_type == 1
    assert [f.name for f in h.filters.filters] == ["GZIP", "AES_256_GCM"]
    assert h.filters.filters[0].options == {"compressor": "GZIP", "level": 1}
    assert h.filter_pipeline_size == 8 + 10 + 5 and h.payload_offset == 34 + 23
    assert h.end == len(data)
