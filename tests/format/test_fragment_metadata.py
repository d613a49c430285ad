"""Fragment metadata decoding checked against arrays written by TileDB itself (tiledb-py) and the
back-compat corpus (tests/corpus.py says where it is)."""

from __future__ import annotations

import itertools
import math
import os
import struct

import numpy as np
import pytest
import yaml

import tiledb

from tdbfs.format import fragment_metadata as fm
from tdbfs.views.describe.fragment_metadata import describe_footer, describe_legacy_footer, describe_rtree_level
from tdbfs.format.datatypes import BY_NAME
from tdbfs.format.errors import FormatError
from tdbfs.format.generic_tile import read_generic_tile
from tdbfs.format.schema import parse_schema

FMD = "__fragment_metadata.tdb"
import corpus  # noqa: E402  (tests/corpus.py: the back-compat corpus)
U64_MAX = 2**64 - 1


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def load_schemas(uri: str) -> dict:
    out = {}
    sdir = os.path.join(uri, "__schema")
    if os.path.isdir(sdir):
        for name in os.listdir(sdir):
            path = os.path.join(sdir, name)
            if os.path.isfile(path):
                data = open(path, "rb").read()
                rel = f"__schema/{name}"
                out[name] = parse_schema(read_generic_tile(data, 0, rel, "array schema").payload, rel)
    legacy = os.path.join(uri, "__array_schema.tdb")
    if os.path.isfile(legacy):
        data = open(legacy, "rb").read()
        out["__array_schema.tdb"] = parse_schema(
            read_generic_tile(data, 0, "__array_schema.tdb", "array schema").payload, "__array_schema.tdb")
    return out


def name_version(name: str) -> int:
    parts = name[2:].split("_")
    if len(parts) == 4:
        return int(parts[3])
    if len(parts) == 3:
        return 4
    return 2


def fragment_dirs(uri: str) -> list[str]:
    out = []
    for base in (os.path.join(uri, "__fragments"), uri):
        if not os.path.isdir(base):
            continue
        for name in sorted(os.listdir(base)):
            path = os.path.join(base, name)
            if name.startswith("__") and os.path.isfile(os.path.join(path, FMD)):
                out.append(path)
    return out


class Fragment:
    """A fragment decoded with the module under test."""

    def __init__(self, path: str, schemas: dict):
        self.path = path
        self.name = os.path.basename(path)
        self.file = FMD
        self.data = open(os.path.join(path, FMD), "rb").read()
        self.name_version = name_version(self.name)
        off, length = fm.locate_footer(self.data, len(self.data), self.name_version,
                                       schemas.get("__array_schema.tdb"))
        version, schema_name = fm.peek_footer_schema_name(self.data, FMD, off)
        self.schema = schemas[schema_name or "__array_schema.tdb"]
        self.footer_offset, self.footer_length = off, length
        self.footer = fm.parse_footer(self.data, FMD, self.schema, off, length, self.name_version)
        self.fields = self.footer.fields

    def payload(self, offset: int, what: str = "gtile") -> bytes:
        return read_generic_tile(self.data, offset, FMD, what).payload

    @property
    def gto(self):
        return self.footer.generic_tile_offsets

    def rtree(self) -> fm.RTree:
        return fm.parse_rtree(self.payload(self.gto.rtree), FMD, self.schema.dimensions, self.footer.version)

    def u64s(self, kind: str, idx: int) -> np.ndarray:
        return fm.parse_u64_list(self.payload(getattr(self.gto, kind)[idx]), FMD, kind)

    def mins(self, idx: int):
        return fm.parse_tile_min_max(self.payload(self.gto.tile_min_offsets[idx]), FMD, self.fields[idx])

    def maxs(self, idx: int):
        return fm.parse_tile_min_max(self.payload(self.gto.tile_max_offsets[idx]), FMD, self.fields[idx],
                                     "tile maxes")

    def sums(self, idx: int):
        return fm.parse_tile_sums(self.payload(self.gto.tile_sum_offsets[idx]), FMD, self.fields[idx])

    def null_counts(self, idx: int):
        return self.u64s("tile_null_count_offsets", idx)

    def summary(self):
        return fm.parse_fragment_min_max_sum_null_count(
            self.payload(self.gto.fragment_min_max_sum_null_count), FMD, self.fields)

    def processed_conditions(self):
        return fm.parse_processed_conditions(self.payload(self.gto.processed_conditions), FMD)

    def tile_num(self) -> int:
        if not self.footer.dense:
            return self.footer.sparse_tile_num
        return dense_tile_num(self.schema, self.footer.non_empty_domain)


