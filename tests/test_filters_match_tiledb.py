"""Every numeric filter (and WEBP), alone and in pipelines, decodes to exactly what TileDB reads.

Each case writes a REAL array with tiledb-py: the filter (or "+"-chain of
tests/arrays.py FILTERS names) on attributes of the types TileDB lets it take, on
the offsets pipeline, the validity pipeline and the coordinates, wherever TileDB
accepts it. Every tile of every stream, as tdbfs shows it (tile_K.bin /
.var.bin / .validity.bin), is then compared with TileDB's own read of the
fragment (tests/test_tiles_match_tiledb.py's comparison), and the stage records
of tile_K.yaml are checked to hold the filter's header fields.

Arrays are small (300 cells, tiles of 130 cells so bitshuffle meets element
counts that are not multiples of 8); one dense array has 160 KB tiles that
span three chunks. Tile 1 of every nullable field is all nulls, and tile 1 of the
var string field holds only empty strings (an empty var tile).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import tiledb
import yaml
from tiledb.sparse_array import _setitem_impl_sparse

import reference
from arrays import filter_list
from test_tiles_match_tiledb import _check_fragment, _read
from tdbfs.store import ArrayStore
from tdbfs.views.nodes import ViewError
from tdbfs.views.tree import build_root

N = 300          # cells per sparse array
CAPACITY = 130   # cells per sparse tile: tiles of 130, 130, 40 cells

INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "datetime64[ns]", "bool")
FLOATS = ("float32", "float64")


@dataclass
class Field:
    dtype: Any
    filters: str
    values: str = "smooth"     # smooth | random | sorted
    var: bool = False
    nullable: bool = False

    @property
    def name(self) -> str:
        kind = "v" if self.var else ("n" if self.nullable else "a")
        dt = "str" if self.dtype is str else np.dtype(self.dtype).name.replace("[", "_").rstrip("]")
        return f"{kind}_{dt}_{self.values}"


def tdb_name(chain_item: str) -> str:
    """TileDB's name of a FILTERS entry: "BIT_WIDTH_REDUCTION_W64" -> "BIT_WIDTH_REDUCTION"."""
    base = re.sub(r"_(W\d+|AS_[A-Z0-9]+)$", "", chain_item)
    return "NONE" if base == "NOOP" else base


# -- values ---------------------------------------------------------------------------


def _int_range(dt: np.dtype) -> tuple[int, int]:
    if dt.kind == "M" or dt.itemsize == 8:
        # DOUBLE_DELTA refuses deltas that overflow int64: keep 64-bit values in +-2**61
        return (0, 2 ** 62) if dt.kind == "u" else (-2 ** 61, 2 ** 61)
    info = np.iinfo(dt)
    return int(info.min), int(info.max)


