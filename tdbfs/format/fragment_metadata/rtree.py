"""The R-tree generic tile: the MBRs of a sparse fragment's tiles, root level first."""

from __future__ import annotations

from dataclasses import dataclass

from ...lazy import np
from ..cursor import Cursor
from ..datatypes import Datatype, decode_scalar
from ..errors import safety_net
from .domain import read_var_range


@dataclass(frozen=True)
class RTreeLevel:
    """One R-tree level: per dimension, fixed dims an (n, 2) array of (min, max), var dims a list of (start, end)."""

    mbr_num: int
    ranges: tuple


@dataclass(frozen=True)
class RTree:
    version: int
    fanout: int
    levels: tuple[RTreeLevel, ...]     # root first, leaves (one MBR per sparse tile) last
    dim_num: int | None = None         # stored only before v5
    datatype: int | None = None        # stored only before v5

    @property
    def leaves(self) -> RTreeLevel | None:
        return self.levels[-1] if self.levels else None

    @property
    def leaf_num(self) -> int:
        return self.levels[-1].mbr_num if self.levels else 0


def _var_value(raw: bytes, dt: Datatype):
    if dt.is_string:
        return decode_scalar(raw, dt)
    return raw


def mbr_dtype(dims) -> np.dtype:
    return np.dtype([(f"d{j}", d.datatype.dtype, (2,)) for j, d in enumerate(dims)])


@safety_net("R-tree")
def parse_rtree(payload, file: str, schema_dims, version: int, *, within: str = "R-tree") -> RTree:
    """The R-tree generic tile payload (§5.5): root level first, leaves last."""
    dims = tuple(schema_dims)
    cur = Cursor(payload, file, "R-tree", within=within)
    dim_num = datatype = None
    if version < 5:
        dim_num = cur.u32("dim_num")
        if dim_num != len(dims):
            raise cur.error(f"R-tree has {dim_num} dimensions but the schema has {len(dims)}", 0)
    fanout = cur.u32("fanout")
    if version < 5:
        datatype = cur.u8("datatype")
    level_num = cur.u32_count(8, "level count", "R-tree levels")
    all_fixed = all(not d.var_sized for d in dims)
    fixed_size = sum(2 * d.coord_size for d in dims if not d.var_sized)
    min_mbr = fixed_size + 16 * sum(1 for d in dims if d.var_sized)
    levels = []
    for lv in range(level_num):
        at = cur.pos
        n = cur.u64(f"level {lv} MBR count")
        if min_mbr:
            cur.count(n, min_mbr, f"level {lv} MBRs", at)
        elif n:
            raise cur.error(f"level {lv} has {n} MBRs but the schema has no dimensions")
        if all_fixed:
            rec = cur.array(n, mbr_dtype(dims), f"level {lv} MBRs")
            ranges = tuple(np.ascontiguousarray(rec[f"d{j}"]) for j in range(len(dims)))
        else:
            cols: list = [[] for _ in dims]
            fixed_cols: list = [[] for _ in dims]
            for m in range(n):
                for j, d in enumerate(dims):
                    if d.var_sized:
                        start, end = read_var_range(cur, f"level {lv} MBR {m} dimension {j}")
                        cols[j].append((_var_value(start, d.datatype), _var_value(end, d.datatype)))
                    else:
                        fixed_cols[j].append(cur.bytes(2 * d.coord_size, f"level {lv} MBR {m} dimension {j} range"))
            ranges = tuple(cols[j] if d.var_sized else
                           np.frombuffer(b"".join(fixed_cols[j]), d.datatype.dtype).reshape(-1, 2)
                           for j, d in enumerate(dims))
        levels.append(RTreeLevel(n, ranges))
    if cur.remaining:
        raise cur.error(f"{cur.remaining} bytes remain after the last R-tree level")
    return RTree(version, fanout, tuple(levels), dim_num, datatype)