def dense_tile_ranges(schema, ned):
    """Per dimension the tile index range covering the non-empty domain."""
    out = []
    for d, (lo, hi) in zip(schema.dimensions, ned):
        dlo = d.domain[0]
        ext = d.tile_extent
        out.append(range((lo - dlo) // ext, (hi - dlo) // ext + 1))
    return out


def dense_tile_num(schema, ned) -> int:
    return math.prod(len(r) for r in dense_tile_ranges(schema, ned))


def fragments(uri: str) -> list[Fragment]:
    schemas = load_schemas(uri)
    return [Fragment(p, schemas) for p in fragment_dirs(uri)]


def info_by_name(uri: str) -> dict:
    return {os.path.basename(fi.uri.rstrip("/")): fi for fi in tiledb.array_fragments(uri)}


def check_file_sizes(frag: Fragment):
    """file_sizes / file_var_sizes / file_validity_sizes equal the data files on disk."""
    ft = frag.footer
    on_disk = {n: os.path.getsize(os.path.join(frag.path, n)) for n in os.listdir(frag.path)}
    expected = {FMD}
    for f in frag.fields:
        if ft.file_sizes[f.idx] or f.file in on_disk:
            assert on_disk[f.file] == ft.file_sizes[f.idx], f.file
            expected.add(f.file)
        if f.idx < frag.fields.var_count and f.var_sized:
            if ft.file_var_sizes[f.idx] or f.var_file in on_disk:
                assert on_disk[f.var_file] == ft.file_var_sizes[f.idx], f.var_file
                expected.add(f.var_file)
        else:
            if f.idx < frag.fields.var_count:
                assert ft.file_var_sizes[f.idx] == 0
        if ft.file_validity_sizes is not None:
            if f.nullable:
                assert on_disk[f.validity_file] == ft.file_validity_sizes[f.idx]
                expected.add(f.validity_file)
            else:
                assert ft.file_validity_sizes[f.idx] == 0
    assert set(on_disk) == expected


def _absent(values, n) -> bool:
    """Lists of data a field does not have are empty, or (newer writers) n zeros."""
    return len(values) == 0 or (len(values) == n and not np.any(values))


def check_tile_counts(frag: Fragment) -> dict:
    """Every list that has entries has one per tile; lists of absent data are empty or zero."""
    n = frag.tile_num()
    ft = frag.footer
    shapes = {}
    for f in frag.fields:
        offs = frag.u64s("tile_offsets", f.idx)
        has_file = ft.file_sizes[f.idx] > 0
        if has_file:
            assert len(offs) == n, f.name
            assert offs[0] == 0 and np.all(np.diff(offs.astype(np.int64)) > 0)
            assert offs[-1] < ft.file_sizes[f.idx]
        else:
            assert _absent(offs, n), f.name
        shapes[(f.name, "tile_offsets")] = len(offs)
        if f.idx < frag.fields.var_count:
            voffs = frag.u64s("tile_var_offsets", f.idx)
            vsizes = frag.u64s("tile_var_sizes", f.idx)
            if f.var_sized and has_file:
                assert len(voffs) == n and len(vsizes) == n, f.name
                assert voffs[0] == 0 and int(voffs[-1]) < ft.file_var_sizes[f.idx]
            else:
                assert _absent(voffs, n) and _absent(vsizes, n), f.name
            shapes[(f.name, "tile_var_offsets")] = len(voffs)
        if ft.version >= 7:
            val = frag.u64s("tile_validity_offsets", f.idx)
            if f.nullable:
                assert len(val) == n and int(val[-1]) < ft.file_validity_sizes[f.idx]
            else:
                assert _absent(val, n), f.name
        if ft.version >= 11:
            nulls = frag.null_counts(f.idx)
            if f.nullable:
                assert len(nulls) == n
            else:
                assert _absent(nulls, n), f.name
            sums = frag.sums(f.idx)
            if f.has_sum and has_file:
                assert len(sums) == n
            elif f.kind != fm.COORDS:
                assert _absent(sums, n), f.name
            mins, maxs = frag.mins(f.idx), frag.maxs(f.idx)
            if f.has_min_max and has_file:
                assert len(mins) == n and len(maxs) == n
            elif f.kind != fm.COORDS:
                assert len(mins) == 0 and len(maxs) == 0
    return shapes


def check_cell_num(frag: Fragment, fi):
    ft = frag.footer
    if ft.dense:
        cells = frag.tile_num() * ft.last_tile_cell_num
    else:
        cells = (ft.sparse_tile_num - 1) * frag.schema.capacity + ft.last_tile_cell_num
    assert cells == fi.cell_num


def plain_ned(ned):
    out = []
    for lo, hi in ned:
        if isinstance(lo, np.datetime64):
            lo, hi = lo.astype("int64").item(), hi.astype("int64").item()
        if isinstance(lo, bytes):
            lo, hi = lo.decode(), hi.decode()
        if isinstance(lo, np.generic):
            lo, hi = lo.item(), hi.item()
        out.append((lo, hi))
    return tuple(out)


def cpp_min_max(values, nulls=None):
    """TileDB's per-cell min/max loop for numbers (skipping nulls); NaN behaves as in C++."""
    mn = mx = None
    for k, v in enumerate(values):
        if nulls is not None and nulls[k]:
            continue
        mn = v if mn is None or not (mn < v) else mn
        mx = v if mx is None or not (mx > v) else mx
    return mn, mx


def as_bytes(v, size=None) -> bytes:
    b = v.encode() if isinstance(v, str) else bytes(v)
    return b.ljust(size, b"\0") if size else b


def expected_tile_stats(field, values, mask):
    """(min, max, sum, null_count) TileDB computes for one tile of `field` from cell values."""
    nulls = np.asarray(mask, bool) if mask is not None else np.zeros(len(values), bool)
    nn = [v for v, m in zip(values, nulls) if not m]
    null_count = int(nulls.sum()) if field.nullable else None
    mn = mx = total = None
    if field.has_min_max:
        if field.datatype.is_string:
            size = None if field.var_sized else field.cell_size
            bs = [as_bytes(v, size) for v in nn]
            mn, mx = (min(bs), max(bs)) if bs else (None, None)
        elif field.datatype.is_datetime:
            mn, mx = cpp_min_max([np.asarray(v).astype("int64").item() for v in nn])
        else:
            mn, mx = cpp_min_max([np.asarray(v).item() for v in nn])
    if field.has_sum:
        if field.sum_dtype.kind == "f":
            total = float(sum(float(v) for v in nn))
        else:
            total = int(sum(np.asarray(v).astype("int64").item() if field.datatype.is_datetime else int(v)
                            for v in nn))
    return mn, mx, total, null_count


def check_tile_values(frag: Fragment, tiles: list[dict]):
    """Compare tile mins/maxes/sums/null counts with values computed from TileDB's own reads.

    `tiles[k]` maps field name -> (values, mask or None) for tile k."""
    assert len(tiles) == frag.tile_num()
    for f in frag.fields:
        if f.kind == fm.COORDS or f.name not in tiles[0]:
            continue
        mins, maxs, sums = frag.mins(f.idx), frag.maxs(f.idx), frag.sums(f.idx)
        nulls = frag.null_counts(f.idx)
        for k, tile in enumerate(tiles):
            values, mask = tile[f.name]
            mn, mx, total, null_count = expected_tile_stats(f, values, mask)
            if f.has_min_max and mn is not None:
                got_min = mins[k] if f.datatype.is_string else mins[k].item()
                got_max = maxs[k] if f.datatype.is_string else maxs[k].item()
                assert got_min == mn, (f.name, k)
                assert got_max == mx, (f.name, k)
            if f.has_sum:
                if isinstance(total, float):
                    assert sums[k] == pytest.approx(total), (f.name, k)
                else:
                    assert int(sums[k]) == total, (f.name, k)
            if f.nullable:
                assert int(nulls[k]) == null_count, (f.name, k)


def split_result(result: dict, names, size: int) -> list[dict]:
    """Cut a global-order read into tiles of `size` cells: field -> (values, mask)."""
    n = len(next(iter(result.values())))
    tiles = []
    for start in range(0, n, size):
        tile = {}
        for name in names:
            col = result[name]
            part = col[start:start + size]
            if isinstance(part, np.ma.MaskedArray):
                tile[name] = (list(part.data), np.ma.getmaskarray(part))
            else:
                tile[name] = (list(part), None)
        tiles.append(tile)
    return tiles


def check_rtree(frag: Fragment, tile_coords: list[dict] | None):
    """Leaves are the tiles' coordinate bounds; each upper MBR bounds its `fanout` children."""
    rt = frag.rtree()
    ft = frag.footer
    if ft.dense:
        assert rt.levels == ()
        return rt
    assert rt.leaf_num == ft.sparse_tile_num
    assert rt.levels[0].mbr_num == 1
    leaves = describe_rtree_level(rt, len(rt.levels) - 1)
    dims = frag.schema.dimensions
    if tile_coords is not None:
        for k, tile in enumerate(tile_coords):
            row = []
            for d in dims:
                vals = tile[d.name][0]
                if d.var_sized:
                    vals = [v.decode() if isinstance(v, bytes) else v for v in vals]
                elif d.datatype.is_datetime:
                    vals = [np.asarray(v).astype("int64").item() for v in vals]
                else:
                    vals = [np.asarray(v).item() for v in vals]
                row += [min(vals), max(vals)]
            assert leaves[k] == row, k
    for lv in range(len(rt.levels) - 1):
        parents = describe_rtree_level(rt, lv)
        children = describe_rtree_level(rt, lv + 1)
        assert len(parents) == -(-len(children) // rt.fanout)
        for p, parent in enumerate(parents):
            group = children[p * rt.fanout:(p + 1) * rt.fanout]
            for j in range(len(dims)):
                assert parent[2 * j] == min(c[2 * j] for c in group)
                assert parent[2 * j + 1] == max(c[2 * j + 1] for c in group)
    # the fragment's non-empty domain is the root MBR
    root = describe_rtree_level(rt, 0)[0]
    assert [x for lo_hi in ft.non_empty_domain for x in lo_hi] == root
    return rt


def expected_keys(version: int) -> tuple[set, set]:
    top = {"version", "dense", "null_non_empty_domain", "non_empty_domain", "sparse_tile_num",
           "last_tile_cell_num", "file_sizes", "file_var_sizes", "footer_length", "generic_tile_offsets"}
    gto = {"rtree", "tile_offsets", "tile_var_offsets", "tile_var_sizes"}
    if version >= 7:
        top.add("file_validity_sizes")
        gto.add("tile_validity_offsets")
    if version >= 10:
        top.add("array_schema_name")
    if version >= 11:
        gto |= {"tile_min_offsets", "tile_max_offsets", "tile_sum_offsets", "tile_null_count_offsets"}
    if version >= 12:
        gto.add("fragment_min_max_sum_null_count")
    if version >= 14:
        top.add("has_timestamps")
    if version >= 15:
        top.add("has_delete_meta")
    if version >= 16:
        gto.add("processed_conditions")
    return top, gto


def check_footer_dict(frag: Fragment):
    ft = frag.footer
    d = describe_footer(ft)
    top, gto = expected_keys(ft.version)
    assert set(d) == top
    assert set(d["generic_tile_offsets"]) == gto
    assert d["footer_length"] == frag.footer_length
    # plain YAML: ints, bools, strings, lists
    text = yaml.safe_dump(d, sort_keys=False)
    assert yaml.safe_load(text) == d
    for key in ("dense", "null_non_empty_domain", "has_timestamps", "has_delete_meta"):
        if key in d:
            assert type(d[key]) is bool
    for key in ("file_sizes", "file_var_sizes", "file_validity_sizes"):
        if key in d:
            assert all(type(x) is int for x in d[key])
    for key, value in d["generic_tile_offsets"].items():
        values = value if isinstance(value, list) else [value]
        assert all(type(x) is int for x in values)
        # every offset points at a generic tile that decodes
        for off in values:
            read_generic_tile(frag.data, off, FMD, key)
    return d


def check_all(uri: str, tile_reader=None) -> list[Fragment]:
    infos = info_by_name(uri)
    frags = [f for f in fragments(uri) if f.name in infos]
    assert len(frags) == len(infos)
    for frag in frags:
        fi = infos[frag.name]
        ft = frag.footer
        assert ft.version == fi.version == frag.name_version == 22
        assert ft.dense == (not fi.sparse)
        assert not ft.null_non_empty_domain
        assert ft.non_empty_domain == plain_ned(fi.nonempty_domain)
        assert ft.array_schema_name in load_schemas(uri)
        assert ft.notes == ()
        check_cell_num(frag, fi)
        check_file_sizes(frag)
        check_tile_counts(frag)
        check_footer_dict(frag)
        if tile_reader is not None:
            tiles = tile_reader(frag, fi)
            check_tile_values(frag, tiles)
            check_rtree(frag, None if ft.dense else tiles)
        else:
            check_rtree(frag, None)
    return frags


def sparse_tiles(uri):
    """Reader of a sparse fragment's tiles: global-order read cut into `capacity`-cell tiles."""
    def read(frag, fi):
        with tiledb.open(uri, timestamp=fi.timestamp_range) as A:
            result = A.query(order="G")[:]
        names = [a.name for a in frag.schema.attributes] + [d.name for d in frag.schema.dimensions]
        return split_result(result, names, frag.schema.capacity)
    return read


def dense_tiles(uri):
    """Reader of a dense fragment's tiles: per tile, the written cells inside it (tile order row-major)."""
    def read(frag, fi):
        ned = frag.footer.non_empty_domain
        dims = frag.schema.dimensions
        tiles = []
        with tiledb.open(uri, timestamp=fi.timestamp_range) as A:
            for tidx in itertools.product(*dense_tile_ranges(frag.schema, ned)):
                sl = []
                for d, t, (lo, hi) in zip(dims, tidx, ned):
                    tlo = d.domain[0] + t * d.tile_extent
                    thi = tlo + d.tile_extent - 1
                    sl.append(slice(max(lo, tlo), min(hi, thi) + 1))
                res = A[tuple(sl)]
                tile = {}
                for a in frag.schema.attributes:
                    col = res[a.name]
                    if isinstance(col, np.ma.MaskedArray):
                        tile[a.name] = (list(col.data.ravel()), np.ma.getmaskarray(col).ravel())
                    else:
                        tile[a.name] = (list(np.asarray(col).ravel()), None)
                tiles.append(tile)
        return tiles
    return read


# ---------------------------------------------------------------------------
# field index space
# ---------------------------------------------------------------------------

def test_field_space_positional_names(tmp_path):
    uri = str(tmp_path / "arr")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 9), tile=5, dtype=np.int32),
                        tiledb.Dim("name", domain=(None, None), tile=None, dtype="ascii"))
    schema = tiledb.ArraySchema(domain=dom, sparse=True, attrs=[
        tiledb.Attr("v", dtype=np.float64), tiledb.Attr("s", dtype=str, var=True, nullable=True)])
    tiledb.Array.create(uri, schema)
    sch = next(iter(load_schemas(uri).values()))
    space = fm.build_field_space(sch, 22, has_timestamps=True, has_delete_meta=True)
    got = [(f.idx, f.name, f.kind, f.stem, f.datatype.name if f.datatype else None, f.cell_size,
            f.var_sized, f.nullable) for f in space]
    assert got == [
        (0, "v", fm.ATTRIBUTE, "a0", "FLOAT64", 8, False, False),
        (1, "s", fm.ATTRIBUTE, "a1", "STRING_UTF8", 1, True, True),
        (2, "__coords", fm.COORDS, "__coords", None, 0, False, False),
        (3, "x", fm.DIMENSION, "d0", "INT32", 4, False, False),
        (4, "name", fm.DIMENSION, "d1", "STRING_ASCII", 1, True, False),
        (5, "__timestamps", fm.TIMESTAMPS, "t", "UINT64", 8, False, False),
        (6, "__delete_timestamps", fm.DELETE_TIMESTAMPS, "dt", "UINT64", 8, False, False),
        (7, "__delete_condition_index", fm.DELETE_CONDITION_INDEX, "dci", "UINT64", 8, False, False),
    ]
    assert len(space) == space.count == space.var_count == 8
    assert space.by_stem("a1").var_file == "a1_var.tdb" and space.by_stem("a1").validity_file == "a1_validity.tdb"
    assert space.by_name("x").file == "d0.tdb"
    assert [f.stem for f in space.special] == ["t", "dt", "dci"]
    assert [f.has_min_max for f in space] == [True, False, False, False, False, True, True, True]
    assert [f.has_sum for f in space] == [True, False, False, True, False, True, True, True]
    # without the special attributes
    assert len(fm.build_field_space(sch, 22)) == 5
    assert len(fm.build_field_space(sch, 22, has_timestamps=True)) == 6
    # older naming schemes
    assert [f.stem for f in fm.build_field_space(sch, 7)] == ["v", "s", "__coords", "x", "name"]


