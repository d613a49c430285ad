"""Byte maps: every byte of every file of a fragment (and of the array-level files: schemas,
enumerations, commits, metadata, .meta; `array_file_map`), with the structure that holds it.

A map is a partition of `[0, file size)` into ranges `(start, end, structure, detail)`:
the fields of each generic tile header, tile chunk counts, chunk headers, chunk metadata
and data, every footer field; bytes no structure claims are `unclaimed` (a gap, or
after the last structure), bytes two structures claim are `overlap`, and where a
structure stops decoding the rest of it is `undecodable` with the reason and offset.

Structures are placed from what the format layer decodes (generic tile headers, chunk
headers, the traced footer fields) and the fragment's own offsets lists; nothing here
assumes that structures are contiguous, which is what lets gaps and garbage show.
"""

from __future__ import annotations

import bisect
import operator
import re
from dataclasses import dataclass

from ..format import fragment_metadata as fm
from ..format.errors import FormatError
from ..format.generic_tile import ENCRYPTION_TYPES, HEADER_BASE_SIZE, HEADER_FIELDS, read_generic_tile_header
from ..format.datatypes import datatype_name
from ..format.tile import parse_chunk_headers
from ..lazy import np
from .fragment import Fragment
from .fragment_interface import DATA, VALIDITY, VAR

UNCLAIMED = "unclaimed"
OVERLAP = "overlap"
UNDECODABLE = "undecodable"
FOOTER = "footer"
METADATA_FILE = Fragment.METADATA_FILE


@dataclass(frozen=True)
class ByteRange:
    start: int
    end: int
    structure: str
    detail: str = ""

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Region:
    """A whole named structure of a file (a generic tile, the footer): what hex views dump."""

    name: str
    start: int
    end: int


@dataclass(frozen=True)
class FileMap:
    file: str                       # name inside the fragment folder
    size: int
    ranges: tuple[ByteRange, ...]   # ordered, contiguous, from 0 to size
    regions: tuple[Region, ...] = ()


# ---------------------------------------------------------------------------
# Claims -> partition

_START_END = operator.attrgetter("start", "end")


def cover(claims: list[ByteRange], size: int) -> list[ByteRange]:
    """The partition of [0, size) by `claims`: gaps become `unclaimed`, shared bytes `overlap`."""
    # a claim within the file is placed as it is (ranges are frozen): a map of a fragment's metadata
    # file has some 400, and making each anew twice took 1.8 of the map's 11-16 ms
    claims = [c if c.start >= 0 and c.end <= size
              else ByteRange(max(c.start, 0), min(c.end, size), c.structure, c.detail)
              for c in claims if min(c.end, size) > max(c.start, 0)]
    claims.sort(key=_START_END)
    out: list[ByteRange] = []
    pos = 0
    for c in claims:
        if c.start > pos:
            out.append(_gap(pos, c.start, out[-1] if out else None, c))
            pos = c.start
        if c.start < pos:
            _overlap(out, c)
        if c.end > pos:
            out.append(c if c.start >= pos else ByteRange(pos, c.end, c.structure, c.detail))
            pos = c.end
    if pos < size:
        out.append(_gap(pos, size, out[-1] if out else None, None))
    return out


def _gap(start: int, end: int, before: ByteRange | None, after: ByteRange | None) -> ByteRange:
    if before is None and after is None:
        detail = "no structure of this file is known"
    elif after is None:
        detail = f"after the last structure ({before.structure}, which ends at byte {before.end})"
    elif before is None:
        detail = f"before the first structure ({after.structure}, at byte {after.start})"
    else:
        detail = f"gap between {before.structure} and {after.structure}"
    return ByteRange(start, end, UNCLAIMED, detail)


