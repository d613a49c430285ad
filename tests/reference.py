"""What TileDB itself reads from an array, for comparing with what tdbfs decodes.

Everything here goes through tiledb-py; nothing decodes TileDB files by hand.

One fragment alone
------------------
TileDB has no "read this fragment" call, and opening an array at a fragment's
timestamp range can also show other fragments (a consolidated fragment's range
covers the fragments it was made from). So :func:`isolated_fragment` copies the
array's schemas (``__schema/`` with its enumerations, and a legacy
``__array_schema.tdb``) and that one fragment folder, with a fresh commit marker,
into a temporary array, and the readers open that copy at the fragment's own
timestamp range. The copy is the only thing opened; the array itself is only read.

:func:`fragment_cells` returns the cells of one fragment in the order the fragment
stores them (global order):

* sparse: the fragment's cells, read with ``order='G'``; tile ``k`` holds cells
  ``[k*capacity, (k+1)*capacity)``.
* dense: the fragment's non-empty domain expanded to whole space tiles, tile after
  tile in the schema's tile order, each tile's cells in the cell order (cells of
  those tiles outside what was written hold the fill values; parts of a tile that
  fall outside the domain are padded with the attribute's fill value, as TileDB
  stores them).

Limits: TileDB's reader filters duplicates (same coordinates, different
timestamps) in arrays that do not allow duplicates, so for a consolidated fragment
that holds several versions of a cell (with ``t.tdb``) only the newest comes back;
the special fields ``t``, ``dt`` and ``dci`` are not readable through tiledb-py.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import tiledb

#: __<t1>_<t2>_<32 hex uuid>[_<format version>]
FRAGMENT_NAME_RE = re.compile(r"^__(\d+)_(\d+)_([0-9a-fA-F]{32})(?:_(\d+))?$")


def _local(uri: str | os.PathLike) -> Path:
    s = os.fspath(uri)
    if s.startswith("file://"):
        s = s[len("file://"):]
    return Path(s)


def parse_fragment_name(name: str) -> tuple[int, int, str, int | None]:
    """(t1, t2, uuid, format version or None) of a fragment (or commit) name."""
    base = os.path.basename(name.rstrip("/"))
    base = re.sub(r"\.(wrt|ok|del|upd|vac|con|ign|meta)$", "", base)
    m = FRAGMENT_NAME_RE.match(base)
    if not m:
        raise ValueError(f"not a timestamped fragment name: {name!r}")
    t1, t2, uuid, v = m.groups()
    return int(t1), int(t2), uuid, (int(v) if v is not None else None)


def _sort_key(name: str) -> tuple:
    try:
        t1, t2, uuid, _v = parse_fragment_name(name)
        return (t1, t2, uuid)
    except ValueError:
        return (float("inf"), float("inf"), name)


def list_fragments(uri: str | os.PathLike) -> list[str]:
    """Names of the fragment folders on disk (``__fragments/*`` and legacy fragment
    folders in the array root), committed or not, oldest first (by t1, t2, uuid).
    "Fragment index" everywhere in this module is a position in this list."""
    root = _local(uri)
    names: list[str] = []
    frag_dir = root / "__fragments"
    if frag_dir.is_dir():
        names += [p.name for p in frag_dir.iterdir() if p.is_dir()]
    for p in root.iterdir() if root.is_dir() else ():
        if p.is_dir() and FRAGMENT_NAME_RE.match(p.name) and (p / "__fragment_metadata.tdb").exists():
            names.append(p.name)
    return sorted(names, key=_sort_key)


def resolve_fragment(uri: str | os.PathLike, frag: int | str) -> str:
    """Fragment name from an index into list_fragments() or a name (or path)."""
    names = list_fragments(uri)
    if isinstance(frag, (int, np.integer)):
        return names[int(frag)]
    name = os.path.basename(os.fspath(frag).rstrip("/"))
    if name not in names:
        raise KeyError(f"no fragment {name!r} in {uri}")
    return name


def fragment_path(uri: str | os.PathLike, frag: int | str) -> Path:
    name = resolve_fragment(uri, frag)
    root = _local(uri)
    p = root / "__fragments" / name
    return p if p.is_dir() else root / name


def is_committed(uri: str | os.PathLike, frag: int | str) -> bool:
    """A commit marker exists (``__commits/<name>.wrt`` or legacy ``<name>.ok``),
    or a consolidated-commits file (.con) lists the fragment."""
    name = resolve_fragment(uri, frag)
    root = _local(uri)
    if (root / "__commits" / f"{name}.wrt").exists() or (root / f"{name}.ok").exists():
        return True
    commits = root / "__commits"
    if commits.is_dir():
        needle = f"{name}.wrt".encode()
        for p in commits.glob("*.con"):
            if needle in p.read_bytes():
                return True
    return False


def schema_names(uri: str | os.PathLike) -> list[str]:
    """Schema file names in __schema/ (oldest first), plus "__array_schema.tdb" first
    when the legacy schema file exists."""
    root = _local(uri)
    out = []
    if (root / "__array_schema.tdb").exists():
        out.append("__array_schema.tdb")
    sd = root / "__schema"
    if sd.is_dir():
        out += sorted((p.name for p in sd.iterdir() if p.is_file()), key=_sort_key)
    return out


@contextlib.contextmanager
def isolated_fragment(uri: str | os.PathLike, frag: int | str) -> Iterator[Path]:
    """A temporary array holding the array's schemas and only this fragment (with a
    commit marker). Removed on exit."""
    name = resolve_fragment(uri, frag)
    root = _local(uri)
    src = fragment_path(uri, name)
    tmp = Path(tempfile.mkdtemp(prefix="tdbfs-ref-"))
    try:
        dst = tmp / "array"
        dst.mkdir()
        if (root / "__schema").is_dir():
            shutil.copytree(root / "__schema", dst / "__schema")
        if (root / "__array_schema.tdb").exists():
            shutil.copy2(root / "__array_schema.tdb", dst / "__array_schema.tdb")
        if src.parent.name == "__fragments":
            (dst / "__fragments").mkdir()
            shutil.copytree(src, dst / "__fragments" / name)
            (dst / "__commits").mkdir()
            (dst / "__commits" / f"{name}.wrt").touch()
        else:  # legacy layout: fragment folder in the root, "<name>.ok" marker
            shutil.copytree(src, dst / name)
            (dst / f"{name}.ok").touch()
        yield dst
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------
# fragment info


@dataclass
class FragmentRef:
    """What TileDB (and the file system) say about one fragment."""

    name: str
    index: int
    path: Path
    t1: int
    t2: int
    uuid: str
    version: int  # format version, from TileDB's fragment info
    sparse: bool
    cell_num: int
    dim_names: list[str]
    nonempty_domain: list[tuple[Any, Any]]  # one (min, max) per dimension, schema order
    array_schema_name: str
    has_consolidated_metadata: bool | None  # None: TileDB no longer lists it (to vacuum)
    to_vacuum: bool
    committed: bool
    files: dict[str, int]  # file name -> size in bytes
    capacity: int | None  # sparse tile capacity
    tile_cell_counts: list[int]  # cells in each data tile, in file order
    mbrs: list[list[tuple[Any, Any]]] | None = None  # sparse: one MBR per data tile

    @property
    def size(self) -> int:
        return sum(self.files.values())

    @property
    def tile_num(self) -> int:
        return len(self.tile_cell_counts)

    @property
    def has_timestamps(self) -> bool:
        return "t.tdb" in self.files

    @property
    def has_delete_meta(self) -> bool:
        return "dt.tdb" in self.files

    @property
    def nonempty_domain_by_dim(self) -> dict[str, tuple[Any, Any]]:
        return dict(zip(self.dim_names, self.nonempty_domain))


def _open_schema(path: Path, t1: int, t2: int) -> tiledb.ArraySchema:
    with tiledb.open(str(path), timestamp=(t1, t2)) as A:
        return A.schema


def _dense_tiles(schema: tiledb.ArraySchema, ned: Sequence[tuple[Any, Any]]):
    """Space tiles covering `ned`, in the schema's tile order: a list of per-dimension
    (tile_low, tile_high) tuples (may reach past the domain's upper bound)."""
    per_dim = []
    for d, (lo, hi) in zip(schema.domain, ned):
        dlo = int(d.domain[0])
        ext = int(d.tile)
        k0 = (int(lo) - dlo) // ext
        k1 = (int(hi) - dlo) // ext
        per_dim.append([(dlo + k * ext, dlo + (k + 1) * ext - 1) for k in range(k0, k1 + 1)])
    if schema.tile_order == "col-major":
        combos = [tuple(reversed(c)) for c in itertools.product(*reversed(per_dim))]
    else:
        combos = list(itertools.product(*per_dim))
    return combos


def _tile_cells(schema: tiledb.ArraySchema) -> int:
    return int(np.prod([int(d.tile) for d in schema.domain]))


def fragment_info(uri: str | os.PathLike, frag: int | str) -> FragmentRef:
    name = resolve_fragment(uri, frag)
    index = list_fragments(uri).index(name)
    path = fragment_path(uri, name)
    t1, t2, uuid, _v = parse_fragment_name(name)
    files = {p.name: p.stat().st_size for p in sorted(path.iterdir()) if p.is_file()}

    # what TileDB says about the fragment within the real array (if it still lists it)
    has_cons: bool | None = None
    to_vacuum = False
    try:
        orig = tiledb.FragmentInfoList(str(_local(uri)))
        for u, hc in zip(orig.uri, orig.has_consolidated_metadata):
            if os.path.basename(u.rstrip("/")) == name:
                has_cons = bool(hc)
        to_vacuum = any(os.path.basename(u.rstrip("/")) == name for u in orig.to_vacuum)
    except tiledb.TileDBError:
        pass

    with isolated_fragment(uri, name) as iso:
        schema = tiledb.ArraySchema.load(str(iso))
        sparse = schema.sparse
        fl = tiledb.FragmentInfoList(str(iso), include_mbrs=sparse)
        if len(fl) != 1:
            raise AssertionError(f"isolated copy of {name} shows {len(fl)} fragments")
        ned = [tuple(r) for r in fl.nonempty_domain[0]]
        cell_num = int(fl.cell_num[0])
        version = int(fl.version[0])
        schema_name = fl.array_schema_name[0]
        mbrs = None
        if sparse:
            mbrs = [[tuple(r) for r in m] for m in fl.mbrs[0]]
            cap = schema.capacity
            counts = [cap] * (cell_num // cap) + ([cell_num % cap] if cell_num % cap else [])
        else:
            cap = None
            opened = _open_schema(iso, t1, t2)
            counts = [_tile_cells(opened)] * len(_dense_tiles(opened, ned))
        dim_names = [d.name for d in schema.domain]
    return FragmentRef(
        name=name, index=index, path=path, t1=t1, t2=t2, uuid=uuid, version=version, sparse=sparse,
        cell_num=cell_num, dim_names=dim_names, nonempty_domain=ned, array_schema_name=schema_name,
        has_consolidated_metadata=has_cons, to_vacuum=to_vacuum, committed=is_committed(uri, name),
        files=files, capacity=cap, tile_cell_counts=counts, mbrs=mbrs,
    )


# ---------------------------------------------------------------------------
# cells


@dataclass
class FieldCells:
    """One field's cells, in stored order.

    Fixed-size fields: `values` (numpy, shape (n,) or (n, cell_val_num) for numeric
    fields with several values per cell; 'S<k>' strings stay shape (n,)).
    Var-size fields: `cells`, the stored bytes of each cell (UTF-8 for strings,
    little-endian values for numbers); `offsets` and `data` give the two files'
    decoded contents (byte offsets as TileDB stores them, and the values).
    Nullable attributes: `validity` (uint8, 1 = valid). The value stored under a
    null cell is kept as TileDB returns it.
    """

    name: str
    role: str  # "attr" | "dim"
    dtype: np.dtype  # numpy dtype of one value ('S1' for chars, 'datetime64[..]', ...)
    var: bool
    cell_val_num: int | None  # None when var
    nullable: bool = False
    values: np.ndarray | None = None
    cells: list[bytes] | None = None
    validity: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.cells) if self.var else len(self.values)

    @property
    def offsets(self) -> np.ndarray:
        sizes = np.array([len(c) for c in self.cells], dtype=np.uint64)
        return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.uint64) if len(sizes) else sizes

    @property
    def data(self) -> bytes:
        return b"".join(self.cells)

    def fixed_bytes(self) -> bytes:
        """The fixed cells as stored (the unfiltered contents of the data file's tiles)."""
        return np.ascontiguousarray(self.values).tobytes()

    def slice(self, start: int, stop: int) -> "FieldCells":
        return FieldCells(
            self.name, self.role, self.dtype, self.var, self.cell_val_num, self.nullable,
            values=None if self.values is None else self.values[start:stop],
            cells=None if self.cells is None else self.cells[start:stop],
            validity=None if self.validity is None else self.validity[start:stop],
        )

    def tiles(self, counts: Sequence[int]) -> list["FieldCells"]:
        """Split into consecutive tiles of the given cell counts."""
        out, pos = [], 0
        for c in counts:
            out.append(self.slice(pos, pos + c))
            pos += c
        if pos != len(self):
            raise ValueError(f"tile counts add up to {pos}, field has {len(self)} cells")
        return out

    def as_python(self) -> list:
        """Cells as plain Python values (var strings decoded as UTF-8 when they are
        strings, None for null cells) -- handy for comparing with text views."""
        out = []
        for k in range(len(self)):
            if self.nullable and self.validity is not None and not self.validity[k]:
                out.append(None)
            elif self.var:
                out.append(self.cells[k])
            else:
                v = self.values[k]
                out.append(v.tolist() if isinstance(v, np.ndarray) else v.item() if hasattr(v, "item") else v)
        return out


def _cell_bytes(cell: Any, dtype: np.dtype) -> bytes:
    if cell is None:
        return b""
    if isinstance(cell, str):
        return cell.encode("utf-8")
    if isinstance(cell, (bytes, bytearray, np.bytes_)):
        return bytes(cell)
    return np.asarray(cell, dtype=dtype).tobytes()


def _field_meta(obj: Any, role: str) -> tuple[np.dtype, bool, int | None, bool]:
    var = bool(obj.isvar)
    nullable = bool(getattr(obj, "isnullable", False))
    dt = obj.dtype
    if dt.names:  # several values per cell: tiledb-py gives a structured dtype
        base = dt.fields[dt.names[0]][0]
        return base, var, None if var else len(dt.names), nullable
    if var:
        if dt.kind == "U":
            dt = np.dtype("S1")  # UTF-8 bytes
        elif dt.kind == "S":
            dt = np.dtype("S1")
        return dt, True, None, nullable
    if dt.kind == "S":
        return dt, False, max(1, dt.itemsize), nullable
    return dt, False, int(obj.ncells) if role == "attr" else 1, nullable


def _to_field(name: str, role: str, obj: Any, raw: Any, shape_flat: bool = True) -> FieldCells:
    dtype, var, cvn, nullable = _field_meta(obj, role)
    validity = None
    if isinstance(raw, np.ma.MaskedArray):
        validity = (~np.ma.getmaskarray(raw)).astype(np.uint8).reshape(-1)
        raw = raw.data
    raw = np.asarray(raw)
    if nullable and validity is None:
        validity = np.ones(raw.size, dtype=np.uint8)
    if var:
        flat = raw.reshape(-1)
        vdt = np.dtype(obj.dtype) if np.dtype(obj.dtype).kind not in "USO" else np.dtype("S1")
        cells = [_cell_bytes(c, vdt) for c in flat]
        return FieldCells(name, role, dtype, True, None, nullable, cells=cells, validity=validity)
    flat = raw.reshape(-1)
    if flat.dtype.names:
        base = flat.dtype.fields[flat.dtype.names[0]][0]
        flat = np.ascontiguousarray(flat).view(base).reshape(len(flat), len(raw.dtype.names))
    return FieldCells(name, role, dtype, False, cvn, nullable, values=flat, validity=validity)


def _read_sparse(path: Path, t1: int, t2: int) -> dict[str, FieldCells]:
    with tiledb.open(str(path), timestamp=(t1, t2)) as A:
        schema = A.schema
        res = A.query(order="G", coords=True)[:]
        out: dict[str, FieldCells] = {}
        for k in range(schema.nattr):
            a = schema.attr(k)
            out[a.name] = _to_field(a.name, "attr", a, res[a.name])
        for d in schema.domain:
            out[d.name] = _to_field(d.name, "dim", d, res[d.name])
    return out


def _fill_for(attr: tiledb.Attr) -> Any:
    f = attr.fill
    if attr.isvar:
        if isinstance(f, (bytes, str)):
            return f
        f = np.asarray(f).reshape(-1)
        return f[0] if f.size else b""
    return f


def _read_dense(path: Path, t1: int, t2: int, ned: Sequence[tuple[Any, Any]]) -> dict[str, FieldCells]:
    with tiledb.open(str(path), timestamp=(t1, t2)) as A:
        schema = A.schema
        attrs = [schema.attr(k) for k in range(schema.nattr)]
        dims = list(schema.domain)
        if any(np.dtype(d.dtype).kind not in "iu" for d in dims):
            raise NotImplementedError("dense reference supports integer dimensions only")
        order = "F" if schema.cell_order == "col-major" else "C"
        chunks: dict[str, list] = {a.name: [] for a in attrs}
        valids: dict[str, list] = {a.name: [] for a in attrs}
        for tile in _dense_tiles(schema, ned):
            full_shape = tuple(hi - lo + 1 for lo, hi in tile)
            clipped = [(lo, min(hi, int(d.domain[1]))) for (lo, hi), d in zip(tile, dims)]
            sel = tuple(slice(lo, hi + 1) for lo, hi in clipped)
            res = A.query(order="C")[sel]
            for a in attrs:
                v = res[a.name]
                mask = np.ma.getmaskarray(v) if isinstance(v, np.ma.MaskedArray) else None
                v = v.data if isinstance(v, np.ma.MaskedArray) else np.asarray(v)
                got_shape = tuple(hi - lo + 1 for lo, hi in clipped)
                v = v.reshape(got_shape)
                if got_shape != full_shape:  # tile sticks out of the domain: pad with fill
                    padded = np.empty(full_shape, dtype=v.dtype)
                    fill = _fill_for(a)
                    if v.dtype == object:
                        padded[...] = None
                        padded.reshape(-1)[:] = [fill] * padded.size
                    else:
                        padded[...] = np.asarray(fill).astype(v.dtype).reshape(-1)[0] if not v.dtype.names else fill
                    padded[tuple(slice(0, s) for s in got_shape)] = v
                    v = padded
                    if mask is not None:
                        m = np.ones(full_shape, dtype=bool)
                        m[tuple(slice(0, s) for s in got_shape)] = mask.reshape(got_shape)
                        mask = m
                chunks[a.name].append(v.reshape(-1, order=order))
                if mask is not None:
                    valids[a.name].append((~mask).reshape(-1, order=order))
        out: dict[str, FieldCells] = {}
        for a in attrs:
            raw = np.concatenate(chunks[a.name]) if chunks[a.name] else np.array([])
            if valids[a.name]:
                raw = np.ma.array(raw, mask=~np.concatenate(valids[a.name]))
            out[a.name] = _to_field(a.name, "attr", a, raw)
    return out


def fragment_cells(uri: str | os.PathLike, frag: int | str) -> dict[str, FieldCells]:
    """The cells one fragment stores, in global (stored) order: attribute name ->
    FieldCells for each attribute of the schema the fragment is read with (schema
    order), then, for sparse fragments, each dimension's coordinates."""
    info = fragment_info(uri, frag)
    with isolated_fragment(uri, info.name) as iso:
        if info.sparse:
            return _read_sparse(iso, info.t1, info.t2)
        return _read_dense(iso, info.t1, info.t2, info.nonempty_domain)


def fragment_tiles(uri: str | os.PathLike, frag: int | str) -> list[dict[str, FieldCells]]:
    """fragment_cells() split into data tiles: one dict per tile, in file order."""
    info = fragment_info(uri, frag)
    cells = fragment_cells(uri, info.name)
    split = {k: v.tiles(info.tile_cell_counts) for k, v in cells.items()}
    return [{k: split[k][i] for k in cells} for i in range(info.tile_num)]


# ---------------------------------------------------------------------------
# whole array


def array_cells(uri: str | os.PathLike, timestamp: Any = None) -> dict[str, FieldCells]:
    """What a normal read of the whole array returns (all fragments merged, deletes
    applied). Sparse: global order. Dense: the non-empty domain in row-major order."""
    kw = {} if timestamp is None else {"timestamp": timestamp}
    with tiledb.open(str(_local(uri)), **kw) as A:
        schema = A.schema
        if schema.sparse:
            res = A.query(order="G", coords=True)[:]
        else:
            ned = A.nonempty_domain()
            res = A.query(order="C")[tuple(slice(lo, hi + 1) for lo, hi in ned)]
        out = {}
        for k in range(schema.nattr):
            a = schema.attr(k)
            out[a.name] = _to_field(a.name, "attr", a, res[a.name])
        if schema.sparse:
            for d in schema.domain:
                out[d.name] = _to_field(d.name, "dim", d, res[d.name])
    return out


def read_metadata(uri: str | os.PathLike, timestamp: Any = None) -> dict[str, Any]:
    """Array metadata as TileDB merges it (deleted keys gone, newest value wins)."""
    kw = {} if timestamp is None else {"timestamp": timestamp}
    out = {}
    with tiledb.open(str(_local(uri)), **kw) as A:
        for k in A.meta.keys():
            v = A.meta[k]
            # numpy values are views into memory TileDB frees when the array closes
            out[k] = np.array(v, copy=True) if isinstance(v, np.ndarray) else v
    return out


def array_summary(uri: str | os.PathLike) -> dict[str, Any]:
    """Counts a mount's array.yaml can be checked against."""
    root = _local(uri)
    commits = root / "__commits"
    commit_files = sorted(p.name for p in commits.iterdir()) if commits.is_dir() else []
    schema = tiledb.ArraySchema.load(str(root))
    return {
        "sparse": schema.sparse,
        "fragments": list_fragments(root),
        "schemas": schema_names(root),
        "commit_files": commit_files,
        "fragment_meta_files": sorted(p.name for p in (root / "__fragment_meta").iterdir())
        if (root / "__fragment_meta").is_dir() else [],
        "meta_files": sorted(p.name for p in (root / "__meta").iterdir()) if (root / "__meta").is_dir() else [],
        "total_size": sum(p.stat().st_size for p in root.rglob("*") if p.is_file()),
    }
