"""TileDB 0.x arrays written by GenomicsDB's TileDB library: every fragment decodes to what the
library reads back; schema and book-keeping agree with the library; a workspace mounts as one tree.

The arrays are written for real through ctypes (tests/legacy0x_arrays.py). The oracle for one
fragment is the library reading a copy of the array holding only that fragment.
"""

from __future__ import annotations

import json
import os
import shutil
import struct

import numpy as np
import pytest

import legacy0x_arrays as Z
from tdbfs.store.array_store import ArrayStore
from tdbfs.store.legacy0x import Legacy0xArrayStore, Legacy0xWorkspaceStore
from tdbfs.store.open_array import open_array
from tdbfs.views.nodes import DirNode, ViewError, resolve
from tdbfs.views.tree import build_root

pytestmark = pytest.mark.skipif(Z.wheel_library_path() is None,
                                reason="genomicsdb==0.1.6 (its TileDB 0.x library) is not installed; "
                                       "scripts/_setup.sh installs it")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The workspace of tests/legacy0x_arrays.py and what the library reads from each fragment alone,
    made in a child process (the library may crash a process at exit)."""
    root = tmp_path_factory.mktemp("zero")
    return Z.load_corpus(root)


def fragment_oracle(corpus, path: str, spec: Z.ArraySpec, frag_name: str, ned=None) -> dict:
    """What the library reads from this fragment alone (a copy of the array holding only it)."""
    return corpus["cells"][(str(path), frag_name)]


def read_node(root, path: str) -> bytes:
    node = resolve(root, path)
    size = node.size()
    data = node.read(0, size + 10)
    assert len(data) == size, f"{path}: stat size {size}, read {len(data)}"
    return data


def view_fragment_cells(root, base: str, spec: Z.ArraySpec, ntiles: int) -> dict:
    """Every field of a fragment as the tree shows it, tiles concatenated."""
    out = {}
    for a in spec.attrs:
        d = f"{base}/attrs/{a.name}"
        data = b"".join(read_node(root, f"{d}/tile_{k}.bin") for k in range(ntiles))
        if a.var:
            values = b"".join(read_node(root, f"{d}/tile_{k}.var.bin") for k in range(ntiles))
            offs = np.frombuffer(data, "<u8").astype(np.int64)  # as stored: into the fragment's whole var stream
            ends = np.append(offs[1:], len(values))
            out[a.name] = [values[s:e] for s, e in zip(offs.tolist(), ends.tolist())]
        else:
            out[a.name] = np.frombuffer(data, Z.NUMPY[a.type]) if a.type != Z.CHAR else data
    if not spec.dense:
        raw = b"".join(read_node(root, f"{base}/dims/__coords/tile_{k}.bin") for k in range(ntiles))
        out["__coords"] = np.frombuffer(raw, spec.coord_dtype).reshape(-1, len(spec.dims))
        for i, dim in enumerate(spec.dims):
            col = b"".join(read_node(root, f"{base}/dims/{dim}/tile_{k}.bin") for k in range(ntiles))
            out[f"dim:{dim}"] = np.frombuffer(col, spec.coord_dtype)
    return out


def assert_cells_equal(got: dict, want: dict, where: str, spec: Z.ArraySpec) -> None:
    for a in spec.attrs:
        g, w = got[a.name], want[a.name]
        if isinstance(w, list):
            assert g == w, f"{where}: {a.name} var cells differ"
        elif isinstance(w, bytes):
            assert g == w, f"{where}: {a.name} differs"
        else:
            assert g.dtype == w.dtype and np.array_equal(g, w, equal_nan=w.dtype.kind == "f"), \
                f"{where}: {a.name} differs"
    if not spec.dense:
        assert np.array_equal(got["__coords"], want["__coords"]), f"{where}: coordinates differ"
        for i, dim in enumerate(spec.dims):
            assert np.array_equal(got[f"dim:{dim}"], want["__coords"][:, i]), f"{where}: dims/{dim} differs"


def committed_fragments(path: str) -> list[str]:
    return [n for n in os.listdir(path) if n.startswith("__") and os.path.isdir(os.path.join(path, n))
            and os.path.exists(os.path.join(path, n, "__tiledb_fragment.tdb"))]


# -- every fragment decodes to what the library reads back -----------------------------------------

ARRAY_NAMES = ["sparse_none", "sparse_gzip", "sparse_zstd_lz4", "sparse_rle", "sparse_delta", "sparse_bitshuffle",
               "sparse_types", "sparse_hilbert", "sparse_extents_col", "dense_gzip", "dense_none", "dense_codecs",
               "sparse_consolidated", "grp/in_group", "dense_interrupted", "sparse_unmarked"]


@pytest.mark.parametrize("name", ARRAY_NAMES)
def test_every_fragment_matches_library(corpus, name):
    path, spec = corpus["arrays"][name]
    store = open_array(path)
    assert isinstance(store, Legacy0xArrayStore)
    root = build_root(store)
    frags = [n for n in os.listdir(path) if n.lstrip(".").startswith("__") and os.path.isdir(os.path.join(path, n))]
    assert sorted(root.children()["fragments"].children()) == sorted(frags)
    checked = 0
    for frag_name in frags:
        frag = store.fragment(frag_name)
        if not os.path.exists(os.path.join(path, frag_name, "__book_keeping.tdb.gz")):
            continue  # the interrupted write: checked in test_uncommitted_fragments_are_shown_and_flagged
        bk = frag.book_keeping()
        want = fragment_oracle(corpus, path, spec, frag_name, bk.non_empty_domain)
        base = f"fragments/{frag_name}"
        got = view_fragment_cells(root, base, spec, frag.tile_count())
        assert_cells_equal(got, want, f"{name}/{frag_name}", spec)
        n = frag.cell_count()
        first = spec.attrs[0]
        assert n == (len(want[first.name]) // (first.cell_val_num if not first.var else 1)) > 0
        checked += 1
    assert checked >= 1


@pytest.mark.parametrize("name", ["sparse_gzip", "sparse_rle", "sparse_types", "dense_codecs", "dense_none"])
def test_tile_text_and_records(corpus, name):
    """tile_K.txt is the cells as JSON lines; tile_K.yaml gives var offsets as stored and tile-relative."""
    path, spec = corpus["arrays"][name]
    store = open_array(path)
    root = build_root(store)
    for frag_name in committed_fragments(path):
        frag = store.fragment(frag_name)
        want = fragment_oracle(corpus, path, spec, frag_name, frag.book_keeping().non_empty_domain)
        base = f"fragments/{frag_name}/attrs"
        for a in spec.attrs:
            lines = []
            for k in range(frag.tile_count()):
                lines += read_node(root, f"{base}/{a.name}/tile_{k}.txt").decode().splitlines()
            values = [json.loads(line) for line in lines]
            w = want[a.name]
            if a.var and a.type == Z.CHAR:
                assert values == [c.decode() for c in w]
            elif a.var:
                assert values == [np.frombuffer(c, Z.NUMPY[a.type]).tolist() for c in w]
            elif a.type == Z.CHAR:
                width = a.cell_val_num
                assert values == [w[i:i + width].decode() for i in range(0, len(w), width)]
            else:  # text holds the shortest repr of each value in its own type
                got = np.array(values, dtype=np.asarray(w).dtype)
                assert np.array_equal(got, np.asarray(w).reshape(got.shape))
            if a.var:
                total = 0
                for k in range(frag.tile_count()):
                    import yaml
                    rec = yaml.safe_load(read_node(root, f"{base}/{a.name}/tile_{k}.yaml"))["streams"]["offsets"]
                    stored = rec["offsets_stored"]
                    assert stored[0] == total == rec["var_base"]
                    assert rec["offsets_tile_relative"] == [o - total for o in stored]
                    total += len(read_node(root, f"{base}/{a.name}/tile_{k}.var.bin"))


def test_schema_matches_library(corpus):
    import yaml
    for name, (path, spec) in corpus["arrays"].items():
        lib = corpus["schemas"][path]
        root = build_root(open_array(path))
        assert resolve(root, "schema/current.yaml").target == "__array_schema.tdb.yaml"
        doc = yaml.safe_load(read_node(root, "schema/__array_schema.tdb.yaml"))
        assert doc["form"].startswith("GenomicsDB") and doc["version"] == 2
        assert doc["array_name"] == lib["name"]
        assert [a["name"] for a in doc["attributes"]] == lib["attributes"]
        assert [d["name"] for d in doc["dimensions"]] == lib["dimensions"]
        assert doc["capacity"] == lib["capacity"]
        assert doc["array_type"] == ("dense" if lib["dense"] else "sparse")
        orders = {0: "row-major", 1: "col-major", 2: "hilbert"}
        assert doc["cell_order"] == orders[lib["cell_order"]] and doc["tile_order"] == orders[lib["tile_order"]]
        assert [a["cell_val_num"] for a in doc["attributes"]] == [
            "var" if v == Z.VAR_NUM else v for v in lib["cell_val_num"]]
        assert [a["compression"]["raw"] for a in doc["attributes"]] + [doc["coordinates"]["compression"]["raw"]] \
            == lib["compression"]
        assert [a["compression"]["level"] for a in doc["attributes"]] + [
            doc["coordinates"]["compression"]["level"]] == lib["compression_level"]
        for a, off in zip(doc["attributes"], lib["offsets_compression"]):
            if a["cell_val_num"] == "var":
                assert a["offsets_compression"]["raw"] == off
        assert [d["domain"] for d in doc["dimensions"]] == [list(r) for r in spec.domain]


def test_book_keeping_agrees_with_cells(corpus):
    """MBRs hold every cell of their tile, bounding coords are each tile's first and last cell, the
    non-empty domain is the write's subarray (or the whole domain), last_tile_cell_num the tail."""
    import yaml
    for name in ("sparse_gzip", "sparse_zstd_lz4", "sparse_types", "sparse_hilbert", "sparse_extents_col",
                 "dense_gzip", "sparse_consolidated"):
        path, spec = corpus["arrays"][name]
        store = open_array(path)
        root = build_root(store)
        for frag_name in committed_fragments(path):
            frag = store.fragment(frag_name)
            doc = yaml.safe_load(read_node(root, f"fragments/{frag_name}/book_keeping.yaml"))
            want = fragment_oracle(corpus, path, spec, frag_name, frag.book_keeping().non_empty_domain)
            if spec.dense:
                assert doc["mbr_num"] == 0 and doc["last_tile_cell_num"] == int(np.prod(spec.extents))
                continue
            assert doc["non_empty_domain"] == {d: r for d, r in zip(spec.dims, spec.domain)}
            coords = want["__coords"]
            cap = spec.capacity
            ntiles = -(-len(coords) // cap)
            assert doc["mbr_num"] == doc["bounding_coords_num"] == ntiles
            assert doc["last_tile_cell_num"] == len(coords) - (ntiles - 1) * cap
            csv = read_node(root, f"fragments/{frag_name}/rtree/level_0.csv").decode().splitlines()
            assert len(csv) == ntiles + 1
            for k in range(ntiles):
                tile = coords[k * cap:(k + 1) * cap]
                mbr = [[int(tile[:, i].min()), int(tile[:, i].max())] for i in range(len(spec.dims))]
                assert doc["mbrs"][k] == mbr
                assert doc["bounding_coords"][k] == {"first": tile[0].tolist(), "last": tile[-1].tolist()}
                assert csv[k + 1] == ",".join(str(v) for v in [k] + sum(mbr, []))


def test_dense_subarray_is_the_non_empty_domain(corpus):
    """A dense write that is not tile-aligned stores whole tiles; the non-empty domain is its subarray."""
    import yaml
    path, spec = corpus["arrays"]["dense_gzip"]
    root = build_root(open_array(path))
    docs = [yaml.safe_load(read_node(root, f"fragments/{n}/fragment.yaml")) for n in committed_fragments(path)]
    by_cells = sorted(docs, key=lambda d: d["cell_count"])
    assert by_cells[0]["non_empty_domain"] == {"d1": [1, 2], "d2": [2, 4]}
    assert by_cells[0]["tile_count"] == 2 and by_cells[0]["cell_count"] == 32 and by_cells[0]["tile_grid"] == [1, 2]
    assert by_cells[1]["non_empty_domain"] == {"d1": [0, 7], "d2": [0, 7]} and by_cells[1]["tile_count"] == 4


def test_fragment_yaml_parses_the_name(corpus):
    import yaml
    path, spec = corpus["arrays"]["sparse_gzip"]
    root = build_root(open_array(path))
    for n in committed_fragments(path):
        doc = yaml.safe_load(read_node(root, f"fragments/{n}/fragment.yaml"))
        assert doc["writer_kind"] == "uuid+thread"
        assert n == "__" + doc["uuid"] + str(doc["thread_id"]) + "_" + str(doc["timestamp_ms"])
        assert doc["committed"] is True and doc["problems"] == []
        assert doc["files"]["__book_keeping.tdb.gz"] == os.path.getsize(os.path.join(path, n, "__book_keeping.tdb.gz"))


def test_uncommitted_fragments_are_shown_and_flagged(corpus):
    import yaml
    path, spec = corpus["arrays"]["dense_interrupted"]
    root = build_root(open_array(path))
    names = sorted(root.children()["fragments"].children())
    hidden = [n for n in names if n.startswith(".__")]
    assert len(hidden) == 1 and len(names) == 2
    doc = yaml.safe_load(read_node(root, f"fragments/{hidden[0]}/fragment.yaml"))
    assert doc["committed"] is False and doc["hidden"] is True
    assert any("hidden" in r for r in doc["uncommitted"]) and any("__tiledb_fragment.tdb" in r for r in doc["uncommitted"])
    # no book-keeping yet: that view is an I/O error, the raw data files are still there
    with pytest.raises(ViewError):
        read_node(root, f"fragments/{hidden[0]}/book_keeping.yaml")
    raw = root.children()["fragments"].children()[hidden[0]].children()["raw"].children()
    assert "a1.tdb" in raw and "__book_keeping.tdb.gz" not in raw
    summary = yaml.safe_load(read_node(root, "array.yaml"))
    assert summary["counts"] == {"fragments": 2, "committed_fragments": 1, "uncommitted_fragments": 1, "schemas": 1}
    assert summary["uncommitted_fragments"] == hidden
    assert any(p["file"].endswith("__book_keeping.tdb.gz") for p in summary["problems"])

    path, spec = corpus["arrays"]["sparse_unmarked"]
    root = build_root(open_array(path))
    unmarked = [n for n in os.listdir(path) if n.startswith("__") and os.path.isdir(os.path.join(path, n))
                and n not in committed_fragments(path)]
    assert len(unmarked) == 1
    doc = yaml.safe_load(read_node(root, f"fragments/{unmarked[0]}/fragment.yaml"))
    assert doc["committed"] is False and doc["hidden"] is False
    assert doc["uncommitted"] == ["no __tiledb_fragment.tdb: the writer never finalized it"]
    assert doc["cell_count"] == 9  # still fully decodable (checked against the library above)


# -- the original Intel-HLS schema (no version tag) --------------------------------------------------

def legacy_schema_bytes(versioned: bytes) -> bytes:
    """The original Intel-HLS `__array_schema.tdb` of the same array (docs/format-0x.md, steps 2-9).

    The library only writes the versioned form, so the original is rebuilt from the versioned
    bytes: drop the tag and workspace string (step 1), keep steps 2-9 unchanged, and drop the
    version 1 and 2 additions (compression levels, offsets codecs) that follow step 9."""
    (tag,) = struct.unpack_from("<I", versioned, 0)
    assert tag == 0xFFFFFFFF - 2
    (ws_len,) = struct.unpack_from("<i", versioned, 4)
    body = versioned[8 + ws_len:]
    pos = 0
    (n,) = struct.unpack_from("<i", body, pos); pos += 4 + n           # array name
    pos += 3 + 8                                                       # dense, tile order, cell order, capacity
    (attr_num,) = struct.unpack_from("<i", body, pos); pos += 4
    for _ in range(attr_num):
        (n,) = struct.unpack_from("<i", body, pos); pos += 4 + n
    (dim_num,) = struct.unpack_from("<i", body, pos); pos += 4
    for _ in range(dim_num):
        (n,) = struct.unpack_from("<i", body, pos); pos += 4 + n
    for _ in range(2):                                                 # domain, tile extents
        (n,) = struct.unpack_from("<i", body, pos); pos += 4 + n
    pos += (attr_num + 1) + 4 * attr_num + (attr_num + 1)              # types, cell_val_num, compression
    return body[:pos]


@pytest.mark.parametrize("name", ["sparse_gzip", "dense_none", "sparse_rle", "sparse_types"])
def test_original_intel_hls_schema(corpus, tmp_path, name):
    """A copy of the array under the untagged schema decodes to the same cells. The oracle is the
    library reading the versioned original: it misreads compressed var offsets under an untagged
    schema (docs/format-0x.md), and the untagged form means the same codecs at default levels."""
    import yaml
    path, spec = corpus["arrays"][name]
    copy = tmp_path / "legacy"
    shutil.copytree(path, copy)
    versioned = (copy / "__array_schema.tdb").read_bytes()
    (copy / "__array_schema.tdb").write_bytes(legacy_schema_bytes(versioned))
    store = open_array(str(copy))
    assert isinstance(store, Legacy0xArrayStore)
    root = build_root(store)
    doc = yaml.safe_load(read_node(root, "schema/__array_schema.tdb.yaml"))
    assert doc["form"].startswith("original") and "version" not in doc
    assert doc["size"] == len(legacy_schema_bytes(versioned))
    for frag_name in committed_fragments(path):
        frag = store.fragment(frag_name)
        want = fragment_oracle(corpus, path, spec, frag_name, frag.book_keeping().non_empty_domain)
        got = view_fragment_cells(root, f"fragments/{frag_name}", spec, frag.tile_count())
        assert_cells_equal(got, want, f"legacy {name}/{frag_name}", spec)


# -- the workspace ---------------------------------------------------------------------------------------

def test_workspace_is_one_tree(corpus):
    import yaml
    store = open_array(corpus["ws"])
    assert isinstance(store, Legacy0xWorkspaceStore)
    root = build_root(store)
    top = root.children()
    assert set(top) == {"README.txt", "workspace.yaml", "arrays", "files"}
    arrays = top["arrays"].children()
    assert sorted(arrays) == sorted(n.replace("/", "%2F") for n in corpus["arrays"])
    assert read_node(root, "files/callset.json") == b'{"callsets": []}\n'
    assert read_node(root, "files/__tiledb_workspace.tdb") == b""
    doc = yaml.safe_load(read_node(root, "workspace.yaml"))
    assert doc["kind"] == "workspace" and doc["groups"] == ["grp"]
    assert doc["arrays"]["dense_interrupted"]["uncommitted_fragments"] == 1
    assert doc["arrays"]["sparse_consolidated"]["fragments"] == 1
    # an array in the workspace shows the same tree as when mounted alone
    path, spec = corpus["arrays"]["grp/in_group"]
    alone = build_root(open_array(path))
    frag = committed_fragments(path)[0]
    for sub in ("attrs/a1/tile_0.bin", "dims/__coords/tile_1.txt", "dims/d2/tile_2.bin", "book_keeping.yaml"):
        assert read_node(root, f"arrays/grp%2Fin_group/fragments/{frag}/{sub}") == \
            read_node(alone, f"fragments/{frag}/{sub}")
    assert isinstance(resolve(root, "arrays/sparse_gzip/schema"), DirNode)


def test_a_0x_group_is_told_from_a_group_before_tiledb_2_9_by_its_arrays(corpus, tmp_path):
    """A 0.x group and a TileDB group written before 2.9 are both a folder with only the group marker:
    the layout of the arrays in it tells them apart, never the marker (tests/test_group_members.py has
    the TileDB side)."""
    import corpus as backcompat
    from tdbfs.store.group_store import GroupStore

    grp = open_array(os.path.join(corpus["ws"], "grp"))
    assert isinstance(grp, Legacy0xWorkspaceStore) and grp.kind == "group" and grp.array_paths() == ["in_group"]
    # a marker-only group of 0.x arrays only (one untagged by the fork, found by its book-keeping files)
    zero = tmp_path / "zero_group"
    zero.mkdir()
    (zero / "__tiledb_group.tdb").write_bytes(b"")
    for name in ("sparse_gzip", "dense_gzip"):
        shutil.copytree(corpus["arrays"][name][0], zero / name)
    store = open_array(str(zero))
    assert isinstance(store, Legacy0xWorkspaceStore) and store.array_paths() == ["dense_gzip", "sparse_gzip"]
    # the same with a TileDB array of format 5 beside them: a TileDB group, each member as what it is
    shutil.copytree(backcompat.array("v05"), zero / "data")
    store = open_array(str(zero))
    assert isinstance(store, GroupStore) and [m.shown for m in store.members()] == ["data", "dense_gzip", "sparse_gzip"]
    assert type(store.member_store("data")) is ArrayStore
    assert type(store.member_store("sparse_gzip")) is Legacy0xArrayStore
    assert store.findings() == []


def test_today_arrays_are_not_routed(array_factory):
    """A TileDB 2.x array is opened by ArrayStore exactly as before."""
    arr = array_factory("sparse")
    assert type(open_array(arr.path)) is ArrayStore


def test_mount_workspace(corpus, mount, tmp_path):
    """A real FUSE mount of a GenomicsDB-style workspace: one tree, the workspace untouched."""
    from mounting import assert_unchanged, snapshot_tree
    ws = tmp_path / "ws"
    shutil.copytree(corpus["ws"], ws, symlinks=True)
    before = snapshot_tree(ws)
    mnt = mount(ws)
    assert sorted(os.listdir(mnt / "arrays")) == sorted(n.replace("/", "%2F") for n in corpus["arrays"])
    path, spec = corpus["arrays"]["sparse_gzip"]
    frag = committed_fragments(path)[0]
    store = open_array(path)
    want = fragment_oracle(corpus, path, spec, frag)
    tdir = mnt / "arrays" / "sparse_gzip" / "fragments" / frag / "attrs" / "a1"
    ntiles = store.fragment(frag).tile_count()
    got = b"".join((tdir / f"tile_{k}.bin").read_bytes() for k in range(ntiles))
    assert np.array_equal(np.frombuffer(got, "<i4"), want["a1"])
    lines = (mnt / "arrays" / "sparse_gzip" / "fragments" / frag / "dims" / "__coords" / "tile_0.txt").read_text()
    assert [json.loads(x) for x in lines.splitlines()] == want["__coords"][:spec.capacity].tolist()
    hidden = [n for n in os.listdir(mnt / "arrays" / "dense_interrupted" / "fragments") if n.startswith(".")]
    assert len(hidden) == 1
    with pytest.raises(OSError):
        (mnt / "arrays" / "dense_interrupted" / "fragments" / hidden[0] / "book_keeping.yaml").read_bytes()
    assert_unchanged(before, snapshot_tree(ws))


# -- BLOSC: the genomicsdb library has no blosc compiled in, so these tiles are made here -----------

BLOSC_CODECS = {4: "blosclz", 5: "lz4", 6: "lz4hc", 8: "zlib", 9: "zstd"}


def book_keeping_file(bk, tile_offsets, var_offsets) -> bytes:
    """`__book_keeping.tdb.gz` from its fields (docs/format-0x.md): the library's own lists, with new
    tile offsets for the re-compressed files."""
    q = lambda values: np.asarray(values, "<i8").tobytes()
    ned = np.asarray(bk.non_empty_domain).astype(bk.mbrs.dtype)
    out = q([ned.nbytes]) + ned.tobytes()
    out += q([len(bk.mbrs)]) + bk.mbrs.tobytes() + q([len(bk.bounding_coords)]) + bk.bounding_coords.tobytes()
    for lists in (tile_offsets, var_offsets, bk.tile_var_sizes):
        for v in lists:
            out += q([len(v)]) + q(v)
    out += q([bk.last_tile_cell_num])
    import gzip
    return gzip.compress(out)


@pytest.mark.parametrize("codec", sorted(BLOSC_CODECS))
def test_blosc_tiles(corpus, tmp_path, codec):
    """sparse_gzip re-compressed tile by tile with blosc, the way Intel-HLS TileDB wrote BLOSC tiles
    (blosc_compress with byte shuffle and the value type size), decodes to what the library reads
    from the gzip original."""
    import blosc
    path, spec = corpus["arrays"]["sparse_gzip"]
    copy = tmp_path / "blosc"
    shutil.copytree(path, copy)
    schema = bytearray((copy / "__array_schema.tdb").read_bytes())
    n = len(spec.attrs)
    # a version 2 schema ends with compression[n+1], levels[n+1], offsets compression[n], offsets levels[n]
    tail = len(schema) - (4 * n + 2)
    schema[tail:tail + n + 1] = bytes([codec]) * (n + 1)
    for i, a in enumerate(spec.attrs):
        if a.var:
            schema[len(schema) - 2 * n + i] = codec
    (copy / "__array_schema.tdb").write_bytes(bytes(schema))
    original = open_array(path)
    for frag_name in committed_fragments(path):
        frag = original.fragment(frag_name)
        bk = frag.book_keeping()
        tile_offsets, var_offsets = [], []
        for field in frag.fields():
            for stream, lists in (("data", tile_offsets), ("var", var_offsets)):
                if stream == "var" and field.kind != "attribute":
                    continue
                if stream == "var" and not field.var_sized:
                    lists.append([])
                    continue
                size = 8 if stream == "data" and field.var_sized else (
                    field.attribute.datatype.size if field.attribute else spec.coord_dtype.itemsize)
                blobs = [blosc.compress(frag.tile(field, k, stream).data, typesize=size, cname=BLOSC_CODECS[codec],
                                        shuffle=blosc.SHUFFLE) for k in range(frag.tile_count())]
                lists.append(np.cumsum([0] + [len(b) for b in blobs[:-1]]).tolist())
                suffix = "_var.tdb" if stream == "var" else ".tdb"
                (copy / frag_name / (field.name + suffix)).write_bytes(b"".join(blobs))
        (copy / frag_name / "__book_keeping.tdb.gz").write_bytes(book_keeping_file(bk, tile_offsets, var_offsets))
    store = open_array(str(copy))
    root = build_root(store)
    import yaml
    doc = yaml.safe_load(read_node(root, "schema/__array_schema.tdb.yaml"))
    assert doc["attributes"][0]["compression"]["compressor"] == ["BLOSC", "BLOSC_LZ4", "BLOSC_LZ4HC", "",
                                                                 "BLOSC_ZLIB", "BLOSC_ZSTD"][codec - 4]
    for frag_name in committed_fragments(path):
        want = fragment_oracle(corpus, path, spec, frag_name)
        got = view_fragment_cells(root, f"fragments/{frag_name}", spec, store.fragment(frag_name).tile_count())
        assert_cells_equal(got, want, f"blosc {codec} {frag_name}", spec)


# -- damage: an I/O error on what cannot be decoded, the place in fragment.yaml, the rest readable ------

def test_corrupt_tile_and_truncated_book_keeping(corpus, tmp_path):
    import yaml
    path, spec = corpus["arrays"]["sparse_gzip"]
    copy = tmp_path / "bad"
    shutil.copytree(path, copy)
    frags = sorted(committed_fragments(path))
    store = open_array(path)
    loc = store.fragment(frags[0]).location(store.fragment(frags[0]).fields()[0], 1, "data")
    data = bytearray((copy / frags[0] / "a1.tdb").read_bytes())
    data[loc.offset + 2:loc.offset + 6] = b"\xff\xff\xff\xff"  # inside tile 1's deflate stream
    (copy / frags[0] / "a1.tdb").write_bytes(bytes(data))
    bk = copy / frags[1] / "__book_keeping.tdb.gz"
    bk.write_bytes(bk.read_bytes()[:20])
    root = build_root(open_array(str(copy)))
    base = f"fragments/{frags[0]}"
    assert read_node(root, f"{base}/attrs/a1/tile_0.bin") == read_node(build_root(store), f"{base}/attrs/a1/tile_0.bin")
    with pytest.raises(ViewError):
        read_node(root, f"{base}/attrs/a1/tile_1.bin")
    problems = yaml.safe_load(read_node(root, f"{base}/fragment.yaml"))["problems"]
    assert any(p["file"] == f"{frags[0]}/a1.tdb" and p["offset"] == loc.offset and p["structure"] == "tile 1"
               for p in problems), problems
    with pytest.raises(ViewError):
        read_node(root, f"fragments/{frags[1]}/book_keeping.yaml")
    assert read_node(root, f"fragments/{frags[1]}/raw/a1.tdb") == (copy / frags[1] / "a1.tdb").read_bytes()
    summary = yaml.safe_load(read_node(root, "array.yaml"))
    assert any(p["file"] == f"{frags[1]}/__book_keeping.tdb.gz" for p in summary["problems"])


def test_cli_cat_and_ls(corpus, capsys):
    from tdbfs.cli import main
    assert main(["ls", corpus["ws"], "arrays"]) == 0
    listed = capsys.readouterr().out.split()
    assert "sparse_gzip/" in listed and "grp%2Fin_group/" in listed
    assert main(["cat", corpus["ws"], "arrays/dense_gzip/schema/current.yaml"]) == 0
    out = capsys.readouterr().out
    assert "GenomicsDB fork" in out and "array_type: dense" in out
    path, _ = corpus["arrays"]["dense_gzip"]
    assert main(["cat", path, "array.yaml"]) == 0  # one array of the workspace, on its own
    assert "layout: TileDB 0.x" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["sparse_gzip", "sparse_types", "sparse_rle", "grp/in_group"])