def _overlap(out: list[ByteRange], c: ByteRange) -> None:
    """Re-cut the rows already placed over [c.start, ...) so the bytes c shares with them read `overlap`."""
    lo, hi = c.start, min(c.end, out[-1].end)
    i = bisect.bisect_right([r.end for r in out], lo)
    new = out[:i]
    for r in out[i:]:
        if r.start < lo:
            new.append(ByteRange(r.start, lo, r.structure, r.detail))
        s, e = max(r.start, lo), min(r.end, hi)
        if s < e:
            first = r.detail if r.structure == OVERLAP else r.structure
            new.append(ByteRange(s, e, OVERLAP, f"{first} and {c.structure}"))
        if r.end > hi:
            new.append(ByteRange(max(r.start, hi), r.end, r.structure, r.detail))
    out[:] = new


# ---------------------------------------------------------------------------
# Tiles: u64 nchunks, then per chunk a 12-byte header, metadata, data (§2.2)

def tile_claims(data, file: str, offset: int, end: int, label: str, what: str, filters: str,
                base: int = 0) -> list[ByteRange]:
    """Claims of the tile occupying [offset, end) of a file whose bytes from `base` on are `data`.

    `label` prefixes every structure ("tile 3", "rtree"); `what` describes the tile once.
    Past the first thing that does not decode: one `undecodable` range up to `end`.
    """
    end = min(end, base + len(data))
    if end <= offset:
        return []
    view = memoryview(data)[:end - base]
    chunks: list = []
    claims: list[ByteRange] = []
    try:
        parse_chunk_headers(view, file, offset, label, base=base, out=chunks)
        error = None
    except FormatError as exc:
        error = exc
    if end - offset >= 8:
        nchunks = int.from_bytes(bytes(view[offset - base:offset - base + 8]), "little")
        claims.append(ByteRange(offset, offset + 8, f"{label}: nchunks", f"{nchunks} chunk{'' if nchunks == 1 else 's'}; {what}"))
    for h in chunks:
        claims.append(ByteRange(h.offset, h.metadata_offset, f"{label}: chunk {h.index} header",
                                f"unfiltered_size {h.unfiltered_size}, filtered_size {h.filtered_size}, "
                                f"metadata_size {h.metadata_size}"))
        if h.metadata_size:
            claims.append(ByteRange(h.metadata_offset, h.data_offset, f"{label}: chunk {h.index} metadata",
                                    f"{h.metadata_size} bytes of filter metadata ({filters})"))
        if h.filtered_size:
            claims.append(ByteRange(h.data_offset, h.end, f"{label}: chunk {h.index} data",
                                    f"{h.filtered_size} filtered bytes ({filters}) -> {h.unfiltered_size} bytes"))
    if error is not None:
        at = max([c.end for c in claims], default=offset)
        if at < end:
            claims.append(ByteRange(at, end, UNDECODABLE, f"{label}: {_reason(error)}"))
    return claims


def _reason(exc: Exception) -> str:
    if isinstance(exc, FormatError):
        where = f"{exc.within}, " if exc.within else ""
        return f"{exc.structure} at {where}byte {exc.offset}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


def _filters_text(pipeline) -> str:
    return "+".join(pipeline.names) or "no filters"


# ---------------------------------------------------------------------------
# Generic tiles (§2.1)

#: how a generic tile header field's value is shown, where not as a number
_HEADER_VALUE = {"datatype": datatype_name, "encryption_type": lambda v: ENCRYPTION_TYPES.get(v, f"UNKNOWN({v})")}