def test_v8_percent_encoding():
    assert fm.encode_v8_name("plain_name.1") == "plain_name.1"
    assert fm.encode_v8_name("a!#$%&'()*+,/:;=?@[]") == "a%21%23%24%25%26%27%28%29%2A%2B%2C%2F%3A%3B%3D%3F%40%5B%5D"
    # TileDB's own (non-standard) codes for Windows-illegal characters
    assert fm.encode_v8_name('"<>\\|') == "%22%20%2D%30%3C"


@pytest.mark.backcompat
def test_v4_field_space_has_coords_slot_only():
    sch = load_schemas(corpus.array("v03"))["__array_schema.tdb"]
    space = fm.build_field_space(sch, 3)
    A = len(sch.attributes)
    assert space.count == A + 1 and space.var_count == A
    coords = space[A]
    assert coords.kind == fm.COORDS and coords.file == "__coords.tdb"
    assert coords.cell_size == sum(d.coord_size for d in sch.dimensions)


# ---------------------------------------------------------------------------
# sparse arrays
# ---------------------------------------------------------------------------

def test_sparse_2d_many_tiles(tmp_path):
    uri = str(tmp_path / "sparse2d")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 99), tile=10, dtype=np.int32),
                        tiledb.Dim("y", domain=(0.0, 10.0), tile=2.5, dtype=np.float64))
    attrs = [
        tiledb.Attr("a", dtype=np.int64),
        tiledb.Attr("u", dtype=np.uint16),
        tiledb.Attr("s", dtype=str, var=True),
        tiledb.Attr("c", dtype="S3"),
        tiledb.Attr("n", dtype=np.float32, nullable=True),
        tiledb.Attr("v", dtype="ascii", var=True, nullable=True),
        tiledb.Attr("i", dtype=np.int16, nullable=True),
        tiledb.Attr("b", dtype=np.bool_),
    ]
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=3, attrs=attrs))
    rng = np.random.default_rng(7)
    for n_cells in (40, 5):
        flat = rng.choice(100 * 20, n_cells, replace=False)
        x = (flat // 20).astype(np.int32)
        y = (flat % 20) * 0.5
        words = ["", "a", "bb", "zeta", "alpha", "m"]
        with tiledb.open(uri, "w") as A:
            A[x, y] = {
                "a": rng.integers(-10**12, 10**12, n_cells),
                "u": rng.integers(0, 65535, n_cells).astype(np.uint16),
                "s": np.array([words[k % 6] + "é" * (k % 2) for k in range(n_cells)], dtype=object),
                "c": np.array([b"abc", b"b", b"zz", b"q", b"rrr"] * 8, dtype="S3")[:n_cells],
                "n": np.where(np.arange(n_cells) % 3 == 0, np.nan, rng.random(n_cells)).astype(np.float32),
                "v": np.array([None if k % 4 == 1 else words[k % 6] for k in range(n_cells)], dtype=object),
                "i": np.array([None if k % 5 == 0 else int(k) - 20 for k in range(n_cells)], dtype=object),
                "b": np.arange(n_cells) % 3 == 1,
            }
    frags = check_all(uri, sparse_tiles(uri))
    assert len(frags) == 2
    big = max(frags, key=lambda f: f.footer.sparse_tile_num)
    assert big.footer.sparse_tile_num == 14 and big.footer.last_tile_cell_num == 1
    rt = big.rtree()
    assert [lv.mbr_num for lv in rt.levels] == [1, 2, 14] and rt.fanout == 10
    leaves = rt.leaves
    assert leaves.ranges[0].dtype == np.int32 and leaves.ranges[0].shape == (14, 2)
    assert leaves.ranges[1].dtype == np.float64
    # fragment-wide summary agrees with the per-tile lists
    for s in big.summary():
        f = big.fields[s.idx]
        if f.kind == fm.COORDS:
            continue
        if f.has_sum:
            sums = big.sums(f.idx)
            if f.sum_dtype.kind == "f":
                assert s.sum == pytest.approx(float(sums.sum()))
            else:
                assert s.sum == int(sums.astype(object).sum())
        if f.nullable:
            assert s.null_count == int(big.null_counts(f.idx).sum())
        if f.has_min_max and not f.datatype.is_string:
            mins, maxs = big.mins(f.idx), big.maxs(f.idx)
            assert s.min == mins.min().item() and s.max == maxs.max().item()
        if not f.has_min_max:
            assert s.min is None and s.max is None


def test_sparse_3d_datetime_uint_float_dims(tmp_path):
    uri = str(tmp_path / "sparse3d")
    dom = tiledb.Domain(
        tiledb.Dim("day", domain=(np.datetime64("2020-01-01"), np.datetime64("2021-12-31")),
                   tile=np.timedelta64(30, "D"), dtype="datetime64[D]"),
        tiledb.Dim("z", domain=(0, 200), tile=50, dtype=np.uint8),
        tiledb.Dim("w", domain=(-1.0, 1.0), tile=0.5, dtype=np.float32))
    attrs = [tiledb.Attr("when", dtype="datetime64[s]"), tiledb.Attr("q", dtype=np.uint64)]
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=4, attrs=attrs))
    rng = np.random.default_rng(3)
    n = 23
    days = np.datetime64("2020-01-01") + rng.integers(0, 700, n).astype("timedelta64[D]")
    z = rng.integers(0, 200, n).astype(np.uint8)
    w = (rng.integers(-8, 8, n) / 8).astype(np.float32)
    with tiledb.open(uri, "w") as A:
        A[days, z, w] = {"when": np.datetime64("2001-01-01T00:00:00") + np.arange(n).astype("timedelta64[h]"),
                         "q": rng.integers(0, 2**62, n).astype(np.uint64)}
    (frag,) = check_all(uri, sparse_tiles(uri))
    ned = frag.footer.non_empty_domain
    assert isinstance(ned[0][0], int) and isinstance(ned[1][0], int) and isinstance(ned[2][0], float)
    when = frag.fields.by_name("when")
    assert when.has_min_max and when.sum_dtype == np.dtype("<i8")
    assert frag.sums(when.idx).dtype == np.dtype("<i8")
    assert frag.sums(frag.fields.by_name("q").idx).dtype == np.dtype("<u8")
    assert frag.sums(frag.fields.by_name("w").idx).dtype == np.dtype("<f8")


