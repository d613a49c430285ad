"""Generic tiles (docs/format.md §2.1): the self-describing container of every metadata structure."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .cursor import Cursor
from .datatypes import DATATYPES, datatype_name
from .errors import FormatError
from .errors import safety_net
from .filter_registry import MAX_COMPRESSOR, compressor_name, filter_id
from .filters import FilterPipeline, parse_pipeline
from .tile import ChunkHeader, ChunkRecord, FilterContext, parse_chunk_headers, tile_end, unfilter_tile, CHAR
from .reversers.common import StageError
from .reversers.encryption import NO_KEY_MESSAGE, EncryptedError, PartHeader, parse_parts

HEADER_BASE_SIZE = 34
#: (field, start, end) of the fixed header fields, relative to the tile; the filter pipeline follows.
HEADER_FIELDS = (("version", 0, 4), ("persisted_size", 4, 12), ("tile_size", 12, 20), ("datatype", 20, 21),
                 ("cell_size", 21, 29), ("encryption_type", 29, 30), ("filter_pipeline_size", 30, 34))
EXPERIMENTAL_VERSION_BIT = 0x80000000
_FIXED_FIELDS = struct.Struct("<IQQBQBI")  # HEADER_FIELDS, in order


@dataclass(frozen=True)
class GenericTileHeader:
    offset: int                 # file offset of the header
    version: int
    persisted_size: int
    tile_size: int
    datatype: int
    cell_size: int
    encryption_type: int
    filter_pipeline_size: int
    filters: FilterPipeline

    @property
    def header_size(self) -> int:
        return HEADER_BASE_SIZE + self.filter_pipeline_size

    @property
    def payload_offset(self) -> int:
        return self.offset + self.header_size

    @property
    def end(self) -> int:
        return self.payload_offset + self.persisted_size


@dataclass(frozen=True)
class GenericTile:
    header: GenericTileHeader
    payload: bytes
    chunks: tuple[ChunkRecord, ...]
    checksum_failures: tuple[str, ...] = ()

    @property
    def end(self) -> int:
        return self.header.end


#: Newest format version a released TileDB writes or is about to (§6.2).
MAX_KNOWN_VERSION = 23
#: TileDB <= 1.3 header: u64 compressed_size, u64 tile_size, u8 datatype, u64 cell_size, u8 compressor, i32 level.
PRE_FORMAT_HEADER_SIZE = 30


def pre_format_header(data, offset: int = 0) -> dict | None:
    """The fields of a TileDB <= 1.3 (pre-format-1) generic tile header, if the bytes at `offset` are one (§2.1).

    Such a header has no version field and is followed by one compressed blob
    that ends the file; that is what is checked, with plausible datatype and
    compressor bytes.
    """
    if len(data) - offset < PRE_FORMAT_HEADER_SIZE:
        return None
    compressed, tile_size, dtype, cell_size, compressor, level = struct.unpack_from("<QQBQBi", data, offset)
    if not _pre_format_fits(compressed, dtype, cell_size, compressor, len(data) - offset):
        return None
    return {"compressed_size": compressed, "tile_size": tile_size, "datatype": datatype_name(dtype),
            "cell_size": cell_size, "compressor": compressor_name(compressor), "level": level}


def _pre_format_fits(compressed: int, dtype: int, cell_size: int, compressor: int, size: int) -> bool:
    return PRE_FORMAT_HEADER_SIZE + compressed == size and dtype <= 43 and compressor <= MAX_COMPRESSOR and cell_size > 0


def is_whole_file_tile(head: bytes, size: int) -> bool:
    """Whether `head`, the first HEADER_BASE_SIZE bytes of a file of `size` bytes, starts one generic tile
    that ends exactly where the file ends, as TileDB writes a schema file: format 1 on, a header with a
    version whose filter pipeline and persisted sizes add up to the file; before (TileDB 1.3) the older
    30-byte header whose compressed size does. What tells a TileDB 1.x/2.x `__array_schema.tdb` from a
    TileDB 0.x one, which starts with the array name's length and the name."""
    if len(head) >= HEADER_BASE_SIZE:
        version, persisted, _, _, _, _, pipeline = _FIXED_FIELDS.unpack_from(head, 0)
        if version >= 1 and HEADER_BASE_SIZE + pipeline + persisted == size:
            return True
    if len(head) >= PRE_FORMAT_HEADER_SIZE:
        compressed, _, dtype, cell_size, compressor, _ = struct.unpack_from("<QQBQBi", head, 0)
        return _pre_format_fits(compressed, dtype, cell_size, compressor, size)
    return False


def _refuse_pre_format(data, offset: int, file: str, structure: str) -> None:
    old = pre_format_header(data, offset)
    if old is not None:
        raise FormatError(file, f"{structure} generic tile header", offset,
                          "pre-format generic tile (TileDB <= 1.3): the old 30-byte header without a version field "
                          f"(compressed_size {old['compressed_size']}, tile_size {old['tile_size']}, compressor "
                          f"{old['compressor']}); format version 1 (TileDB 1.4) replaced it and TileDB refuses "
                          "such arrays, so it is not decoded")


@safety_net("generic tile header", offset_arg="offset")
def read_generic_tile_header(data, offset: int, file: str, structure: str) -> GenericTileHeader:
    try:
        header = _read_header(data, offset, file, structure)
    except FormatError:
        _refuse_pre_format(data, offset, file, structure)
        raise
    if MAX_KNOWN_VERSION < header.version < EXPERIMENTAL_VERSION_BIT:
        _refuse_pre_format(data, offset, file, structure)
    return header