def generic_tile_claims(data, file: str, offset: int, name: str, summary=None) -> tuple[list[ByteRange], int]:
    """Claims of the generic tile at `offset` and where it ends (the file's end if it does not decode).

    `summary()`, when given, describes the decoded payload (called only if the header decodes).
    """
    size = len(data)
    claims = []
    head = bytes(data[offset:offset + HEADER_BASE_SIZE])
    for field, s, e in HEADER_FIELDS:
        if e > len(head):
            break
        value = int.from_bytes(head[s:e], "little")
        shown = _HEADER_VALUE.get(field, str)(value)
        claims.append(ByteRange(offset + s, offset + e, f"{name}: header.{field}", f"{field} = {shown}"))
    try:
        header = read_generic_tile_header(data, offset, file, name)
    except FormatError as exc:
        at = max([c.end for c in claims], default=offset)
        if at < size:
            claims.append(ByteRange(at, size, UNDECODABLE, f"{name}: {_reason(exc)}"))
        return claims, size
    if header.filter_pipeline_size:
        claims.append(ByteRange(offset + HEADER_BASE_SIZE, header.payload_offset, f"{name}: header.filter_pipeline",
                                f"max_chunk_size {header.filters.max_chunk_size}, filters "
                                f"{_filters_text(header.filters)}"))
    what = f"payload of {header.tile_size} bytes"
    if summary is not None:
        try:
            what += f": {summary()}"
        except Exception as exc:
            what += f" (not decoded: {_reason(exc)})"
    claims += tile_claims(data, file, header.payload_offset, header.end, f"{name}: payload", what,
                          _filters_text(header.filters))
    return claims, header.end


def _values(values, limit: int = 16) -> str:
    values = list(values)
    shown = " ".join(_plain(v) for v in values[:limit])
    more = f" ... ({len(values) - limit} more)" if len(values) > limit else ""
    return f"{len(values)} values [{shown}{more}]"


def _plain(v) -> str:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, (bytes, bytearray)):
        return repr(bytes(v))[1:]
    if isinstance(v, np.ndarray):
        return "(" + " ".join(str(x) for x in v.tolist()) + ")"
    return str(v)


# ---------------------------------------------------------------------------
# __fragment_metadata.tdb

_LIST_KINDS = ("tile_offsets", "tile_var_offsets", "tile_var_sizes", "tile_validity_offsets",
               "tile_min_offsets", "tile_max_offsets", "tile_sum_offsets", "tile_null_count_offsets",
               "tile_global_order_min_offsets", "tile_global_order_max_offsets")


def metadata_generic_tiles(frag: Fragment) -> list[tuple[str, int, object]]:
    """(name, offset, payload summary function) of every generic tile the footer points at, file order."""
    g = frag.footer().generic_tile_offsets
    fields = frag.fields()
    out = [("rtree", g.rtree, lambda: _rtree_summary(frag))]
    for kind in _LIST_KINDS:
        offsets = getattr(g, kind)
        for i, off in enumerate(offsets or ()):
            base = kind.removesuffix("_offsets") if kind not in ("tile_offsets", "tile_var_offsets") else kind
            label = fields[i].name if i < len(fields) and "global_order" not in kind else f"dimension {i}"
            out.append((f"{base}[{i}]", int(off), lambda kind=kind, i=i, label=label: f"{label}: "
                        + _list_summary(frag, kind, i)))
    if g.fragment_min_max_sum_null_count is not None:
        out.append(("fragment_min_max_sum_null_count", int(g.fragment_min_max_sum_null_count),
                    lambda: _values(f"{s.name}:min={_plain(s.min)},max={_plain(s.max)},sum={s.sum},"
                                    f"null_count={s.null_count}" for s in frag.fragment_min_max_sum_null_count())))
    if g.processed_conditions is not None:
        out.append(("processed_conditions", int(g.processed_conditions),
                    lambda: _values(frag.processed_conditions())))
    return sorted(out, key=lambda t: t[1])


def _rtree_summary(frag: Fragment) -> str:
    rt = frag.rtree()
    return f"R-tree, fanout {rt.fanout}, {len(rt.levels)} levels of {[lv.mbr_num for lv in rt.levels]} MBRs"


