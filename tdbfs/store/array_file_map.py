"""Byte maps of the array-level files: schemas, enumerations, commit files, array metadata, .meta files
(byte_map.py: what a map is, and those of a fragment's files).

Each is one generic tile (schemas, enumerations, .del/.upd, __meta files, .meta), a text
file of lines (.vac, .ign, .con with its embedded .del files), or an empty marker (.wrt,
.ok). Which one is told by the file's place and extension alone, so that listing layout/ and
hex/ reads no byte.
"""

from __future__ import annotations

from ..format.errors import FormatError
from ..format.generic_tile import HEADER_BASE_SIZE, read_generic_tile_header
from ..format.tile import parse_chunk_headers
from .byte_map import (UNDECODABLE, ByteRange, FileMap, Region, _plain, _reason, _values, cover,
                       generic_tile_claims)

GENERIC = "generic tile"
TEXT = "text"
CONSOLIDATED_COMMITS = "consolidated commits"
MARKER = "marker"
UNKNOWN = "unknown"

_TEXT_ENTRY = {".vac": "vacuum entry", ".ign": "ignore entry"}
_TILE_NAME = {".del": "delete condition", ".upd": "update condition", ".meta": "consolidated fragment metadata"}


def array_file_kind(rel: str) -> str:
    base = rel.rsplit("/", 1)[-1]
    ext = "." + base.rsplit(".", 1)[1] if "." in base else ""
    if ext in _TEXT_ENTRY:
        return TEXT
    if ext == ".con":
        return CONSOLIDATED_COMMITS
    if ext in (".wrt", ".ok") or rel == "__tiledb_group.tdb":
        return MARKER
    if ext in _TILE_NAME or rel == "__array_schema.tdb":
        return GENERIC
    if ext == "" and rel.startswith(("__schema/", "__meta/", "__group/")):  # schemas, enumerations, metadata,
        # group details: no extension
        return GENERIC
    return UNKNOWN


def array_tile_name(rel: str) -> str:
    """What the generic tile of an array-level file holds: the prefix of its byte-map structures."""
    base = rel.rsplit("/", 1)[-1]
    ext = "." + base.rsplit(".", 1)[1] if "." in base else ""
    if ext in _TILE_NAME:
        return _TILE_NAME[ext]
    if rel.startswith("__schema/__enumerations/"):
        return "enumeration"
    if rel.startswith("__meta/"):
        return "array metadata"
    if rel.startswith("__group/"):
        return "group details"
    return "array schema"


def array_file_map(store, rel: str) -> FileMap:
    """The byte map of one array-level file (path relative to the array root), once per file size.

    Never raises for bytes that do not decode, nor for a file that cannot be read: those are
    `undecodable` rows, so a damaged array still shows every byte it has.
    """
    try:
        size = store.file_size(rel)
    except OSError as exc:
        # no size to partition: one empty row still says why nothing is mapped
        return FileMap(rel, 0, (ByteRange(0, 0, UNDECODABLE, f"file not read: {_reason(exc)}"),))

    try:   # mtime too: array-level files come and go while mounted, and may be rewritten in place
        mtime = store.stat(rel).mtime_ns
    except OSError:
        mtime = None

    def make():
        m = _build_array_file(store, rel, size)
        return m, 350 * len(m.ranges) + 200

    return store.cache.get_or_make(("array byte_map", store.path, rel, size, mtime), make)


def _build_array_file(store, rel: str, size: int) -> FileMap:
    kind = array_file_kind(rel)
    if size == 0:
        if kind == GENERIC:   # no byte to flag, yet TileDB cannot read it: said in an empty row
            return FileMap(rel, 0, (ByteRange(0, 0, UNDECODABLE, f"empty file: {array_tile_name(rel)} generic tile "
                                                                  f"header needs {HEADER_BASE_SIZE} bytes"),))
        return FileMap(rel, 0, ())
    try:
        data = store.read_file(rel)
    except OSError as exc:
        return FileMap(rel, size, (ByteRange(0, size, UNDECODABLE, f"file not read: {_reason(exc)}"),))
    size = len(data)
    regions: list[Region] = []
    try:
        if kind == GENERIC:
            name = array_tile_name(rel)
            claims, end = generic_tile_claims(data, rel, 0, name, lambda: _array_tile_summary(store, rel, name))
            claims = _with_aes_parts(data, rel, 0, name, claims)
            regions = [Region(name, 0, min(end, size))]
        elif kind == TEXT:
            claims = _text_claims(data, rel, _TEXT_ENTRY["." + rel.rsplit(".", 1)[1]])
        elif kind == CONSOLIDATED_COMMITS:
            claims = _consolidated_commits_claims(store, data, rel)
        else:
            claims = []
    except Exception as exc:  # a decoder bug must not hide the file: its bytes still show, flagged
        claims = [ByteRange(0, size, UNDECODABLE, f"not mapped: {_reason(exc)}")]
    return FileMap(rel, size, tuple(cover(claims, size)), tuple(regions))


