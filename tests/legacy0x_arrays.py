"""Real TileDB 0.x arrays for tests, written and read back through GenomicsDB's TileDB library.

The PyPI wheel `genomicsdb==0.1.6` (installed with --no-deps by scripts/_setup.sh) bundles
`genomicsdb.libs/libtiledbgenomicsdb-*.so`, GenomicsDB's fork of TileDB 0.x, whose C API is
exported with plain C names (docs/format-0x.md). Only ctypes is used: importing the `genomicsdb`
Python module itself would need numpy<2 and old pyarrow/pandas.

    lib = library()                         # None when the wheel is absent (tests skip)
    ws = lib.workspace(tmp / "ws")
    spec = ArraySpec("sparse_gzip", attrs=[Attr("a1", INT32), ...], dims=["d1", "d2"], ...)
    lib.create(ws, spec)
    lib.write(ws / spec.name, spec, cells)  # one fragment per call
    got = lib.read(path, spec)              # what the library reads back: {attr: values, "__coords": ...}

Everything the library writes goes into the test's own tmp folder; it may leave its
`.__consolidation_lock` files there, never anywhere else.

The test process itself never loads the library: now and then it crashes the process at exit
(after Python has finished, in the library's static destructors), which would turn a green
pytest run red. `load_corpus(root)` runs build_corpus and every oracle read in a child process
and hands back the results (pickled).
"""

from __future__ import annotations

import atexit
import ctypes as C
import glob
import importlib.util
import os
from dataclasses import dataclass, field

import numpy as np

# tiledb_constants.h of the fork
INT32, INT64, FLOAT32, FLOAT64, CHAR, INT8, UINT8, INT16, UINT16, UINT32, UINT64 = range(11)
NUMPY = {INT32: "<i4", INT64: "<i8", FLOAT32: "<f4", FLOAT64: "<f8", CHAR: "S1", INT8: "i1", UINT8: "u1",
         INT16: "<i2", UINT16: "<u2", UINT32: "<u4", UINT64: "<u8"}
VAR_NUM = 2 ** 31 - 1
NONE, GZIP, ZSTD, LZ4, RLE = 0, 1, 2, 3, 10
DELTA, BITSHUFFLE = 0x10, 0x20
ROW_MAJOR, COL_MAJOR, HILBERT = 0, 1, 2
READ, READ_SORTED_COL, READ_SORTED_ROW, WRITE, WRITE_SORTED_COL, WRITE_SORTED_ROW, WRITE_UNSORTED = range(7)
COORDS = "__coords"


@dataclass
class Attr:
    name: str
    type: int
    cell_val_num: int = 1
    compression: int = NONE
    level: int | None = None          # None: the codec's default level
    offsets_compression: int | None = None  # None: the attribute's codec (the library's default)

    @property
    def var(self) -> bool:
        return self.cell_val_num == VAR_NUM


@dataclass
class ArraySpec:
    name: str
    attrs: list
    dims: list
    domain: list                      # [lo, hi] per dimension
    coord_type: int = INT64
    dense: bool = False
    extents: list | None = None
    capacity: int = 4
    cell_order: int = ROW_MAJOR
    tile_order: int = ROW_MAJOR
    coords_compression: int = NONE

    @property
    def coord_dtype(self) -> np.dtype:
        return np.dtype(NUMPY[self.coord_type])


@dataclass
class Cells:
    """Cells to write: per attribute a numpy array (fixed: cells x cell_val_num values flattened)
    or a list of per-cell numpy arrays / bytes (var); coordinates as an (n, dim) array (sparse)."""
    values: dict
    coords: np.ndarray | None = None
    subarray: list | None = None
    mode: int = WRITE_UNSORTED
    extra: dict = field(default_factory=dict)


def wheel_library_path() -> str | None:
    spec = importlib.util.find_spec("genomicsdb")  # does not import the module
    if spec is None or not spec.origin:
        return None
    libs = glob.glob(os.path.join(os.path.dirname(spec.origin), "..", "genomicsdb.libs", "libtiledbgenomicsdb-*.so*"))
    return os.path.realpath(libs[0]) if libs else None