def test_dimension_tile_records(corpus, name):
    """dims/<dimension>/tile_K.yaml: like every stem folder, the record of tile K, here the __coords
    tile it is cut from, with which dimension and where its values sit in each cell."""
    import yaml
    path, spec = corpus["arrays"][name]
    store = open_array(path)
    root = build_root(store)
    for frag_name in committed_fragments(path):
        frag = store.fragment(frag_name)
        bk = frag.book_keeping()
        coords = next(f for f in frag.fields() if f.name == "__coords")
        base = f"fragments/{frag_name}/dims"
        ntiles = frag.tile_count()
        assert ntiles
        for d, dim in enumerate(spec.dims):
            names = set(resolve(root, f"{base}/{dim}").children())
            assert {f"tile_{k}.yaml" for k in range(ntiles)} <= names
            for k in range(ntiles):
                rec = yaml.safe_load(read_node(root, f"{base}/{dim}/tile_{k}.yaml"))
                whole = yaml.safe_load(read_node(root, f"{base}/__coords/tile_{k}.yaml"))
                assert rec["field"] == dim and rec["stem"] == dim and rec["dimension_index"] == d
                assert rec["tile"] == k and rec["derived_from"] == f"__coords/tile_{k}.bin"
                assert rec["streams"] == whole["streams"]
                data = rec["streams"]["data"]
                assert data["file"] == f"{frag_name}/__coords.tdb" and "error" not in data
                if len(bk.tile_offsets[coords.idx]):
                    assert data["offset"] == int(bk.tile_offsets[coords.idx][k])
                assert data["unfiltered_size"] == rec["cells"] * len(spec.dims) * spec.coord_dtype.itemsize
                assert rec["size"] == len(read_node(root, f"{base}/{dim}/tile_{k}.bin"))
                assert f"at byte {d * spec.coord_dtype.itemsize} of every" in rec["coords_layout"]


