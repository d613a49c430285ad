"""The fragment-wide min / max / sum / null count of every field (format >= 12)."""

from __future__ import annotations

from dataclasses import dataclass

from ...lazy import np
from ..cursor import Cursor
from ..errors import safety_net
from .fields import COORDS, Field
from .tile_lists import field_label


@dataclass(frozen=True)
class FragmentFieldSummary:
    """Fragment-wide min / max / sum / null count of one field (v>=12)."""

    idx: int
    name: str
    min: object            # None when not stored; Python scalar, or bytes for strings
    max: object
    sum: int | float
    null_count: int
    min_raw: bytes = b""
    max_raw: bytes = b""


def _summary_value(raw: bytes, f: Field):
    dt = f.datatype
    if not raw:
        # An empty string is a valid min/max of a string field; elsewhere nothing was stored.
        return b"" if f.has_min_max and dt.is_string else None
    if dt is None or f.kind == COORDS or dt.is_string or len(raw) != dt.size:
        return raw
    return np.frombuffer(raw, dt.dtype)[0].item()


@safety_net("fragment min/max/sum/null count")
def parse_fragment_min_max_sum_null_count(payload, file: str, fields, *,
                                          within: str = "fragment min/max/sum/null count"
                                          ) -> tuple[FragmentFieldSummary, ...]:
    """Per field `u64 min_len, min, u64 max_len, max, u64 sum, u64 null_count` (§5.5)."""
    cur = Cursor(payload, file, "fragment min/max/sum/null count", within=within)
    out = []
    for f in fields:
        cur.structure = f"fragment min/max/sum/null count of {field_label(f)}"
        mn = cur.bytes(cur.u64("min length"), "min")
        mx = cur.bytes(cur.u64("max length"), "max")
        raw_sum = cur.bytes(8, "sum")
        null_count = cur.u64("null count")
        total = np.frombuffer(raw_sum, f.sum_dtype)[0].item()
        out.append(FragmentFieldSummary(f.idx, f.name, _summary_value(mn, f), _summary_value(mx, f),
                                        total, null_count, mn, mx))
    cur.structure = "fragment min/max/sum/null count"
    if cur.remaining:
        raise cur.error(f"{cur.remaining} bytes remain after {len(out)} fields")
    return tuple(out)