class _Schema(C.Structure):
    """TileDB_ArraySchema of the fork's tiledb.h (built without MPI)."""
    _fields_ = [("array_workspace", C.c_char_p), ("array_name", C.c_char_p), ("attributes", C.POINTER(C.c_char_p)),
                ("attribute_num", C.c_int), ("capacity", C.c_int64), ("cell_order", C.c_int),
                ("cell_val_num", C.POINTER(C.c_int)), ("compression", C.POINTER(C.c_int)),
                ("compression_level", C.POINTER(C.c_int)), ("offsets_compression", C.POINTER(C.c_int)),
                ("offsets_compression_level", C.POINTER(C.c_int)), ("dense", C.c_int),
                ("dimensions", C.POINTER(C.c_char_p)), ("dim_num", C.c_int), ("domain", C.c_void_p),
                ("tile_extents", C.c_void_p), ("tile_order", C.c_int), ("types", C.POINTER(C.c_int))]


class LibraryError(Exception):
    pass


def _strings(xs):
    return (C.c_char_p * len(xs))(*[x.encode() for x in xs])


def _ints(xs):
    return (C.c_int * len(xs))(*xs)


class Legacy0xLibrary:
    def __init__(self, path: str):
        self.path = path
        self.lib = C.CDLL(path)
        lib = self.lib
        vp, cp = C.c_void_p, C.c_char_p
        lib.tiledb_ctx_init.argtypes = [C.POINTER(vp), vp]
        lib.tiledb_ctx_finalize.argtypes = [vp]
        lib.tiledb_workspace_create.argtypes = [vp, cp]
        lib.tiledb_group_create.argtypes = [vp, cp]
        lib.tiledb_array_set_schema.argtypes = [
            C.POINTER(_Schema), cp, C.POINTER(cp), C.c_int, C.c_int64, C.c_int, C.POINTER(C.c_int),
            C.POINTER(C.c_int), C.POINTER(C.c_int), C.POINTER(C.c_int), C.POINTER(C.c_int), C.c_int,
            C.POINTER(cp), C.c_int, vp, C.c_size_t, vp, C.c_size_t, C.c_int, C.POINTER(C.c_int)]
        lib.tiledb_array_create.argtypes = [vp, C.POINTER(_Schema)]
        lib.tiledb_array_init.argtypes = [vp, C.POINTER(vp), cp, C.c_int, vp, C.POINTER(cp), C.c_int]
        lib.tiledb_array_write.argtypes = [vp, C.POINTER(vp), C.POINTER(C.c_size_t)]
        lib.tiledb_array_read.argtypes = [vp, C.POINTER(vp), C.POINTER(C.c_size_t)]
        lib.tiledb_array_overflow.argtypes = [vp, C.c_int]
        lib.tiledb_array_finalize.argtypes = [vp]
        lib.tiledb_array_consolidate.argtypes = [vp, cp, C.c_size_t, C.c_int]
        lib.tiledb_array_load_schema.argtypes = [vp, cp, C.POINTER(_Schema)]
        lib.tiledb_array_free_schema.argtypes = [C.POINTER(_Schema)]
        self.ctx = vp()
        if lib.tiledb_ctx_init(C.byref(self.ctx), None) != 0:
            raise LibraryError("tiledb_ctx_init failed")

    def _check(self, rc, what):
        if rc != 0:
            raise LibraryError(f"{what} failed ({rc}); the library prints no reason")

    # -- creating --------------------------------------------------------------
    def workspace(self, path) -> str:
        path = str(path)
        self._check(self.lib.tiledb_workspace_create(self.ctx, path.encode()), f"workspace_create {path}")
        return path

    def group(self, path) -> str:
        path = str(path)
        self._check(self.lib.tiledb_group_create(self.ctx, path.encode()), f"group_create {path}")
        return path

    def create(self, parent, spec: ArraySpec) -> str:
        path = os.path.join(str(parent), spec.name)
        attrs = spec.attrs
        n = len(attrs)
        cdt = spec.coord_dtype
        domain = np.asarray(spec.domain, cdt).reshape(-1)
        extents = np.asarray(spec.extents, cdt) if spec.extents is not None else None
        levels = [a.level if a.level is not None else _default_level(a.compression) for a in attrs]
        levels.append(_default_level(spec.coords_compression))
        offs = [a.compression if a.offsets_compression is None else a.offsets_compression for a in attrs]
        offs_levels = [_default_level(c) for c in offs]
        schema = _Schema()
        rc = self.lib.tiledb_array_set_schema(
            C.byref(schema), path.encode(), _strings([a.name for a in attrs]), n, spec.capacity, spec.cell_order,
            _ints([a.cell_val_num for a in attrs]), _ints([a.compression for a in attrs] + [spec.coords_compression]),
            _ints(levels), _ints(offs + [0]), _ints(offs_levels + [0]), int(spec.dense),
            _strings(spec.dims), len(spec.dims), domain.ctypes.data, domain.nbytes,
            extents.ctypes.data if extents is not None else None, extents.nbytes if extents is not None else 0,
            spec.tile_order, _ints([a.type for a in attrs] + [spec.coord_type]))
        self._check(rc, f"set_schema {path}")
        self._check(self.lib.tiledb_array_create(self.ctx, C.byref(schema)), f"array_create {path}")
        return path

    # -- writing ---------------------------------------------------------------
    def write(self, path, spec: ArraySpec, cells: Cells) -> None:
        buffers, keep = [], []
        for a in spec.attrs:
            v = cells.values[a.name]
            if a.var:
                offsets, data = var_buffers(v, NUMPY[a.type])
                buffers += [offsets, data]
            else:
                buffers.append(np.ascontiguousarray(np.asarray(v, NUMPY[a.type])))
        if cells.coords is not None:
            buffers.append(np.ascontiguousarray(np.asarray(cells.coords, spec.coord_dtype)))
        sub = np.asarray(cells.subarray, spec.coord_dtype).reshape(-1) if cells.subarray is not None else None
        arr = C.c_void_p()
        self._check(self.lib.tiledb_array_init(self.ctx, C.byref(arr), str(path).encode(), cells.mode,
                                               sub.ctypes.data if sub is not None else None, None, 0),
                    f"array_init (write) {path}")
        ptrs = (C.c_void_p * len(buffers))(*[b.ctypes.data if b.nbytes else _EMPTY_PTR for b in buffers])
        sizes = (C.c_size_t * len(buffers))(*[b.nbytes for b in buffers])
        keep.append(buffers)
        rc = self.lib.tiledb_array_write(arr, ptrs, sizes)
        rc2 = self.lib.tiledb_array_finalize(arr)
        self._check(rc, f"array_write {path}")
        self._check(rc2, f"array_finalize {path}")

    def consolidate(self, path) -> None:
        self._check(self.lib.tiledb_array_consolidate(self.ctx, str(path).encode(), 10 << 20, -1),
                    f"consolidate {path}")

    # -- reading -----------------------------------------------------------------
    def read(self, path, spec: ArraySpec, subarray=None, mode: int = READ, capacity_cells: int = 1 << 16) -> dict:
        """Every cell the library returns, in `mode` order: {attr: array or list of bytes, '__coords': (n, dim)}.

        Read in rounds while any buffer overflows."""
        names = [a.name for a in spec.attrs] + ([COORDS] if not spec.dense else [])
        sub = np.asarray(subarray, spec.coord_dtype).reshape(-1) if subarray is not None else None
        arr = C.c_void_p()
        self._check(self.lib.tiledb_array_init(self.ctx, C.byref(arr), str(path).encode(), mode,
                                               sub.ctypes.data if sub is not None else None,
                                               _strings(names), len(names)), f"array_init (read) {path}")
        layout = []  # (name, kind, itemsize per cell for fixed)
        for a in spec.attrs:
            if a.var:
                layout += [(a.name, "offsets", 8), (a.name, "var", np.dtype(NUMPY[a.type]).itemsize * 64)]
            else:
                layout.append((a.name, "fixed", np.dtype(NUMPY[a.type]).itemsize * a.cell_val_num))
        if not spec.dense:
            layout.append((COORDS, "fixed", spec.coord_dtype.itemsize * len(spec.dims)))
        chunks = {i: [] for i in range(len(layout))}
        try:
            while True:
                bufs = [np.zeros(capacity_cells * size, np.uint8) for (_, _, size) in layout]
                ptrs = (C.c_void_p * len(bufs))(*[b.ctypes.data for b in bufs])
                sizes = (C.c_size_t * len(bufs))(*[b.nbytes for b in bufs])
                self._check(self.lib.tiledb_array_read(arr, ptrs, sizes), f"array_read {path}")
                for i, b in enumerate(bufs):
                    chunks[i].append(b[:sizes[i]].tobytes())
                overflow = any(self.lib.tiledb_array_overflow(arr, j) == 1 for j in range(len(names)))
                if not overflow and all(sizes[i] == 0 for i in range(len(bufs))):
                    break
                if not overflow:
                    break
                if all(sizes[i] == 0 for i in range(len(bufs))):
                    raise LibraryError("read overflows with empty buffers: raise capacity_cells")
        finally:
            self.lib.tiledb_array_finalize(arr)
        out = {}
        i = 0
        for a in spec.attrs:
            dt = np.dtype(NUMPY[a.type])
            if a.var:
                cells = []
                for off_raw, data in zip(chunks[i], chunks[i + 1]):
                    offs = np.frombuffer(off_raw, "<u8").astype(np.int64)
                    ends = np.append(offs[1:], len(data))
                    cells += [data[s:e] for s, e in zip(offs.tolist(), ends.tolist())]
                out[a.name] = cells
                i += 2
            else:
                raw = b"".join(chunks[i])
                out[a.name] = np.frombuffer(raw, dt) if a.type != CHAR else raw
                i += 1
        if not spec.dense:
            out[COORDS] = np.frombuffer(b"".join(chunks[i]), spec.coord_dtype).reshape(-1, len(spec.dims))
        return out

    def load_schema(self, path) -> dict:
        """The schema as the library loads it from disk."""
        s = _Schema()
        self._check(self.lib.tiledb_array_load_schema(self.ctx, str(path).encode(), C.byref(s)), f"load_schema {path}")
        n, d = s.attribute_num, s.dim_num
        out = {"name": s.array_name.decode(), "attributes": [s.attributes[i].decode() for i in range(n)],
               "dimensions": [s.dimensions[i].decode() for i in range(d)], "capacity": s.capacity,
               "cell_order": s.cell_order, "tile_order": s.tile_order, "dense": bool(s.dense),
               "types": [s.types[i] for i in range(n + 1)], "cell_val_num": [s.cell_val_num[i] for i in range(n)],
               "compression": [s.compression[i] for i in range(n + 1)]}
        if s.compression_level:
            out["compression_level"] = [s.compression_level[i] for i in range(n + 1)]
        if s.offsets_compression:
            out["offsets_compression"] = [s.offsets_compression[i] for i in range(n)]
        self.lib.tiledb_array_free_schema(C.byref(s))
        return out