def _array_tile_summary(store, rel: str, name: str) -> str:
    payload = store.generic_tile(rel, 0, name).payload
    if name == "array schema":
        s = store.schema(rel)
        return (f"array schema version {s.version}, {'dense' if s.dense else 'sparse'}, dimensions "
                f"{[d.name for d in s.dimensions]}, attributes {[a.name for a in s.attributes]}")
    if name == "enumeration":
        e = store.enumeration(rel)
        return f"enumeration {e.name!r} of {e.datatype.name}, {_values(e.values)}"
    if name == "array metadata":
        from ..format.array_metadata import parse_array_metadata
        records = parse_array_metadata(payload, rel)
        return f"{len(records)} records: " + ", ".join(
            f"{r.key} (deleted)" if r.deleted else f"{r.key}={_plain(r.value)}" for r in records[:16]) + (
            f" ... ({len(records) - 16} more)" if len(records) > 16 else "")
    if name in ("delete condition", "update condition"):
        return _condition_summary(store, payload, rel, name)
    if name == "group details":
        from .group_store import details_summary
        return details_summary(store.group_details(rel))
    from ..format.consolidated_fragment_metadata import parse_consolidated_fragment_metadata
    entries = parse_consolidated_fragment_metadata(payload, rel)
    return f"footers of {len(entries)} fragments: " + ", ".join(e.fragment_name for e in entries)


def _condition_summary(store, payload, rel: str, name: str) -> str:
    """The stored condition (TileDB stores the negation of the user's), values typed by the latest
    schema so that they read as values, not hex."""
    from ..format import commits
    parse = commits.parse_delete_condition if name == "delete condition" else commits.parse_update_condition
    commit = parse(payload, rel)
    types = {}
    try:
        s = store.schema(store.latest_schema_file())
        types = {f.name: f.datatype for f in (*s.dimensions, *s.attributes)}
    except Exception:
        pass
    out = "stored condition " + commits.condition_to_text(commit.condition, types)
    if commit.update_values:
        out += f", {len(commit.update_values)} update values"
    return out


def _text_claims(data, rel: str, entry: str) -> list[ByteRange]:
    """One row per line, its newline included; a line that is not UTF-8 is undecodable on its own
    (TileDB reads each line apart, so the next ones still count)."""
    data = bytes(data)
    claims = []
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        end = len(data) if nl < 0 else nl + 1
        raw = data[pos:end].rstrip(b"\n")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            claims.append(ByteRange(pos, end, UNDECODABLE, f"{entry}: line is not valid UTF-8 at byte {pos + e.start}"))
        else:
            claims.append(ByteRange(pos, end, entry, text) if text else
                          ByteRange(pos, end, "empty line", "skipped by TileDB"))
        pos = end
    return claims


def _consolidated_commits_claims(store, data, rel: str) -> list[ByteRange]:
    """Lines naming commits; a `.del` line is followed by u64 size and the whole `.del` file."""
    data = bytes(data)
    claims = []
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        end = len(data) if nl < 0 else nl + 1
        try:
            line = data[pos:end].rstrip(b"\n").decode("utf-8")
        except UnicodeDecodeError as e:
            # where the next entry starts cannot be told past an unreadable .del line
            claims.append(ByteRange(pos, len(data), UNDECODABLE,
                                    f"commit entry: marker path is not valid UTF-8 at byte {pos + e.start}"))
            break
        if not line:
            claims.append(ByteRange(pos, end, "empty line", "skipped by TileDB"))
            pos = end
            continue
        kind = line.rsplit("/", 1)[-1].rsplit(".", 1)[-1] if "." in line.rsplit("/", 1)[-1] else ""
        claims.append(ByteRange(pos, end, "commit entry", f"{line} ({kind or 'no extension'})"))
        pos = end
        if kind != "del":
            continue
        if pos + 8 > len(data):
            claims.append(ByteRange(pos, len(data), UNDECODABLE,
                                    f"embedded .del size at byte {pos}: 8 bytes needed, {len(data) - pos} remain"))
            break
        n = int.from_bytes(data[pos:pos + 8], "little")
        claims.append(ByteRange(pos, pos + 8, "embedded .del size", f"{n} bytes"))
        pos += 8
        if pos + n > len(data):
            claims.append(ByteRange(pos, len(data), UNDECODABLE,
                                    f"embedded .del file at byte {pos}: {n} bytes announced, {len(data) - pos} remain"))
            break
        blob = data[:pos + n]   # the embedded tile may not reach past its announced size
        name = "embedded delete condition"
        tile, _ = generic_tile_claims(blob, rel, pos, name,
                                      lambda at=pos, end=pos + n: _embedded_condition(store, data[at:end], rel))
        claims += _with_aes_parts(blob, rel, pos, name, tile)
        pos += n
    return claims