def test_sparse_string_dimension(tmp_path):
    uri = str(tmp_path / "strdim")
    dom = tiledb.Domain(tiledb.Dim("key", domain=(None, None), tile=None, dtype="ascii"),
                        tiledb.Dim("k", domain=(0, 1000), tile=100, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=2,
                                                attrs=[tiledb.Attr("a", dtype=np.int32)]))
    keys = np.array(["pear", "apple", "fig", "kiwi", "banana", "", "zz", "apple2", "melon"], dtype=object)
    with tiledb.open(uri, "w") as A:
        A[keys, np.arange(len(keys)) * 7] = np.arange(len(keys), dtype=np.int32)
    (frag,) = check_all(uri, sparse_tiles(uri))
    assert frag.footer.non_empty_domain[0] == ("", "zz")
    rt = frag.rtree()
    leaf = rt.leaves.ranges[0]
    assert isinstance(leaf, list) and all(isinstance(lo, str) for lo, _ in leaf)
    d = describe_footer(frag.footer)
    assert d["non_empty_domain"] == [["", "zz"], [0, 56]]


# ---------------------------------------------------------------------------
# dense arrays
# ---------------------------------------------------------------------------

DENSE_CASES = {
    "1d": ([(1, 100, 10)], [(13, 47)]),
    "2d": ([(0, 11, 4), (0, 11, 3)], [(2, 6), (4, 10)]),
    "3d": ([(0, 7, 2), (0, 7, 4), (1, 9, 3)], [(1, 4), (0, 6), (2, 8)]),
}


