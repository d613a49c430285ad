"""Array (and group) metadata (docs/format.md §7.1): the payload of a `__meta/__t1_t2_label` generic tile.

Payload = records until the end:
`u32 key_len, key, u8 deleted; if !deleted: u8 value_type, u32 value_count, value[value_count * type_size]`.
Files apply in timestamp order; a later record for a key replaces the earlier
one, a deleted record removes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .cursor import Cursor
from .datatypes import Datatype, datatype
from .names import try_parse_name
from .schema import decode_value
from .errors import safety_net


@dataclass(frozen=True)
class MetadataRecord:
    key: str
    deleted: bool
    value_type: Datatype | None        # None for deleted records
    value_count: int
    raw: bytes                          # value bytes (value_count * type size)
    value: object                       # str for string/char types, bytes for BLOB-like,
                                        # a scalar (1 value) or list of numbers otherwise; None if deleted
    offset: int = 0                     # payload offset of the record
    key_raw: bytes = b""


def _decode(raw: bytes, dt: Datatype, count: int):
    if dt.is_string:
        return decode_value(raw, dt)
    value = decode_value(raw, dt, single=(count == 1))
    if value is None:       # cannot happen: raw is count * size bytes
        return raw
    if count == 0 and not isinstance(value, bytes):
        return []
    return value


@safety_net("array metadata")
def parse_array_metadata(payload, file: str, within: str = "generic tile payload") -> list[MetadataRecord]:
    """Every record of one metadata file, in stored order (the writer stores keys sorted)."""
    cur = Cursor(payload, file, "array metadata", within=within)
    records = []
    while not cur.at_end():
        start = cur.pos
        cur.structure = f"array metadata record {len(records)}"
        key_len = cur.u32("key length")
        key_raw = cur.bytes(key_len, "key")
        key = key_raw.decode("utf-8", errors="backslashreplace")
        cur.structure = f"array metadata record {len(records)} ({key!r})"
        deleted = cur.bool("deleted flag")
        if deleted:
            records.append(MetadataRecord(key, True, None, 0, b"", None, start, key_raw))
            continue
        at = cur.pos
        type_id = cur.u8("value type")
        dt = datatype(type_id)
        if dt is None:
            raise cur.error(f"unknown value datatype id {type_id}", offset=at)
        count = cur.u32_count(dt.size, "value count", "value")
        raw = cur.bytes(count * dt.size, "value")
        records.append(MetadataRecord(key, False, dt, count, raw, _decode(raw, dt, count), start, key_raw))
    return records


def _order(item) -> tuple:
    name = item[0]
    parsed = try_parse_name(name.rstrip("/").rsplit("/", 1)[-1])
    if parsed is None:
        return (1, 0, 0, name)
    return (0, parsed.t1, parsed.t2, name)


def merge_metadata(files) -> dict[str, MetadataRecord]:
    """Apply metadata files `[(file name, records), ...]` in timestamp order.

    Files are sorted by (t1, t2, name) of their timestamped names (names that do
    not parse go last, by name); a later record replaces an earlier one for the
    same key, a deleted record removes the key. Returns key → the live record,
    keys sorted.
    """
    merged: dict[str, MetadataRecord] = {}
    for _, records in sorted(files, key=_order):
        for rec in records:
            merged.pop(rec.key, None)
            if not rec.deleted:
                merged[rec.key] = rec
    return dict(sorted(merged.items()))
