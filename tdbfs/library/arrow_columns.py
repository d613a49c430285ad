"""Columns of cells (store/tile_columns.py) as Arrow arrays, keeping TileDB's types: what `tdbfs export
OUT.parquet` writes and what `Array.cells()` returns with the `[parquet]` extra.

Each TileDB datatype maps to the Arrow type whose values are the same (format_spec/array_schema.md,
"Datatype"; the Python types are those tiledb-py's read returns):

- INT8..UINT64, FLOAT32/64: the integer or float of that width; BOOL: bool;
- DATETIME_SEC/MS/US/NS: timestamp of that unit; DATETIME_DAY, _WEEK, _MONTH, _YEAR: date32 (a day);
  DATETIME_HR, _MIN: timestamp[s]; TIME_SEC/MS: time32, TIME_US/NS: time64, TIME_HR/MIN: time32[s];
  units finer than ns (PS, FS, AS), which Arrow lacks: int64, as stored;
- STRING_UTF8: string; CHAR, STRING_ASCII, BLOB, GEOM_*, wide strings: binary (tiledb-py returns bytes);
  a fixed string loses the NULs that pad it, as tiledb-py's numpy `S` values do;
- several values per cell: fixed_size_list; var-sized non-string cells: list;
- a nullable field's null cells: nulls.

Every field carries its TileDB datatype in its Arrow metadata (`tiledb_datatype`), so a unit Arrow
cannot hold is never silent. Arrays are built from the columns' buffers (offsets, values, validity),
never a Python object per cell.
"""

from __future__ import annotations

from ..lazy import np

#: Arrow field metadata key holding the TileDB datatype name
DATATYPE_KEY = b"tiledb_datatype"

_TIMESTAMP_UNITS = {"SEC": "s", "MS": "ms", "US": "us", "NS": "ns"}
#: DATETIME_ units stored as a count of a duration Arrow lacks: numpy's unit to convert them with
_TO_SECONDS = {"HR": "h", "MIN": "m"}
_TO_DAYS = {"DAY": "D", "WEEK": "W", "MONTH": "M", "YEAR": "Y"}
_TIME32 = {"SEC": "s", "MS": "ms"}
_TIME64 = {"US": "us", "NS": "ns"}
_TIME_SCALE = {"HR": 3600, "MIN": 60}

_BINARY_NAMES = ("CHAR", "STRING_ASCII", "BLOB", "GEOM_WKB", "GEOM_WKT", "ANY")


def pyarrow():
    """pyarrow, or ImportError naming the extra that brings it."""
    try:
        import pyarrow as pa
        import pyarrow.parquet  # noqa: F401 -- export writes Parquet with it
    except ImportError:
        raise ImportError("Parquet and Arrow need the 'parquet' extra: pip install 'tdbfs[parquet]'") from None
    return pa


def scalar_type(dt):
    """The Arrow type of one value of TileDB datatype `dt` (format.datatypes.Datatype)."""
    pa = pyarrow()
    name = dt.name
    unit = name.split("_", 1)[1] if "_" in name else ""
    if name == "STRING_UTF8":
        return pa.string()
    if dt.is_string or name in _BINARY_NAMES:
        return pa.binary()
    if name == "BOOL":
        return pa.bool_()
    if name.startswith("DATETIME_"):
        if unit in _TIMESTAMP_UNITS:
            return pa.timestamp(_TIMESTAMP_UNITS[unit])
        if unit in _TO_DAYS:
            return pa.date32()
        if unit in _TO_SECONDS:
            return pa.timestamp("s")
        return pa.int64()
    if name.startswith("TIME_"):
        if unit in _TIME32 or unit in _TIME_SCALE:
            return pa.time32(_TIME32.get(unit, "s"))
        if unit in _TIME64:
            return pa.time64(_TIME64[unit])
        return pa.int64()
    return pa.from_numpy_dtype(dt.dtype)


def arrow_type(dt, per_cell: int, var_sized: bool):
    """The Arrow type of a cell of a field: a value, a fixed-size list or a list of values."""
    pa = pyarrow()
    value = scalar_type(dt)
    if pa.types.is_string(value) or pa.types.is_binary(value):
        return value          # a string cell is one string, fixed or var-sized
    if var_sized:
        return pa.list_(value)
    return pa.list_(value, per_cell) if per_cell > 1 else value


def arrow_field(column):
    pa = pyarrow()
    return pa.field(column.name, arrow_type(column.datatype, column.per_cell, column.var_sized),
                    nullable=True, metadata={DATATYPE_KEY: column.datatype.name.encode()})