def _read_header(data, offset: int, file: str, structure: str) -> GenericTileHeader:
    cur = Cursor(data, file, f"{structure} generic tile header", pos=offset)
    if cur.remaining >= HEADER_BASE_SIZE:
        # the fixed fields in one unpack: listing hex/ of a fragment reads some 30 of these headers
        version, persisted, tile_size, dtype, cell_size, encryption, fps = _FIXED_FIELDS.unpack_from(cur.data, offset)
        cur.pos += HEADER_BASE_SIZE
    else:  # field by field, so that the error names the field cut short
        version = cur.u32("version")
        persisted = cur.u64("persisted_size")
        tile_size = cur.u64("tile_size")
        dtype = cur.u8("datatype")
        cell_size = cur.u64("cell_size")
        encryption = cur.u8("encryption_type")
        fps = cur.u32("filter_pipeline_size")
    if fps > cur.remaining:   # the length is the number that is wrong: reported where it is
        raise cur.error(f"filter_pipeline_size is {fps} bytes but only {cur.remaining} remain in the file",
                        offset=offset + 30)
    pipe_cur = cur.sub(fps, f"{structure} generic tile filter pipeline")
    filters = parse_pipeline(pipe_cur, version)
    if pipe_cur.remaining:
        raise pipe_cur.error(f"filter pipeline is {fps} bytes but its filters end after {pipe_cur.pos}")
    if cur.remaining < persisted:
        raise cur.error(f"persisted_size is {persisted} bytes but only {cur.remaining} remain in the file",
                        offset=offset + 4)
    return GenericTileHeader(offset, version, persisted, tile_size, dtype, cell_size, encryption, fps, filters)


@safety_net("generic tile", offset_arg="offset")
def read_generic_tile(data, offset: int, file: str, structure: str, key=None) -> GenericTile:
    """Decode the generic tile at `offset` of `data` (the file's bytes) into its payload.

    `key` (an EncryptionKey) decrypts tiles whose header says AES-256-GCM; their
    pipeline then ends with the AES_256_GCM filter (§2.1), reversed like any other.
    """
    header = read_generic_tile_header(data, offset, file, structure)
    check_encryption(header, file, structure, key)
    view = memoryview(data)[:header.end]
    headers = parse_chunk_headers(view, file, header.payload_offset, f"{structure} generic tile")
    end = tile_end(headers, header.payload_offset)
    if end != header.end:
        raise FormatError(file, f"{structure} generic tile", header.payload_offset,
                          f"chunks end at byte {end} but persisted_size says {header.end}")
    total = sum(h.unfiltered_size for h in headers)
    if total != header.tile_size:   # blame the header's field, before any chunk is decompressed
        raise FormatError(file, f"{structure} generic tile header", header.offset + 12,
                          f"tile_size is {header.tile_size} but the chunks hold {total} unfiltered bytes")
    dt = DATATYPES.get(header.datatype, CHAR)
    ctx = FilterContext(dt, header.cell_size, header.version, key=key)
    decoded = unfilter_tile(view, file, header.payload_offset, header.filters, ctx,
                            f"{structure} generic tile", expected_size=header.tile_size, headers=headers)
    return GenericTile(header, decoded.data, decoded.chunks, decoded.checksum_failures)


ENCRYPTION_TYPES = {0: "NONE", 1: "AES_256_GCM"}
_AES_256_GCM = filter_id("AES_256_GCM")


def check_encryption(header: GenericTileHeader, file: str, structure: str, key) -> None:
    """Refuse, naming the tile, an encryption this header announces and cannot be undone here."""
    where = f"{structure} generic tile header"
    if header.encryption_type not in ENCRYPTION_TYPES:
        raise FormatError(file, where, header.offset + 29, f"unknown encryption_type {header.encryption_type}")
    if header.encryption_type == 0:
        return
    if not any(f.id == _AES_256_GCM for f in header.filters.filters):
        raise FormatError(file, where, header.offset + 34,
                          "encryption_type is AES_256_GCM but the pipeline has no AES_256_GCM filter")
    if key is None:
        raise EncryptedError(file, where, header.offset, NO_KEY_MESSAGE)


@dataclass(frozen=True)
class EnvelopeChunk:
    """One chunk of a tile read without its key: its header and, under AES-256-GCM, its part headers."""

    header: ChunkHeader
    aes_parts: tuple[PartHeader, ...] | None    # None when the pipeline does not end with AES_256_GCM


@dataclass(frozen=True)
class GenericTileEnvelope:
    """What an encrypted generic tile shows without its key: none of it is encrypted."""

    header: GenericTileHeader
    chunks: tuple[EnvelopeChunk, ...]


@safety_net("generic tile", offset_arg="offset")
def read_generic_tile_envelope(data, offset: int, file: str, structure: str) -> GenericTileEnvelope:
    """The header, chunk headers and, per chunk, the AES-256-GCM part headers (lengths, IVs, tags)."""
    header = read_generic_tile_header(data, offset, file, structure)
    view = memoryview(data)[:header.end]
    encrypted = bool(header.filters.filters) and header.filters.filters[-1].id == _AES_256_GCM
    chunks = []
    for h in parse_chunk_headers(view, file, header.payload_offset, f"{structure} generic tile"):
        parts = None
        if encrypted:
            try:
                parts = tuple(parse_parts(view[h.metadata_offset:h.data_offset])[0])
            except StageError as exc:
                raise FormatError(file, f"{structure} generic tile", h.metadata_offset,
                                  f"chunk {h.index}, AES_256_GCM header: {exc}") from None
        chunks.append(EnvelopeChunk(h, parts))
    return GenericTileEnvelope(header, tuple(chunks))
