"""Filter pipelines (FORMAT.md §3.1-§3.2): their serialisation and the filter table."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .cursor import Cursor

# Filter ids as serialised (§3.2). Names are TileDB's filter names.
FILTER_NAMES = {
    0: "NONE", 1: "GZIP", 2: "ZSTD", 3: "LZ4", 4: "RLE", 5: "BZIP2", 6: "DOUBLE_DELTA",
    7: "BIT_WIDTH_REDUCTION", 8: "BITSHUFFLE", 9: "BYTESHUFFLE", 10: "POSITIVE_DELTA",
    11: "AES_256_GCM", 12: "CHECKSUM_MD5", 13: "CHECKSUM_SHA256", 14: "DICTIONARY",
    15: "SCALE_FLOAT", 16: "XOR", 17: "DEPRECATED_BITSORT", 18: "WEBP", 19: "DELTA",
}
# The first option byte of compression filters is the internal Compressor enum, not the filter id.
COMPRESSOR_NAMES = {0: "NONE", 1: "GZIP", 2: "ZSTD", 3: "LZ4", 4: "RLE", 5: "BZIP2",
                    6: "DOUBLE_DELTA", 7: "DICTIONARY", 8: "DELTA"}
COMPRESSION_FILTERS = {1, 2, 3, 4, 5, 6, 14, 19}
WEBP_FORMATS = {0: "NONE", 1: "RGB", 2: "BGR", 3: "RGBA", 4: "BGRA"}


@dataclass(frozen=True)
class FilterSpec:
    """One serialised filter: its id, the options decoded by name, and the raw option bytes."""

    id: int
    options: dict = field(default_factory=dict, hash=False, compare=False)
    raw_options: bytes = b""

    @property
    def name(self) -> str:
        return FILTER_NAMES.get(self.id, f"UNKNOWN({self.id})")


@dataclass(frozen=True)
class FilterPipeline:
    max_chunk_size: int
    filters: tuple[FilterSpec, ...]

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.filters]


EMPTY_PIPELINE = FilterPipeline(65536, ())


def _decode_options(fid: int, raw: bytes, version: int) -> dict:
    """Options by name; unknown or short option bytes stay only in raw_options."""
    try:
        if fid in COMPRESSION_FILTERS and len(raw) >= 5:
            comp, level = struct.unpack_from("<Bi", raw, 0)
            opts = {"compressor": COMPRESSOR_NAMES.get(comp, f"UNKNOWN({comp})"), "level": level}
            if fid in (6, 19) and len(raw) >= 6:
                from .datatypes import datatype_name
                opts["reinterpret_type"] = datatype_name(raw[5])
            return opts
        if fid in (7, 10) and len(raw) >= 4:
            return {"max_window_size": struct.unpack_from("<I", raw, 0)[0]}
        if fid == 15 and len(raw) >= 24:
            scale, offset, width = struct.unpack_from("<ddQ", raw, 0)
            return {"scale": scale, "offset": offset, "byte_width": width}
        if fid == 18 and len(raw) >= 8:
            quality, fmt, lossless, y_ext, x_ext = struct.unpack_from("<fBBHH", raw, 0)
            return {"quality": quality, "format": WEBP_FORMATS.get(fmt, f"UNKNOWN({fmt})"),
                    "lossless": bool(lossless), "y_extent": y_ext, "x_extent": x_ext}
    except struct.error:
        pass
    return {}


def parse_pipeline(cur: Cursor, version: int) -> FilterPipeline:
    """Read one serialised pipeline (§3.1) at the cursor.

    `version` is the schema or generic tile version: it gates the reinterpret
    byte of DELTA (>=19) and DOUBLE_DELTA (>=20), which only shows in option sizes.
    """
    max_chunk_size = cur.u32("filter pipeline max_chunk_size")
    nfilters = cur.u32("filter pipeline filter count")
    cur.count(nfilters, 5, "filter pipeline filters")
    filters = []
    for _ in range(nfilters):
        fid = cur.u8("filter type")
        olen = cur.u32("filter options length")
        raw = cur.bytes(olen, f"options of filter {FILTER_NAMES.get(fid, fid)}")
        filters.append(FilterSpec(fid, _decode_options(fid, raw, version), raw))
    return FilterPipeline(max_chunk_size, tuple(filters))


def pipeline_to_dict(p: FilterPipeline) -> dict:
    """The pipeline as plain data for YAML views: filters by name with their options."""
    out = []
    for f in p.filters:
        entry = {"name": f.name, "id": f.id}
        if f.options:
            entry["options"] = dict(f.options)
        elif f.raw_options:
            entry["raw_options"] = f.raw_options.hex()
        out.append(entry)
    return {"max_chunk_size": p.max_chunk_size, "filters": out}
