"""Columns of cells (store/tile_columns.py) as CSV text: the rows of every cells table of the tree
(a fragment's `cells.csv` and `cells/tile_K.csv`, the cells TileDB returns under `as_of/<T>/`) and of
`tdbfs export` to CSV.

A nullable field is followed by `<name>.valid` (1 or 0; the value of a null cell is an empty field).
Strings, var-sized values and cells of several values (space-separated) are always double-quoted, `"`
doubled, as Python's csv module writes them; numbers never are, so `grep ',486,'` finds a coordinate.
Fixed strings are shown without the NULs that pad them (as tiledb-py returns them, and so that grep does
not take the file for binary).

Rows are built column by column with numpy, as bytes: each CSV field of a column is a matrix of its
texts (one row a cell, padded to the widest) with the byte length of each, and a row of the CSV is the
used bytes of each matrix's row with the separators between them. Integers (datetimes and booleans are
stored as integers) have their digits computed with numpy, and their widths without any text, so the
size of a table of integers costs no rendering (`rows_size`); float64 text is Python's `repr`, which is
what numpy's `str` of a float64 gives (both the shortest text that reads back to the same value); only
float32, strings, var-sized values and cells of several values are converted per cell.
"""

from __future__ import annotations

from ..lazy import np
from .render import _csv_cell, _numbers_as_text

#: rows turned into text at a time: bounds the memory of one step, and the time one numpy call holds
#: the GIL, whatever the size of the table
ROWS_PER_BATCH = 1 << 16

#: 10, 100, ... 10**19: the number of digits of a uint64 is 1 + how many of these it reaches
_POW10 = None


def header_names(columns) -> list[str]:
    """The CSV header of columns (a nullable one adds `<name>.valid`)."""
    names = []
    for c in columns:
        names += [c.name, f"{c.name}.valid"] if c.validity is not None else [c.name]
    return names


def csv_header(names: list[str]) -> bytes:
    return (",".join(_csv_cell(h) for h in names) + "\n").encode("utf-8")


def csv_rows(columns) -> bytes:
    """The rows of columns of equal length, without the header."""
    if not columns:
        return b""
    n = len(columns[0])
    return b"".join(_batch(columns, start, min(n, start + ROWS_PER_BATCH)) for start in range(0, n, ROWS_PER_BATCH))


def source_header(columns) -> bytes:
    """The header of the cells a read returns (`as_of/<T>/cells.csv`, `tdbfs export`): the columns', then
    `fragment` and `tile`."""
    return csv_header(header_names(columns) + ["fragment", "tile"])


def batch_csv_rows(batch, fragment_names) -> bytes:
    """The rows of a reader.batch.CellBatch: its columns, then the name of the fragment each value comes
    from (a string, so quoted) and the tile; both empty for a cell no fragment wrote (a dense fill value)."""
    names = _names_field(fragment_names)
    out = []
    for start in range(0, len(batch), ROWS_PER_BATCH):
        stop = min(len(batch), start + ROWS_PER_BATCH)
        fields = []
        for c in batch.columns:
            fields += _fields(c.slice(start, stop))
        out.append(_assemble(fields + _source_fields(batch, names, start, stop), stop - start))
    return b"".join(out)


def batch_rows_size(batch, fragment_names) -> int:
    """len(batch_csv_rows(batch, fragment_names)), without making the rows."""
    _, lengths, _ = _names_field(fragment_names)
    tiles = batch.tile
    tile_lengths = np.where(tiles >= 0, _int_lengths(np.maximum(tiles, 0))[0], 0)
    return (rows_size(batch.columns) + int(lengths[batch.fragment].sum()) + int(tile_lengths.sum())
            + 2 * len(batch))


def _names_field(fragment_names) -> tuple:
    """The field of each fragment name (quoted), and last an empty one: NO_SOURCE (-1) picks it."""
    return _text_field(['"' + name.replace('"', '""') + '"' for name in fragment_names] + [""])