@pytest.mark.parametrize("case", sorted(DENSE_CASES))
def test_dense_partial_writes(tmp_path, case):
    doms, written = DENSE_CASES[case]
    uri = str(tmp_path / f"dense{case}")
    dims = [tiledb.Dim(f"d{j}", domain=(lo, hi), tile=ext, dtype=np.int32) for j, (lo, hi, ext) in enumerate(doms)]
    attrs = [tiledb.Attr("a", dtype=np.int32), tiledb.Attr("f", dtype=np.float64, fill=-1.5),
             tiledb.Attr("s", dtype="ascii", var=True), tiledb.Attr("b", dtype=np.uint8)]
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=tiledb.Domain(*dims), sparse=False, attrs=attrs))
    shape = tuple(hi - lo + 1 for lo, hi in written)
    n = math.prod(shape)
    rng = np.random.default_rng(11)
    with tiledb.open(uri, "w") as A:
        A[tuple(slice(lo, hi + 1) for lo, hi in written)] = {
            "a": rng.integers(-1000, 1000, n).astype(np.int32).reshape(shape),
            "f": rng.random(n).reshape(shape),
            "s": np.array([f"s{k % 13}" for k in range(n)], dtype=object).reshape(shape),
            "b": rng.integers(0, 255, n).astype(np.uint8).reshape(shape),
        }
    # a second, smaller write: one cell
    with tiledb.open(uri, "w") as A:
        A[tuple(slice(lo, lo + 1) for lo, _ in written)] = {
            "a": np.full((1,) * len(doms), 5, np.int32), "f": np.full((1,) * len(doms), 0.25),
            "s": np.array(["one"], dtype=object).reshape((1,) * len(doms)),
            "b": np.full((1,) * len(doms), 9, np.uint8)}
    frags = check_all(uri, dense_tiles(uri))
    assert len(frags) == 2
    for frag in frags:
        ft = frag.footer
        assert ft.dense and ft.sparse_tile_num == 0
        assert ft.last_tile_cell_num == math.prod(ext for _, _, ext in doms)
        assert frag.rtree().levels == ()
        # dense fragments store no coordinates
        assert all(ft.file_sizes[f.idx] == 0 for f in frag.fields.dimensions)
    big = max(frags, key=lambda f: f.tile_num())
    assert big.footer.non_empty_domain == tuple(written)


# ---------------------------------------------------------------------------
# consolidation: timestamps, delete metadata, processed conditions
# ---------------------------------------------------------------------------

def _write_three(uri):
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 99), tile=10, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=3,
                                                attrs=[tiledb.Attr("a", dtype=np.int32)]))
    for k in range(3):
        with tiledb.open(uri, "w", timestamp=100 + k) as A:
            A[np.arange(k * 4, k * 4 + 4)] = np.arange(k * 4, k * 4 + 4, dtype=np.int32)


def _consolidated(uri) -> Fragment:
    infos = info_by_name(uri)
    (name,) = [n for n, fi in infos.items() if fi.timestamp_range[0] != fi.timestamp_range[1]]
    (frag,) = [f for f in fragments(uri) if f.name == name]
    return frag, infos[name]


def test_consolidation_with_timestamps(tmp_path):
    uri = str(tmp_path / "ts")
    _write_three(uri)
    tiledb.consolidate(uri, config=tiledb.Config({"sm.consolidation.with_timestamps": "true"}))
    frag, fi = _consolidated(uri)
    ft = frag.footer
    assert fi.timestamp_range == (100, 102)
    assert ft.has_timestamps is True and ft.has_delete_meta is False
    assert [f.stem for f in frag.fields.special] == ["t"]
    t = frag.fields.by_stem("t")
    assert os.path.getsize(os.path.join(frag.path, "t.tdb")) == ft.file_sizes[t.idx] > 0
    check_cell_num(frag, fi)
    check_file_sizes(frag)
    check_tile_counts(frag)
    assert describe_footer(ft)["has_timestamps"] is True
    # cells 0..11 in global order; cell x was written at 100 + x // 4; tiles of 3 cells
    stamps = [100 + x // 4 for x in range(12)]
    tiles = [stamps[k:k + 3] for k in range(0, 12, 3)]
    assert frag.mins(t.idx).tolist() == [min(s) for s in tiles]
    assert frag.maxs(t.idx).tolist() == [max(s) for s in tiles]
    assert frag.sums(t.idx).tolist() == [sum(s) for s in tiles]
    summary = {s.name: s for s in frag.summary()}
    assert summary["__timestamps"].min == 100 and summary["__timestamps"].max == 102
    assert frag.processed_conditions() == ()
    check_rtree(frag, [{"x": (list(range(k, k + 3)), None)} for k in range(0, 12, 3)])


def test_delete_then_consolidate(tmp_path):
    uri = str(tmp_path / "del")
    _write_three(uri)
    with tiledb.open(uri, "d", timestamp=110) as A:
        A.query(cond="a < 2").submit()
    with tiledb.open(uri, "w", timestamp=120) as A:
        A[np.array([50, 51])] = np.array([50, 51], dtype=np.int32)
    del_files = [n for n in os.listdir(os.path.join(uri, "__commits")) if n.endswith(".del")]
    assert len(del_files) == 1
    tiledb.consolidate(uri, config=tiledb.Config({"sm.consolidation.with_timestamps": "true"}))
    frag, fi = _consolidated(uri)
    ft = frag.footer
    assert ft.has_timestamps and ft.has_delete_meta
    assert [f.stem for f in frag.fields.special] == ["t", "dt", "dci"]
    assert frag.fields.count == 1 + 1 + 1 + 3
    check_cell_num(frag, fi)
    check_file_sizes(frag)
    check_tile_counts(frag)
    for stem in ("dt", "dci"):
        f = frag.fields.by_stem(stem)
        assert os.path.getsize(os.path.join(frag.path, stem + ".tdb")) == ft.file_sizes[f.idx]
    # the delete condition that was applied
    assert frag.processed_conditions() == ("__commits/" + del_files[0],)
    # cells in global order: 0..11 then 50, 51; cells 0 and 1 were deleted at 110 by condition 0
    xs = list(range(12)) + [50, 51]
    dt = [110 if x < 2 else U64_MAX for x in xs]
    dci = [0 if x < 2 else U64_MAX for x in xs]
    stamps = [100 + x // 4 if x < 12 else 120 for x in xs]
    chunks = lambda v: [v[k:k + 3] for k in range(0, len(v), 3)]
    fdt, fdci, ft_ = (frag.fields.by_stem(s) for s in ("dt", "dci", "t"))
    assert frag.mins(fdt.idx).tolist() == [min(c) for c in chunks(dt)]
    assert frag.maxs(fdt.idx).tolist() == [max(c) for c in chunks(dt)]
    assert frag.mins(fdci.idx).tolist() == [min(c) for c in chunks(dci)]
    assert frag.mins(ft_.idx).tolist() == [min(c) for c in chunks(stamps)]
    assert frag.maxs(ft_.idx).tolist() == [max(c) for c in chunks(stamps)]
    check_rtree(frag, [{"x": (c, None)} for c in chunks(xs)])
    d = describe_footer(ft)
    assert d["has_delete_meta"] is True
    assert d["generic_tile_offsets"]["processed_conditions"] == ft.generic_tile_offsets.processed_conditions
    assert len(d["file_sizes"]) == 6


# ---------------------------------------------------------------------------
# footer details: locate, peek, padding, v11, versions
# ---------------------------------------------------------------------------

def _one_fragment(tmp_path, dims=None):
    uri = str(tmp_path / "one")
    dims = dims or [tiledb.Dim("x", domain=(0, 99), tile=10, dtype=np.int32),
                    tiledb.Dim("y", domain=(0, 99), tile=10, dtype=np.int32)]
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=tiledb.Domain(*dims), sparse=True, capacity=2,
                                                attrs=[tiledb.Attr("a", dtype=np.int32)]))
    with tiledb.open(uri, "w") as A:
        A[np.array([1, 5, 9], dtype=np.int32), np.array([3, 4, 2], dtype=np.int32)] = np.array([1, 2, 3], np.int32)
    (frag,) = fragments(uri)
    return frag


