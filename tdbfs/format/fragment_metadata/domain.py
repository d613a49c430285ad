"""Per-dimension (min, max) ranges as the footer and formats 1/2 store a non-empty domain, and u64 lists."""

from __future__ import annotations

from ..cursor import Cursor
from ..datatypes import Datatype, decode_scalar


def _range_value(raw: bytes, dt: Datatype):
    return decode_scalar(raw, dt)


def read_ranges(cur: Cursor, dims, what: str) -> tuple:
    """Per dimension (min, max): fixed `min,max`, var `u64 range_len, u64 start_len, bytes`."""
    out = []
    for j, d in enumerate(dims):
        if d.var_sized:
            at = cur.pos
            r_len = cur.u64(f"{what} dimension {j} range length")
            s_len = cur.u64(f"{what} dimension {j} start length")
            if s_len > r_len:
                raise cur.error(f"{what} dimension {j}: start length {s_len} exceeds range length {r_len}", at)
            raw = cur.bytes(r_len, f"{what} dimension {j} range")
            out.append((_range_value(raw[:s_len], d.datatype), _range_value(raw[s_len:], d.datatype)))
        else:
            cs = d.coord_size
            raw = cur.bytes(2 * cs, f"{what} dimension {j} range")
            out.append((_range_value(raw[:cs], d.datatype), _range_value(raw[cs:], d.datatype)))
    return tuple(out)


def read_u64s(cur: Cursor, n: int, what: str) -> tuple[int, ...]:
    return tuple(cur.u64_array(n, what).tolist())
