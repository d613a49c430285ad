"""Filtered tiles (docs/format.md §2.2-§2.3): chunk headers, and reversing a pipeline per chunk.

A tile is `u64 nchunks` then per chunk `u32 unfiltered_len, u32 filtered_data_len,
u32 metadata_len, metadata, data`. Each chunk is unfiltered on its own by running
the pipeline's filters from last to first over (metadata, data).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..lazy import np
from .cursor import Cursor
from .datatypes import Datatype, DATATYPES
from .errors import FormatError
from .errors import safety_net
from .filters import FilterPipeline
from . import filter_reversal, zstd_tile

CHUNK_HEADER_SIZE = 12
_CHUNK_HEADER = struct.Struct("<3I")  # unfiltered length, filtered data length, metadata length


@dataclass(frozen=True)
class ChunkHeader:
    index: int
    offset: int               # file offset of the chunk's 12-byte header
    unfiltered_size: int
    filtered_size: int
    metadata_size: int

    @property
    def metadata_offset(self) -> int:
        return self.offset + CHUNK_HEADER_SIZE

    @property
    def data_offset(self) -> int:
        return self.metadata_offset + self.metadata_size

    @property
    def end(self) -> int:
        return self.data_offset + self.filtered_size


@dataclass(frozen=True)
class ChunkRecord:
    """What reversing one chunk found: its header, and per filter stage what that stage recorded."""

    header: ChunkHeader
    stages: tuple[dict, ...]


@dataclass(frozen=True)
class DecodedTile:
    data: bytes | bytearray   # bytearray from the ZSTD fast path (zstd_tile); never written to
    chunks: tuple[ChunkRecord, ...]
    checksum_failures: tuple[str, ...] = ()
    # Var strings under RLE/DICTIONARY (§3.4): the uint64 tile-relative offsets the
    # filter rebuilt while decoding the var tile (one per cell), else None.
    offsets: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class FilterContext:
    """What the filters need to know about the stream they reverse."""

    datatype: Datatype        # type of the stream entering the first filter
    cell_size: int            # the tile's cell size (classic RLE needs it)
    version: int              # format version of the fragment or generic tile
    var_strings: bool = False  # var data of an ASCII/UTF-8 field whose RLE/DICTIONARY embeds the offsets
    cell_num: int | None = None  # cells of the tile, when known (bounds the offsets var strings rebuild)
    key: object = field(default=None, repr=False, compare=False)  # EncryptionKey for AES-256-GCM, never shown


UINT8 = DATATYPES[6]
UINT64 = DATATYPES[10]
CHAR = DATATYPES[4]


@safety_net("tile", offset_arg="offset")
def parse_chunk_headers(data, file: str, offset: int, structure: str = "tile", base: int = 0,
                        out: list | None = None) -> list[ChunkHeader]:
    """Chunk headers of the tile starting at `offset` in `data`; lengths checked against `data`.

    `data` holds the file's bytes from file offset `base` on; header offsets are
    file offsets. This reads only headers, so unfiltered sizes are known without decoding.
    `out`, when given, receives each whole chunk as it is read, so a caller (byte maps)
    keeps the chunks before a corrupt one.
    """
    cur = Cursor(data, file, structure, base=base, pos=offset - base)
    nchunks = cur.u64_count(CHUNK_HEADER_SIZE, "tile chunk count", "tile chunks")
    headers = [] if out is None else out
    data, size = cur.data, len(cur.data)
    for i in range(nchunks):
        at = cur.offset
        if 0 <= cur.pos and cur.pos + CHUNK_HEADER_SIZE <= size:
            # the three lengths at once: a tile has thousands of chunks, and a message for each field
            # read one by one cost more than the reading (only a short header needs them)
            unfiltered, filtered, md_len = _CHUNK_HEADER.unpack_from(data, cur.pos)
            cur.pos += CHUNK_HEADER_SIZE
        else:
            unfiltered = cur.u32(f"chunk {i} unfiltered length")
            filtered = cur.u32(f"chunk {i} filtered data length")
            md_len = cur.u32(f"chunk {i} metadata length")
        if md_len + filtered > cur.remaining:  # blame the length fields, not the bytes after them
            raise cur.error(f"chunk {i} metadata and data ({md_len} + {filtered} bytes) need more than the "
                            f"{cur.remaining} bytes that remain", offset=at - base + 4)
        cur.pos += md_len + filtered
        headers.append(ChunkHeader(i, at, unfiltered, filtered, md_len))
    return headers


def tile_end(headers: list[ChunkHeader], offset: int) -> int:
    return headers[-1].end if headers else offset + 8


@safety_net("tile", offset_arg="offset")
def unfilter_tile(data, file: str, offset: int, pipeline: FilterPipeline, ctx: FilterContext,
                  structure: str = "tile", expected_size: int | None = None,
                  headers: list[ChunkHeader] | None = None, base: int = 0, pool=None, share=None) -> DecodedTile:
    """Reverse `pipeline` on every chunk of the tile at `offset`; the unfiltered bytes and a record.

    `expected_size`, when known from fragment metadata, bounds all output so
    that a corrupt length cannot make us allocate or decompress more than that.
    A tile of ZSTD alone whose size is expected decodes through `zstd_tile` into one buffer (a bytearray), its
    chunks shared with a thread of `pool` (an Executor) when the tile is big, and offered through
    `share(work)` to whoever else asks for it meanwhile; any other tile, or one that does not decode
    there, goes chunk by chunk through the filters.
    """
    if headers is None:
        headers = parse_chunk_headers(data, file, offset, structure, base)
    total = sum(h.unfiltered_size for h in headers)
    if expected_size is not None and total != expected_size:
        raise FormatError(file, structure, _first_wrong_length(headers, expected_size, offset),
                          f"chunks hold {total} unfiltered bytes but the fragment metadata expects {expected_size}")
    # the fast path allocates the whole tile before decoding: only a size the fragment metadata vouches
    # for may size it (a generic tile's chunk lengths alone could claim terabytes)
    if expected_size is not None and zstd_tile.applies(pipeline, ctx):
        fast = zstd_tile.decode(data, headers, base, total, pool, share)
        if fast is not None:
            out, stages = fast
            return DecodedTile(out, tuple(ChunkRecord(h, s) for h, s in zip(headers, stages)))
    view = memoryview(data)
    outputs = []
    records = []
    failures = []
    offsets = []
    for h in headers:
        md = view[h.metadata_offset - base:h.data_offset - base]
        chunk = view[h.data_offset - base:h.end - base]
        out, stages, bad = filter_reversal.reverse_chunk(md, chunk, h, pipeline, ctx, file, structure)
        for stage in stages:
            if "_offsets" in stage:  # var strings: offsets rebuilt from the chunk (one chunk per tile)
                offsets.append(stage.pop("_offsets"))
        if len(out) != h.unfiltered_size:
            raise FormatError(file, structure, h.offset,
                              f"chunk {h.index} unfiltered to {len(out)} bytes, its header says {h.unfiltered_size}")
        outputs.append(out)
        records.append(ChunkRecord(h, tuple(stages)))
        failures.extend(bad)
    result = outputs[0] if len(outputs) == 1 else b"".join(outputs)
    rebuilt = None
    if offsets:
        if len(offsets) != len(headers):
            raise FormatError(file, structure, offset, f"offsets were rebuilt for {len(offsets)} of the "
                                                       f"{len(headers)} chunks of a var-string tile")
        rebuilt = _join_offsets(offsets, outputs)
    return DecodedTile(bytes(result), tuple(records), tuple(failures), rebuilt)


def _first_wrong_length(headers: list[ChunkHeader], expected: int, offset: int) -> int:
    """Offset of the unfiltered-length field that first takes the running total past `expected`
    (or of the last chunk's, when the total falls short): where a damaged length most likely is."""
    running = 0
    for h in headers:
        running += h.unfiltered_size
        if running > expected:
            return h.offset
    return headers[-1].offset if headers else offset


def _join_offsets(parts, outputs) -> bytes:
    """Per-chunk offsets made relative to the whole tile (TileDB writes one chunk; more is tolerated)."""
    if len(parts) == 1:
        return parts[0].astype("<u8", copy=False).tobytes()
    shifts = np.cumsum([0] + [len(o) for o in outputs[:-1]], dtype=np.uint64)
    return np.concatenate([p + s for p, s in zip(parts, shifts)]).astype("<u8").tobytes()


def empty_offsets(cell_num: int) -> bytes:
    """Offsets of a var-string tile whose var data has no chunk: every cell is the empty string."""
    return bytes(8 * cell_num)
