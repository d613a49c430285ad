"""Arrays whose cells are hard to show as CSV text, written with tiledb-py: floats of every kind
(NaN, infinities, subnormals, -0.0, the shortest-text edges), negative and extreme integers,
datetimes, strings with quotes, commas, newlines and bytes that are not UTF-8, nulls, var-sized and
multi-value cells; and big plain tables (a 1M-cell sparse tile, an 8M-cell dense tile)."""

from __future__ import annotations

import numpy as np
import tiledb
from tiledb.sparse_array import _setitem_impl_sparse

F8_EDGES = [np.nan, np.inf, -np.inf, -0.0, 0.0, 5e-324, -2.2250738585072014e-308, 1e16, 9999999999999998.0,
            1e-4, 9.999999999999999e-05, 1e-5, 0.1, 1.7976931348623157e308, 123456789.125]
F4_EDGES = [np.nan, np.inf, -np.inf, -0.0, 1e-45, 1.1754944e-38, 0.1, 3.4028235e38, 16777216.0, 1e-4]
STRINGS = [b'a,b', b'say "hi"', b'two\nlines', b'', b'\xff\xfe not utf-8', 'é ü ∑'.encode(), b'cr\r\nlf',
           b'"', b',', b'tab\there']


def make_special(path: str, cells: int, capacity: int) -> None:
    rng = np.random.default_rng(11)
    dims = [tiledb.Dim("d0", domain=(-(1 << 40), 1 << 40), tile=1 << 20, dtype=np.int64),
            tiledb.Dim("d1", domain=(-1000, 1000), tile=100, dtype=np.int16)]
    attrs = [tiledb.Attr("f8", dtype=np.float64), tiledb.Attr("f4", dtype=np.float32),
             tiledb.Attr("i1", dtype=np.int8), tiledb.Attr("u8", dtype=np.uint64),
             tiledb.Attr("i8", dtype=np.int64), tiledb.Attr("when", dtype="datetime64[ns]"),
             tiledb.Attr("s", dtype=str, var=True, nullable=True), tiledb.Attr("b", dtype=bytes, var=True),
             tiledb.Attr("v", dtype=np.int16, var=True), tiledb.Attr("m", dtype=np.dtype("f4, f4, f4")),
             tiledb.Attr("nf", dtype=np.float64, nullable=True)]
    tiledb.Array.create(path, tiledb.ArraySchema(domain=tiledb.Domain(*dims), sparse=True, capacity=capacity,
                                                 attrs=attrs, allows_duplicates=True))
    bits8 = rng.integers(0, 1 << 63, cells, dtype=np.int64).view(np.float64) * rng.choice([-1.0, 1.0], cells)
    f8 = np.where(rng.random(cells) < 0.5, bits8, np.round(rng.standard_normal(cells) * 10.0 ** rng.integers(0, 6, cells)) / 1000)
    f8[:len(F8_EDGES)] = F8_EDGES
    f4 = rng.integers(0, 1 << 31, cells, dtype=np.int64).astype(np.int32).view(np.float32).copy()
    f4[:len(F4_EDGES)] = F4_EDGES
    i8 = rng.integers(-(1 << 63), (1 << 63) - 1, cells, dtype=np.int64)
    i8[:3] = [-(1 << 63), (1 << 63) - 1, 0]
    u8 = rng.integers(0, 1 << 64, cells, dtype=np.uint64)
    u8[:2] = [(1 << 64) - 1, 0]
    when = rng.integers(-(1 << 62), 1 << 62, cells, dtype=np.int64).view("datetime64[ns]")
    words = np.array([STRINGS[i % len(STRINGS)].decode("utf-8", "replace") + str(i % 7) for i in range(cells)],
                     dtype=object)
    raw = np.array([STRINGS[i % len(STRINGS)] for i in range(cells)], dtype=object)
    var = np.array([rng.integers(-32768, 32767, i % 4).astype(np.int16) for i in range(cells)], dtype=object)
    m = np.zeros(cells, np.dtype("f4, f4, f4"))
    for j, name in enumerate(m.dtype.names):
        m[name] = np.array(F4_EDGES)[(np.arange(cells) + j) % len(F4_EDGES)]
    with tiledb.open(path, "w") as A:
        _setitem_impl_sparse(A, (rng.integers(-(1 << 40), 1 << 40, cells), rng.integers(-1000, 1000, cells).astype(np.int16)),
                             {"f8": f8, "f4": f4, "i1": rng.integers(-128, 127, cells).astype(np.int8), "u8": u8,
                              "i8": i8, "when": when, "s": words, "b": raw, "v": var, "m": m,
                              "nf": np.where(rng.random(cells) < 0.5, f8, -0.0)},
                             {"s": (rng.random(cells) < 0.8).astype(np.uint8),
                              "nf": (rng.random(cells) < 0.6).astype(np.uint8)})


def make_big_sparse(path: str, cells: int = 1 << 20, tiles: int = 2) -> None:
    """Tiles of `cells` cells: d0, d1 int64, a int32, b float64, c int64 (issue 38's 1M-cell tile)."""
    rng = np.random.default_rng(12)
    dims = [tiledb.Dim(n, domain=(0, 1 << 30), tile=1 << 30, dtype=np.int64) for n in ("d0", "d1")]
    attrs = [tiledb.Attr("a", dtype=np.int32), tiledb.Attr("b", dtype=np.float64), tiledb.Attr("c", dtype=np.int64)]
    tiledb.Array.create(path, tiledb.ArraySchema(domain=tiledb.Domain(*dims), sparse=True, capacity=cells,
                                                 attrs=attrs, allows_duplicates=True))
    n = cells * tiles
    with tiledb.open(path, "w") as A:
        A[np.sort(rng.integers(0, 1 << 20, n)), rng.integers(0, 1 << 30, n)] = {
            "a": rng.integers(-(1 << 31), 1 << 31, n).astype(np.int32),
            "b": np.round(rng.standard_normal(n) * 1000, 3), "c": rng.integers(0, 1 << 40, n)}


def make_big_dense(path: str, rows: int = 4096, cols: int = 2048) -> None:
    """One dense tile of rows x cols cells (8M by default) of one int32 attribute."""
    dims = [tiledb.Dim("x", domain=(0, rows - 1), tile=rows, dtype=np.int64),
            tiledb.Dim("y", domain=(0, cols - 1), tile=cols, dtype=np.int64)]
    tiledb.Array.create(path, tiledb.ArraySchema(domain=tiledb.Domain(*dims), sparse=False,
                                                 attrs=[tiledb.Attr("a", dtype=np.int32)]))
    with tiledb.open(path, "w") as A:
        A[:, :] = {"a": np.arange(rows * cols, dtype=np.int32).reshape(rows, cols)}
