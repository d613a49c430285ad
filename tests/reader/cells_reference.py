"""What a tiledb-py read at T returns, and what `as_of/<T>/cells.csv` shows, as comparable multisets of rows.

A row is a tuple of one normalised value per dimension and attribute of the schema in force (by name, in
the schema's order): integers, floats of the field's own width (NaN as the string "nan"), bytes for strings,
tuples for cells of several values or var-sized numbers, None for a null cell.
"""

from __future__ import annotations

import csv
import io
from collections import Counter

import numpy as np
import tiledb

from tdbfs.views.nodes import resolve
from tdbfs.views.tree import build_root


def _fields(schema):
    return list(schema.domain) + [schema.attr(i) for i in range(schema.nattr)]


def _kind(f):
    """(base numpy dtype, var, cell count, nullable, is string) of a tiledb-py Dim/Attr."""
    dt = np.dtype(f.dtype)
    var = bool(f.isvar)
    nullable = bool(getattr(f, "isnullable", False))
    n = 1
    if dt.names:
        n = len(dt.names)
        dt = dt.fields[dt.names[0]][0]
    elif not var and isinstance(f, tiledb.Attr):
        n = int(f.ncells) if dt.kind not in "SU" else 1
    return dt, var, n, nullable, dt.kind in "SUO"


def _num(v, dt):
    if dt.kind == "f":
        x = float(dt.type(v))
        return "nan" if x != x else x
    if dt.kind == "M" or dt.kind == "m":
        return int(np.asarray(v).astype(dt).astype(np.int64))
    if dt.kind == "b":
        return int(bool(v))
    return int(v)


def _ref_value(v, f):
    dt, var, n, _, string = _kind(f)
    if string:
        if isinstance(v, str):
            return v.encode("utf-8")
        return bytes(v)
    if var:
        return tuple(_num(x, dt) for x in np.asarray(v).reshape(-1))
    if n > 1:
        flat = np.asarray(v.tolist() if hasattr(v, "dtype") and v.dtype.names else v).reshape(-1)
        return tuple(_num(x, dt) for x in flat)
    return _num(v, dt)


def _null_masks(A, sel) -> dict:
    """name -> bool array (True: null) of the nullable attributes: tiledb-py's numpy results of a
    multi-range read carry no mask, its Arrow results do."""
    names = [A.schema.attr(i).name for i in range(A.schema.nattr) if A.schema.attr(i).isnullable]
    if not names:
        return {}
    table = A.query(attrs=names, coords=True, return_arrow=True).df[sel]
    return {n: np.asarray(table.column(n).is_null().to_pylist(), bool) for n in names}


def tiledb_rows(uri: str, t: int | None, ranges=None, key=None) -> Counter:
    """The cells tiledb-py returns at T (None: now), the whole array or `ranges` (per dimension a list of
    inclusive (lo, hi), None for all)."""
    kw = {} if t is None else {"timestamp": t}
    if key is not None:
        kw["config"] = tiledb.Config({"sm.encryption_type": "AES_256_GCM", "sm.encryption_key": key})
    with tiledb.open(uri, **kw) as A:
        schema = A.schema
        fields = _fields(schema)
        if schema.sparse:
            sel = None if ranges is None else tuple(slice(None) if r is None else list(r) for r in ranges)
            res = A.query(coords=True)[:] if sel is None else A.query(coords=True).multi_index[sel]
            nulls = {} if sel is None else _null_masks(A, sel)
        else:
            ned = A.nonempty_domain()
            if ned is None:
                return Counter()
            want = []
            for (lo, hi), r in zip(ned, ranges or [None] * len(ned)):
                rs = [(lo, hi)] if r is None else [(max(lo, a), min(hi, b)) for a, b in r if max(lo, a) <= min(hi, b)]
                if not rs:
                    return Counter()
                want.append(rs)
            res = A.query(coords=True).multi_index[tuple(want)]
            nulls = _null_masks(A, tuple(want))
        n = len(np.asarray(res[fields[0].name]).reshape(-1))
        cols = []
        for f in fields:
            raw = res[f.name]
            mask = nulls.get(f.name)
            if mask is None and isinstance(raw, np.ma.MaskedArray):
                mask = np.ma.getmaskarray(raw).reshape(-1)
            data = raw.data if isinstance(raw, np.ma.MaskedArray) else raw
            flat = np.asarray(data)
            if not flat.dtype.names:
                flat = flat.reshape(n, -1) if (flat.size != n and flat.dtype != object) else flat.reshape(-1)
            else:
                flat = flat.reshape(-1)
            col = [_ref_value(flat[i], f) for i in range(n)]
            if mask is not None:
                col = [None if m else c for c, m in zip(col, mask)]
            cols.append(col)
        return Counter(zip(*cols))


def _csv_value(text: str, f):
    dt, var, n, _, string = _kind(f)
    if string:
        return text.encode("utf-8")
    if var or n > 1:
        return tuple(_num_text(x, dt) for x in text.split())
    return _num_text(text, dt)


def _num_text(text, dt):
    if dt.kind == "f":
        return _num(float(text), dt)
    return int(text)


def parse_cells_csv(data: bytes, schema) -> tuple[Counter, list[tuple]]:
    """(multiset of rows, [(row, fragment, tile)] in file order) of a cells.csv."""
    reader = csv.reader(io.StringIO(data.decode("utf-8")))
    header = next(reader)
    fields = _fields(schema)
    expect = []
    for f in fields:
        expect += [f.name, f"{f.name}.valid"] if getattr(f, "isnullable", False) else [f.name]
    assert header == expect + ["fragment", "tile"], (header, expect)
    rows, sourced = Counter(), []
    for line in reader:
        values, at = [], 0
        for f in fields:
            text = line[at]
            at += 1
            if getattr(f, "isnullable", False):
                valid = line[at] == "1"
                at += 1
                values.append(_csv_value(text, f) if valid else None)
            else:
                values.append(_csv_value(text, f))
        row = tuple(values)
        rows[row] += 1
        sourced.append((row, line[at], line[at + 1]))
    return rows, sourced


def view_bytes(store, path: str) -> bytes:
    node = resolve(build_root(store), path)
    size = node.size()
    data = node.read(0, size + 10)
    assert len(data) == size, (len(data), size)
    return data


def view_rows(store, uri: str, t, sub: str | None = None, key=None) -> tuple[Counter, list]:
    """parse_cells_csv of as_of/<t>/cells.csv (or cells/<sub>.csv), with tiledb-py's schema at T."""
    path = f"as_of/{t if t is not None else 'now'}/" + ("cells.csv" if sub is None else f"cells/{sub}.csv")
    data = view_bytes(store, path)
    kw = {} if t is None else {"timestamp": t}
    if key is not None:
        kw["config"] = tiledb.Config({"sm.encryption_type": "AES_256_GCM", "sm.encryption_key": key})
    with tiledb.open(uri, **kw) as A:
        return parse_cells_csv(data, A.schema)