def _list_summary(frag: Fragment, kind: str, i: int) -> str:
    if kind in ("tile_min_offsets", "tile_max_offsets"):
        return _values(frag.tile_min_max("min" if kind == "tile_min_offsets" else "max", i))
    if kind == "tile_sum_offsets":
        return _values(frag.tile_sums(i))
    if kind.startswith("tile_global_order"):
        return "tile global order bounds"
    return _values(frag._u64_list(kind, i))


UNREFERENCED = "unreferenced generic tile at"


def metadata_regions(frag: Fragment, data=None) -> list[Region]:
    """The whole structures of `__fragment_metadata.tdb` (each generic tile, the footer) in file
    order, found from generic tile headers alone, no payload decoded: cheap enough to list `hex/`
    of every fragment, and the frame the byte map fills in.

    A gap between them may hold a generic tile no footer field points at (TileDB 2.11's v15
    writer leaves its processed conditions tile there): it is a region too, since TileDB never
    reads it and a user should see it.
    """
    rel = frag._file(METADATA_FILE)
    if data is None:
        data = frag.store.read_file(rel)
    try:
        footer = frag.footer()
    except Exception:
        return _walk_generic_tiles(data, rel, "")[1]
    if footer.generic_tile_offsets is None:          # formats 1/2: one generic tile is the whole file
        return [Region("legacy_fragment_metadata", 0, _generic_tile_end(data, rel, 0, "legacy fragment metadata"))]
    regions: list[Region] = []
    seen: set = set()
    for name, off, _ in metadata_generic_tiles(frag):
        if off in seen or off >= len(data):
            continue
        seen.add(off)
        regions.append(Region(name, off, _generic_tile_end(data, rel, off, name)))
    regions.append(Region(FOOTER, footer.offset, len(data)))
    regions.sort(key=lambda r: r.start)
    found = []
    at = 0
    for r in regions + [Region("", len(data), len(data))]:
        off = at
        while off < r.start:                         # a gap: generic tiles that fit in it, back to back
            name = f"{UNREFERENCED} {off}"
            try:
                header = read_generic_tile_header(data, off, rel, name)
            except FormatError:
                break
            if header.end > r.start:
                break
            found.append(Region(name, off, header.end))
            off = header.end
        at = max(at, r.end)
    return sorted(regions + found, key=lambda r: r.start)


def _generic_tile_end(data, rel: str, offset: int, name: str) -> int:
    """Where the generic tile at `offset` ends; the file's end if its header does not decode."""
    try:
        return read_generic_tile_header(data, offset, rel, name).end
    except FormatError:
        return len(data)


def metadata_map(frag: Fragment, data) -> tuple[list[ByteRange], list[Region]]:
    rel = frag._file(METADATA_FILE)
    try:
        footer = frag.footer()
    except Exception as exc:
        return _walk_generic_tiles(data, rel, f"footer not decoded ({_reason(exc)})")
    if footer.generic_tile_offsets is None:          # formats 1/2: one generic tile is the whole file
        c, _ = generic_tile_claims(data, rel, 0, "legacy fragment metadata",
                                   lambda: f"format {footer.version} fragment metadata (§5.7)")
        return c, metadata_regions(frag, data)
    claims: list[ByteRange] = []
    named: dict[int, str] = {}
    summaries = {}
    for name, off, summary in metadata_generic_tiles(frag):
        if off in named:         # two footer entries naming one tile: say so on the tile's first range
            claims.append(ByteRange(off, off, name, f"same generic tile as {named[off]}"))
            continue
        named[off] = name
        summaries[name] = summary
    regions = metadata_regions(frag, data)
    for r in regions:
        if r.name == FOOTER:
            claims += footer_claims(frag, data, footer)
        elif r.name.startswith(UNREFERENCED):
            claims += generic_tile_claims(data, rel, r.start, r.name,
                                          lambda: "no footer field points here, TileDB does not read it")[0]
        else:
            claims += generic_tile_claims(data, rel, r.start, r.name, summaries.get(r.name))[0]
    return claims, regions


