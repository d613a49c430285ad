"""A subarray typed as text: `d0=10..20,d1=5..9` (the `as_of/<T>/cells/<subarray>.csv` file name, and
`tdbfs export --subarray`).

Grammar: `<dim>=<lo>..<hi>` parts joined by `,`, a dimension named at most once; several ranges of one
dimension joined by `;` (`d0=1..3;7..9`); a single value `d0=5` is the range 5..5. Ranges are inclusive,
as TileDB's `Subarray::add_range` takes them. Values are read in the dimension's type: integers (decimal,
`-` allowed), floats (anything Python's float() takes, `inf` and `nan` refused), datetimes as integers
in the dimension's unit, strings as their UTF-8 bytes (`%XX` escapes a byte, so `,` `;` `.` `/` can be
typed); a string range may leave an end empty (`s=..m`, `s=k..`: from the first or to the last string).
A range reaching outside the domain selects what lies inside (TileDB's `sm.read_range_oob` = warn crops it).

The result is what ReadPlan.subarray holds: per dimension (schema order) a tuple of (lo, hi) ranges, or
None for a dimension not named (its whole domain).
"""

from __future__ import annotations

import math
import re
from urllib.parse import unquote_to_bytes

from ..errors import TdbfsError

_INT = re.compile(r"[+-]?[0-9]+\Z")


class SubarrayError(TdbfsError, ValueError):
    """A subarray text that does not parse; the message names the bad part."""


def parse_subarray(text: str, schema) -> tuple:
    """Per dimension of `schema` (format.schema.ArraySchema) a tuple of inclusive (lo, hi) ranges, None
    for a dimension not named. SubarrayError names the part at fault."""
    dims = schema.dimensions
    by_name = {d.name: i for i, d in enumerate(dims)}
    out: list = [None] * len(dims)
    if not text:
        raise SubarrayError("empty subarray: expected <dim>=<lo>..<hi>[,<dim>=<lo>..<hi>...]")
    for part in text.split(","):
        name, eq, ranges_text = part.partition("=")
        if not eq:
            raise SubarrayError(f"{part!r}: expected <dim>=<lo>..<hi>")
        name = unquote_to_bytes(name).decode("utf-8", "replace")
        if name not in by_name:
            raise SubarrayError(f"{part!r}: no dimension {name!r} (the dimensions are "
                                f"{', '.join(d.name for d in dims)})")
        i = by_name[name]
        if out[i] is not None:
            raise SubarrayError(f"{part!r}: dimension {name!r} named twice (join its ranges with ';')")
        out[i] = tuple(_range(r, dims[i], part) for r in ranges_text.split(";"))
    return tuple(out)


def _range(text: str, dim, part: str) -> tuple:
    lo, dots, hi = text.partition("..")
    if not dots:
        lo = hi = text
    string = dim.datatype.is_string
    if not string and (lo == "" or hi == ""):
        raise SubarrayError(f"{part!r}: range {text!r} needs both ends")
    low = _value(lo, dim, part) if lo != "" else None
    high = _value(hi, dim, part) if hi != "" else None
    if low is not None and high is not None and low > high:
        raise SubarrayError(f"{part!r}: range {text!r} starts after it ends")
    return (low, high)


def _value(text: str, dim, part: str):
    dt = dim.datatype
    if dt.is_string:
        return unquote_to_bytes(text)
    if dt.is_float:
        try:
            v = float(text)
        except ValueError:
            raise SubarrayError(f"{part!r}: {text!r} is not a number ({dim.name!r} is {dt.name})") from None
        if math.isnan(v) or math.isinf(v):
            raise SubarrayError(f"{part!r}: {text!r}: a range end must be a finite number")
        return v
    if not _INT.match(text):
        raise SubarrayError(f"{part!r}: {text!r} is not an integer ({dim.name!r} is {dt.name})")
    v = int(text)
    info = _int_bounds(dt)
    if not info[0] <= v <= info[1]:
        raise SubarrayError(f"{part!r}: {text!r} does not fit {dim.name!r} ({dt.name})")
    return v


def _int_bounds(dt) -> tuple[int, int]:
    import numpy as np
    info = np.iinfo(dt.dtype)
    return int(info.min), int(info.max)


def format_subarray(subarray: tuple, schema) -> str:
    """The text parse_subarray reads back to `subarray` (None entries left out)."""
    from urllib.parse import quote_from_bytes
    parts = []
    for dim, ranges in zip(schema.dimensions, subarray):
        if ranges is None:
            continue

        def one(v):
            if v is None:
                return ""
            return quote_from_bytes(v, safe="") if isinstance(v, bytes) else repr(v) if isinstance(v, float) else str(v)
        parts.append(f"{dim.name}=" + ";".join(f"{one(lo)}..{one(hi)}" for lo, hi in ranges))
    return ",".join(parts)
