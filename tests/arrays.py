"""Factories that write REAL TileDB arrays with tiledb-py, for the tests.

Nothing here makes bytes by hand: every array is created, written, deleted from,
consolidated and vacuumed through tiledb-py, so the files on disk are exactly what
TileDB itself writes.

Entry point::

    built = make_array(base_dir, "sparse", ndim=2, capacity=3)
    built.path          # pathlib.Path of the array directory (os.fspath(built) works too)
    built.ops           # what was done, in order (writes with their data, deletes, ...)
    built.writes        # only the Op(kind="write") entries, oldest first
    built.fragments()   # fragment folder names on disk, oldest first

Every write, delete, metadata write and schema evolution happens at an explicit,
distinct timestamp (milliseconds, taken from the wall clock and never repeated), so
one fragment can be isolated by opening the array at ``timestamp=(t, t)``. Timestamps
are never in the future, so a plain ``tiledb.open(uri)`` sees everything.

``KINDS`` maps each kind name to its builder; see each builder's docstring for the
array it makes. ``SAMPLE_SET`` is the representative set the ``sample_arrays``
fixture builds once per session.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import tiledb
from tiledb.sparse_array import _setitem_impl_sparse

# ---------------------------------------------------------------------------
# filters

#: filter name (as TileDB names them) -> factory of a tiledb-py filter list
FILTERS: dict[str, Callable[[], list]] = {
    "none": lambda: [],
    "GZIP": lambda: [tiledb.GzipFilter(level=6)],
    "ZSTD": lambda: [tiledb.ZstdFilter(level=3)],
    "LZ4": lambda: [tiledb.LZ4Filter()],
    "BZIP2": lambda: [tiledb.Bzip2Filter(level=5)],
    "BYTESHUFFLE": lambda: [tiledb.ByteShuffleFilter()],
    "CHECKSUM_MD5": lambda: [tiledb.ChecksumMD5Filter()],
    "CHECKSUM_SHA256": lambda: [tiledb.ChecksumSHA256Filter()],
}

FILTER_NAMES = tuple(FILTERS)

# Filters that only apply to some types (or to sorted values), so they are not in
# FILTER_NAMES (whose sample arrays put one filter on every field of the "filters"
# profile); tests/test_filters_match_tiledb.py picks fields for them.
FILTERS.update({
    "NOOP": lambda: [tiledb.NoOpFilter()],
    "DOUBLE_DELTA": lambda: [tiledb.DoubleDeltaFilter()],
    "DOUBLE_DELTA_AS_INT64": lambda: [tiledb.DoubleDeltaFilter(reinterp_dtype=np.int64)],
    "DOUBLE_DELTA_AS_INT32": lambda: [tiledb.DoubleDeltaFilter(reinterp_dtype=np.int32)],
    "DELTA": lambda: [tiledb.DeltaFilter()],
    "DELTA_AS_INT64": lambda: [tiledb.DeltaFilter(reinterp_dtype=np.int64)],
    "DELTA_AS_UINT16": lambda: [tiledb.DeltaFilter(reinterp_dtype=np.uint16)],
    "BIT_WIDTH_REDUCTION": lambda: [tiledb.BitWidthReductionFilter()],
    "BIT_WIDTH_REDUCTION_W64": lambda: [tiledb.BitWidthReductionFilter(window=64)],
    "BITSHUFFLE": lambda: [tiledb.BitShuffleFilter()],
    "POSITIVE_DELTA": lambda: [tiledb.PositiveDeltaFilter()],
    "POSITIVE_DELTA_W64": lambda: [tiledb.PositiveDeltaFilter(window=64)],
    "SCALE_FLOAT": lambda: [tiledb.FloatScaleFilter(factor=0.01, offset=-3.0, bytewidth=4)],
    "SCALE_FLOAT_W2": lambda: [tiledb.FloatScaleFilter(factor=0.25, offset=1.5, bytewidth=2)],
    "SCALE_FLOAT_W8": lambda: [tiledb.FloatScaleFilter(factor=1e-6, offset=0.0, bytewidth=8)],
    "XOR": lambda: [tiledb.XORFilter()],
    "WEBP_RGB_LOSSLESS": lambda: [tiledb.WebpFilter(input_format=tiledb.WebpFilter.WebpInputFormat.WEBP_RGB, lossless=True)],
    "WEBP_BGRA_LOSSLESS": lambda: [tiledb.WebpFilter(input_format=tiledb.WebpFilter.WebpInputFormat.WEBP_BGRA, lossless=True)],
    "WEBP_RGB_LOSSY": lambda: [tiledb.WebpFilter(input_format=tiledb.WebpFilter.WebpInputFormat.WEBP_RGB, quality=50.0,
                                                 lossless=False)],
    "WEBP_RGBA_LOSSY": lambda: [tiledb.WebpFilter(input_format=tiledb.WebpFilter.WebpInputFormat.WEBP_RGBA, quality=75.0,
                                                  lossless=False)],
})


def filter_list(spec: str | Sequence[str] | None) -> tiledb.FilterList:
    """A tiledb.FilterList from a filter name ("ZSTD"), a "+"-joined chain
    ("BYTESHUFFLE+ZSTD+CHECKSUM_SHA256") or a list of names; None or "none" -> empty."""
    if spec is None:
        return tiledb.FilterList([])
    names = spec.split("+") if isinstance(spec, str) else list(spec)
    out: list = []
    for name in names:
        try:
            out.extend(FILTERS[name]())
        except KeyError:
            raise ValueError(f"unknown filter {name!r}; known: {', '.join(FILTERS)}") from None
    return tiledb.FilterList(out)


# ---------------------------------------------------------------------------
# clock


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Clock:
    """Distinct, increasing millisecond timestamps that are never in the future."""

    def __init__(self) -> None:
        self.last = 0

    def next(self) -> int:
        t = now_ms()
        while t <= self.last:
            time.sleep(0.0005)
            t = now_ms()
        self.last = t
        return t


# ---------------------------------------------------------------------------
# records


@dataclass
class Op:
    """One thing done to the array, in order.

    kind: "write" | "delete" | "meta" | "evolve" | "consolidate" | "vacuum"
    timestamp: the explicit timestamp used (None for consolidate/vacuum, which
        TileDB stamps itself)
    coords: sparse write: dimension name -> coordinates (numpy array, or list of str)
    subarray: dense write: one inclusive (low, high) pair per dimension
    data: write: attribute (or dimension label) name -> values as written (numpy
        arrays; var cells as object arrays; dense data shaped like the subarray)
    validity: nullable attributes: name -> uint8 array (1 valid, 0 null), same shape
    cond: delete condition (a tiledb-py query-condition string)
    meta: metadata written (key -> value) ; deleted: metadata keys deleted
    config: consolidation/vacuum config
    """

    kind: str
    timestamp: int | None = None
    coords: dict[str, Any] | None = None
    subarray: list[tuple[Any, Any]] | None = None
    data: dict[str, Any] = field(default_factory=dict)
    validity: dict[str, np.ndarray] = field(default_factory=dict)
    cond: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    config: dict[str, str] = field(default_factory=dict)
    note: str = ""


@dataclass
class BuiltArray:
    path: Path
    kind: str
    options: dict[str, Any]
    ops: list[Op] = field(default_factory=list)

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    @property
    def uri(self) -> str:
        return str(self.path)

    @property
    def writes(self) -> list[Op]:
        return [op for op in self.ops if op.kind == "write"]

    def ops_of(self, kind: str) -> list[Op]:
        return [op for op in self.ops if op.kind == kind]

    def schema(self) -> tiledb.ArraySchema:
        return tiledb.ArraySchema.load(self.uri)

    def fragments(self) -> list[str]:
        """Fragment folder names on disk (committed or not), oldest first."""
        from reference import list_fragments  # local import: tests/ is on sys.path

        return list_fragments(self.path)

    def files(self) -> list[str]:
        """Every file under the array, relative, sorted."""
        out = []
        for root, _dirs, files in os.walk(self.path):
            for f in files:
                out.append(os.path.relpath(os.path.join(root, f), self.path))
        return sorted(out)


# ---------------------------------------------------------------------------
# attribute profiles and value generators


@dataclass
class AttrSpec:
    name: str
    dtype: Any
    var: bool = False
    nullable: bool = False
    filters: str | Sequence[str] | None = None  # None = tiledb-py default (none)
    fill: Any = None
    enum_label: str | None = None

    def make(self) -> tiledb.Attr:
        kw: dict[str, Any] = dict(name=self.name, dtype=self.dtype, var=self.var, nullable=self.nullable)
        if self.filters is not None:
            kw["filters"] = filter_list(self.filters)
        if self.fill is not None:
            kw["fill"] = self.fill
        if self.enum_label is not None:
            kw["enum_label"] = self.enum_label
        return tiledb.Attr(**kw)


#: a fixed attribute holding 3 float32 values per cell (cell_val_num = 3)
F4X3 = np.dtype([("", "f4")] * 3)

FIXED_DTYPES = (
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "datetime64[ns]", "datetime64[D]", "bool", "S1",
)


def _attr_name(dtype: str) -> str:
    return "x_" + dtype.replace("[", "_").replace("]", "")


def attr_profile(profile: str | Sequence[AttrSpec], filters: str | Sequence[str] | None = None) -> list[AttrSpec]:
    """Attribute lists by name.

    "default": a0 int32 (ZSTD unless `filters` given), a1 var UTF-8 string,
               a2 nullable float64
    "filters": a0 int32, a1 var UTF-8 string, a2 nullable float32,
               a3 nullable var int32 -- all with `filters`
    "all_dtypes": one fixed attribute per FIXED_DTYPES entry (x_int8 ... x_S1), then
               f3 (3 x float32 per cell), s3 (fixed 'S3', cell_val_num 3),
               vu (var UTF-8), vs (var bytes 'S'), vascii (var ASCII), vi (var int32),
               nf (nullable float64), ni (nullable int16), nvu (nullable var UTF-8)
    "int": a0 int32 only
    """
    if not isinstance(profile, str):
        return list(profile)
    if profile == "default":
        return [
            AttrSpec("a0", np.int32, filters=filters if filters is not None else "ZSTD"),
            AttrSpec("a1", str, var=True, filters=filters),
            AttrSpec("a2", np.float64, nullable=True, filters=filters),
        ]
    if profile == "filters":
        return [
            AttrSpec("a0", np.int32, filters=filters),
            AttrSpec("a1", str, var=True, filters=filters),
            AttrSpec("a2", np.float32, nullable=True, filters=filters),
            AttrSpec("a3", np.int32, var=True, nullable=True, filters=filters),
        ]
    if profile == "all_dtypes":
        out = [AttrSpec(_attr_name(dt), dt, filters=filters) for dt in FIXED_DTYPES]
        out += [
            AttrSpec("f3", F4X3, filters=filters),
            AttrSpec("s3", "S3", filters=filters),
            AttrSpec("vu", "U", var=True, filters=filters),
            AttrSpec("vs", "S", var=True, filters=filters),
            AttrSpec("vascii", "ascii", var=True, filters=filters),
            AttrSpec("vi", np.int32, var=True, filters=filters),
            AttrSpec("nf", np.float64, nullable=True, filters=filters),
            AttrSpec("ni", np.int16, nullable=True, filters=filters),
            AttrSpec("nvu", "U", var=True, nullable=True, filters=filters),
        ]
        return out
    if profile == "int":
        return [AttrSpec("a0", np.int32, filters=filters)]
    raise ValueError(f"unknown attribute profile {profile!r}")


_WORDS = ["", "a", "bb", "ccc", "héllo", "wörld", "x" * 9, "tile", "db", "ünï", "z"]


def _is_null(i: int, seed: int) -> bool:
    return (i + seed) % 3 == 1


def attr_values(spec: AttrSpec, n: int, seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Deterministic values for `n` cells of attribute `spec` (seed varies them per
    write). Returns (values, validity or None). Null cells keep a real value (TileDB
    stores it under the null); var cells are an object array (str, bytes or arrays)."""
    i = np.arange(n)
    validity = None
    if spec.var:
        dt = np.dtype(spec.dtype) if spec.dtype not in ("U", "S", "ascii", str, bytes) else None
        if dt is None:
            words = [_WORDS[(k + seed) % len(_WORDS)] + (str(k + seed * 10) if k % 4 == 3 else "") for k in i]
            if spec.dtype in ("S", bytes):
                vals = [w.encode("utf-8") + (b"\x00\x01" if k % 5 == 2 else b"") for k, w in zip(i, words)]
            elif spec.dtype == "ascii":
                vals = [w.encode("utf-8").decode("ascii", "replace").replace("\ufffd", "?") for w in words]
            else:
                vals = words
        else:
            vals = [np.arange(k % 3 + 1, dtype=dt) + dt.type(k + seed * 100) for k in i]
        cells = np.empty(n, dtype=object)
        cells[:] = vals
        if spec.nullable:
            validity = np.array([0 if _is_null(k, seed) else 1 for k in i], dtype=np.uint8)
        return cells, validity

    dt = np.dtype(spec.dtype)
    if dt == F4X3:
        vals = np.zeros(n, dtype=F4X3)
        for j, fname in enumerate(dt.names):
            vals[fname] = (i + seed * 10 + j / 4.0).astype(np.float32)
    elif dt.kind == "M":
        vals = (np.datetime64("2020-01-01", "D") + (i + seed * 30).astype("timedelta64[D]")).astype(dt)
        if dt == np.dtype("datetime64[ns]"):
            vals = vals + (i * 1234567).astype("timedelta64[ns]")
    elif dt.kind == "b":
        vals = ((i + seed) % 3 == 0)
    elif dt.kind == "S":
        width = dt.itemsize
        vals = np.array([("abcdefgh"[(k + seed) % 8] * (k % width + 1)).encode() for k in i], dtype=dt)
    elif dt.kind == "f":
        vals = ((i - n // 2) * 0.5 + seed * 100 + 0.25).astype(dt)
    elif dt.kind == "u":
        vals = ((i * 7 + seed * 11) % 200).astype(dt)
        if dt.itemsize >= 4:
            vals = vals + dt.type(1) * dt.type(3_000_000_000 if dt.itemsize == 8 else 70_000)
    elif dt.kind == "i":
        vals = ((i * 7 + seed * 11) % 200 - 100).astype(dt)
        if dt.itemsize == 8:
            vals = vals * np.int64(10_000_000_000)
    else:
        raise ValueError(f"no generator for {dt}")
    if spec.nullable:
        validity = np.array([0 if _is_null(k, seed) else 1 for k in i], dtype=np.uint8)
    return np.asarray(vals), validity


# ---------------------------------------------------------------------------
# dimensions


@dataclass
class DimSpec:
    name: str
    kind: str  # "int" | "float" | "datetime" | "string"
    dtype: Any
    domain: tuple[Any, Any] | None
    tile: Any
    filters: str | Sequence[str] | None = None

    def make(self) -> tiledb.Dim:
        kw: dict[str, Any] = dict(name=self.name, dtype=self.dtype)
        if self.kind == "string":
            kw.update(domain=(None, None), tile=None)
        else:
            kw.update(domain=self.domain, tile=self.tile)
        if self.filters is not None:
            kw["filters"] = filter_list(self.filters)
        return tiledb.Dim(**kw)


def dim_spec(name: str, kind: str, *, dtype: Any = None, domain: Any = None, tile: Any = None,
             filters: str | Sequence[str] | None = None) -> DimSpec:
    if kind == "int":
        return DimSpec(name, kind, dtype or np.int32, domain or (0, 99), tile if tile is not None else 10, filters)
    if kind == "float":
        return DimSpec(name, kind, dtype or np.float64, domain or (-100.0, 100.0), tile if tile is not None else 25.0, filters)
    if kind == "datetime":
        return DimSpec(name, kind, dtype or "datetime64[D]",
                       domain or (np.datetime64("2000-01-01"), np.datetime64("2099-12-31")),
                       tile if tile is not None else np.timedelta64(365, "D"), filters)
    if kind == "string":
        return DimSpec(name, kind, "ascii", None, None, filters)
    raise ValueError(f"unknown dimension kind {kind!r}")


def sparse_coords(dims: Sequence[DimSpec], n: int, seed: int) -> dict[str, Any]:
    """`n` distinct coordinates, deterministic in `seed`, in a scrambled (non-global) order."""
    rng = np.random.default_rng(seed)
    side = 10  # each dimension takes 10 distinct values per seed; grid of 10**ndim points
    if n > side ** len(dims):
        raise ValueError("too many cells for the coordinate grid")
    flat = rng.choice(side ** len(dims), size=n, replace=False)
    idx = np.unravel_index(flat, (side,) * len(dims))
    out: dict[str, Any] = {}
    for d, ix in zip(dims, idx):
        ix = np.asarray(ix)
        if d.kind == "int":
            lo, hi = d.domain
            step = max(1, (hi - lo + 1) // side)
            vals = lo + ix * step + (seed % step)
            out[d.name] = np.minimum(vals, hi).astype(d.dtype)
        elif d.kind == "float":
            lo, hi = d.domain
            out[d.name] = (lo + (ix + 0.5 + seed * 0.01) * ((hi - lo) / side)).astype(d.dtype)
        elif d.kind == "datetime":
            lo, _hi = d.domain
            out[d.name] = (np.datetime64(lo, "D") + (ix * 1000 + seed * 7).astype("timedelta64[D]")).astype(d.dtype)
        elif d.kind == "string":
            words = ["apple", "b", "cherry", "date", "e", "fig", "grape", "h", "kiwi", "lemon"]
            arr = np.empty(n, dtype=object)
            arr[:] = [words[k] + ("" if seed == 0 else str(seed)) for k in ix]
            out[d.name] = arr
        else:
            raise ValueError(d.kind)
    return out


# ---------------------------------------------------------------------------
# building blocks


def _create(path: Path, schema: tiledb.ArraySchema) -> None:
    if path.exists():
        raise FileExistsError(path)
    tiledb.Array.create(str(path), schema)


def _write_sparse(built: BuiltArray, clock: Clock, attrs: Sequence[AttrSpec], coords: dict[str, Any],
                  seed: int, extra: dict[str, Any] | None = None, note: str = "") -> Op:
    n = len(next(iter(coords.values())))
    data: dict[str, Any] = {}
    validity: dict[str, np.ndarray] = {}
    for a in attrs:
        vals, val = attr_values(a, n, seed)
        data[a.name] = vals
        if val is not None:
            validity[a.name] = val
    if extra:
        data.update(extra)
    ts = clock.next()
    with tiledb.open(built.uri, "w", timestamp=ts) as A:
        sel = tuple(coords[d.name] for d in A.schema.domain)
        if validity:
            # explicit validity maps, so null cells keep (and store) their values
            _setitem_impl_sparse(A, sel, data, {k: v.astype(np.uint8) for k, v in validity.items()})
        else:
            A[sel] = data
    op = Op("write", ts, coords=coords, data=data, validity=validity, note=note)
    built.ops.append(op)
    return op


def _write_dense(built: BuiltArray, clock: Clock, attrs: Sequence[AttrSpec], subarray: list[tuple[int, int]],
                 seed: int, extra: dict[str, Any] | None = None, note: str = "") -> Op:
    shape = tuple(hi - lo + 1 for lo, hi in subarray)
    n = int(np.prod(shape))
    data: dict[str, Any] = {}
    validity: dict[str, np.ndarray] = {}
    for a in attrs:
        vals, val = attr_values(a, n, seed)
        data[a.name] = vals.reshape(shape)
        if val is not None:
            validity[a.name] = val.reshape(shape)
    if extra:
        data.update(extra)
    ts = clock.next()
    with tiledb.open(built.uri, "w", timestamp=ts) as A:
        sel = tuple(slice(lo, hi + 1) for lo, hi in subarray)
        if validity:
            # explicit validity maps (row-major, like the data), so null cells keep
            # (and store) their values
            A._setitem_impl(sel, data, {k: v.reshape(-1).astype(np.uint8) for k, v in validity.items()})
        else:
            A[sel] = data
    op = Op("write", ts, subarray=list(subarray), data=data, validity=validity, note=note)
    built.ops.append(op)
    return op


def consolidate(built: BuiltArray, **config: str) -> None:
    """tiledb.consolidate with the given config (keys without the "sm." prefix
    mean sm.consolidation.<key>: mode="commits" -> sm.consolidation.mode)."""
    cfg = {(k if k.startswith("sm.") else f"sm.consolidation.{k}"): str(v) for k, v in config.items()}
    # the default 50 MB per-field buffers make each consolidation take ~1 s; our
    # arrays are tiny, so this changes nothing on disk
    cfg.setdefault("sm.consolidation.buffer_size", "1000000")
    tiledb.consolidate(built.uri, config=tiledb.Config(cfg))
    built.ops.append(Op("consolidate", config=cfg))


def vacuum(built: BuiltArray, mode: str = "fragments") -> None:
    cfg = {"sm.vacuum.mode": mode}
    tiledb.vacuum(built.uri, config=tiledb.Config(cfg))
    built.ops.append(Op("vacuum", config=cfg))


def delete(built: BuiltArray, clock: Clock, cond: str) -> Op:
    ts = clock.next()
    with tiledb.open(built.uri, "d", timestamp=ts) as A:
        A.query(cond=cond).submit()
    op = Op("delete", ts, cond=cond)
    built.ops.append(op)
    return op


def put_meta(built: BuiltArray, clock: Clock, values: dict[str, Any] | None = None,
             delete_keys: Sequence[str] = ()) -> Op:
    ts = clock.next()
    with tiledb.open(built.uri, "w", timestamp=ts) as A:
        for k, v in (values or {}).items():
            A.meta[k] = v
        for k in delete_keys:
            del A.meta[k]
    op = Op("meta", ts, meta=dict(values or {}), deleted=list(delete_keys))
    built.ops.append(op)
    return op


def _schema(dims: Sequence[DimSpec], attrs: Sequence[AttrSpec], *, sparse: bool, capacity: int = 0,
            cell_order: str = "row-major", tile_order: str = "row-major", allows_duplicates: bool = False,
            coords_filters: str | Sequence[str] | None = None, offsets_filters: str | Sequence[str] | None = None,
            validity_filters: str | Sequence[str] | None = None, enums: Sequence[tiledb.Enumeration] | None = None,
            dim_labels: dict | None = None) -> tiledb.ArraySchema:
    kw: dict[str, Any] = dict(
        domain=tiledb.Domain(*[d.make() for d in dims]),
        attrs=[a.make() for a in attrs],
        sparse=sparse,
        cell_order=cell_order,
        tile_order=tile_order,
    )
    if sparse:
        kw["capacity"] = capacity
        kw["allows_duplicates"] = allows_duplicates
    if offsets_filters is not None:
        kw["offsets_filters"] = filter_list(offsets_filters)
    if validity_filters is not None:
        kw["validity_filters"] = filter_list(validity_filters)
    if enums:
        kw["enums"] = list(enums)
    if dim_labels:
        kw["dim_labels"] = dim_labels
    schema = tiledb.ArraySchema(**kw)
    if coords_filters is not None:
        # tiledb-py's `coords_filters=` argument copies the list onto every dimension
        # and leaves the schema's own coords pipeline empty; set the schema-level
        # pipeline instead, so dimensions without filters of their own use it.
        schema._coords_filters = filter_list(coords_filters)
    return schema


def _dims_for(ndim: int, dim_kinds: str | Sequence[str], **kw: Any) -> list[DimSpec]:
    kinds = [dim_kinds] * ndim if isinstance(dim_kinds, str) else list(dim_kinds)
    if len(kinds) != ndim:
        raise ValueError("dim_kinds must have one entry per dimension")
    return [dim_spec(f"d{j}", k, **kw) for j, k in enumerate(kinds)]


# ---------------------------------------------------------------------------
# builders (one per kind)


def build_dense(path: Path, *, ndim: int = 2, extent: int = 2, tiles_per_dim: int = 3,
                dim_dtype: Any = np.int64, low: int = 1, attrs: str | Sequence[AttrSpec] = "default",
                filters: str | Sequence[str] | None = None, cell_order: str = "row-major",
                tile_order: str = "row-major", fragments: Sequence[Sequence[tuple[int, int]]] | None = None,
                domain_high: int | None = None, offsets_filters=None, validity_filters=None) -> BuiltArray:
    """Dense array, `ndim` (1-3) integer dimensions d0.. with domain
    [low, low + extent*tiles_per_dim - 1] (or `domain_high`) and tile extent `extent`.
    Attributes from `attrs` profile ("default": a0 int32 ZSTD, a1 var string,
    a2 nullable float64). Default fragments: (1) the whole domain, (2) a partial
    write not aligned to tiles (low+1 .. low+extent+1 on every dimension), so its
    tiles hold fill values around the written cells. `fragments` overrides: a list
    of subarrays, each a list of inclusive (lo, hi) per dimension."""
    high = domain_high if domain_high is not None else low + extent * tiles_per_dim - 1
    dims = [DimSpec(f"d{j}", "int", dim_dtype, (low, high), extent) for j in range(ndim)]
    aspecs = attr_profile(attrs, filters)
    _create(path, _schema(dims, aspecs, sparse=False, cell_order=cell_order, tile_order=tile_order,
                          offsets_filters=offsets_filters, validity_filters=validity_filters))
    built = BuiltArray(path, "dense", dict(ndim=ndim, extent=extent, tiles_per_dim=tiles_per_dim, attrs=attrs,
                                           cell_order=cell_order, tile_order=tile_order))
    clock = Clock()
    if fragments is None:
        fragments = [[(low, high)] * ndim, [(low + 1, min(high, low + extent + 1))] * ndim]
    for seed, sub in enumerate(fragments, start=1):
        _write_dense(built, clock, aspecs, list(sub), seed)
    return built


def build_sparse(path: Path, *, ndim: int = 2, dim_kinds: str | Sequence[str] = "int", capacity: int = 3,
                 cells: int = 10, n_fragments: int = 2, attrs: str | Sequence[AttrSpec] = "default",
                 filters: str | Sequence[str] | None = None, allows_duplicates: bool = False,
                 cell_order: str = "row-major", tile_order: str = "row-major",
                 coords_filters=None, offsets_filters=None, validity_filters=None,
                 dim_filters: str | Sequence[str] | None = None) -> BuiltArray:
    """Sparse array, `ndim` (1-3) dimensions d0.. of `dim_kinds` ("int" int32
    [0,99] tile 10, "float" float64 [-100,100] tile 25, "datetime" datetime64[D]
    2000..2099 tile 365 days, "string" ascii var; or a list, one per dimension),
    tile capacity `capacity`, `n_fragments` fragments of `cells` distinct cells each
    (different coordinates per fragment), written in scrambled order (TileDB sorts
    them into global order). Attributes from `attrs` ("default": a0 int32 ZSTD,
    a1 var string, a2 nullable float64). cell_order may be "hilbert"."""
    dims = _dims_for(ndim, dim_kinds, filters=dim_filters)
    aspecs = attr_profile(attrs, filters)
    _create(path, _schema(dims, aspecs, sparse=True, capacity=capacity, cell_order=cell_order,
                          tile_order=tile_order, allows_duplicates=allows_duplicates,
                          coords_filters=coords_filters, offsets_filters=offsets_filters,
                          validity_filters=validity_filters))
    built = BuiltArray(path, "sparse", dict(ndim=ndim, dim_kinds=dim_kinds, capacity=capacity, cells=cells,
                                            n_fragments=n_fragments, attrs=attrs, cell_order=cell_order))
    clock = Clock()
    for seed in range(1, n_fragments + 1):
        _write_sparse(built, clock, aspecs, sparse_coords(dims, cells, seed), seed)
    return built


def build_all_dtypes(path: Path, *, sparse: bool = True, cells: int = 7, capacity: int = 4,
                     filters: str | Sequence[str] | None = None) -> BuiltArray:
    """Every attribute datatype tiledb-py writes (profile "all_dtypes": int8..uint64,
    float32/64, datetime64[ns]/[D], bool, 'S1', 3 x float32 per cell, 'S3', var UTF-8,
    var bytes, var ASCII, var int32, nullable float64 / int16 / var UTF-8).
    Sparse: one uint64 dimension d0 [0, 999] tile 100, `cells` cells, capacity
    `capacity`. Dense: d0 int64 [0, 7] tile 4, whole domain written. One fragment."""
    aspecs = attr_profile("all_dtypes", filters)
    if sparse:
        dims = [DimSpec("d0", "int", np.uint64, (0, 999), 100)]
        _create(path, _schema(dims, aspecs, sparse=True, capacity=capacity))
        built = BuiltArray(path, "all_dtypes", dict(sparse=True, cells=cells, capacity=capacity))
        clock = Clock()
        coords = {"d0": np.array([(k * 37) % 100 * 3 for k in range(cells)], dtype=np.uint64)}
        _write_sparse(built, clock, aspecs, coords, seed=1)
    else:
        dims = [DimSpec("d0", "int", np.int64, (0, 7), 4)]
        _create(path, _schema(dims, aspecs, sparse=False))
        built = BuiltArray(path, "all_dtypes", dict(sparse=False))
        clock = Clock()
        _write_dense(built, clock, aspecs, [(0, 7)], seed=1)
    return built


def build_filters(path: Path, *, filter: str | Sequence[str] = "ZSTD", sparse: bool = True,
                  cells: int = 9, capacity: int = 4, ndim: int = 2) -> BuiltArray:
    """One filter (or "+"-chain) everywhere: on every attribute (profile "filters":
    a0 int32, a1 var string, a2 nullable float32, a3 nullable var int32), on the
    offsets pipeline, the validity pipeline and (sparse) the schema's coords
    pipeline (dimensions have no filters of their own, so they use it).
    Sparse: int32 dimensions, `cells` cells, capacity `capacity`, one fragment.
    Dense: int64 dims [1, 4] tile 2, whole domain, one fragment."""
    aspecs = attr_profile("filters", filter)
    if sparse:
        dims = _dims_for(ndim, "int")
        _create(path, _schema(dims, aspecs, sparse=True, capacity=capacity, coords_filters=filter,
                              offsets_filters=filter, validity_filters=filter))
    else:
        dims = [DimSpec(f"d{j}", "int", np.int64, (1, 4), 2) for j in range(ndim)]
        _create(path, _schema(dims, aspecs, sparse=False, coords_filters=filter,
                              offsets_filters=filter, validity_filters=filter))
    built = BuiltArray(path, "filters", dict(filter=filter, sparse=sparse, cells=cells, capacity=capacity))
    clock = Clock()
    if sparse:
        _write_sparse(built, clock, aspecs, sparse_coords(dims, cells, 1), seed=1)
    else:
        _write_dense(built, clock, aspecs, [(1, 4)] * ndim, seed=1)
    return built


def build_consolidated(path: Path, *, sparse: bool = True, n_fragments: int = 3, cells: int = 5,
                       capacity: int = 4, overlap: bool = False, vacuum_after: bool = False,
                       fragment_meta: bool = False, allows_duplicates: bool = False) -> BuiltArray:
    """`n_fragments` fragments, then fragment consolidation (a new fragment
    __<first t1>_<last t2>_..., a .vac file in __commits listing the old ones).
    Sparse (1 int32 dim d0, capacity `capacity`): TileDB 2.30 always writes the cell
    timestamps t.tdb in consolidated sparse fragments. `overlap`: fragments write
    overlapping coordinates (then a consolidated fragment holds several cells with
    the same coordinates; reading it back through TileDB keeps only the newest
    unless allows_duplicates). Dense: 1 int64 dim [0,15] tile 4, fragment k writes
    [k*3, k*3+4]. `fragment_meta`: also consolidate fragment metadata first
    (__fragment_meta/*.meta). `vacuum_after`: vacuum fragments afterwards."""
    if sparse:
        dims = [DimSpec("d0", "int", np.int32, (0, 99), 10)]
        aspecs = attr_profile("default")
        _create(path, _schema(dims, aspecs, sparse=True, capacity=capacity, allows_duplicates=allows_duplicates))
    else:
        dims = [DimSpec("d0", "int", np.int64, (0, 15), 4)]
        aspecs = attr_profile("default")
        _create(path, _schema(dims, aspecs, sparse=False))
    built = BuiltArray(path, "consolidated", dict(sparse=sparse, n_fragments=n_fragments, overlap=overlap,
                                                  vacuum_after=vacuum_after, fragment_meta=fragment_meta))
    clock = Clock()
    for seed in range(1, n_fragments + 1):
        if sparse:
            start = seed if overlap else (seed - 1) * cells * 2
            coords = {"d0": np.arange(start, start + cells * (1 if overlap else 2), 1 if overlap else 2,
                                      dtype=np.int32)[::-1].copy()}
            _write_sparse(built, clock, aspecs, coords, seed)
        else:
            lo = (seed - 1) * 3
            _write_dense(built, clock, aspecs, [(lo, min(15, lo + 4))], seed)
    if fragment_meta:
        consolidate(built, mode="fragment_meta")
    consolidate(built)
    if vacuum_after:
        vacuum(built)
    return built


#: the "deletes" kind's delete conditions; with its default data each matches 2 cells
DELETE_CONDITIONS = ("a0 < -80", "a0 > -40")


def build_deletes(path: Path, *, n_fragments: int = 3, cells: int = 6, capacity: int = 4,
                  consolidate_after: bool = True, purge: bool = False, vacuum_after: bool = False) -> BuiltArray:
    """Sparse (1 int32 dim d0, default attributes), `n_fragments` fragments, then two
    delete commits (__commits/*.del), DELETE_CONDITIONS, at their own timestamps
    (each deletes some of the written cells). `consolidate_after`: fragment consolidation, which writes a
    consolidated fragment with t.tdb and -- unless `purge`
    (sm.consolidation.purge_deleted_cells=true) -- the delete metadata dt.tdb
    (delete timestamp per cell) and dci.tdb (index of the delete condition), and
    lists the processed conditions in its footer."""
    dims = [DimSpec("d0", "int", np.int32, (0, 99), 10)]
    aspecs = attr_profile("default")
    _create(path, _schema(dims, aspecs, sparse=True, capacity=capacity))
    built = BuiltArray(path, "deletes", dict(n_fragments=n_fragments, consolidate_after=consolidate_after,
                                             purge=purge, vacuum_after=vacuum_after))
    clock = Clock()
    for seed in range(1, n_fragments + 1):
        coords = {"d0": np.arange((seed - 1) * cells, seed * cells, dtype=np.int32)}
        _write_sparse(built, clock, aspecs, coords, seed)
    for cond in DELETE_CONDITIONS:
        delete(built, clock, cond)
    if consolidate_after:
        if purge:
            consolidate(built, purge_deleted_cells="true")
        else:
            consolidate(built)
        if vacuum_after:
            vacuum(built)
    return built


def build_commits(path: Path, *, n_fragments: int = 3, cells: int = 4, with_delete: bool = True,
                  vacuum_commits: bool = False, then_fragments: bool = True) -> BuiltArray:
    """Sparse (1 int32 dim d0), `n_fragments` fragments (+ a delete commit when
    `with_delete`), then commit consolidation (sm.consolidation.mode=commits: a .con
    file listing the .wrt/.del commits, embedding the .del bytes). `vacuum_commits`:
    vacuum commits (removes the .wrt/.del that the .con holds). `then_fragments`:
    afterwards consolidate the fragments and vacuum them, which makes TileDB write an
    ignore file (.ign) naming the removed fragments' commits that the .con still lists."""
    dims = [DimSpec("d0", "int", np.int32, (0, 99), 10)]
    aspecs = attr_profile("default")
    _create(path, _schema(dims, aspecs, sparse=True, capacity=4))
    built = BuiltArray(path, "commits", dict(n_fragments=n_fragments, with_delete=with_delete,
                                             vacuum_commits=vacuum_commits, then_fragments=then_fragments))
    clock = Clock()
    for seed in range(1, n_fragments + 1):
        coords = {"d0": np.arange((seed - 1) * cells, seed * cells, dtype=np.int32)}
        _write_sparse(built, clock, aspecs, coords, seed)
    if with_delete:
        delete(built, clock, DELETE_CONDITIONS[0])
    consolidate(built, mode="commits")
    if vacuum_commits:
        vacuum(built, mode="commits")
    if then_fragments:
        consolidate(built)
        vacuum(built)
    return built


def build_fragment_meta(path: Path, *, sparse: bool = True, n_fragments: int = 3, vacuum_after: bool = False) -> BuiltArray:
    """`n_fragments` fragments, then fragment-metadata consolidation
    (sm.consolidation.mode=fragment_meta): __fragment_meta/__t1_t2_uuid_v.meta holds
    every fragment's footer. `vacuum_after`: vacuum fragment_meta (keeps the newest
    .meta, removes older ones; with one .meta nothing changes). Sparse: the
    "sparse" 1-D layout; dense: the "dense" 1-D layout."""
    if sparse:
        built = build_sparse(path, ndim=1, n_fragments=n_fragments, cells=6)
    else:
        built = build_dense(path, ndim=1, fragments=[[(1 + k, 2 + k * 2)] for k in range(n_fragments)])
    built.kind = "fragment_meta"
    consolidate(built, mode="fragment_meta")
    if vacuum_after:
        vacuum(built, mode="fragment_meta")
    return built


def build_schema_evolution(path: Path, *, sparse: bool = True) -> BuiltArray:
    """Three schemas in __schema/. S0: a0 int32, a1 var string -> fragment F1.
    Evolve (add `a2` float64, fill value 1.5) -> S1 -> fragment F2 (a0, a1, a2). Evolve (drop a1) -> S2 -> fragment F3 (a0, a2; on disk
    its files are a0.tdb and a1.tdb, positions in S2). Sparse: 1 int32 dim d0;
    dense: 1 int64 dim d0 [0, 11] tile 4, each fragment writes 4 cells."""
    if sparse:
        dims = [DimSpec("d0", "int", np.int32, (0, 99), 10)]
    else:
        dims = [DimSpec("d0", "int", np.int64, (0, 11), 4)]
    s0 = [AttrSpec("a0", np.int32), AttrSpec("a1", str, var=True)]
    a2 = AttrSpec("a2", np.float64, fill=1.5)
    _create(path, _schema(dims, s0, sparse=sparse, capacity=4))
    built = BuiltArray(path, "schema_evolution", dict(sparse=sparse))
    clock = Clock()

    def write(aspecs, seed):
        if sparse:
            _write_sparse(built, clock, aspecs, {"d0": np.arange(seed * 10, seed * 10 + 5, dtype=np.int32)}, seed)
        else:
            _write_dense(built, clock, aspecs, [((seed - 1) * 4, (seed - 1) * 4 + 3)], seed)

    write(s0, 1)
    ase = tiledb.ArraySchemaEvolution()
    ase.add_attribute(a2.make())
    ts = clock.next()
    ase.timestamp(ts)
    ase.array_evolve(built.uri)
    built.ops.append(Op("evolve", ts, note="add a2 float64"))
    write(s0 + [a2], 2)
    ase = tiledb.ArraySchemaEvolution()
    ase.drop_attribute("a1")
    ts = clock.next()
    ase.timestamp(ts)
    ase.array_evolve(built.uri)
    built.ops.append(Op("evolve", ts, note="drop a1"))
    write([s0[0], a2], 3)
    return built


def build_enumerations(path: Path, *, extend: bool = True) -> BuiltArray:
    """Sparse, 1 int32 dim d0; attributes `color` uint8 with enumeration "colors"
    (unordered strings red/green/blue), `size` int8 with enumeration "sizes" (ordered
    int32 10/20/30) and a0 int32. Files: __schema/__enumerations/__<label>_0. One
    fragment; with `extend`, the "colors" enumeration is extended (schema evolution:
    a new schema and a new enumeration file) and a second fragment uses the new value."""
    dims = [DimSpec("d0", "int", np.int32, (0, 99), 10)]
    colors = tiledb.Enumeration("colors", False, ["red", "green", "blue"])
    sizes = tiledb.Enumeration("sizes", True, np.array([10, 20, 30], dtype=np.int32))
    aspecs = [AttrSpec("color", np.uint8, enum_label="colors"), AttrSpec("size", np.int8, enum_label="sizes"),
              AttrSpec("a0", np.int32)]
    _create(path, _schema(dims, aspecs, sparse=True, capacity=4, enums=[colors, sizes]))
    built = BuiltArray(path, "enumerations", dict(extend=extend))
    clock = Clock()
    n = 6
    extra = {"color": np.array([k % 3 for k in range(n)], dtype=np.uint8),
             "size": np.array([(k + 1) % 3 for k in range(n)], dtype=np.int8)}
    _write_sparse(built, clock, aspecs[2:], {"d0": np.arange(n, dtype=np.int32)}, 1, extra=extra)
    if extend:
        with tiledb.open(built.uri) as A:
            ext = A.enum("colors").extend(["purple"])
        ase = tiledb.ArraySchemaEvolution()
        ase.extend_enumeration(ext)
        ts = clock.next()
        ase.timestamp(ts)
        ase.array_evolve(built.uri)
        built.ops.append(Op("evolve", ts, note="extend enumeration colors with purple"))
        extra = {"color": np.array([3, 0], dtype=np.uint8), "size": np.array([2, 2], dtype=np.int8)}
        _write_sparse(built, clock, aspecs[2:], {"d0": np.array([10, 11], dtype=np.int32)}, 2, extra=extra)
    return built


def build_dim_labels(path: Path) -> BuiltArray:
    """Dense, 1 uint64 dim d0 [0, 7] tile 4, attribute a0 int32, and a dimension
    label "xl" (increasing float64) on d0: the schema names it and the label is its
    own nested array under __labels/l0/. One write of the whole domain writes a
    fragment in the array and one in the label array."""
    dim = tiledb.Dim("d0", domain=(0, 7), tile=4, dtype=np.uint64)
    labels = {0: {"xl": dim.create_label_schema(order="increasing", dtype=np.float64)}}
    schema = tiledb.ArraySchema(domain=tiledb.Domain(dim), attrs=[tiledb.Attr("a0", dtype=np.int32)],
                                dim_labels=labels, sparse=False)
    _create(path, schema)
    built = BuiltArray(path, "dim_labels", {})
    clock = Clock()
    ts = clock.next()
    data = {"a0": np.arange(8, dtype=np.int32) * 3, "xl": np.linspace(-1.0, 1.0, 8)}
    with tiledb.open(built.uri, "w", timestamp=ts) as A:
        A[0:8] = data
    built.ops.append(Op("write", ts, subarray=[(0, 7)], data=data))
    return built


#: metadata values the "metadata" kind writes (first write)
META_VALUES_1 = {"int": 7, "float": 2.5, "str": "hello", "arr_i32": np.array([1, -2, 3], dtype=np.int32)}
META_VALUES_2 = {"bytes": b"\x00\x01bin", "arr_f64": np.array([0.5, 1.5]), "str": "hello again", "uint8": np.uint8(200)}


def build_metadata(path: Path, *, consolidate_meta: bool = False, vacuum_meta: bool = False) -> BuiltArray:
    """Sparse 1-D array with one fragment and array metadata written at three
    timestamps: META_VALUES_1, then META_VALUES_2 (overwrites "str"), then a
    deletion of "int" (a tombstone). Expected merged metadata: see
    `expected_metadata`. `consolidate_meta`: array-metadata consolidation
    (sm.consolidation.mode=array_meta: one merged __meta file + a .vac file);
    `vacuum_meta`: then vacuum array_meta."""
    built = build_sparse(path, ndim=1, n_fragments=1, cells=4)
    built.kind = "metadata"
    built.options.update(consolidate_meta=consolidate_meta, vacuum_meta=vacuum_meta)
    clock = Clock()
    clock.last = max(op.timestamp for op in built.ops if op.timestamp)
    put_meta(built, clock, META_VALUES_1)
    put_meta(built, clock, META_VALUES_2)
    put_meta(built, clock, delete_keys=["int"])
    if consolidate_meta:
        consolidate(built, mode="array_meta")
        if vacuum_meta:
            vacuum(built, mode="array_meta")
    return built


def expected_metadata(built: BuiltArray) -> dict[str, Any]:
    """Merged metadata as the ops wrote it (later writes win; deletions remove)."""
    out: dict[str, Any] = {}
    for op in built.ops_of("meta"):
        out.update(op.meta)
        for k in op.deleted:
            out.pop(k, None)
    return out


KINDS: dict[str, Callable[..., BuiltArray]] = {
    "dense": build_dense,
    "sparse": build_sparse,
    "all_dtypes": build_all_dtypes,
    "filters": build_filters,
    "consolidated": build_consolidated,
    "deletes": build_deletes,
    "commits": build_commits,
    "fragment_meta": build_fragment_meta,
    "schema_evolution": build_schema_evolution,
    "enumerations": build_enumerations,
    "dim_labels": build_dim_labels,
    "metadata": build_metadata,
}


def make_array(base_dir: str | os.PathLike, kind: str, name: str | None = None, **options: Any) -> BuiltArray:
    """Write an array of `kind` (see KINDS) into base_dir/name (default: the kind,
    made unique) and return what was built."""
    try:
        builder = KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown array kind {kind!r}; known: {', '.join(KINDS)}") from None
    base = Path(base_dir)
    base.mkdir(parents=True, exist_ok=True)
    stem = name or kind
    path = base / stem
    k = 1
    while path.exists():
        k += 1
        path = base / f"{stem}_{k}"
    built = builder(path, **options)
    built.options.setdefault("kind_options", dict(options))
    return built


#: name -> (kind, options): the representative set of the `sample_arrays` fixture
SAMPLE_SET: dict[str, tuple[str, dict[str, Any]]] = {
    "dense_1d": ("dense", dict(ndim=1, extent=4, tiles_per_dim=3)),
    "dense_2d": ("dense", dict(ndim=2)),
    "dense_3d": ("dense", dict(ndim=3, attrs="int")),
    "dense_2d_colmajor": ("dense", dict(ndim=2, cell_order="col-major", tile_order="col-major")),
    "sparse_1d": ("sparse", dict(ndim=1, capacity=3, cells=10)),
    "sparse_2d": ("sparse", dict(ndim=2)),
    "sparse_3d_mixed": ("sparse", dict(ndim=3, dim_kinds=["int", "float", "datetime"], cells=12, capacity=5)),
    "sparse_string_dim": ("sparse", dict(ndim=2, dim_kinds=["string", "int"], cells=8, capacity=3)),
    "sparse_hilbert": ("sparse", dict(ndim=2, cell_order="hilbert", cells=9, capacity=4, n_fragments=1)),
    "all_dtypes_sparse": ("all_dtypes", dict(sparse=True)),
    "all_dtypes_dense": ("all_dtypes", dict(sparse=False)),
    **{f"filter_{f}": ("filters", dict(filter=f)) for f in FILTER_NAMES},
    "filter_chain": ("filters", dict(filter="BYTESHUFFLE+ZSTD+CHECKSUM_SHA256")),
    "consolidated_sparse": ("consolidated", dict(sparse=True)),
    "consolidated_sparse_vacuumed": ("consolidated", dict(sparse=True, vacuum_after=True, fragment_meta=True)),
    "consolidated_dense": ("consolidated", dict(sparse=False)),
    "deletes": ("deletes", dict()),
    "commits": ("commits", dict()),
    "fragment_meta": ("fragment_meta", dict()),
    "schema_evolution": ("schema_evolution", dict()),
    "enumerations": ("enumerations", dict()),
    "dim_labels": ("dim_labels", dict()),
    "metadata": ("metadata", dict()),
}


def build_sample_set(base_dir: str | os.PathLike, names: Sequence[str] | None = None) -> dict[str, BuiltArray]:
    out = {}
    for name in names or SAMPLE_SET:
        kind, opts = SAMPLE_SET[name]
        out[name] = make_array(base_dir, kind, name=name, **opts)
    return out


# ---------------------------------------------------------------------------
# var strings under RLE / DICTIONARY (offsets embedded, docs/format.md §3.4), and encryption

FILTERS.update({
    "RLE": lambda: [tiledb.RleFilter()],
    "DICTIONARY": lambda: [tiledb.DictionaryFilter()],
})

#: attribute name -> (tiledb-py dtype, filter chain, nullable) of the "var_strings" kind
VAR_STRING_ATTRS = {
    "rle_ascii": ("ascii", "RLE+ZSTD", False),
    "rle_utf8": ("U", "RLE", False),
    "dict_ascii": ("ascii", "DICTIONARY+LZ4+CHECKSUM_SHA256", False),
    "dict_utf8": ("U", "DICTIONARY+ZSTD", False),
    "rle_utf8_nullable": ("U", "RLE+GZIP", True),
    "dict_utf8_nullable": ("U", "DICTIONARY", True),
}


def var_string_values(n: int, capacity: int, seed: int = 0) -> list[str]:
    """Strings for `n` cells in global order, tile by tile of `capacity` cells: tile 0 has a run
    longer than 255 (2-byte run lengths), a 300-character string (2-byte string lengths) and
    empty strings; tile 1 is all empty strings; later tiles mix unicode, repeats and empties."""
    words = ["", "a", "bb", "héllo", "wörld", "ünï", "tile", "", "db", "z" * 3]
    out = []
    for i in range(n):
        t, j = divmod(i, capacity)
        if t == 0:
            v = "same" if j < 270 else ("L" * 300 if j == 271 else ("" if j % 3 == 0 else f"x{j % 4}"))
        elif t == 1:
            v = ""
        else:
            v = words[(j * 7 + seed) % len(words)] * (1 + j % 3) + ("" if j % 5 else str(seed))
        out.append(v)
    return out


#: the attributes of a dense "var_strings" array: TileDB 2.30 (tiledb-py 0.36) crashes with a
#: segmentation fault writing a dense array with 4 or more of them at once
DENSE_VAR_STRING_ATTRS = ("rle_ascii", "dict_utf8", "rle_utf8_nullable")


def build_var_strings(path: Path, *, sparse: bool = True, cells: int = 700, capacity: int = 300,
                      attrs: Sequence[str] | None = None) -> BuiltArray:
    """Var-sized string attributes whose offsets TileDB embeds in the var tile (VAR_STRING_ATTRS:
    RLE / DICTIONARY, each alone or followed by compressors and a checksum, on ASCII and UTF-8,
    two nullable). Values: `var_string_values` (long runs, long strings, empty strings, a tile
    of all-empty strings). Sparse: ASCII string dimensions d0 (own filters RLE) and d1 (own
    filters DICTIONARY+ZSTD) plus an int32 dim d2; `cells` cells, capacity `capacity`, one
    fragment. Dense: one int64 dim [0, cells-1] with tile extent `capacity` and only
    DENSE_VAR_STRING_ATTRS. `attrs` picks attributes by name."""
    names = list(attrs or (VAR_STRING_ATTRS if sparse else DENSE_VAR_STRING_ATTRS))
    aspecs = [AttrSpec(n, VAR_STRING_ATTRS[n][0], var=True, nullable=VAR_STRING_ATTRS[n][2],
                       filters=VAR_STRING_ATTRS[n][1]) for n in names]
    if sparse:
        dims = [DimSpec("d0", "string", "ascii", None, None, "RLE"),
                DimSpec("d1", "string", "ascii", None, None, "DICTIONARY+ZSTD"),
                DimSpec("d2", "int", np.int32, (0, 1 << 20), 1 << 20)]
        _create(path, _schema(dims, aspecs, sparse=True, capacity=capacity))
    else:
        dims = [DimSpec("d0", "int", np.int64, (0, cells - 1), capacity)]
        _create(path, _schema(dims, aspecs, sparse=False))
    built = BuiltArray(path, "var_strings", dict(sparse=sparse, cells=cells, capacity=capacity))
    clock = Clock()
    data: dict[str, Any] = {}
    validity: dict[str, np.ndarray] = {}
    for k, a in enumerate(aspecs):
        vals = var_string_values(cells, capacity, seed=k)
        if a.dtype == "ascii":
            vals = [v.encode("utf-8").decode("ascii", "replace").replace("\ufffd", "?") for v in vals]
        arr = np.empty(cells, dtype=object)
        arr[:] = vals
        data[a.name] = arr
        if a.nullable:
            validity[a.name] = np.array([0 if i % 7 == 3 else 1 for i in range(cells)], dtype=np.uint8)
    ts = clock.next()
    if sparse:
        # coordinates increase with i (d0, then d1, then d2), so cell i is the i-th in global order
        d0 = np.empty(cells, dtype=object)
        d0[:] = [f"chr{i // 250:02d}" for i in range(cells)]
        d1 = np.empty(cells, dtype=object)
        d1[:] = ["" if i % 250 < 10 else f"s{(i % 250) // 50}" for i in range(cells)]
        coords = {"d0": d0, "d1": d1, "d2": np.arange(cells, dtype=np.int32)}
        with tiledb.open(built.uri, "w", timestamp=ts) as A:
            if validity:
                _setitem_impl_sparse(A, (d0, d1, coords["d2"]), data,
                                     {k: v.astype(np.uint8) for k, v in validity.items()})
            else:
                A[d0, d1, coords["d2"]] = data
        built.ops.append(Op("write", ts, coords=coords, data=data, validity=validity))
    else:
        with tiledb.open(built.uri, "w", timestamp=ts) as A:
            A._setitem_impl((slice(0, cells),), data, {k: v for k, v in validity.items()})
        built.ops.append(Op("write", ts, subarray=[(0, cells - 1)], data=data, validity=validity))
    return built


#: the key the "encrypted" kind uses: TileDB takes a 32-character string as the 32 key bytes
ENCRYPTION_KEY = "tdbfs-test-key-0123456789abcdef!"


def encryption_ctx(key: str = ENCRYPTION_KEY) -> tiledb.Ctx:
    return tiledb.Ctx({"sm.encryption_type": "AES_256_GCM", "sm.encryption_key": key})


def build_encrypted(path: Path, *, sparse: bool = True, key: str = ENCRYPTION_KEY,
                    filter: str = "BYTESHUFFLE+ZSTD+CHECKSUM_SHA256", var_strings: bool = False) -> BuiltArray:
    """An AES-256-GCM encrypted array (every generic tile and data tile) written with `key`: the
    "filters" kind with `filter` (a0 int32, a1 var string, a2 nullable float32, a3 nullable var
    int32), sparse or dense, plus array metadata; or, with `var_strings`, the "var_strings" kind.
    Everything TileDB does inside runs with the key as its default context."""
    with tiledb.scope_ctx(encryption_ctx(key)):
        if var_strings:
            built = build_var_strings(path, sparse=sparse, cells=400, capacity=300)
        else:
            built = build_filters(path, filter=filter, sparse=sparse)
        clock = Clock()
        clock.last = max(op.timestamp for op in built.ops if op.timestamp)
        put_meta(built, clock, {"secret": "value", "n": 3})
    built.kind = "encrypted"
    built.options.update(key=key, sparse=sparse, var_strings=var_strings)
    return built


KINDS["var_strings"] = build_var_strings
KINDS["encrypted"] = build_encrypted