def _walk_generic_tiles(data, rel: str, why: str) -> tuple[list[ByteRange], list[Region]]:
    """Without a footer: generic tiles one after another from byte 0, as TileDB writes them."""
    claims: list[ByteRange] = []
    regions: list[Region] = []
    off = 0
    while off < len(data):
        name = f"generic tile at {off}"
        try:
            read_generic_tile_header(data, off, rel, name)
        except FormatError as exc:
            claims.append(ByteRange(off, len(data), UNDECODABLE,
                                    f"{why}; no generic tile at byte {off}: {_reason(exc)}"))
            break
        c, end = generic_tile_claims(data, rel, off, name)
        claims += c
        regions.append(Region(name.replace(" ", "_"), off, end))
        off = end
    return claims, regions


_DIM_RANGE = re.compile(r"non-empty domain dimension (\d+) range$")


def footer_claims(frag: Fragment, data, footer) -> list[ByteRange]:
    """Every footer field at its bytes (the footer re-read with a trace), and the trailing footer_len."""
    rel = frag._file(METADATA_FILE)
    trace: list = []
    claims = []
    start, length = footer.offset, footer.footer_length
    try:
        fm.parse_footer(data, rel, frag.schema(), start, length, frag._name_version(), trace=trace)
    except FormatError as exc:     # cannot happen for a footer that parsed once; still mapped
        trace.append((UNDECODABLE, exc.offset, start + length))
    fields = frag.fields()
    for what, s, e in trace:
        if what == UNDECODABLE:
            claims.append(ByteRange(s, e, UNDECODABLE, "footer"))
            continue
        raw = bytes(data[s:e])
        m = _DIM_RANGE.search(what)
        if m and footer.non_empty_domain is not None:
            lo, hi = footer.non_empty_domain[int(m.group(1))]
            claims.append(ByteRange(s, e, f"footer: {what}", f"[{_plain(lo)}, {_plain(hi)}]"))
        elif (what.startswith("file_") or what.endswith("generic tile offsets")) and e - s > 8:
            name = what.removesuffix(" generic tile offsets")
            values = np.frombuffer(raw, "<u8")
            for i, v in enumerate(values.tolist()):
                label = fields[i].name if i < len(fields) else ""
                claims.append(ByteRange(s + 8 * i, s + 8 * i + 8, f"footer: {name}[{i}]", f"{v} ({label})"))
        elif what == "array schema name" or e - s > 8:
            claims.append(ByteRange(s, e, f"footer: {what}", raw.decode("utf-8", "backslashreplace")
                                    if what == "array schema name" else f"{e - s} bytes"))
        else:
            claims.append(ByteRange(s, e, f"footer: {what}", str(int.from_bytes(raw, "little"))))
    end = start + length
    if end + 8 <= len(data) and fm.footer_has_length_field(frag.schema(), frag._name_version() or footer.version):
        claims.append(ByteRange(end, end + 8, "footer: footer_len", f"{length} (footer starts at byte {start})"))
    return claims


# ---------------------------------------------------------------------------
# Data files

def _streams(field) -> list[str]:
    return [DATA] + ([VAR] if field.var_sized else []) + ([VALIDITY] if field.nullable else [])


_SUFFIX = {DATA: ".tdb", VAR: "_var.tdb", VALIDITY: "_validity.tdb"}


def data_file_owners(frag: Fragment) -> dict[str, tuple]:
    """Data file name -> (field, stream) for every stored field of the fragment."""
    return {f.stem + _SUFFIX[s]: (f, s) for f in frag.stored_fields() for s in _streams(f)}


def _offsets(frag: Fragment, field, stream: str):
    if stream == VAR:
        return frag.tile_var_offsets(field.idx), frag.footer().file_var_sizes[field.idx]
    if stream == VALIDITY:
        return frag.tile_validity_offsets(field.idx), frag.footer().file_validity_sizes[field.idx]
    return frag.tile_offsets(field.idx), frag.footer().file_sizes[field.idx]