def test_locate_footer_from_tail_and_errors(tmp_path):
    frag = _one_fragment(tmp_path)
    data = frag.data
    size = len(data)
    assert fm.locate_footer(data[-8:], size, 22, None) == (frag.footer_offset, frag.footer_length)
    assert fm.locate_footer(data, size, 22, None) == (size - 8 - frag.footer_length, frag.footer_length)
    bad = data[:-8] + struct.pack("<Q", size)
    with pytest.raises(FormatError) as e:
        fm.locate_footer(bad, size, 22, None)
    assert e.value.offset == size - 8 and e.value.file == FMD
    with pytest.raises(FormatError) as e:
        fm.locate_footer(data[-5:], size, 22, None)
    assert e.value.offset == size - 8
    with pytest.raises(FormatError):
        fm.locate_footer(data, size, 2, None)
    # computed sizes for formats without a length field (all dims fixed)
    schema = frag.schema
    A, D = 1, 2
    n = A + 1 + D
    assert fm.computed_footer_size(schema, 9) == 4 + 2 + 2 * D * 4 + 16 + 8 * n * 2 + 8 + 3 * 8 * n + 16 * n
    assert fm.computed_footer_size(schema, 6) == 4 + 2 + 2 * D * 4 + 16 + 8 * n * 2 + 8 + 3 * 8 * n
    assert fm.computed_footer_size(schema, 4) == 4 + 2 + 2 * D * 4 + 16 + 8 * (A + 1) + 8 * A + 8 + 8 * (A + 1) + 16 * A
    assert fm.locate_footer(data, size, 9, schema) == (size - fm.computed_footer_size(schema, 9),
                                                       fm.computed_footer_size(schema, 9))
    with pytest.raises(FormatError) as e:
        fm.locate_footer(data[:20], 20, 9, schema)
    assert e.value.offset == 0


def test_read_footer_whole_file_and_tail(tmp_path):
    frag = _one_fragment(tmp_path)
    uri = os.path.dirname(os.path.dirname(frag.path))
    schemas = load_schemas(uri)
    size = len(frag.data)
    whole = fm.read_footer(frag.data, size, 22, schemas)
    tail = fm.read_footer(frag.data[frag.footer_offset - 3:], size, 22, schemas)
    assert describe_footer(whole) == describe_footer(tail) == describe_footer(frag.footer)
    assert whole.offset == tail.offset == frag.footer_offset
    with pytest.raises(FormatError) as e:
        fm.read_footer(frag.data[-20:], size, 22, schemas)
    assert e.value.offset == frag.footer_offset
    with pytest.raises(FormatError) as e:
        fm.read_footer(frag.data, size, 22, {})
    assert "schema" in e.value.message
    # a tail with a truncated field reports the file offset
    cut = frag.data[:frag.footer_offset + 30] + frag.data[-8:]
    with pytest.raises(FormatError):
        fm.read_footer(cut, len(cut), 22, schemas)


def test_peek_footer_schema_name(tmp_path):
    frag = _one_fragment(tmp_path)
    version, name = fm.peek_footer_schema_name(frag.data, FMD, frag.footer_offset)
    assert version == 22 and name == frag.footer.array_schema_name
    assert os.path.exists(os.path.join(os.path.dirname(os.path.dirname(frag.path)), "__schema", name))


def test_footer_truncation_offsets(tmp_path):
    frag = _one_fragment(tmp_path)
    off, length = frag.footer_offset, frag.footer_length
    name_len = len(frag.footer.array_schema_name)
    ned_at = 4 + 8 + name_len + 2
    tile_num_at = ned_at + 16
    for cut, field_at, what in [(2, 0, "version"), (4 + 3, 4, "array schema name length"),
                                # a name the footer cannot hold: at its length, the number that is wrong
                                (4 + 8 + name_len - 1, 4, "array schema name length"),
                                (ned_at + 5, ned_at, "non-empty domain"),
                                (tile_num_at + 3, tile_num_at, "sparse_tile_num"),
                                (length - 1, length - 8, "processed conditions")]:
        with pytest.raises(FormatError) as e:
            fm.parse_footer(frag.data[:off + cut], FMD, frag.schema, off, cut, 22)
        assert e.value.offset == off + field_at, what
        assert what in e.value.message
        assert e.value.file == FMD and "footer" in e.value.structure
    # a length running past the data
    with pytest.raises(FormatError) as e:
        fm.parse_footer(frag.data, FMD, frag.schema, off, length + 9, 22)
    assert e.value.offset == off
    # bytes left over
    data = frag.data[:off + length] + b"\0" * 8
    with pytest.raises(FormatError) as e:
        fm.parse_footer(data, FMD, frag.schema, off, length + 8, 22)
    assert e.value.offset == off + length and "remain" in e.value.message
    # errors in a tail report file offsets through `base`
    tail = frag.data[off:]
    with pytest.raises(FormatError) as e:
        fm.parse_footer(tail[:tile_num_at + 3], FMD, frag.schema, 0, tile_num_at + 3, 22, base=off)
    assert e.value.offset == off + tile_num_at


def test_footer_versions_rejected(tmp_path):
    frag = _one_fragment(tmp_path)
    off, length = frag.footer_offset, frag.footer_length
    for version in (0xFFFFFFFF, 0x80000000 | 22, 2, 24):
        data = bytearray(frag.data)
        data[off:off + 4] = struct.pack("<I", version)
        with pytest.raises(FormatError) as e:
            fm.parse_footer(bytes(data), FMD, frag.schema, off, length, 22)
        assert e.value.offset == off
    # a name/footer version mismatch is noted, not fatal
    ft = fm.parse_footer(frag.data, FMD, frag.schema, off, length, 21)
    assert ft.version == 22 and any("differs" in n for n in ft.notes)