def _source_fields(batch, names, start: int, stop: int) -> list[tuple]:
    mat, lengths, right = names
    frag = batch.fragment[start:stop]
    tiles = batch.tile[start:stop]
    tile_mat, tile_lengths, tile_right = _int_field(np.maximum(tiles, 0))
    return [(mat[frag], lengths[frag], right), (tile_mat, np.where(tiles >= 0, tile_lengths, 0), tile_right)]


def rows_size(columns) -> int:
    """len(csv_rows(columns)), without making the rows (nor, for integer columns, any text)."""
    if not columns:
        return 0
    n = len(columns[0])
    total = 0
    for start in range(0, n, ROWS_PER_BATCH):
        stop = min(n, start + ROWS_PER_BATCH)
        fields = 0
        for c in columns:
            for lengths in _field_lengths(c.slice(start, stop)):
                total += int(lengths.sum())
                fields += 1
        total += fields * (stop - start)   # a comma after each field but the last, then a newline
    return total


def _batch(columns, start: int, stop: int) -> bytes:
    fields = []
    for c in columns:
        fields += _fields(c.slice(start, stop))
    return _assemble(fields, stop - start)


def _assemble(fields, n: int) -> bytes:
    """The CSV rows of fields [(texts matrix (n, w) uint8, byte lengths (n,), right-aligned)]: every
    field's matrix and a separator side by side in one matrix, and the bytes in use picked out of it."""
    if n == 0:
        return b""
    width = sum(mat.shape[1] + 1 for mat, _, _ in fields)
    out = np.empty((n, width), np.uint8)
    used = np.empty((n, width), bool)
    at = 0
    for i, (mat, lengths, right) in enumerate(fields):
        w = mat.shape[1]
        out[:, at:at + w] = mat
        cols = np.arange(w)
        if right:
            np.greater_equal(cols, (w - lengths)[:, None], out=used[:, at:at + w])
        else:
            np.less(cols, lengths[:, None], out=used[:, at:at + w])
        at += w
        out[:, at] = ord(",") if i < len(fields) - 1 else ord("\n")
        used[:, at] = True
        at += 1
    return out[used].tobytes()


# -- one column's fields ------------------------------------------------------------------

def _fields(c) -> list[tuple]:
    """[(matrix, lengths, right-aligned)] of the column's CSV field(s): its values, then `.valid`."""
    v = c.values
    if c.offsets is None and v.ndim == 1 and v.dtype.kind in "iu":
        field = _int_field(v)
    elif c.offsets is None and v.ndim == 1 and v.dtype == np.float64:
        field = _ascii_field(_float64_text(v))
    elif c.offsets is None and v.ndim == 1 and v.dtype.kind == "f":
        text = _numbers_as_text(v)
        field = (_matrix(text.astype("S")), np.strings.str_len(text).astype(np.int64), False)
    else:
        field = _text_field(column_text(_without_validity(c))[0])
    if c.validity is None:
        return [field]
    valid = c.validity
    mat, lengths, right = field
    return [(mat, np.where(valid, lengths, 0), right),
            ((valid.astype(np.uint8) + ord("0")).reshape(-1, 1), np.ones(len(valid), np.int64), False)]


def _field_lengths(c) -> list:
    """The byte lengths of the column's CSV field(s), as `_fields` would make them."""
    v = c.values
    if c.offsets is None and v.ndim == 1 and v.dtype.kind in "iu":
        lengths = _int_lengths(v)[0]
    elif c.offsets is None and v.ndim == 1 and v.dtype == np.float64:
        lengths = _float64_lengths(v)
    else:
        lengths = _fields(_without_validity(c))[0][1]
    if c.validity is None:
        return [lengths]
    return [np.where(c.validity, lengths, 0), np.ones(len(c.validity), np.int64)]


def _without_validity(c):
    return type(c)(c.name, c.kind, c.datatype, c.per_cell, c.values, c.offsets, None)


