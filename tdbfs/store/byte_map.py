"""Byte maps: every byte of every file of a fragment (those of the array-level files, schemas,
enumerations, commits, metadata, .meta, are array_file_map.py's), with the structure that holds it.

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