def test_views_read_files_only_through_the_store(corpus, monkeypatch):
    """Workspace files, raw files and mtimes come from the store's reads, never a path opened by a view."""
    import tdbfs.views.legacy0x_views as zv
    assert not hasattr(zv, "os")
    ws = open_array(corpus["ws"])
    calls = []
    from tdbfs.store.base_store import BaseStore
    cls = BaseStore  # the workspace's and its arrays' reads alike
    for method in ("pread", "file_size", "mtime"):
        real = getattr(cls, method)
        monkeypatch.setattr(cls, method, lambda self, *a, real=real, method=method: calls.append(method) or
                            real(self, *a))
    root = build_root(ws)
    assert read_node(root, "files/callset.json") == b'{"callsets": []}\n'
    assert {"pread", "file_size"} <= set(calls)
    calls.clear()
    resolve(root, "files/callset.json").mtime()
    assert calls == ["mtime"]
    with pytest.raises(ViewError):
        zv.StoreFile(ws, "no_such_file.json").read(0, 10)
    path, _ = corpus["arrays"]["sparse_gzip"]
    frag = committed_fragments(path)[0]
    calls.clear()
    assert read_node(build_root(open_array(path)), f"fragments/{frag}/raw/a1.tdb") == \
        open(os.path.join(path, frag, "a1.tdb"), "rb").read()
    assert "pread" in calls


