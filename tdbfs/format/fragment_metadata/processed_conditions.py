"""The processed conditions generic tile (format >= 16): delete/update commits already applied."""

from __future__ import annotations

from ..cursor import Cursor
from ..errors import safety_net


@safety_net("processed conditions")
def parse_processed_conditions(payload, file: str, *, within: str = "processed conditions") -> tuple[str, ...]:
    """`u64 n, n x {u64 len, bytes}`: names of the delete/update commits already applied (§5.5)."""
    cur = Cursor(payload, file, "processed conditions", within=within)
    n = cur.u64_count(8, "count", "processed conditions")
    out = []
    for k in range(n):
        out.append(cur.string(cur.u64(f"condition {k} length"), f"condition {k}"))
    if cur.remaining:
        raise cur.error(f"{cur.remaining} bytes remain after {n} conditions")
    return tuple(out)