def test_null_non_empty_domain_padding(tmp_path):
    """§8 #12: a null non-empty domain is followed by 2*D*coord_size zero bytes (writer) or nothing."""
    frag = _one_fragment(tmp_path)
    off, length = frag.footer_offset, frag.footer_length
    footer = bytearray(frag.data[off:off + length])
    flag_at = 4 + 8 + len(frag.footer.array_schema_name) + 1
    ned_size = 2 * 2 * 4
    footer[flag_at] = 1
    padded = bytes(footer[:flag_at + 1]) + b"\0" * ned_size + bytes(footer[flag_at + 1 + ned_size:])
    unpadded = bytes(footer[:flag_at + 1]) + bytes(footer[flag_at + 1 + ned_size:])
    base = describe_footer(frag.footer)
    for raw, pad in ((padded, ned_size), (unpadded, 0)):
        ft = fm.parse_footer(raw, FMD, frag.schema, 0, len(raw), 22)
        assert ft.null_non_empty_domain and ft.non_empty_domain is None
        assert ft.null_domain_padding == pad
        d = describe_footer(ft)
        assert d["null_non_empty_domain"] is True and d["non_empty_domain"] is None
        for key in base:
            if key not in ("null_non_empty_domain", "non_empty_domain", "footer_length"):
                assert d[key] == base[key], key
        assert d["footer_length"] == len(raw)
    # padding that is not zeros is not padding
    bad = bytearray(padded)
    bad[flag_at + 3] = 7
    with pytest.raises(FormatError):
        fm.parse_footer(bytes(bad), FMD, frag.schema, 0, len(bad), 22)


@pytest.mark.backcompat
def test_v11_footer_with_and_without_fragment_offset():
    """§8 #11: TileDB 2.7 wrote no fragment min/max offset in v11; later back-compat writers add one."""
    uri = corpus.array("v13")
    (frag,) = fragments(uri)
    off, length = frag.footer_offset, frag.footer_length
    footer = bytearray(frag.data[off:off + length])       # v13 = v11 layout + fragment offset
    footer[0:4] = struct.pack("<I", 11)
    with_extra = bytes(footer)
    ft = fm.parse_footer(with_extra, FMD, frag.schema, 0, len(with_extra), 11)
    assert ft.version == 11
    assert ft.generic_tile_offsets.fragment_min_max_sum_null_count == \
        frag.footer.generic_tile_offsets.fragment_min_max_sum_null_count
    assert any("format 11" in n for n in ft.notes)
    assert "fragment_min_max_sum_null_count" in describe_footer(ft)["generic_tile_offsets"]
    plain = with_extra[:-8]
    ft = fm.parse_footer(plain, FMD, frag.schema, 0, len(plain), 11)
    assert ft.generic_tile_offsets.fragment_min_max_sum_null_count is None
    assert ft.generic_tile_offsets.tile_null_count_offsets == frag.footer.generic_tile_offsets.tile_null_count_offsets
    top, gto = expected_keys(11)
    d = describe_footer(ft)
    assert set(d) == top and set(d["generic_tile_offsets"]) == gto


# ---------------------------------------------------------------------------
# sub-structure errors
# ---------------------------------------------------------------------------

def test_substructure_truncation(tmp_path):
    frag = _one_fragment(tmp_path)
    rt_payload = frag.payload(frag.gto.rtree)
    # u32 fanout, u32 levels (2), root: u64 n (=1) + 1 MBR, leaves: u64 n (=2) + 2 MBRs (2 dims x 2 x 4 bytes)
    assert len(rt_payload) == 8 + (8 + 16) + (8 + 2 * 16)
    with pytest.raises(FormatError) as e:
        fm.parse_rtree(rt_payload[:-1], FMD, frag.schema.dimensions, 22)
    # at level 1's MBR count, which the bytes left cannot hold
    assert e.value.offset == 8 + 24 and e.value.within == "R-tree" and "level 1" in e.value.message
    with pytest.raises(FormatError) as e:
        fm.parse_rtree(rt_payload + b"\0", FMD, frag.schema.dimensions, 22)
    assert e.value.offset == len(rt_payload)
    huge = rt_payload[:4] + struct.pack("<I", 2**31) + rt_payload[8:]
    with pytest.raises(FormatError) as e:
        fm.parse_rtree(huge, FMD, frag.schema.dimensions, 22)
    assert e.value.offset == 4      # the level count itself
    # u64 lists: a count larger than the payload
    with pytest.raises(FormatError) as e:
        fm.parse_u64_list(struct.pack("<Q", 2**60) + b"\0" * 16, FMD, "tile offsets")
    assert e.value.offset == 0 and e.value.within == "tile offsets"      # the count itself
    offs = frag.u64s("tile_offsets", 0)
    assert fm.parse_u64_list(struct.pack("<Q", len(offs)) + offs.tobytes(), FMD, "x").tolist() == offs.tolist()
    with pytest.raises(FormatError) as e:
        fm.parse_u64_list(struct.pack("<Q", 1) + b"\0" * 9, FMD, "tile offsets")
    assert e.value.offset == 16
    # the count alone (a dense fragment's tile folder listed without numpy) fails exactly as the list
    good = struct.pack("<Q", len(offs)) + offs.tobytes()
    assert fm.count_u64_list(good, FMD, "x") == len(offs) > 0
    damaged = [good[:cut] for cut in range(len(good))] + [good + b"\0", struct.pack("<Q", 2**60) + good[8:],
                                                          struct.pack("<Q", len(offs) - 1) + good[8:]]
    for payload in damaged:
        with pytest.raises(FormatError) as by_list:
            fm.parse_u64_list(payload, FMD, "tile offsets")
        with pytest.raises(FormatError) as by_count:
            fm.count_u64_list(payload, FMD, "tile offsets")
        assert str(by_count.value) == str(by_list.value)
        assert by_count.value.as_problem() == by_list.value.as_problem()
    # min/max: sizes beyond the payload, sizes not a multiple of the cell
    a = frag.fields.by_name("a")
    mins_payload = frag.payload(frag.gto.tile_min_offsets[a.idx])
    with pytest.raises(FormatError) as e:
        fm.parse_tile_min_max(mins_payload[:-2], FMD, a)
    assert e.value.offset == 16
    bad = struct.pack("<QQ", 6, 0) + b"\0" * 6
    with pytest.raises(FormatError) as e:
        fm.parse_tile_min_max(bad, FMD, a)
    assert e.value.offset == 16 and "multiple" in e.value.message
    with pytest.raises(FormatError) as e:
        fm.parse_tile_sums(struct.pack("<Q", 3) + b"\0" * 16, FMD, a)
    assert e.value.offset == 0      # the count the bytes cannot hold
    summary = frag.payload(frag.gto.fragment_min_max_sum_null_count)
    with pytest.raises(FormatError) as e:
        fm.parse_fragment_min_max_sum_null_count(summary[:-4], FMD, frag.fields)
    assert e.value.offset == len(summary) - 8 and "null count" in e.value.message
    with pytest.raises(FormatError) as e:
        fm.parse_processed_conditions(struct.pack("<QQ", 1, 50) + b"x" * 10, FMD)
    assert e.value.offset == 16
    assert fm.parse_processed_conditions(struct.pack("<QQ", 1, 3) + b"abc", FMD) == ("abc",)


