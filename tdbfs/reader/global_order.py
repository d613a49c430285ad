"""The global order of cells as sort keys: a cell's key is a tuple of components, most significant first,
and cells compare as their keys do lexicographically (`GlobalCellCmp` / `HilbertCmp`,
tiledb/sm/misc/comparators.h; `Domain::tile_order_cmp_impl` and `Domain::cell_order_cmp_impl`,
tiledb/sm/array_schema/domain.cc; `Dimension::tile_idx`, dimension.h).

- row-major / col-major cell order: the tile index of each dimension with a tile extent, in the tile order
  (string dimensions have none), then each coordinate in the cell order;
- hilbert cell order: the cell's Hilbert value (`Hilbert::coords_to_hilbert`, tiledb/sm/misc/hilbert.h, over
  `Dimension::map_to_uint64`), then the coordinates in row-major order; the tile order plays no part.

Strings compare byte by byte as C++ `char` does here, signed, a prefix before the longer string: each
component is the bytes with the top bit flipped (Python compares bytes unsigned). Components are numpy
arrays, one value per cell: numbers in their own type, strings as object arrays of bytes.
"""

from __future__ import annotations

from ..lazy import np

ROW_MAJOR, COL_MAJOR, HILBERT = 0, 1, 4
_FLIP = bytes(b ^ 0x80 for b in range(256))


def dimension_values(columns) -> list:
    """Each dimension's coordinates: a 1-D numpy array, or an object array of bytes for a string one."""
    out = []
    for c in columns:
        if c.offsets is not None:
            data = c.values.tobytes()
            o = c.offsets.tolist()
            out.append(np.array([data[o[i]:o[i + 1]] for i in range(len(o) - 1)] + [b""], dtype=object)[:-1])
        elif c.values.dtype.kind == "S":
            out.append(np.array(list(c.values.tolist()) + [b""], dtype=object)[:-1])
        else:
            out.append(c.values.reshape(len(c.values), -1)[:, 0] if c.values.ndim > 1 else c.values)
    return out


def order_keys(schema, values: list) -> list:
    """The key components of cells whose coordinates are `values` (dimension_values, schema order)."""
    dims = schema.dimensions
    if schema.cell_order == HILBERT:
        return [hilbert_values(dims, values)] + [_cell_component(v) for v in values]
    keys = []
    tile_dims = range(len(dims)) if schema.tile_order != COL_MAJOR else range(len(dims) - 1, -1, -1)
    for i in tile_dims:
        d = dims[i]
        if d.var_sized or d.datatype.is_string or d.tile_extent is None or d.domain is None:
            continue
        keys.append(_tile_index(d, values[i]))
    cell_dims = range(len(dims)) if schema.cell_order != COL_MAJOR else range(len(dims) - 1, -1, -1)
    keys += [_cell_component(values[i]) for i in cell_dims]
    return keys


def _cell_component(v):
    if v.dtype == object:
        return np.array([s.translate(_FLIP) for s in v.tolist()] + [b""], dtype=object)[:-1]
    return v


def _tile_index(d, v):
    lo, ext = d.domain[0], d.tile_extent
    if d.datatype.is_float:
        dt = v.dtype
        return np.trunc((v - dt.type(lo)) / dt.type(ext)).astype(dt)
    # unsigned(v - lo) / unsigned(extent): exact for any integer type, the difference wraps as in C++
    return (v.astype(np.uint64) - np.uint64(int(lo) & (2**64 - 1))) // np.uint64(int(ext))


def hilbert_values(dims, values: list):
    """Each cell's Hilbert value (SparseGlobalOrderReader::compute_hilbert_values)."""
    n = len(dims)
    bits = 63 // n
    max_bucket = float((1 << bits) - 1)
    mapped = []
    for d, v in zip(dims, values):
        if v.dtype == object:
            mapped.append(np.array([_map_string(s, bits) for s in v.tolist()], dtype=np.uint64))
        else:
            lo, hi = float(d.domain[0]), float(d.domain[1])
            norm = (v.astype(np.float64) - lo) / (hi - lo) * max_bucket
            mapped.append(norm.astype(np.uint64))
    return _coords_to_hilbert(mapped, bits)


def _map_string(s: bytes, bits: int) -> int:
    # Dimension::map_to_uint64_2<char>: the first 8 bytes, big-endian, each byte sign-extended as it is ORed
    r = 0
    for i in range(8):
        r = (r << 8) & 0xFFFFFFFFFFFFFFFF
        if i < len(s):
            r |= (s[i] - 256 if s[i] >= 128 else s[i]) & 0xFFFFFFFFFFFFFFFF
    return r >> (64 - bits)


def _coords_to_hilbert(X: list, bits: int):
    """Hilbert::coords_to_hilbert on arrays (one value per cell in each of X)."""
    X = [x.astype(np.uint64).copy() for x in X]
    n = len(X)
    one = np.uint64(1)
    Q = 1 << (bits - 1)
    while Q > 1:   # inverse undo
        P = np.uint64(Q - 1)
        q = np.uint64(Q)
        X[0] = np.where(X[0] & q, X[0] ^ P, X[0])
        for i in range(1, n):
            hit = (X[i] & q) != 0
            t = (X[0] ^ X[i]) & P
            X[0] = np.where(hit, X[0] ^ P, X[0] ^ t)
            X[i] = np.where(hit, X[i], X[i] ^ t)
        Q >>= 1
    for i in range(1, n):   # Gray encode
        X[i] = X[i] ^ X[i - 1]
    t = X[n - 1].copy()
    i = 1
    while i < bits:
        X[n - 1] = X[n - 1] ^ (X[n - 1] >> np.uint64(i))
        i <<= 1
    t = t ^ X[n - 1]
    for i in range(n - 2, -1, -1):
        X[i] = X[i] ^ t
    out = np.zeros(len(X[0]), np.uint64)
    h = 0
    for j in range(bits):   # interleave: bit j of X[n-1] .. X[0], upwards
        for i in range(n - 1, -1, -1):
            out |= ((X[i] >> np.uint64(j)) & one) << np.uint64(h)
            h += 1
    return out


def sortable(component):
    """A component lexsort takes: object (string) arrays become their ranks."""
    if component.dtype == object:
        _, ranks = np.unique(component, return_inverse=True)
        return ranks.reshape(-1)
    return component


def less_than(keys: list, bound: tuple):
    """Cells whose key is strictly below `bound` (a key as a tuple of Python values)."""
    n = len(keys[0]) if keys else 0
    lt = np.zeros(n, bool)
    eq = np.ones(n, bool)
    for comp, b in zip(keys, bound):
        if comp.dtype == object:
            c_lt = np.array([x < b for x in comp.tolist()], bool)
            c_eq = np.array([x == b for x in comp.tolist()], bool)
        else:
            c_lt, c_eq = comp < b, comp == b
        lt |= eq & c_lt
        eq &= c_eq
    return lt


def key_at(keys: list, i: int) -> tuple:
    return tuple(k[i] if k.dtype == object else k[i].item() for k in keys)