def data_file_claims(frag: Fragment, name: str, size: int, field, stream: str) -> list[ByteRange]:
    rel = frag._file(name)
    offsets, file_size = _offsets(frag, field, stream)
    offsets = [int(x) for x in offsets]
    pipeline = frag.pipeline(field, stream)
    filters = _filters_text(pipeline) + ("+AES_256_GCM" if frag.encrypted() else "")
    data = frag.store.read_file(rel)
    claims: list[ByteRange] = []
    kind = {DATA: "offsets" if field.var_sized else "data", VAR: "var data", VALIDITY: "validity"}[stream]
    for k, start in enumerate(offsets):
        end = offsets[k + 1] if k + 1 < len(offsets) else int(file_size)
        what = f"{field.name} {kind} tile {k} of {len(offsets)}, bytes {start}-{end} by the fragment metadata"
        if end > size:
            what += f" (the file ends at {size})"
        try:
            what += f", {frag.tile_cell_num(k)} cells"
        except Exception:
            pass
        claims += tile_claims(data, rel, start, max(start, end), f"tile {k}", what, filters)
    if int(file_size) != size:
        note = f"the footer's size of this file is {int(file_size)} bytes, it has {size}"
        claims.append(ByteRange(min(int(file_size), size), min(int(file_size), size), "file size", note))
    return claims


# ---------------------------------------------------------------------------
# Entry points

def fragment_file_names(frag: Fragment) -> list[str]:
    return [n for n, _ in frag.files()]


def file_map(frag: Fragment, name: str) -> FileMap:
    """The byte map of one file of the fragment folder, computed once per file size. Built in one pass
    of the store: each file it reads is one version (stat once, not once per generic tile)."""
    rel = frag._file(name)
    with frag.store.one_pass():
        size = frag.store.file_size(rel)

        def make():
            m = _build(frag, name, size)
            return m, 350 * len(m.ranges) + 200  # measured with tracemalloc: ~350 B a range, strings included

        return frag.store.cache.get_or_make(("byte_map", frag.store.path, frag.rel, frag.cache_token(), name, size),
                                            make)


def _build(frag: Fragment, name: str, size: int) -> FileMap:
    regions: list[Region] = []
    if name == METADATA_FILE:
        claims, regions = metadata_map(frag, frag.store.read_file(frag._file(name)))
    else:
        try:
            owners = data_file_owners(frag)
        except Exception as exc:
            claims = [ByteRange(0, size, UNDECODABLE, f"fragment metadata not decoded: {_reason(exc)}")]
        else:
            if name in owners:
                field, stream = owners[name]
                try:
                    claims = data_file_claims(frag, name, size, field, stream)
                except Exception as exc:
                    claims = [ByteRange(0, size, UNDECODABLE, f"tile offsets of {name} not decoded: {_reason(exc)}")]
            else:
                claims = []
    # Zero-length claims carry notes (file size mismatch, shared tiles): attach them to the row they touch.
    notes = [c for c in claims if c.start == c.end]
    ranges = cover([c for c in claims if c.end > c.start], size)
    for n in notes:
        i = min(bisect.bisect_right([r.start for r in ranges], n.start) - 1, len(ranges) - 1)
        if i >= 0:
            r = ranges[i]
            ranges[i] = ByteRange(r.start, r.end, r.structure, (r.detail + "; " if r.detail else "") + n.detail)
    return FileMap(name, size, tuple(ranges), tuple(regions))


# ---------------------------------------------------------------------------
# Array-level files: schemas, enumerations, commit files, array metadata, .meta files
#
# Each is one generic tile (schemas, enumerations, .del/.upd, __meta files, .meta), a text
# file of lines (.vac, .ign, .con with its embedded .del files), or an empty marker (.wrt,
# .ok). Which one is told by the file's place and extension alone, so that listing layout/ and
# hex/ reads no byte.

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