def _embedded_condition(store, blob: bytes, rel: str) -> str:
    from ..format.generic_tile import read_generic_tile
    payload = read_generic_tile(blob, 0, rel, "embedded delete condition", key=store.key).payload
    return _condition_summary(store, payload, rel, "delete condition")


def _with_aes_parts(data, rel: str, offset: int, name: str, claims: list[ByteRange]) -> list[ByteRange]:
    """`claims` with each chunk of an AES-256-GCM generic tile cut into its part headers (in the
    chunk metadata) and its parts' ciphertexts (in the chunk data), which are never encrypted
    themselves: what an encrypted array shows without its key."""
    try:
        header = read_generic_tile_header(data, offset, rel, name)
    except FormatError:
        return claims
    filters = header.filters.filters
    if header.encryption_type != 1 or not filters or filters[-1].id != 11:
        return claims
    from ..format.reversers.encryption import PART_HEADER, parse_parts
    chunks: list = []
    try:
        parse_chunk_headers(memoryview(data)[:header.end], rel, header.payload_offset, name, out=chunks)
    except FormatError:
        pass    # the chunks before the one that does not decode are still cut
    label = f"{name}: payload"
    inner = "+".join(header.filters.names[:-1]) or "no filters"
    out = {(c.start, c.structure): c for c in claims}
    for h in chunks:
        md = memoryview(data)[h.metadata_offset:h.data_offset]
        try:
            parts, md_end = parse_parts(md)
        except Exception:
            continue    # left as one metadata range; reversing the chunk says why
        out.pop((h.metadata_offset, f"{label}: chunk {h.index} metadata"), None)
        out.pop((h.data_offset, f"{label}: chunk {h.index} data"), None)
        n_md = sum(1 for p in parts if p.kind == "metadata")
        aes = f"{label}: chunk {h.index} AES-256-GCM"
        new = [ByteRange(h.metadata_offset, h.metadata_offset + 8, f"{aes} part counts",
                         f"{n_md} metadata parts, {len(parts) - n_md} data parts")]
        at = h.metadata_offset + 8
        for p in parts:
            new.append(ByteRange(at, at + PART_HEADER, f"{aes} {p.kind} part {p.index} header",
                                 f"plain_len {p.plain_len}, cipher_len {p.cipher_len}, iv {p.iv.hex()}, "
                                 f"tag {p.tag.hex()}"))
            at += PART_HEADER
        if h.metadata_offset + md_end < h.data_offset:
            new.append(ByteRange(h.metadata_offset + md_end, h.data_offset, UNDECODABLE,
                                 f"{label}: chunk {h.index} metadata: {h.data_offset - h.metadata_offset - md_end} "
                                 "bytes after the AES_256_GCM part headers, which must end it"))
        at = h.data_offset
        for p in parts:
            what = (f"filter metadata of {inner}" if p.kind == "metadata"
                    else f"filtered bytes ({inner}) of {h.unfiltered_size} unfiltered bytes")
            stop = min(at + p.cipher_len, h.end)
            if stop > at:
                new.append(ByteRange(at, stop, f"{aes} {p.kind} part {p.index}",
                                     f"{p.cipher_len} bytes of ciphertext: {what}"))
            at += p.cipher_len
        if at != h.end:
            new.append(ByteRange(min(at, h.end), h.end, UNDECODABLE,
                                 f"{label}: chunk {h.index} data: the AES_256_GCM parts total "
                                 f"{at - h.data_offset} bytes, the chunk data holds {h.filtered_size}"))
        for c in new:
            out[(c.start, c.structure)] = c
    return sorted(out.values(), key=lambda c: (c.start, c.end))
