"""Histories written with tiledb-py at explicit timestamps, for comparing what a read at T returns.

Timestamps are BASE + k, BASE two seconds ahead of the clock when the array is created (so the schema
TileDB writes at creation is older than every write, whatever the machine's load); consolidation and
vacuum, which work on [0, now], wait until the clock has passed the last write.
"""

from __future__ import annotations

import time

import numpy as np
import tiledb

AHEAD_MS = 2000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def wait_past(t: int) -> None:
    while now_ms() <= t:
        time.sleep(0.02)


def _cfg(**kw) -> tiledb.Config:
    return tiledb.Config({f"sm.consolidation.{k}" if not k.startswith("sm.") else k: str(v) for k, v in kw.items()})


def overlapping(uri: str, *, dups: bool = False, consolidate: str = "none", vacuum: bool = False,
                deletes: bool = True, evolve: bool = True, order: str = "row-major", key: str | None = None) -> dict:
    """A 2-D sparse array (int32 x, string s) written five times over overlapping cells, every value
    distinct and naming its write (value = 1000 * write + i); a delete between writes 3 and 4; attribute
    `w` (nullable float32) added by evolution before write 3; consolidation of writes 1-3 or of all.
    Returns {"base": BASE, "times": [the times worth reading], "writes": {value // 1000: timestamp}}."""
    ctx = tiledb.Ctx({"sm.encryption_type": "AES_256_GCM", "sm.encryption_key": key}) if key else None
    cfgkw = {"sm.encryption_type": "AES_256_GCM", "sm.encryption_key": key} if key else {}
    dom = tiledb.Domain(tiledb.Dim("x", (0, 63), 8, dtype=np.int32), tiledb.Dim("s", dtype="ascii"), ctx=ctx)
    schema = tiledb.ArraySchema(dom, sparse=True, allows_duplicates=dups, capacity=5, cell_order=order,
                                tile_order="row-major" if order == "hilbert" else order,
                                attrs=[tiledb.Attr("a", np.int64, ctx=ctx),
                                       tiledb.Attr("b", str, var=True, nullable=True, ctx=ctx)], ctx=ctx)
    base = now_ms() + AHEAD_MS
    tiledb.Array.create(uri, schema, ctx=ctx)
    rng = np.random.default_rng(7)
    writes = {}
    for w in range(1, 6):
        t = base + 10 * w
        if evolve and w == 3:
            se = tiledb.ArraySchemaEvolution(ctx) if ctx else tiledb.ArraySchemaEvolution()
            se.add_attribute(tiledb.Attr("w", np.float32, nullable=True, fill=2.5, ctx=ctx))
            se.timestamp(t - 5)
            se.array_evolve(uri)
        n = 30
        x = rng.integers(0, 40, n).astype(np.int32)
        s = np.array([f"k{v % 7}" for v in rng.integers(0, 50, n)], dtype=object)
        if not dups:
            _, keep = np.unique(np.stack([x.astype(str), s.astype(str)], 1), axis=0, return_index=True)
            x, s = x[np.sort(keep)], s[np.sort(keep)]
        n = len(x)
        a = np.arange(n, dtype=np.int64) + 1000 * w
        valid = (np.arange(n) % 4 != 1).astype(np.uint8)
        data = {"a": a, "b": np.array([f"b{w}_{i}" * (i % 3) for i in range(n)], dtype=object)}
        nullmaps = {"b": valid}
        if evolve and w >= 3:
            data["w"] = (np.arange(n) / 4 + w).astype(np.float32)
            nullmaps["w"] = (np.arange(n) % 3 != 0).astype(np.uint8)
        with tiledb.open(uri, "w", timestamp=t, ctx=ctx) as A:
            from tiledb.sparse_array import _setitem_impl_sparse
            _setitem_impl_sparse(A, (x, s), data, nullmaps)
        writes[w] = t
        if deletes and w == 3:
            with tiledb.open(uri, "d", timestamp=t + 5, ctx=ctx) as A:
                A.query(cond="a < 2010 or a >= 3025").submit()
    last = base + 50
    if consolidate != "none":
        wait_past(last)
        kw = dict(cfgkw)
        if consolidate == "partial":
            kw.update(timestamp_start=base + 10, timestamp_end=base + 30)
        tiledb.consolidate(uri, config=_cfg(**kw))
        if vacuum:
            tiledb.vacuum(uri, config=tiledb.Config({"sm.vacuum.mode": "fragments", **cfgkw}))
    wait_past(base + 60)   # a read "now" then takes the whole history
    times = [base + k for k in (0, 10, 12, 20, 25, 30, 35, 37, 40, 50, 60)]
    return {"base": base, "times": times, "writes": writes}


def dense_overlapping(uri: str, *, consolidate: str = "none", vacuum: bool = False, order: str = "row-major") -> dict:
    """A 2-D dense array (int32 x 0..19 tile 4, int32 y 0..9 tile 3) written four times over overlapping
    rectangles, values 1000 * write + i, a var-sized nullable string attribute; `c` (float64, fill 7.5) added
    by evolution before write 3."""
    dom = tiledb.Domain(tiledb.Dim("x", (0, 19), 4, dtype=np.int32), tiledb.Dim("y", (0, 9), 3, dtype=np.int32))
    schema = tiledb.ArraySchema(dom, sparse=False, cell_order=order, tile_order=order,
                                attrs=[tiledb.Attr("a", np.int64, fill=-7),
                                       tiledb.Attr("b", str, var=True, nullable=True)])
    base = now_ms() + AHEAD_MS
    tiledb.Array.create(uri, schema)
    rects = {1: (2, 9, 1, 5), 2: (6, 15, 0, 3), 3: (0, 4, 4, 9), 4: (8, 12, 2, 8)}
    writes = {}
    for w, (x0, x1, y0, y1) in rects.items():
        t = base + 10 * w
        if w == 3:
            se = tiledb.ArraySchemaEvolution()
            se.add_attribute(tiledb.Attr("c", np.float64, fill=7.5))
            se.timestamp(t - 5)
            se.array_evolve(uri)
        shape = (x1 - x0 + 1, y1 - y0 + 1)
        n = shape[0] * shape[1]
        data = {"a": (np.arange(n, dtype=np.int64) + 1000 * w).reshape(shape),
                "b": np.array([f"w{w}c{i}" * (i % 3) for i in range(n)], dtype=object).reshape(shape)}
        nullmaps = {"b": (np.arange(n) % 5 != 2).astype(np.uint8)}
        if w >= 3:
            data["c"] = (np.arange(n) / 8 + w).reshape(shape)
        with tiledb.open(uri, "w", timestamp=t) as A:
            A._setitem_impl((slice(x0, x1 + 1), slice(y0, y1 + 1)), data, nullmaps)
        writes[w] = t
    if consolidate != "none":
        wait_past(base + 40)
        kw = {}
        if consolidate == "partial":
            kw.update(timestamp_start=base + 10, timestamp_end=base + 20)
        tiledb.consolidate(uri, config=_cfg(**kw))
        if vacuum:
            tiledb.vacuum(uri, config=tiledb.Config({"sm.vacuum.mode": "fragments"}))
    wait_past(base + 50)
    times = [base + k for k in (0, 10, 15, 20, 25, 30, 40, 50)]
    return {"base": base, "times": times, "writes": writes}
