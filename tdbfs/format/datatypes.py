"""TileDB's datatype, layout and other small enums (docs/format.md §4.6), declared once."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..lazy import np

VAR_NUM = 0xFFFFFFFF  # cell_val_num of a var-sized field


@dataclass(frozen=True)
class Datatype:
    id: int
    name: str
    size: int
    numpy: str  # little-endian numpy dtype string of one value

    @property
    def is_string(self) -> bool:
        return self.name.startswith("STRING_") or self.name == "CHAR"

    @property
    def is_float(self) -> bool:
        return self.name.startswith("FLOAT")

    @property
    def is_datetime(self) -> bool:
        return self.name.startswith("DATETIME_") or self.name.startswith("TIME_")

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.numpy)


_TABLE = [
    (0, "INT32", 4, "<i4"), (1, "INT64", 8, "<i8"), (2, "FLOAT32", 4, "<f4"), (3, "FLOAT64", 8, "<f8"),
    (4, "CHAR", 1, "i1"), (5, "INT8", 1, "i1"), (6, "UINT8", 1, "u1"), (7, "INT16", 2, "<i2"),
    (8, "UINT16", 2, "<u2"), (9, "UINT32", 4, "<u4"), (10, "UINT64", 8, "<u8"),
    (11, "STRING_ASCII", 1, "u1"), (12, "STRING_UTF8", 1, "u1"), (13, "STRING_UTF16", 2, "<u2"),
    (14, "STRING_UTF32", 4, "<u4"), (15, "STRING_UCS2", 2, "<u2"), (16, "STRING_UCS4", 4, "<u4"),
    (17, "ANY", 1, "u1"),
]
_TABLE += [(18 + i, "DATETIME_" + u, 8, "<i8") for i, u in
           enumerate(["YEAR", "MONTH", "WEEK", "DAY", "HR", "MIN", "SEC", "MS", "US", "NS", "PS", "FS", "AS"])]
_TABLE += [(31 + i, "TIME_" + u, 8, "<i8") for i, u in
           enumerate(["HR", "MIN", "SEC", "MS", "US", "NS", "PS", "FS", "AS"])]
_TABLE += [(40, "BLOB", 1, "u1"), (41, "BOOL", 1, "u1"), (42, "GEOM_WKB", 1, "u1"), (43, "GEOM_WKT", 1, "u1")]

DATATYPES: dict[int, Datatype] = {i: Datatype(i, n, s, d) for i, n, s, d in _TABLE}
BY_NAME: dict[str, Datatype] = {d.name: d for d in DATATYPES.values()}


def datatype(type_id: int) -> Datatype | None:
    return DATATYPES.get(type_id)


def datatype_name(type_id: int) -> str:
    dt = DATATYPES.get(type_id)
    return dt.name if dt else f"UNKNOWN({type_id})"


LAYOUTS = {0: "row-major", 1: "col-major", 2: "global-order", 3: "unordered", 4: "hilbert"}
ARRAY_TYPES = {0: "dense", 1: "sparse"}
ENCRYPTION_TYPES = {0: "NO_ENCRYPTION", 1: "AES_256_GCM"}
DATA_ORDERS = {0: "unordered", 1: "increasing", 2: "decreasing"}
OBJECT_TYPES = {0: "invalid", 1: "group", 2: "array"}


def enum_name(table: dict[int, str], value: int) -> str:
    return table.get(value, f"UNKNOWN({value})")


def decode_scalar(raw: bytes, dt: Datatype):
    """One fixed value as a Python scalar (int, float, or str for string types)."""
    if dt.is_string:
        return raw.decode("utf-8", errors="backslashreplace") if dt.size == 1 else raw.decode(
            {2: "utf-16-le", 4: "utf-32-le"}[dt.size], errors="backslashreplace")
    if len(raw) != dt.size:
        return raw.hex()
    return _SCALARS[dt.numpy.lstrip("<")].unpack(raw)[0]


# `struct`, not numpy: domains and MBR bounds are decoded at mount start-up, before numpy
# is imported (tdbfs/lazy.py); both give the same Python int or float.
_SCALARS = {code: struct.Struct("<" + char) for code, char in
            (("i1", "b"), ("u1", "B"), ("i2", "h"), ("u2", "H"), ("i4", "i"), ("u4", "I"),
             ("i8", "q"), ("u8", "Q"), ("f4", "f"), ("f8", "d"))}