_EMPTY = np.zeros(8, np.uint8)
_EMPTY_PTR = _EMPTY.ctypes.data


def var_buffers(cells, numpy_type: str):
    """(uint64 offsets, values) buffers of var cells given as bytes or numpy arrays."""
    raw = [c if isinstance(c, bytes) else np.asarray(c, numpy_type).tobytes() for c in cells]
    lens = np.array([len(r) for r in raw], np.uint64)
    offsets = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.uint64) if len(raw) else np.zeros(0, np.uint64)
    return offsets, np.frombuffer(b"".join(raw) or b"", np.uint8).copy()


def _default_level(codec: int) -> int:
    base = codec & 0x0F
    return {GZIP: -1, ZSTD: 1, LZ4: 1}.get(base, 0)


_LIB: list = []


def library() -> Legacy0xLibrary | None:
    """The one library instance of this process (a ctx is cheap but the .so is loaded once), or None."""
    if not _LIB:
        path = wheel_library_path()
        _LIB.append(Legacy0xLibrary(path) if path else None)
        if _LIB[0] is not None:
            # Without tiledb_ctx_finalize the library's static destructors crash the process at exit.
            atexit.register(_LIB[0].lib.tiledb_ctx_finalize, _LIB[0].ctx)
    return _LIB[0]


