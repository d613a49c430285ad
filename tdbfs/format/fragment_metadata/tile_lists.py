"""The per-tile lists of the footer's generic tiles: offsets, sizes, min/max, sums, null counts."""

from __future__ import annotations

from ...lazy import np
from ..cursor import Cursor
from ..datatypes import VAR_NUM
from ..errors import safety_net
from .fields import COORDS, Field


@safety_net("u64 list")
def parse_u64_list(payload, file: str, structure: str, *, within: str | None = None) -> np.ndarray:
    """`u64 n, u64[n]`: tile offsets, var offsets, var sizes, validity offsets, null counts."""
    cur = Cursor(payload, file, structure, within=structure if within is None else within)
    n = cur.u64_count(8, "count", "values")
    values = cur.u64_array(n, "values")
    if cur.remaining:
        raise cur.error(f"{cur.remaining} bytes remain after {n} values")
    return values


@safety_net("u64 list")
def count_u64_list(payload, file: str, structure: str, *, within: str | None = None) -> int:
    """The `n` of `u64 n, u64[n]`, checked as parse_u64_list checks it (the same errors), without
    building the values: listing a dense fragment's tiles then needs no numpy (tdbfs/lazy.py)."""
    cur = Cursor(payload, file, structure, within=structure if within is None else within)
    n = cur.u64_count(8, "count", "values")
    cur.skip(8 * n, "values")
    if cur.remaining:
        raise cur.error(f"{cur.remaining} bytes remain after {n} values")
    return n


def field_label(f: Field) -> str:
    return f"{f.name} (idx {f.idx})"


@safety_net("tile mins")
def parse_tile_min_max(payload, file: str, f: Field, structure: str = "tile mins", *,
                       within: str | None = None):
    """Per-tile min (or max) values of field `f` (§5.5).

    Layout `u64 fixed_bytes, u64 var_bytes, fixed, var`. Numeric fields: a numpy
    array of the field's type, one value per tile. CHAR/ASCII fields: a list of
    bytes (fixed cells, or var values cut at the u64 offsets in `fixed`). Fields
    without min/max give an empty result. The phantom `__coords` slot, which
    some writers fill with junk, comes back as raw uint8.
    """
    label = f"{structure} of {field_label(f)}"
    cur = Cursor(payload, file, label, within=label if within is None else within)
    fixed_len = cur.u64("fixed bytes")
    var_len = cur.u64("var bytes")
    fixed_at = cur.pos
    fixed = cur.bytes(fixed_len, "fixed values")
    var_at = cur.pos
    var = cur.bytes(var_len, "var values") if fixed_len or var_len else b""
    if cur.remaining:
        raise cur.error(f"{cur.remaining} bytes remain after the values")
    dt = f.datatype
    if dt is None or f.kind == COORDS:
        return np.frombuffer(fixed, np.uint8)
    if f.var_sized:
        if fixed_len % 8:
            raise cur.error(f"{fixed_len} bytes of var offsets is not a multiple of 8", fixed_at)
        offs = np.frombuffer(fixed, "<u8")
        if len(offs) and (np.any(np.diff(offs.astype(np.int64)) < 0) or int(offs[-1]) > var_len
                          or np.any(offs > var_len)):
            raise cur.error("var offsets are not increasing within the var values", fixed_at)
        bounds = offs.tolist() + [var_len]
        return [var[bounds[k]:bounds[k + 1]] for k in range(len(offs))]
    cell = f.cell_size
    if cell == 0 or fixed_len % cell:
        raise cur.error(f"{fixed_len} bytes of values is not a multiple of the {cell}-byte cell", fixed_at)
    if var_len:
        raise cur.error(f"a fixed-size field has {var_len} var bytes", var_at)
    if dt.is_string:
        return [fixed[k:k + cell] for k in range(0, fixed_len, cell)]
    arr = np.frombuffer(fixed, dt.dtype)
    if f.cell_val_num not in (1, VAR_NUM) and f.cell_val_num:
        arr = arr.reshape(-1, f.cell_val_num)
    return arr


@safety_net("tile sums")
def parse_tile_sums(payload, file: str, f: Field, *, within: str | None = None) -> np.ndarray:
    """Per-tile sums of field `f`: `u64 n, n x 8 bytes` as int64, uint64 or float64 by type (§5.5)."""
    label = f"tile sums of {field_label(f)}"
    cur = Cursor(payload, file, label, within=label if within is None else within)
    n = cur.u64_count(8, "count", "sums")
    values = cur.array(n, f.sum_dtype, "sums")
    if cur.remaining:
        raise cur.error(f"{cur.remaining} bytes remain after {n} sums")
    return values