def make_values(field: Field, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(field.dtype)
    if dt.kind == "b":
        v = rng.integers(0, 2, n) if field.values != "sorted" else (np.arange(n) >= n // 3)
        return v.astype(bool)
    if dt.kind == "f":
        # positive, so their bit patterns read as int64 (DOUBLE_DELTA as INT64) stay in order
        if field.values == "random":
            return rng.uniform(1.0, 1000.0, n).astype(dt)
        return (1000 + np.abs(np.cumsum(rng.standard_normal(n)) * 7.25)).astype(dt)
    lo, hi = _int_range(dt)
    store = np.int64 if dt.kind in "iM" else np.uint64
    if field.values == "random":
        v = rng.integers(lo, hi, n, dtype=store, endpoint=False)
    elif field.values == "sorted":
        v = np.maximum.accumulate(np.linspace(lo // 2, hi // 2, n).astype(store)
                                  + rng.integers(0, 3, n).astype(store))
    else:
        # small steps, with some 32-value stretches scaled up so that bit width
        # reduction meets windows of 8, 16, 32 and 64 bits; wraps in narrow types
        steps = rng.integers(-3, 6, n).astype(np.int64)
        scale = np.array([1, 1, 300, 1, 70000, 1, 2 ** 33, 1, 1, 5])[np.arange(n) // 32 % 10]
        v = np.cumsum(steps) * scale
        if dt.kind == "u":
            v = v - v.min()  # uint64 values that wrapped would make deltas beyond int64
        v = v.astype(np.int64).astype(store)
    if dt.kind == "M":
        return v.astype(np.int64).view(dt)
    return v.astype(dt)


def make_var(field: Field, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    cells = np.empty(n, dtype=object)
    if field.dtype is str:
        words = ["", "a", "bb", "ccc", "héllo", "wörld", "tiledb", "zz" * 7]
        cells[:] = [words[int(k)] + str(i) for i, k in enumerate(rng.integers(0, len(words), n))]
        if not TILEDB_CANNOT_READ_EMPTY.search(field.filters):
            cells[CAPACITY:2 * CAPACITY] = ""  # tile 1: only empty strings, an empty var tile
    else:
        dt = np.dtype(field.dtype)
        cells[:] = [np.arange(int(k) + 1, dtype=dt) * 3 + i for i, k in enumerate(rng.integers(0, 4, n))]
    return cells


# TileDB 2.30 cannot read back an empty var tile that went through DELTA / DOUBLE_DELTA
# (one chunk whose part says 0 values but still holds a first value: "PreallocatedBuffer:
# Write would overflow buffer") or through XOR followed by another filter (an XOR part of
# 0 bytes: "FilterBuffer error; no current buffer"); see test_empty_var_tiles_tiledb_cannot_read.
TILEDB_CANNOT_READ_EMPTY = re.compile(r"(^|\+)(DOUBLE_)?DELTA|XOR\+")


def make_validity(n: int) -> np.ndarray:
    v = (np.arange(n) % 5 != 2).astype(np.uint8)
    v[CAPACITY:2 * CAPACITY] = 0  # tile 1 is all nulls
    return v


# -- arrays ---------------------------------------------------------------------------


def _attr(f: Field) -> tiledb.Attr:
    return tiledb.Attr(f.name, dtype=f.dtype, var=f.var, nullable=f.nullable, filters=filter_list(f.filters))


def write_sparse(path: Path, fields: list[Field], *, coords=None, offsets=None, validity=None,
                 dim_dtype=np.uint64) -> Path:
    """1-D sparse array, dimension d0 (sorted coordinates 0, 3, 6, ...), one fragment.
    `coords`, `offsets`, `validity`: filter chains of the schema's pipelines."""
    dim = tiledb.Dim("d0", domain=(0, 10 ** 6), tile=1000, dtype=dim_dtype)
    kw = {}
    if offsets:
        kw["offsets_filters"] = filter_list(offsets)
    if validity:
        kw["validity_filters"] = filter_list(validity)
    schema = tiledb.ArraySchema(domain=tiledb.Domain(dim), attrs=[_attr(f) for f in fields], sparse=True,
                                capacity=CAPACITY, **kw)
    if coords:
        schema._coords_filters = filter_list(coords)  # the dimension has none: it uses these
    tiledb.Array.create(str(path), schema)
    data, valid = {}, {}
    for i, f in enumerate(fields):
        data[f.name] = make_var(f, N, i) if f.var else make_values(f, N, i)
        if f.nullable:
            valid[f.name] = make_validity(N)
    coords_v = (np.arange(N) * 3).astype(dim_dtype)
    with tiledb.open(str(path), "w") as A:
        if valid:
            _setitem_impl_sparse(A, (coords_v,), data, valid)
        else:
            A[coords_v] = data
    return path


def check_array(path: Path) -> dict:
    """Compare every tile of every fragment with TileDB's read; returns the tree root."""
    root = build_root(ArrayStore(str(path)))
    built = SimpleNamespace(path=path)
    names = reference.list_fragments(path)
    assert names
    for name in names:
        _check_fragment(root, built, name)
    return root


def stage_records(root, path: Path, field_name: str, stream: str = "data", tile: int = 0) -> list[dict]:
    """The stage records of every chunk of one stream of one tile, from tile_K.yaml."""
    frag = reference.list_fragments(path)[0]
    base = f"fragments/{frag}"
    fields = yaml.safe_load(_read(root, f"{base}/fragment.yaml"))["fields"]
    stem = next(s for s, n in fields.items() if n == field_name)
    kind = "dims" if stem.startswith("d") else "attrs"
    rec = yaml.safe_load(_read(root, f"{base}/{kind}/{stem}/tile_{tile}.yaml"))
    entry = rec["streams"][stream]
    assert "error" not in entry, entry
    return [s for c in entry["chunks"] for s in c["stages"]]


def test_empty_var_tiles_tiledb_cannot_read(tmp_path):
    """A var tile of only empty strings through DELTA / DOUBLE_DELTA (TileDB stores one
    chunk of 0 unfiltered bytes whose part header says 0 values, followed by a stray first
    value) or through XOR and another filter (an XOR part of 0 bytes): TileDB's own read
    fails. tdbfs decodes them as the empty tiles they are, and the other tiles as written."""
    chains = {"a": "DELTA", "b": "DOUBLE_DELTA+ZSTD", "c": "XOR+NOOP"}
    path = tmp_path / "empty"
    dim = tiledb.Dim("d0", domain=(0, 999), tile=1000, dtype=np.uint64)
    attrs = [tiledb.Attr(name, dtype=str, var=True, filters=filter_list(c)) for name, c in chains.items()]
    tiledb.Array.create(str(path), tiledb.ArraySchema(domain=tiledb.Domain(dim), attrs=attrs, sparse=True,
                                                      capacity=10))
    words = np.array([f"w{i}" for i in range(30)], dtype=object)
    words[10:20] = ""
    with tiledb.open(str(path), "w") as A:
        A[np.arange(30, dtype=np.uint64)] = {name: words for name in chains}
    with pytest.raises(tiledb.TileDBError):
        with tiledb.open(str(path)) as A:
            A[:]
    root = build_root(ArrayStore(str(path)))
    frag = reference.list_fragments(path)[0]
    for stem in ("a0", "a1", "a2"):
        for k in range(3):
            var = _read(root, f"fragments/{frag}/attrs/{stem}/tile_{k}.var.bin")
            assert var == "".join(words[10 * k:10 * k + 10]).encode()
    for name in "ab":
        parts = stage_records(root, path, name, "var", 1)[0]["parts"]
        assert parts[0]["unfiltered"] == 0 and parts[0]["values"] == 0 and parts[0]["filtered"] > 8
    assert stage_records(root, path, "c", "var", 1)[0]["parts"] == [0]


def test_xor_after_a_size_changing_filter_loses_bytes(tmp_path):
    """XOR behind DOUBLE_DELTA sees 417 bytes of INT32 and writes only the 416 of whole
    values while its header says 417: the last byte of the double-delta stream is lost.
    TileDB cannot read the tile back; tdbfs says which part and how many bytes."""
    path = write_sparse(tmp_path / "lost", [Field("int32", "DOUBLE_DELTA_AS_INT32+XOR")])
    with pytest.raises(tiledb.TileDBError, match="span multiple regions"):
        with tiledb.open(str(path)) as A:
            A[:]
    root = build_root(ArrayStore(str(path)))
    frag = reference.list_fragments(path)[0]
    rec = yaml.safe_load(_read(root, f"fragments/{frag}/attrs/a0/tile_0.yaml"))
    assert re.search(r"filter XOR \(position 1\): XOR parts total (\d+) bytes but the data holds (\d+)",
                     rec["streams"]["data"]["error"])
    with pytest.raises(ViewError, match="XOR parts total"):
        _read(root, f"fragments/{frag}/attrs/a0/tile_0.bin")


# -- one filter at a time ---------------------------------------------------------------

# filter -> (fixed attribute dtypes, value kinds, var fields, on offsets, on validity, on coords)
SINGLE = {
    "NOOP": (INTS + FLOATS, ("smooth",), True, True, True, True),
    "DOUBLE_DELTA": (INTS, ("smooth", "random"), True, True, True, True),
    "DELTA": (INTS, ("smooth", "random"), True, True, True, True),
    "BIT_WIDTH_REDUCTION": (INTS, ("smooth", "random"), "int", True, True, True),
    "BIT_WIDTH_REDUCTION_W64": (INTS, ("smooth",), "int", True, True, True),
    "BITSHUFFLE": (INTS + FLOATS, ("smooth", "random"), True, True, True, True),
    "POSITIVE_DELTA": (INTS, ("sorted",), False, True, False, True),
    "POSITIVE_DELTA_W64": (INTS, ("sorted",), False, True, False, True),
    "XOR": (INTS + FLOATS, ("smooth", "random"), True, True, True, True),
    "SCALE_FLOAT": (FLOATS, ("smooth", "random"), False, False, False, False),
    "SCALE_FLOAT_W2": (FLOATS, ("smooth",), False, False, False, False),
    "SCALE_FLOAT_W8": (FLOATS, ("smooth",), False, False, False, False),
}


def fields_for(chain: str, dtypes, kinds, var) -> list[Field]:
    out = [Field(dt, chain, k) for dt in dtypes for k in kinds]
    out.append(Field(dtypes[0], chain, kinds[0], nullable=True))
    if var:
        out.append(Field(np.int32, chain, "smooth", var=True, nullable=True))
        if var is True:
            out.append(Field(str, chain, "smooth", var=True))
    return out


@pytest.mark.parametrize("name", list(SINGLE))
def test_single_filter_matches_tiledb(tmp_path, name):
    dtypes, kinds, var, on_offsets, on_validity, on_coords = SINGLE[name]
    path = write_sparse(tmp_path / name, fields_for(name, dtypes, kinds, var),
                        offsets=name if on_offsets else None, validity=name if on_validity else None,
                        coords=name if on_coords else None)
    root = check_array(path)
    first = dtypes[0]
    stages = stage_records(root, path, Field(first, name, kinds[0]).name)
    assert [s["filter"] for s in stages] == [tdb_name(name)] * len(stages)
    s = stages[0]
    if name.startswith("DOUBLE_DELTA"):
        assert {"bitsize", "values"} <= set(s["parts"][-1]) and s["element_type"] == "INT8"
    elif name.startswith("DELTA"):
        assert s["parts"][-1]["values"] == CAPACITY and s["element_type"] == "INT8"
    elif name.startswith("BIT_WIDTH"):
        # int8 is not reduced; int16 is
        assert s["applied"] is False
        s16 = stage_records(root, path, Field("int16", name, kinds[0]).name)[0]
        assert s16["original_length"] == 2 * CAPACITY and s16["windows"][0]["bits"] in (8, 16)
        assert sum(s16["windows_by_bits"].values()) == s16["window_count"]
    elif name.startswith("POSITIVE_DELTA"):
        assert s["element_type"] == "INT8" and s["windows"][0]["first_value"] == int(
            make_values(Field(first, name, "sorted"), N, 0)[0])
    elif name.startswith("SCALE_FLOAT"):
        assert s["byte_width"] in (2, 4, 8) and s["float_type"] == "FLOAT32"
    elif name in ("BITSHUFFLE", "XOR"):
        assert s["type_size"] == 1
    if on_offsets and var:
        off = stage_records(root, path, fields_for(name, dtypes, kinds, var)[-1].name, "offsets")
        assert off and off[0]["filter"] == tdb_name(name)


def test_datetime_reduced_at_format_22(tmp_path):
    """BIT_WIDTH_REDUCTION and POSITIVE_DELTA treat DATETIME as int64 from format 20 on."""
    fields = [Field("datetime64[ns]", "BIT_WIDTH_REDUCTION", "smooth"),
              Field("datetime64[ns]", "POSITIVE_DELTA", "sorted")]
    path = write_sparse(tmp_path / "dt", fields)
    root = check_array(path)
    bwr = stage_records(root, path, fields[0].name)[0]
    pd = stage_records(root, path, fields[1].name)[0]
    assert bwr["element_type"] == "INT64" and bwr["original_length"] == 8 * CAPACITY
    assert pd["element_type"] == "INT64" and pd["window_count"] >= 1


# -- pipelines ----------------------------------------------------------------------

INT_ONLY = ("int8", "uint16", "int32", "uint32", "int64", "uint64", "datetime64[ns]")
SIZE8 = ("int64", "uint64", "float64", "datetime64[ns]")

# chain -> (fixed dtypes, value kinds, var fields, on offsets, on validity, on coords)
PIPELINES = {
    "BIT_WIDTH_REDUCTION+ZSTD": (INT_ONLY, ("smooth", "random"), "int", True, True, True),
    "DELTA+BYTESHUFFLE+LZ4": (INT_ONLY, ("smooth", "random"), True, True, True, True),
    "DOUBLE_DELTA+BITSHUFFLE+ZSTD": (INT_ONLY, ("smooth", "random"), True, True, True, True),
    "SCALE_FLOAT+BYTESHUFFLE+ZSTD": (FLOATS, ("smooth", "random"), False, False, False, False),
    "SCALE_FLOAT_W2+BIT_WIDTH_REDUCTION+ZSTD": (FLOATS, ("smooth",), False, False, False, False),
    "SCALE_FLOAT_W8+XOR+GZIP": (FLOATS, ("smooth",), False, False, False, False),
    "CHECKSUM_SHA256+GZIP": (INTS + FLOATS, ("smooth",), True, True, True, True),
    "XOR+BIT_WIDTH_REDUCTION+ZSTD": (INT_ONLY + FLOATS, ("smooth", "random"), True, True, True, True),
    "XOR+BITSHUFFLE+LZ4": (INTS + FLOATS, ("smooth",), True, True, True, True),
    "POSITIVE_DELTA+BITSHUFFLE+ZSTD": (INT_ONLY, ("sorted",), False, True, False, True),
    "POSITIVE_DELTA_W64+BYTESHUFFLE+CHECKSUM_MD5": (INT_ONLY, ("sorted",), False, True, False, True),
    "DOUBLE_DELTA_AS_INT64+BIT_WIDTH_REDUCTION+ZSTD": (SIZE8, ("smooth", "random"), False, True, False, True),
    "DOUBLE_DELTA_AS_INT32+BIT_WIDTH_REDUCTION+ZSTD": (("float32", "int32", "uint32"), ("smooth",),
                                                       False, False, False, False),
    "DELTA_AS_UINT16+BIT_WIDTH_REDUCTION+BZIP2": (("int32", "uint32", "int64", "float32", "float64"),
                                                  ("smooth", "random"), False, True, False, True),
    "DELTA_AS_INT64+BITSHUFFLE": (SIZE8, ("smooth",), False, True, False, True),
    "BITSHUFFLE+DELTA+ZSTD": (("int8", "int16", "int32"), ("smooth",), False, False, True, False),
    # 130 int8/int16 values are not a multiple of 8 bytes: BITSHUFFLE hands on two parts
    "BITSHUFFLE+XOR+ZSTD": (("int8", "int16", "uint16"), ("smooth", "random"), False, False, True, False),
    "BITSHUFFLE+BIT_WIDTH_REDUCTION+LZ4": (("int8", "int16", "uint16"), ("smooth",), False, False, True, False),
    "NOOP+DOUBLE_DELTA+NOOP": (("int16", "uint64"), ("smooth",), True, True, True, True),
    "XOR+BIT_WIDTH_REDUCTION_W64+CHECKSUM_MD5": (INT_ONLY, ("smooth",), "int", True, True, True),
}


@pytest.mark.parametrize("chain", list(PIPELINES))
def test_pipeline_matches_tiledb(tmp_path, chain):
    dtypes, kinds, var, on_offsets, on_validity, on_coords = PIPELINES[chain]
    path = write_sparse(tmp_path / "arr", fields_for(chain, dtypes, kinds, var),
                        offsets=chain if on_offsets else None, validity=chain if on_validity else None,
                        coords=chain if on_coords else None)
    root = check_array(path)
    stages = stage_records(root, path, Field(dtypes[-1], chain, kinds[0]).name)
    assert [s["position"] for s in stages] == list(range(len(chain.split("+"))))


def test_type_changes_reach_the_next_filter(tmp_path):
    """XOR on float64 hands INT64 on, SCALE_FLOAT(2 bytes) INT16, DELTA as UINT16 UINT16:
    the BIT_WIDTH_REDUCTION behind them works on those types (it skips floats)."""
    fields = [Field("float64", "XOR+BIT_WIDTH_REDUCTION+ZSTD"),
              Field("float32", "SCALE_FLOAT_W2+BIT_WIDTH_REDUCTION+ZSTD"),
              Field("int64", "DELTA_AS_UINT16+BIT_WIDTH_REDUCTION+BZIP2")]
    path = write_sparse(tmp_path / "types", fields)
    root = check_array(path)
    for f, elem in zip(fields, ("INT64", "INT16", "UINT16")):
        bwr = stage_records(root, path, f.name)[1]
        assert bwr["filter"] == "BIT_WIDTH_REDUCTION" and bwr["element_type"] == elem


# -- dense: partial edge tiles, fill values, multi-chunk tiles ------------------------------


def write_dense(path: Path, fields: list[Field], *, domain: int, extent: int, ndim: int,
                sub: tuple[int, int], validity=None, offsets=None) -> Path:
    dims = [tiledb.Dim(f"d{j}", domain=(0, domain - 1), tile=extent, dtype=np.int64) for j in range(ndim)]
    kw = {}
    if validity:
        kw["validity_filters"] = filter_list(validity)
    if offsets:
        kw["offsets_filters"] = filter_list(offsets)
    schema = tiledb.ArraySchema(domain=tiledb.Domain(*dims), attrs=[_attr(f) for f in fields], sparse=False, **kw)
    tiledb.Array.create(str(path), schema)
    shape = (sub[1] - sub[0] + 1,) * ndim
    n = int(np.prod(shape))
    data, valid = {}, {}
    for i, f in enumerate(fields):
        data[f.name] = (make_var(f, n, i) if f.var else make_values(f, n, i)).reshape(shape)
        if f.nullable:
            valid[f.name] = make_validity(n)
    with tiledb.open(str(path), "w") as A:
        sel = tuple(slice(sub[0], sub[1] + 1) for _ in range(ndim))
        if valid:
            A._setitem_impl(sel, data, valid)
        else:
            A[sel] = data
    return path


def test_dense_partial_edge_tiles(tmp_path):
    """10x10 domain in 4x4 tiles (edge tiles stick out of the domain), written on
    [1, 8]^2: tiles hold fill values around the cells."""
    fields = [Field("int32", "DOUBLE_DELTA+BITSHUFFLE+ZSTD"), Field("uint16", "BIT_WIDTH_REDUCTION+ZSTD"),
              Field("float64", "SCALE_FLOAT+BYTESHUFFLE+ZSTD"), Field("int64", "XOR+BIT_WIDTH_REDUCTION+LZ4"),
              Field("int16", "DELTA+BYTESHUFFLE+LZ4"), Field(str, "DOUBLE_DELTA", var=True)]
    # (no nullable field: tests/reference.py cannot pad a nullable dense edge tile)
    path = write_dense(tmp_path / "dense", fields, domain=10, extent=4, ndim=2, sub=(1, 8),
                       offsets="DOUBLE_DELTA+BITSHUFFLE")
    check_array(path)


def test_multi_chunk_tiles(tmp_path):
    """1-D dense tiles of 20000 cells: 160 KB int64/float64 tiles are three chunks."""
    n = 40000
    fields = [Field("int64", "DOUBLE_DELTA+BITSHUFFLE+ZSTD"), Field("float64", "XOR+BIT_WIDTH_REDUCTION+ZSTD"),
              Field("int32", "BIT_WIDTH_REDUCTION"), Field("uint64", "POSITIVE_DELTA+BYTESHUFFLE", "sorted"),
              Field("float32", "SCALE_FLOAT+BITSHUFFLE"), Field("int64", "DELTA+XOR+LZ4", "random"),
              Field("int16", "BITSHUFFLE+ZSTD", nullable=True)]
    path = write_dense(tmp_path / "big", fields, domain=n, extent=20000, ndim=1, sub=(0, n - 1),
                       validity="BITSHUFFLE+ZSTD")
    root = check_array(path)
    frag = reference.list_fragments(path)[0]
    chunks = yaml.safe_load(_read(root, f"fragments/{frag}/attrs/a0/tile_0.yaml"))["streams"]["data"]["chunks"]
    assert len(chunks) == 3 and sum(c["unfiltered_size"] for c in chunks) == 160000


# -- WEBP ---------------------------------------------------------------------------------


def write_image(path: Path, chain: str, depth: int, seed: int = 0) -> tuple[Path, np.ndarray]:
    """Dense 2-D uint8: rows (y, tile 8) x bytes per row (x, tile 8*depth): each tile is
    an 8x8-pixel image. Written over the whole 16 x 16*depth domain."""
    h, w = 16, 16 * depth
    dims = [tiledb.Dim("y", domain=(0, h - 1), tile=8, dtype=np.int32),
            tiledb.Dim("x", domain=(0, w - 1), tile=8 * depth, dtype=np.int32)]
    attr = tiledb.Attr("rgb", dtype=np.uint8, filters=filter_list(chain))
    tiledb.Array.create(str(path), tiledb.ArraySchema(domain=tiledb.Domain(*dims), attrs=[attr], sparse=False))
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    img = ((yy * 13 + xx * 5) % 256 + rng.integers(0, 40, (h, w))).astype(np.uint8)
    if depth == 4:
        img[:, 3::4] = np.where(yy[:, 3::4] < 8, 255, 128 + xx[:, 3::4])
    with tiledb.open(str(path), "w") as A:
        A[:, :] = img
    return path, img


@pytest.mark.parametrize("chain,depth", [("WEBP_RGB_LOSSLESS", 3), ("WEBP_BGRA_LOSSLESS", 4),
                                         ("WEBP_RGB_LOSSLESS+ZSTD", 3)])
def test_webp_lossless_matches_tiledb(tmp_path, chain, depth):
    path, img = write_image(tmp_path / "img", chain, depth)
    root = check_array(path)
    frag = reference.list_fragments(path)[0]
    tile0 = np.frombuffer(_read(root, f"fragments/{frag}/attrs/a0/tile_0.bin"), np.uint8).reshape(8, 8 * depth)
    assert np.array_equal(tile0, img[:8, :8 * depth]), "lossless WebP gives back the pixels written"
    webp = stage_records(root, path, "rgb")[0]
    assert webp["format"] == ("RGB" if depth == 3 else "BGRA") and webp["lossless"] is True
    assert webp["images"] == [{"width": 8, "height": 8, "encoded_bytes": webp["images"][0]["encoded_bytes"],
                               "webp_mode": webp["images"][0]["webp_mode"]}]


@pytest.mark.parametrize("chain,depth", [("WEBP_RGB_LOSSY", 3), ("WEBP_RGBA_LOSSY", 4)])
def test_webp_lossy_matches_tiledb(tmp_path, chain, depth):
    """Lossy WebP: Pillow's libwebp decodes to the very bytes TileDB's libwebp reads."""
    path, img = write_image(tmp_path / "img", chain, depth)
    check_array(path)
    with tiledb.open(str(path)) as A:
        read = A[:, :]["rgb"]
    assert not np.array_equal(read, img), "the lossy encoding changed some pixels (else this proves nothing)"


# -- a real mount ------------------------------------------------------------------------


def test_mounted_filtered_tile_reads_with_cat(tmp_path, mount):
    fields = [Field("int64", "DOUBLE_DELTA+BITSHUFFLE+ZSTD"), Field("float64", "SCALE_FLOAT+BYTESHUFFLE+ZSTD")]
    path = write_sparse(tmp_path / "arr", fields, coords="DELTA+BIT_WIDTH_REDUCTION+ZSTD")
    mnt = mount(path)
    frag = reference.list_fragments(path)[0]
    cells = reference.fragment_cells(path, frag)
    for stem, name in (("a0", fields[0].name), ("a1", fields[1].name), ("d0", "d0")):
        kind = "dims" if stem == "d0" else "attrs"
        got = subprocess.run(["cat", str(mnt / "fragments" / frag / kind / stem / "tile_0.bin")],
                             check=True, capture_output=True, timeout=30).stdout
        assert got == cells[name].fixed_bytes()[:len(got)] and len(got) == 8 * CAPACITY
