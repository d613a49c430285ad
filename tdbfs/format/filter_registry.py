"""Every filter type TileDB defines, one entry each: the single table the rest of tdbfs asks by id.

TileDB keeps the same facts in its `FilterType` enum (tiledb/sm/enums/filter_type.h)
and builds filters from stored bytes in one factory (tiledb/sm/filter/filter_create.cc).
Here one frozen `FilterType` per id holds what decoding needs to know about it:
its name, how its option bytes read, which reverser undoes it, the type it hands
on, and whether it carries a var-string tile's offsets. Adding a filter means one
entry here and, when it can be reversed, its reverser in `reversers/`.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Callable

from .datatypes import BY_NAME, Datatype, datatype_name

WEBP_FORMATS = {0: "NONE", 1: "RGB", 2: "BGR", 3: "RGBA", 4: "BGRA"}
_SIGNED_BY_SIZE = {1: "INT8", 2: "INT16", 4: "INT32", 8: "INT64"}


# -- option layouts: short or unknown bytes decode to {} and stay raw ---------------------------

def _no_options(raw: bytes) -> dict:
    return {}


def _compression_options(raw: bytes) -> dict:
    if len(raw) < 5:
        return {}
    comp, level = struct.unpack_from("<Bi", raw, 0)
    return {"compressor": compressor_name(comp), "level": level}


def _compression_reinterpret_options(raw: bytes) -> dict:
    """DOUBLE_DELTA (format >= 20) and DELTA (>= 19) add a reinterpret datatype byte, seen only in the size."""
    opts = _compression_options(raw)
    if opts and len(raw) >= 6:
        opts["reinterpret_type"] = datatype_name(raw[5])
    return opts


def _window_options(raw: bytes) -> dict:
    return {"max_window_size": struct.unpack_from("<I", raw, 0)[0]} if len(raw) >= 4 else {}


def _scale_float_options(raw: bytes) -> dict:
    if len(raw) < 24:
        return {}
    scale, offset, width = struct.unpack_from("<ddQ", raw, 0)
    return {"scale": scale, "offset": offset, "byte_width": width}


def _webp_options(raw: bytes) -> dict:
    if len(raw) < 8:
        return {}
    quality, fmt, lossless, y_ext, x_ext = struct.unpack_from("<fBBHH", raw, 0)
    return {"quality": quality, "format": WEBP_FORMATS.get(fmt, f"UNKNOWN({fmt})"),
            "lossless": bool(lossless), "y_extent": y_ext, "x_extent": x_ext}


# -- lossy filters: how far a reversed value may be from the one written (None: lossless, exact) ----------
# TileDB computes a tile's min/max/sum before the filters run (tiledb/sm/tile/tile_metadata_generator.cc), so
# the decoded values of a lossy filter match them only within the filter's precision.

def _scale_float_error(options: dict) -> float | None:
    """Each value is stored as round((x - offset) / scale) in a signed integer of `byte_width` bytes and read
    back as that integer * scale + offset (tiledb/sm/filter/float_scaling_filter.cc): within half a step of
    x, while (x - offset) / scale fits the integer; `value_range` says where it does."""
    scale = options.get("scale")
    if not isinstance(scale, float) or not math.isfinite(scale) or scale == 0.0:
        return math.inf
    return abs(scale) / 2


def _scale_float_range(options: dict) -> tuple[float, float] | None:
    """The values SCALE_FLOAT stores faithfully (up to its step): those whose integer fits `byte_width`."""
    scale, offset, width = options.get("scale"), options.get("offset"), options.get("byte_width")
    if width not in _SIGNED_BY_SIZE or not isinstance(scale, float) or not isinstance(offset, float):
        return None
    top = float(1 << (8 * width - 1))
    ends = (offset + scale * -top, offset + scale * (top - 1))
    return min(ends), max(ends)


def _webp_error(options: dict) -> float | None:
    # lossy WEBP has a quality, not a bound on any one value
    return None if options.get("lossless") else math.inf


# -- output-type rules (each filter's output_datatype in TileDB): options that do not say keep the type;
# -- the reverser then complains -------------------------------------------------------------------

def _signed_of_byte_width(options: dict, dtype: Datatype) -> Datatype:
    width = options.get("byte_width")
    return BY_NAME[_SIGNED_BY_SIZE[width]] if width in _SIGNED_BY_SIZE else dtype


def _signed_of_same_width(options: dict, dtype: Datatype) -> Datatype:
    return BY_NAME[_SIGNED_BY_SIZE[dtype.size]] if dtype.size in _SIGNED_BY_SIZE else dtype


def _reinterpret_type(options: dict, dtype: Datatype) -> Datatype:
    name = options.get("reinterpret_type")
    return BY_NAME[name] if name in BY_NAME and name != "ANY" else dtype


def _same_type(options: dict, dtype: Datatype) -> Datatype:
    return dtype


@dataclass(frozen=True)
class FilterType:
    """One filter type as TileDB stores it: the u8 id of a serialised filter and everything that id decides."""

    id: int
    name: str                                   # TileDB's name, as the views show it
    decode_options: Callable[[bytes], dict]     # option bytes -> options by name
    reverser: tuple[str, str] | None            # (module of reversers/, function); None: not reversible
    record: str                                 # what its stage record in tile_K.yaml holds
    output_type: Callable[[dict, Datatype], Datatype] = _same_type
    compressor: int | None = None               # its value in the Compressor enum, if it has one
    format1_compressor: bool = False            # TileDB 1.4 (format 1) counted it as the coords' compressor
    #: First in the var tile of a var-sized field of these types, from these format versions on, it
    #: replaces the offsets tile (stored empty) with the lengths it carries.
    embeds_var_offsets: tuple[tuple[str, int], ...] = ()
    var_string_reverser: tuple[str, str] | None = None   # the reverser when it embeds the offsets
    #: a lossy filter: options -> the largest distance of a reversed value from the value written (math.inf:
    #: no bound known), None for a filter that gives back exactly what it was given
    value_error: Callable[[dict], float | None] | None = None
    #: options -> (low, high) of the values the bound holds for, None: all values
    value_range: Callable[[dict], tuple[float, float] | None] | None = None

    def embeds_offsets(self, type_name: str, version: int) -> bool:
        return any(type_name == t and version >= since for t, since in self.embeds_var_offsets)


_PARTS = "per part its unfiltered and filtered sizes"
_ABSORBING = "metadata and data part counts; " + _PARTS

FILTER_TYPES: tuple[FilterType, ...] = (
    FilterType(0, "NONE", _no_options, ("noop", "reverse_noop"), "nothing", compressor=0),
    FilterType(1, "GZIP", _compression_options, ("compressors", "reverse_gzip"), _ABSORBING,
               compressor=1, format1_compressor=True),
    FilterType(2, "ZSTD", _compression_options, ("compressors", "reverse_zstd"), _ABSORBING,
               compressor=2, format1_compressor=True),
    FilterType(3, "LZ4", _compression_options, ("compressors", "reverse_lz4"), _ABSORBING,
               compressor=3, format1_compressor=True),
    FilterType(4, "RLE", _compression_options, ("compressors", "reverse_rle"),
               _ABSORBING + "; on var strings: runs, widths and sizes of the string encoding",
               compressor=4, format1_compressor=True,
               embeds_var_offsets=(("STRING_ASCII", 12), ("STRING_UTF8", 17)),
               var_string_reverser=("var_strings", "reverse_rle_strings")),
    FilterType(5, "BZIP2", _compression_options, ("compressors", "reverse_bzip2"), _ABSORBING,
               compressor=5, format1_compressor=True),
    FilterType(6, "DOUBLE_DELTA", _compression_reinterpret_options, ("deltas", "reverse_double_delta"),
               _ABSORBING + ", each part's first value, bit width and count; the element type",
               _reinterpret_type, compressor=6, format1_compressor=True),
    FilterType(7, "BIT_WIDTH_REDUCTION", _window_options, ("bit_width", "reverse_bit_width"),
               "element type, original length and per window its bit width and size"),
    FilterType(8, "BITSHUFFLE", _no_options, ("shuffles", "reverse_bitshuffle"),
               "part lengths, type size and which parts were shuffled"),
    FilterType(9, "BYTESHUFFLE", _no_options, ("shuffles", "reverse_byteshuffle"), "part lengths and type size"),
    FilterType(10, "POSITIVE_DELTA", _window_options, ("deltas", "reverse_positive_delta"),
               "element type and per window its base value and size"),
    FilterType(11, "AES_256_GCM", _no_options, ("encryption", "reverse_aes256gcm"),
               "per part its lengths, IV, tag and whether the tag checked"),
    FilterType(12, "CHECKSUM_MD5", _no_options, ("checksums", "reverse_md5"),
               "per part the stored and computed digests"),
    FilterType(13, "CHECKSUM_SHA256", _no_options, ("checksums", "reverse_sha256"),
               "per part the stored and computed digests"),
    FilterType(14, "DICTIONARY", _compression_options, ("var_strings", "reverse_dictionary"),
               "widths, sizes and first entries of the dictionary",
               compressor=7, embeds_var_offsets=(("STRING_ASCII", 13), ("STRING_UTF8", 17)),
               var_string_reverser=("var_strings", "reverse_dictionary_strings")),
    FilterType(15, "SCALE_FLOAT", _scale_float_options, ("scale_float", "reverse_scale_float"),
               "scale, offset, byte width, float type and part lengths", _signed_of_byte_width,
               value_error=_scale_float_error, value_range=_scale_float_range),
    FilterType(16, "XOR", _no_options, ("xor", "reverse_xor"), "part lengths and type size", _signed_of_same_width),
    # Written by no released TileDB (the bitsort filter was withdrawn); its id stays reserved.
    FilterType(17, "DEPRECATED_BITSORT", _no_options, None, "nothing: it is never reversed"),
    FilterType(18, "WEBP", _webp_options, ("webp", "reverse_webp"), "pixel format, lossless flag and image sizes",
               value_error=_webp_error),
    FilterType(19, "DELTA", _compression_reinterpret_options, ("deltas", "reverse_delta"),
               _ABSORBING + ", each part's first value and count; the element type",
               _reinterpret_type, compressor=8),
)

BY_ID: dict[int, FilterType] = {f.id: f for f in FILTER_TYPES}
BY_FILTER_NAME: dict[str, FilterType] = {f.name: f for f in FILTER_TYPES}
#: The internal Compressor enum, which compression filters store as their first option byte
#: (and TileDB <= 1.3 stored in its generic tile headers).
_COMPRESSOR_NAMES = {f.compressor: f.name for f in FILTER_TYPES if f.compressor is not None}
MAX_COMPRESSOR = max(_COMPRESSOR_NAMES)


def filter_type(fid: int) -> FilterType | None:
    """The entry of filter id `fid`, or None for an id TileDB does not define."""
    return BY_ID.get(fid)


def filter_name(fid: int) -> str:
    entry = BY_ID.get(fid)
    return entry.name if entry else f"UNKNOWN({fid})"


def filter_id(name: str) -> int:
    return BY_FILTER_NAME[name].id


def compressor_name(value: int) -> str:
    """The name of a Compressor enum value (a compression filter's first option byte)."""
    return _COMPRESSOR_NAMES.get(value, f"UNKNOWN({value})")


def decode_options(fid: int, raw: bytes) -> dict:
    """Options by name; unknown ids and short option bytes give {} (the bytes stay in raw_options)."""
    entry = BY_ID.get(fid)
    try:
        return entry.decode_options(raw) if entry else {}
    except struct.error:
        return {}


def offsets_embedded(first_filter: int | None, type_name: str, version: int) -> bool:
    """Whether a var tile whose pipeline starts with `first_filter` carries its own offsets."""
    entry = BY_ID.get(first_filter) if first_filter is not None else None
    return entry is not None and entry.embeds_offsets(type_name, version)


def value_tolerance(specs, low: float, high: float) -> float | None:
    """How far values reversed through the filters `specs` (FilterSpecs) may be from those written, when the
    written ones lie in [low, high]: 0.0 for a lossless pipeline, None when no bound is known (a lossy
    filter without one, or values outside the range it keeps)."""
    total = 0.0
    for spec in specs:
        entry = BY_ID.get(spec.id)
        error = entry.value_error(spec.options) if entry is not None and entry.value_error is not None else None
        if error is None:
            continue
        kept = entry.value_range(spec.options) if entry.value_range is not None else None
        if not math.isfinite(error) or (kept is not None and not kept[0] <= low <= high <= kept[1]):
            return None
        total += error
    return total
