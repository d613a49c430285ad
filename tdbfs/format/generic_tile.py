"""Generic tiles (FORMAT.md §2.1): the self-describing container of every metadata structure."""

from __future__ import annotations

from dataclasses import dataclass

from .cursor import Cursor
from .datatypes import DATATYPES, datatype_name
from .errors import FormatError
from .filters import FilterPipeline, parse_pipeline, pipeline_to_dict
from .tile import ChunkRecord, FilterContext, parse_chunk_headers, tile_end, unfilter_tile, CHAR

HEADER_BASE_SIZE = 34


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


def read_generic_tile_header(data, offset: int, file: str, structure: str) -> GenericTileHeader:
    cur = Cursor(data, file, f"{structure} generic tile header", pos=offset)
    version = cur.u32("version")
    persisted = cur.u64("persisted_size")
    tile_size = cur.u64("tile_size")
    dtype = cur.u8("datatype")
    cell_size = cur.u64("cell_size")
    encryption = cur.u8("encryption_type")
    fps = cur.u32("filter_pipeline_size")
    pipe_cur = cur.sub(fps, f"{structure} generic tile filter pipeline")
    filters = parse_pipeline(pipe_cur, version)
    if pipe_cur.remaining:
        raise pipe_cur.error(f"filter pipeline is {fps} bytes but its filters end after {pipe_cur.pos}")
    if cur.remaining < persisted:
        raise cur.error(f"persisted_size is {persisted} bytes but only {cur.remaining} remain in the file")
    return GenericTileHeader(offset, version, persisted, tile_size, dtype, cell_size, encryption, fps, filters)


def read_generic_tile(data, offset: int, file: str, structure: str) -> GenericTile:
    """Decode the generic tile at `offset` of `data` (the file's bytes) into its payload."""
    header = read_generic_tile_header(data, offset, file, structure)
    view = memoryview(data)[:header.end]
    headers = parse_chunk_headers(view, file, header.payload_offset, f"{structure} generic tile")
    end = tile_end(headers, header.payload_offset)
    if end != header.end:
        raise FormatError(file, f"{structure} generic tile", header.payload_offset,
                          f"chunks end at byte {end} but persisted_size says {header.end}")
    dt = DATATYPES.get(header.datatype, CHAR)
    ctx = FilterContext(dt, header.cell_size, header.version)
    decoded = unfilter_tile(view, file, header.payload_offset, header.filters, ctx,
                            f"{structure} generic tile", expected_size=header.tile_size, headers=headers)
    return GenericTile(header, decoded.data, decoded.chunks, decoded.checksum_failures)


def header_to_dict(h: GenericTileHeader) -> dict:
    return {
        "offset": h.offset, "version": h.version, "persisted_size": h.persisted_size,
        "tile_size": h.tile_size, "datatype": datatype_name(h.datatype), "cell_size": h.cell_size,
        "encryption_type": h.encryption_type, "filter_pipeline_size": h.filter_pipeline_size,
        "filter_pipeline": pipeline_to_dict(h.filters),
    }
