"""Per-dimension (min, max) ranges as the footer and formats 1/2 store a non-empty domain, and u64 lists."""

from __future__ import annotations

from ..cursor import Cursor
from ..datatypes import Datatype, decode_scalar


def _range_value(raw: bytes, dt: Datatype):
    return decode_scalar(raw, dt)


def read_var_range(cur: Cursor, what: str) -> tuple[bytes, bytes]:
    """The (start, end) bytes of one var-sized range: `u64 range_len, u64 start_len, bytes`."""
    at = cur.pos
    r_len = cur.u64(f"{what} range length")
    s_len = cur.u64(f"{what} start length")
    if s_len > r_len:
        raise cur.error(f"{what}: start length {s_len} exceeds range length {r_len}", at)
    raw = cur.bytes(r_len, f"{what} range")
    return raw[:s_len], raw[s_len:]


def read_ranges(cur: Cursor, dims, what: str) -> tuple:
    """Per dimension (min, max): fixed `min,max`, var `u64 range_len, u64 start_len, bytes`."""
    out = []
    for j, d in enumerate(dims):
        if d.var_sized:
            start, end = read_var_range(cur, f"{what} dimension {j}")
            out.append((_range_value(start, d.datatype), _range_value(end, d.datatype)))
        else:
            cs = d.coord_size
            raw = cur.bytes(2 * cs, f"{what} dimension {j} range")
            out.append((_range_value(raw[:cs], d.datatype), _range_value(raw[cs:], d.datatype)))
    return tuple(out)


def read_u64s(cur: Cursor, n: int, what: str) -> tuple[int, ...]:
    return cur.u64s(n, what)