@pytest.mark.parametrize("name", ["dense_gzip", "dense_none"])
def test_garbled_dense_domain_is_refused_before_it_drives_a_loop(corpus, tmp_path, name):
    """A dense fragment's tiles are those its non-empty domain spans: a domain garbled in the book-keeping
    (decompressed, the i64 size then the bounds, docs/format-0x.md) would span billions of tiles. The count
    is checked against what the attribute files and tile offsets can hold, and the problem is at the domain."""
    import gzip
    import subprocess
    import sys
    src, _ = corpus["arrays"][name]
    path = tmp_path / name
    shutil.copytree(src, path, symlinks=True)
    frag_name = sorted(committed_fragments(str(path)))[0]
    bk = path / frag_name / "__book_keeping.tdb.gz"
    data = bytearray(gzip.decompress(bk.read_bytes()))
    size = struct.unpack_from("<q", data, 0)[0]
    item = size // 4                            # 2 dimensions, (lo, hi) each
    data[8 + item:8 + 2 * item] = (2**40).to_bytes(item, "little")   # d1's upper bound
    bk.write_bytes(gzip.compress(bytes(data)))
    res = subprocess.run([sys.executable, "-m", "tdbfs", "check", str(path)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 1
    line = [l for l in res.stdout.splitlines() if l.startswith(f"{frag_name}/__book_keeping.tdb.gz:8: book-keeping")]
    assert line and "decompressed stream" in line[0] and "tiles of the schema's extents, more than the" in line[0], \
        res.stdout
