"""Enumerations (docs/format.md §4.8): the payload of a `__schema/__enumerations/*` generic tile.

```
u32 enum_version (0), u32 name_len, name, u32 path_len, path_name,
u8 datatype, u32 cell_val_num, u8 ordered, u64 data_len, data,
[u64 offsets_len, offsets (u64 each)]   # only if cell_val_num == var
```
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .cursor import Cursor
from .datatypes import VAR_NUM, Datatype, datatype
from .schema import decode_value
from .errors import safety_net

# The newest enumeration layout version (constants::enumerations_version).
MAX_ENUMERATION_VERSION = 0


@dataclass(frozen=True)
class Enumeration:
    version: int
    name: str
    path_name: str                     # file name in __schema/__enumerations/
    datatype: Datatype
    cell_val_num: int
    ordered: bool
    data: bytes
    offsets: tuple[int, ...] | None    # var-sized only: u64 start of each value in `data`
    values: tuple                      # decoded: str for string types, scalars/lists otherwise;
                                       # bytes for BLOB-like types or lengths that do not fit the type
    data_offset: int = 0               # payload offset of `data`
    offsets_offset: int | None = None  # payload offset of the offsets (var-sized only)
    trailing_bytes: int = 0

    @property
    def var_sized(self) -> bool:
        return self.cell_val_num == VAR_NUM


def _value(raw: bytes, dt: Datatype, single):
    """A decoded value, or the raw bytes when their length does not fit the type (shown in hex)."""
    value = decode_value(raw, dt, single=single)
    return raw if value is None else value


@safety_net("enumeration")
def parse_enumeration(payload, file: str, within: str = "generic tile payload") -> Enumeration:
    """Decode one enumeration file's payload; every length is checked, errors carry payload offsets."""
    cur = Cursor(payload, file, "enumeration", within=within)
    version = cur.u32("enumeration version")
    if version > MAX_ENUMERATION_VERSION:
        raise cur.error(f"enumeration version {version} is newer than the newest known "
                        f"({MAX_ENUMERATION_VERSION})", offset=cur.pos - 4)
    name = cur.string(cur.u32("enumeration name length"), "enumeration name")
    path_name = cur.string(cur.u32("enumeration path name length"), "enumeration path name")
    at = cur.pos
    type_id = cur.u8("enumeration datatype")
    dt = datatype(type_id)
    if dt is None:
        raise cur.error(f"unknown datatype id {type_id}", offset=at)
    cvn_at = cur.pos
    cell_val_num = cur.u32("enumeration cell_val_num")
    if cell_val_num == 0:
        raise cur.error("cell_val_num is 0", offset=cvn_at)
    ordered = cur.bool("enumeration ordered flag")
    data_len = cur.u64("enumeration data length")
    data_offset = cur.pos
    data = cur.bytes(data_len, "enumeration data")

    offsets = None
    offsets_offset = None
    if cell_val_num == VAR_NUM:
        olen = cur.u64("enumeration offsets length")
        offsets_offset = cur.pos
        raw = cur.bytes(olen, "enumeration offsets")
        if olen % 8:
            raise cur.error(f"offsets length {olen} is not a multiple of 8", offset=offsets_offset - 8)
        offsets = tuple(int(x) for x in np.frombuffer(raw, "<u8"))
        prev = 0
        for i, off in enumerate(offsets):
            if off < prev or off > data_len:
                raise cur.error(f"offset {i} = {off} is out of order or beyond the {data_len} data bytes",
                                offset=offsets_offset + 8 * i)
            prev = off
        bounds = list(offsets) + [data_len]
        values = tuple(_value(data[bounds[i]:bounds[i + 1]], dt, None) for i in range(len(offsets)))
    else:
        cell = dt.size * cell_val_num
        if data_len % cell:
            raise cur.error(f"data length {data_len} is not a multiple of the {cell}-byte cell size",
                            offset=data_offset - 8)
        single = cell_val_num == 1 or None
        values = tuple(_value(data[i:i + cell], dt, single) for i in range(0, data_len, cell))
    return Enumeration(version, name, path_name, dt, cell_val_num, ordered, data, offsets, values,
                       data_offset, offsets_offset, cur.remaining)