def to_arrow(column):
    """The cells of one store.tile_columns.Column as an Arrow array of `arrow_field(column).type`."""
    pa = pyarrow()
    dt = column.datatype
    value_type = scalar_type(dt)
    validity = column.validity
    if pa.types.is_string(value_type) or pa.types.is_binary(value_type):
        if column.var_sized:
            offsets, data = column.offsets, column.values
        else:
            offsets, data = _strip_nul_padding(column.values)
        return _binary_array(value_type, offsets, data, validity)
    if column.var_sized:
        size = dt.size
        raw = column.values[:len(column.values) // size * size]
        flat = _values_array(raw.view(dt.dtype), dt, value_type)
        offsets = _int32_offsets(column.offsets // size)
        return pa.Array.from_buffers(pa.list_(value_type), len(column), [_bitmap(validity), offsets],
                                     null_count=_nulls(validity), children=[flat])
    if column.per_cell > 1:
        flat = _values_array(np.ascontiguousarray(column.values).reshape(-1), dt, value_type)
        return pa.Array.from_buffers(pa.list_(value_type, column.per_cell), len(column), [_bitmap(validity)],
                                     null_count=_nulls(validity), children=[flat])
    return _values_array(column.values, dt, value_type, validity)


# Arrays are made with Array.from_buffers, from numpy's buffers: pa.array() would also look for pandas
# objects, which imports pandas (a second of a CLI export's start) the first time.

def _bitmap(validity):
    """Arrow's validity bitmap (bit i set: cell i not null) of a bool per cell, or None."""
    if validity is None:
        return None
    return pyarrow().py_buffer(np.packbits(validity, bitorder="little"))


def _nulls(validity) -> int:
    return 0 if validity is None else int(len(validity) - np.count_nonzero(validity))


def _int32_offsets(offsets):
    if len(offsets) and int(offsets[-1]) > np.iinfo(np.int32).max:
        raise ValueError(f"{int(offsets[-1])} values in one batch: more than Arrow's 2 Gi per list or string array")
    return pyarrow().py_buffer(np.ascontiguousarray(offsets, np.int32))


def _primitive(typ, values, validity=None):
    """A fixed-width Arrow array of `typ` over numpy `values` of the same width (bool: one per cell)."""
    pa = pyarrow()
    if pa.types.is_boolean(typ):
        data = pa.py_buffer(np.packbits(values, bitorder="little"))
    else:
        data = pa.py_buffer(np.ascontiguousarray(values))
    return pa.Array.from_buffers(typ, len(values), [_bitmap(validity), data], null_count=_nulls(validity))


def _values_array(values, dt, value_type, validity=None):
    """Fixed values (one per cell, or the flat values of every cell) as `value_type`."""
    pa = pyarrow()
    name = dt.name
    unit = name.split("_", 1)[1] if "_" in name else ""
    if name == "BOOL":
        values = values != 0
    elif name.startswith("DATETIME_") and unit in _TO_DAYS:
        values = values.view(f"datetime64[{_TO_DAYS[unit]}]").astype("datetime64[D]").view(np.int64)
        values = values.astype(np.int32)
    elif name.startswith("DATETIME_") and unit in _TO_SECONDS:
        values = values.view(f"datetime64[{_TO_SECONDS[unit]}]").astype("datetime64[s]").view(np.int64)
    elif name.startswith("TIME_") and unit in _TIME_SCALE:
        values = values * _TIME_SCALE[unit]
    if pa.types.is_time32(value_type):
        values = values.astype(np.int32)
    return _primitive(value_type, values, validity)


def _strip_nul_padding(values):
    """(offsets, bytes) of fixed strings (numpy `S<width>`) without their trailing NULs."""
    n, width = len(values), values.dtype.itemsize
    raw = np.ascontiguousarray(values).view(np.uint8).reshape(n, width)
    nonzero = raw != 0
    # length: one past the last non-NUL byte of the cell (0 for a cell of NULs only)
    lengths = np.where(nonzero.any(axis=1), width - np.argmax(nonzero[:, ::-1], axis=1), 0)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets, raw[np.arange(width) < lengths[:, None]]


def _binary_array(value_type, offsets, data, validity):
    """A string or binary array straight from its offsets and bytes."""
    pa = pyarrow()
    return pa.Array.from_buffers(value_type, len(offsets) - 1,
                                 [_bitmap(validity), _int32_offsets(offsets), pa.py_buffer(np.ascontiguousarray(data))],
                                 null_count=_nulls(validity))


def source_arrays(fragment, tile, fragment_names: list[str]):
    """The `fragment` (dictionary of the fragment names) and `tile` columns of a batch: null for a cell no
    fragment wrote (reader.batch.NO_SOURCE)."""
    pa = pyarrow()
    has_source = np.asarray(fragment) >= 0
    validity = None if has_source.all() else has_source
    encoded = [name.encode("utf-8") for name in fragment_names]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    names = _binary_array(pa.string(), offsets, np.frombuffer(b"".join(encoded), np.uint8), None)
    indices = _primitive(pa.int32(), np.where(has_source, fragment, 0).astype(np.int32), validity)
    frag = pa.DictionaryArray.from_arrays(indices, names)
    return frag, _primitive(pa.int64(), np.asarray(tile, np.int64), validity)


SOURCE_FIELDS = ("fragment", "tile")


def batch_schema(columns):
    """The Arrow schema of batches of `columns`, then `fragment` and `tile`."""
    pa = pyarrow()
    return pa.schema([arrow_field(c) for c in columns]
                     + [pa.field("fragment", pa.dictionary(pa.int32(), pa.string())),
                        pa.field("tile", pa.int64())])


def record_batch(batch, fragment_names: list[str], schema=None):
    """A reader.batch.CellBatch as an Arrow RecordBatch of `batch_schema(batch.columns)`."""
    pa = pyarrow()
    schema = schema or batch_schema(batch.columns)
    frag, tiles = source_arrays(batch.fragment, batch.tile, fragment_names)
    return pa.RecordBatch.from_arrays([to_arrow(c) for c in batch.columns] + [frag, tiles], schema=schema)