# -- the test corpus: one workspace of real arrays ------------------------------------------------

def _rng(seed):
    return np.random.default_rng(seed)


def _sparse_cells(spec: ArraySpec, n: int, seed: int, distinct: bool = True) -> Cells:
    """n cells at distinct random coordinates of the domain, values of every attribute."""
    rng = _rng(seed)
    (lo0, hi0), (lo1, hi1) = spec.domain[0], spec.domain[1]
    grid = np.array([(a, b) for a in range(lo0, hi0 + 1) for b in range(lo1, hi1 + 1)])
    coords = grid[rng.choice(len(grid), n, replace=False)]
    return Cells(attribute_values(spec, n, rng), coords=coords)


def attribute_values(spec: ArraySpec, n: int, rng, runs: bool = False) -> dict:
    out = {}
    for a in spec.attrs:
        if a.var:
            lens = rng.integers(0, 5, n)
            if a.type == CHAR:
                out[a.name] = [bytes(rng.choice(list(b"abcxyz"), int(k)).tolist()) if not runs else b"r" * int(k)
                               for k in lens]
            else:
                out[a.name] = [(rng.integers(0, 1000, int(k)) if not runs else np.full(int(k), 7)).astype(NUMPY[a.type])
                               for k in lens]
            continue
        count = n * a.cell_val_num
        dt = np.dtype(NUMPY[a.type])
        if a.type == CHAR:
            out[a.name] = np.array(rng.choice(list(b"ABCDEF"), count), np.uint8).view("S1")
        elif dt.kind == "f":
            out[a.name] = (rng.random(count) * 100).astype(dt) if not runs else np.repeat(
                np.arange(count // 4 + 1, dtype=dt), 4)[:count]
        else:
            hi = min(np.iinfo(dt).max, 10_000)
            vals = rng.integers(0, hi, count) if not runs else np.repeat(np.arange(count // 5 + 1), 5)[:count]
            if a.compression & DELTA:  # slowly varying values, the case delta is for
                vals = np.cumsum(rng.integers(0, 50, count))
            out[a.name] = vals.astype(dt)
    return out


def build_corpus(lib: Legacy0xLibrary, root) -> dict:
    """A GenomicsDB-style workspace of arrays covering the codecs and layouts the library writes.

    Returns {array name: (path, spec)}. Known library bugs (docs/format-0x.md) are avoided:
    bitshuffle only on full sparse tiles, no RLE on coordinates, integer coordinates with extents.
    """
    root = str(root)
    ws = lib.workspace(os.path.join(root, "ws"))
    # GenomicsDB keeps these beside its arrays
    for name, text in (("callset.json", '{"callsets": []}\n'), ("vidmap.json", '{"contigs": []}\n')):
        with open(os.path.join(ws, name), "w") as f:
            f.write(text)
    out = {}
    i32v = lambda name, c=NONE, **kw: Attr(name, INT32, VAR_NUM, c, **kw)
    specs = [
        ArraySpec("sparse_none", [Attr("a1", INT32), Attr("a2", CHAR, VAR_NUM), Attr("a3", FLOAT32, 2)],
                  ["d1", "d2"], [[0, 7], [0, 15]], capacity=4),
        ArraySpec("sparse_gzip", [Attr("a1", INT32, compression=GZIP), Attr("a2", CHAR, VAR_NUM, GZIP),
                                  Attr("a3", FLOAT32, 2, GZIP)],
                  ["d1", "d2"], [[0, 7], [0, 15]], capacity=5, coords_compression=GZIP),
        ArraySpec("sparse_zstd_lz4", [Attr("a1", INT64, compression=ZSTD, level=-5),
                                      Attr("a2", CHAR, VAR_NUM, LZ4, offsets_compression=ZSTD),
                                      Attr("a3", FLOAT64, 3, LZ4)],
                  ["d1", "d2"], [[0, 7], [0, 15]], capacity=6, coords_compression=ZSTD),
        ArraySpec("sparse_rle", [Attr("a1", INT32, compression=RLE), Attr("a2", CHAR, VAR_NUM, RLE),
                                 Attr("a3", FLOAT64, 3, RLE), Attr("a4", CHAR, 3, RLE)],
                  ["d1", "d2"], [[0, 7], [0, 15]], capacity=7, coords_compression=GZIP),
        ArraySpec("sparse_delta", [Attr("a1", INT64, compression=GZIP | DELTA),
                                   Attr("a2", CHAR, VAR_NUM, ZSTD, offsets_compression=ZSTD | DELTA),
                                   Attr("a3", UINT32, 2, LZ4 | DELTA), Attr("a4", INT32, compression=RLE | DELTA)],
                  ["d1", "d2"], [[0, 7], [0, 15]], capacity=4, coords_compression=ZSTD | DELTA),
        ArraySpec("sparse_bitshuffle", [Attr("a1", INT32, compression=ZSTD | BITSHUFFLE),
                                        i32v("a2", LZ4 | BITSHUFFLE),
                                        Attr("a3", UINT64, 2, GZIP | BITSHUFFLE)],
                  ["d1", "d2"], [[0, 99], [0, 99]], capacity=3000, coords_compression=GZIP | BITSHUFFLE),
        ArraySpec("sparse_types", [Attr("i8", INT8, compression=GZIP), Attr("u8", UINT8, 2, ZSTD),
                                   Attr("i16", INT16, compression=LZ4), Attr("u16", UINT16, compression=RLE),
                                   Attr("u32", UINT32, compression=NONE), Attr("u64", UINT64, VAR_NUM, GZIP),
                                   Attr("f64", FLOAT64, VAR_NUM, ZSTD)],
                  ["x", "y"], [[-4, 3], [-8, 7]], coord_type=INT32, capacity=3, coords_compression=LZ4),
        ArraySpec("sparse_hilbert", [Attr("a1", INT32, compression=GZIP), Attr("a2", CHAR, VAR_NUM, GZIP)],
                  ["d1", "d2"], [[0, 7], [0, 15]], capacity=4, cell_order=HILBERT, coords_compression=GZIP),
        ArraySpec("sparse_extents_col", [Attr("a1", FLOAT32, compression=ZSTD)],
                  ["d1", "d2"], [[0, 7], [0, 15]], extents=[4, 4], capacity=3, cell_order=COL_MAJOR,
                  tile_order=COL_MAJOR, coords_compression=ZSTD),
        ArraySpec("dense_gzip", [Attr("a1", INT32, compression=GZIP), Attr("a2", CHAR, VAR_NUM, GZIP),
                                 Attr("a3", FLOAT32, 2, GZIP)],
                  ["d1", "d2"], [[0, 7], [0, 7]], dense=True, extents=[4, 4]),
        ArraySpec("dense_none", [Attr("a1", INT64), Attr("a2", CHAR, VAR_NUM), Attr("a3", INT32, VAR_NUM)],
                  ["d1", "d2"], [[0, 5], [0, 5]], dense=True, extents=[3, 2], tile_order=COL_MAJOR),
        ArraySpec("dense_codecs", [Attr("a1", INT32, compression=RLE), Attr("a2", INT32, VAR_NUM, ZSTD | BITSHUFFLE),
                                   Attr("a3", UINT64, 2, LZ4 | DELTA), Attr("a4", CHAR, VAR_NUM, LZ4)],
                  ["d1", "d2"], [[0, 7], [0, 7]], dense=True, extents=[4, 4]),
    ]
    for k, spec in enumerate(specs):
        path = lib.create(ws, spec)
        out[spec.name] = (path, spec)
        if spec.dense:
            _write_dense(lib, path, spec, seed=100 + k)
        elif spec.name == "sparse_bitshuffle":
            for j in range(2):  # full tiles only (a partial bit-shuffled tile reads back wrong)
                lib.write(path, spec, _sparse_cells(spec, 6000 if j == 0 else 3000, seed=10 * k + j))
        else:
            for j, n in enumerate((23, 9)):
                lib.write(path, spec, _sparse_cells(spec, n, seed=10 * k + j))
    # several fragments, then consolidated into one
    spec = ArraySpec("sparse_consolidated", specs[1].attrs, ["d1", "d2"], [[0, 7], [0, 15]], capacity=4,
                     coords_compression=GZIP)
    path = lib.create(ws, spec)
    for j in range(3):
        lib.write(path, spec, _sparse_cells(spec, 10, seed=500 + j))
    lib.consolidate(path)
    out[spec.name] = (path, spec)
    # an array in a group, as GenomicsDB workspaces may nest them
    group = lib.group(os.path.join(ws, "grp"))
    spec = ArraySpec("in_group", [Attr("a1", INT32, compression=ZSTD)], ["d1", "d2"], [[0, 7], [0, 15]],
                     capacity=4, coords_compression=ZSTD)
    path = lib.create(group, spec)
    lib.write(path, spec, _sparse_cells(spec, 11, seed=900))
    out["grp/in_group"] = (path, spec)
    return out


def _write_dense(lib: Legacy0xLibrary, path, spec: ArraySpec, seed: int) -> None:
    rng = _rng(seed)
    (lo0, hi0), (lo1, hi1) = spec.domain
    whole = [[lo0, hi0], [lo1, hi1]]
    n = (hi0 - lo0 + 1) * (hi1 - lo1 + 1)
    runs = any(a.compression & 0x0F == RLE for a in spec.attrs)
    lib.write(path, spec, Cells(attribute_values(spec, n, rng, runs=runs), subarray=whole, mode=WRITE_SORTED_ROW))
    # not tile-aligned: the library stores the whole expanded tiles, empty cells included
    sub = [[lo0 + 1, lo0 + 2], [lo1 + 2, lo1 + 4]]
    m = 2 * 3
    lib.write(path, spec, Cells(attribute_values(spec, m, rng, runs=runs), subarray=sub, mode=WRITE_SORTED_ROW))


INTERRUPTED_SPEC = ArraySpec("dense_interrupted", [Attr("a1", INT32, compression=GZIP)], ["d1", "d2"],
                             [[0, 3], [0, 3]], dense=True, extents=[2, 2])


def interrupted_write(path) -> None:
    """What an import killed mid-write leaves: a process writes a fragment of INTERRUPTED_SPEC and
    dies before finalizing. The folder is still the hidden `.__*` one, with data files but no
    book-keeping and no __tiledb_fragment.tdb. Run in a child process, so that the test process
    never holds an unfinalized array (the library frees it twice at exit)."""
    import subprocess
    import sys
    code = ("import sys; sys.path.insert(0, %r); import legacy0x_arrays as Z; Z._die_mid_write(%r)"
            % (os.path.dirname(os.path.abspath(__file__)), str(path)))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    if proc.returncode != 0:
        raise LibraryError(f"interrupted write failed: {proc.stderr.decode(errors='replace')[-500:]}")


def _die_mid_write(path: str) -> None:
    lib = library()
    spec = INTERRUPTED_SPEC
    buf = np.arange(4, dtype="<i4") + 100
    sub = np.asarray([[0, 1], [0, 1]], spec.coord_dtype).reshape(-1)
    arr = C.c_void_p()
    lib._check(lib.lib.tiledb_array_init(lib.ctx, C.byref(arr), path.encode(), WRITE, sub.ctypes.data, None, 0),
               "array_init")
    ptrs = (C.c_void_p * 1)(buf.ctypes.data)
    sizes = (C.c_size_t * 1)(buf.nbytes)
    lib._check(lib.lib.tiledb_array_write(arr, ptrs, sizes), "array_write")
    sys_stdout_flush()
    os._exit(0)  # killed: no finalize, no atexit


def sys_stdout_flush() -> None:
    import sys
    sys.stdout.flush()
    sys.stderr.flush()


# -- the whole corpus and its oracle, made in a child process --------------------------------------

def add_interrupted_arrays(lib: Legacy0xLibrary, ws: str, arrays: dict) -> None:
    """An import killed mid-write (hidden folder, no book-keeping, no marker) after a finalized
    fragment; and a fragment whose writer died between its book-keeping and its marker."""
    spec = INTERRUPTED_SPEC
    path = lib.create(ws, spec)
    lib.write(path, spec, Cells({"a1": np.arange(16)}, subarray=[[0, 3], [0, 3]], mode=WRITE_SORTED_ROW))
    interrupted_write(path)
    arrays[spec.name] = (path, spec)
    spec = ArraySpec("sparse_unmarked", arrays["sparse_gzip"][1].attrs, ["d1", "d2"], [[0, 7], [0, 15]],
                     capacity=4, coords_compression=GZIP)
    path = lib.create(ws, spec)
    for j in range(2):
        lib.write(path, spec, _sparse_cells(spec, 9, seed=700 + j))
    frags = [n for n in os.listdir(path) if os.path.isdir(os.path.join(path, n))]
    newest = max(frags, key=lambda n: (int(n.rsplit("_", 1)[1]), n))
    os.remove(os.path.join(path, newest, "__tiledb_fragment.tdb"))
    arrays[spec.name] = (path, spec)


def fragment_cells(lib: Legacy0xLibrary, path: str, spec: ArraySpec, frag_name: str, iso_root: str) -> dict:
    """What the library reads from one fragment alone: a copy of the array holding only it
    (renamed into place and marked committed, so that unfinished ones are read too)."""
    import shutil
    import struct
    import uuid
    import zlib
    iso = os.path.join(iso_root, uuid.uuid4().hex, "arr")
    os.makedirs(iso)
    shutil.copy(os.path.join(path, "__array_schema.tdb"), iso)
    dst = os.path.join(iso, frag_name.lstrip("."))
    shutil.copytree(os.path.join(path, frag_name), dst)
    open(os.path.join(dst, "__tiledb_fragment.tdb"), "wb").close()
    sub = None
    if spec.dense:
        # the fragment's tiles cover its non-empty domain (first book-keeping field) expanded to tiles
        with open(os.path.join(dst, "__book_keeping.tdb.gz"), "rb") as f:
            bk = zlib.decompress(f.read(), 16 + zlib.MAX_WBITS)
        n = struct.unpack_from("<q", bk, 0)[0] // spec.coord_dtype.itemsize
        ned = np.frombuffer(bk, spec.coord_dtype, count=n, offset=8).reshape(-1, 2).tolist()
        sub = []
        for (lo, hi), (dlo, _), ext in zip(ned, spec.domain, spec.extents):
            sub.append([dlo + (lo - dlo) // ext * ext, dlo + ((hi - dlo) // ext + 1) * ext - 1])
    return lib.read(iso, spec, subarray=sub)


def build_all(root: str) -> None:
    """Child process: the corpus, then every oracle read, pickled to ROOT/corpus.pkl."""
    import pickle
    lib = library()
    arrays = build_corpus(lib, root)
    ws = os.path.join(root, "ws")
    add_interrupted_arrays(lib, ws, arrays)
    iso_root = os.path.join(root, "iso")
    schemas, cells = {}, {}
    for name, (path, spec) in arrays.items():
        schemas[path] = lib.load_schema(path)
        for frag in os.listdir(path):
            if os.path.isfile(os.path.join(path, frag, "__book_keeping.tdb.gz")):
                cells[(path, frag)] = fragment_cells(lib, path, spec, frag, iso_root)
    with open(os.path.join(root, "corpus.pkl.tmp"), "wb") as f:
        pickle.dump({"ws": ws, "arrays": arrays, "schemas": schemas, "cells": cells}, f)
    os.rename(os.path.join(root, "corpus.pkl.tmp"), os.path.join(root, "corpus.pkl"))  # complete or absent
    sys_stdout_flush()


def load_corpus(root) -> dict:
    """Build the corpus and its oracle in a child process; {"ws", "arrays", "schemas", "cells"}."""
    import pickle
    import subprocess
    import sys
    root = str(root)
    code = ("import sys; sys.path.insert(0, %r); import legacy0x_arrays; legacy0x_arrays.build_all(%r)"
            % (os.path.dirname(os.path.abspath(__file__)), root))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=600)
    pkl = os.path.join(root, "corpus.pkl")
    if not os.path.exists(pkl):  # a crash at the child's exit, after the pickle was written, is harmless
        raise LibraryError(f"building the 0.x corpus failed ({proc.returncode}): "
                           f"{proc.stderr.decode(errors='replace')[-2000:]}")
    with open(pkl, "rb") as f:
        return pickle.load(f)