def _int_lengths(v):
    """(byte lengths, magnitudes as uint64, negative or None, digit counts) of integers."""
    global _POW10
    if _POW10 is None:
        _POW10 = np.array([10 ** i for i in range(1, 20)], np.uint64)
    if v.dtype.kind == "i":
        v = v.astype(np.int64, copy=False)
        neg = v < 0
        mag = v.view(np.uint64).copy()
        np.negative(mag, out=mag, where=neg)   # two's complement: -(-2**63) is 2**63 as uint64
    else:
        neg, mag = None, v.astype(np.uint64)
    digits = np.searchsorted(_POW10, mag, side="right").astype(np.int64) + 1
    return (digits + neg if neg is not None else digits), mag, neg, digits


def _int_field(v) -> tuple:
    lengths, mag, neg, digits = _int_lengths(v)
    if len(v) == 0:
        return np.zeros((0, 1), np.uint8), lengths, True
    most = int(digits.max())
    width = most + 1
    if most <= 9:   # 32-bit division is several times faster than 64-bit
        mag = mag.astype(np.uint32)
    # digits written one row of the transposed matrix at a time (contiguous), the last digit first
    mat = np.empty((width, len(v)), np.uint8)
    mat[0] = ord("-")
    rest = np.empty_like(mag)
    for j in range(most):
        np.remainder(mag, 10, out=rest)
        np.add(rest, ord("0"), out=mat[width - 1 - j], casting="unsafe")
        mag //= 10
    mat = mat.T
    if neg is not None:
        rows = np.flatnonzero(neg)
        mat[rows, width - 1 - digits[rows]] = ord("-")
    return mat, lengths, True


def _float64_lengths(v):
    """The byte lengths of float64 texts (`_float64_text`), without the matrix of them."""
    return np.fromiter(map(len, _float64_text(v)), np.int64, len(v))


def _float64_text(v) -> list[str]:
    text = list(map(float.__repr__, v.tolist()))
    for i in np.flatnonzero(~np.isfinite(v)).tolist():
        x = v[i]
        text[i] = "NaN" if x != x else "Infinity" if x > 0 else "-Infinity"
    return text


def _ascii_field(text: list[str]) -> tuple:
    lengths = np.fromiter(map(len, text), np.int64, len(text))
    return _matrix(np.array(text, dtype=f"S{max(1, int(lengths.max(initial=1)))}")), lengths, False


def _text_field(text: list[str]) -> tuple:
    raw = [s.encode("utf-8") for s in text]
    lengths = np.fromiter(map(len, raw), np.int64, len(raw))
    # a field's text never ends in a NUL (strings are quoted), which an `S` array would drop
    return _matrix(np.array(raw, dtype=f"S{max(1, int(lengths.max(initial=1)))}")), lengths, False


def _matrix(s) -> np.ndarray:
    """An `S<w>` array as an (n, w) uint8 matrix."""
    w = max(1, s.dtype.itemsize)
    return np.ascontiguousarray(s).view(np.uint8).reshape(len(s), w) if s.dtype.itemsize else \
        np.zeros((len(s), 1), np.uint8)


def column_text(c) -> list[list[str]]:
    """The CSV fields of one column: [values] or, nullable, [values, valid]."""
    if c.offsets is not None:
        text = _var_text(c)
    elif c.values.dtype.kind == "S":
        text = _quoted(v.decode("utf-8", "backslashreplace") for v in c.values.tolist())
    elif c.values.ndim > 1:
        text = _quoted(" ".join(r) for r in _numbers_as_text(c.values).tolist())
    else:
        text = _numbers_as_text(c.values).tolist()
    if c.validity is None:
        return [text]
    valid = c.validity
    return [np.where(valid, np.array(text, dtype=object), "").tolist(), np.where(valid, "1", "0").tolist()]


def _var_text(c) -> list[str]:
    data, dt = c.values.tobytes(), c.datatype
    spans = zip(c.offsets[:-1].tolist(), c.offsets[1:].tolist())
    if dt.is_string and dt.size == 1:
        return _quoted(data[s:e].decode("utf-8", "backslashreplace") for s, e in spans)
    w = dt.size
    return _quoted(" ".join(_numbers_as_text(np.frombuffer(data[s:e - (e - s) % w], dt.dtype)).tolist())
                   for s, e in spans)


def _quoted(texts) -> list[str]:
    return ['"' + s.replace('"', '""') + '"' for s in texts]