def test_var_min_max_offsets_checked():
    f = fm.Field(0, "s", fm.ATTRIBUTE, "a0", BY_NAME["STRING_ASCII"], fm.VAR_NUM, 1, True, False, 0)
    good = struct.pack("<QQ", 16, 5) + struct.pack("<QQ", 0, 2) + b"abcde"
    assert fm.parse_tile_min_max(good, FMD, f) == [b"ab", b"cde"]
    bad = struct.pack("<QQ", 16, 5) + struct.pack("<QQ", 0, 9) + b"abcde"
    with pytest.raises(FormatError) as e:
        fm.parse_tile_min_max(bad, FMD, f)
    assert e.value.offset == 16


# ---------------------------------------------------------------------------
# back-compat corpus (formats 1-22)
# ---------------------------------------------------------------------------

def _backcompat_arrays():
    """(format version, array) for every corpus array with fragments, from its folder name ("v05" -> 5)."""
    out = [pytest.param(int(folder[1:3]), uri, id=f"{int(folder[1:3])}-{os.path.basename(uri)}")
           for folder, uri in corpus.arrays()
           if folder.startswith("v") and folder[1:3].isdigit() and fragment_dirs(uri)]
    return out or [pytest.param(None, None, id="corpus-absent")]   # skipped by the backcompat marker, saying why


@pytest.mark.backcompat
@pytest.mark.parametrize("version,uri", _backcompat_arrays())
def test_backcompat(version, uri):
    schemas = load_schemas(uri)
    paths = fragment_dirs(uri)
    assert paths
    for path in paths:
        name = os.path.basename(path)
        if version <= 2:
            data = open(os.path.join(path, FMD), "rb").read()
            sch = schemas["__array_schema.tdb"]
            meta = fm.parse_legacy_fragment_metadata(read_generic_tile(data, 0, FMD, "fragment metadata").payload,
                                                     FMD, sch)
            assert meta.version == version
            A = len(sch.attributes)
            assert len(meta.file_sizes) == A + 1 and len(meta.tile_offsets) == A + 1
            for f in meta.fields:
                assert os.path.getsize(os.path.join(path, f.file)) == meta.file_sizes[f.idx]
                assert len(meta.tile_offsets[f.idx]) == meta.mbrs.mbr_num
            expected = {1: ((1, 4), (10, 10)), 2: ((1, 2), (1, 4))}[version]
            assert meta.non_empty_domain == expected
            shown = yaml.safe_load(yaml.safe_dump(describe_legacy_footer(meta, dense=False)))
            assert shown["legacy_fragment_metadata"]["mbr_num"] == meta.mbrs.mbr_num
            assert shown["non_empty_domain"] == [list(r) for r in expected]
            continue
        frag = Fragment(path, schemas)
        ft = frag.footer
        assert ft.version == version
        assert ft.notes == ()
        if version < 10:
            assert ft.array_schema_name is None
            assert frag.footer_length == fm.computed_footer_size(frag.schema, frag.name_version) or any(
                d.var_sized for d in frag.schema.dimensions)
        check_file_sizes(frag)
        check_tile_counts(frag)
        check_footer_dict(frag)
        rt = check_rtree(frag, None)
        if not ft.dense:
            assert rt.leaf_num == ft.sparse_tile_num
            if version < 5:
                assert rt.dim_num == len(frag.schema.dimensions)
        if version >= 12:
            summary = frag.summary()
            assert len(summary) == frag.fields.count
        if version >= 16:
            assert isinstance(frag.processed_conditions(), tuple)
        if version == 8:
            assert {f.file for f in frag.fields if ft.file_sizes[f.idx]} <= set(os.listdir(path))


# ---------------------------------------------------------------------------
# formats 1-4: legacy footer view and the __coords split (§5.2, §5.7)
# ---------------------------------------------------------------------------

def _legacy(version_dir: str):
    """The schema, fragment folder and legacy metadata of the one fragment of a format 1/2 corpus array."""
    uri = corpus.array(version_dir)      # skips the test, saying why, if the corpus is missing
    sch = load_schemas(uri)["__array_schema.tdb"]
    (path,) = fragment_dirs(uri)
    data = open(os.path.join(path, FMD), "rb").read()
    meta = fm.parse_legacy_fragment_metadata(read_generic_tile(data, 0, FMD, "fragment metadata").payload, FMD, sch)
    return sch, path, meta


@pytest.mark.backcompat
def test_legacy_footer_has_the_footer_keys_of_its_version():
    """A v1/v2 fragment has no footer: footer.yaml shows the footer keys it has, then the inline lists."""
    sch, path, meta = _legacy("v02")
    ft = fm.legacy_footer(meta, dense=False)
    assert ft.version == 2 and ft.sparse_tile_num == 1 and ft.last_tile_cell_num == 3
    assert ft.non_empty_domain == ((1, 2), (1, 4)) and ft.generic_tile_offsets is None
    d = describe_legacy_footer(meta, dense=False)
    assert list(d)[:8] == ["version", "dense", "null_non_empty_domain", "non_empty_domain", "sparse_tile_num",
                           "last_tile_cell_num", "file_sizes", "file_var_sizes"]
    assert "footer_length" not in d and "generic_tile_offsets" not in d
    assert d["file_sizes"] == [os.path.getsize(os.path.join(path, f)) for f in ("a.tdb", "__coords.tdb")]
    assert d["legacy_fragment_metadata"]["tile_offsets"] == [[0], [0]]
    rt = fm.legacy_rtree(meta)
    assert rt.leaf_num == 1 and describe_rtree_level(rt, 0) == [[1, 2, 1, 4]]
    assert fm.legacy_footer(meta, dense=True).sparse_tile_num == 0


@pytest.mark.backcompat
def test_coords_zipped_only_in_format_1_without_a_compressor():
    """§5.2: format 1 zipped the coordinates unless the coords pipeline compresses; later formats split them."""
    from tdbfs.format.filters import FilterPipeline, FilterSpec
    none = FilterPipeline(65536, ())
    zstd = FilterPipeline(65536, (FilterSpec(2),))
    shuffle = FilterPipeline(65536, (FilterSpec(9),))
    assert fm.coords_zipped(1, none) and fm.coords_zipped(1, shuffle)
    assert not fm.coords_zipped(1, zstd)
    assert not any(fm.coords_zipped(v, p) for v in (2, 3, 4) for p in (none, zstd))
    sch, _, _ = _legacy("v01")
    assert fm.coords_zipped(1, sch.coords_filters)       # the v1 sample: no coords compressor


@pytest.mark.backcompat
def test_split_coords_zipped_and_unzipped():
    sch, _, _ = _legacy("v01")
    dims = sch.dimensions
    zipped = np.array([1, 10, 2, 10, 3, 10], "<i4").tobytes()
    d1, d2 = fm.split_coords(zipped, dims, True)
    assert d1.tolist() == [1, 2, 3] and d2.tolist() == [10, 10, 10]
    d1, d2 = fm.split_coords(np.array([1, 2, 3, 10, 10, 10], "<i4").tobytes(), dims, False)
    assert d1.tolist() == [1, 2, 3] and d2.tolist() == [10, 10, 10]
    assert [a.tolist() for a in fm.split_coords(b"", dims, False)] == [[], []]
    with pytest.raises(FormatError) as e:
        fm.split_coords(zipped[:-4], dims, True, "__coords.tdb", "tile 0", 120)
    assert e.value.offset == 120 and "2-dimensional 8-byte" in str(e.value)
