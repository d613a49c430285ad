"""Reversing each filter of a pipeline on one chunk (FORMAT.md §2.3).

The reversers themselves live in `reversers/`, one module per family of
filters; this module routes each filter id to its reverser, works out the
datatype each stage saw, and turns a stage's complaint into a FormatError
with the file and the offset of the chunk.
"""

from __future__ import annotations

import importlib

from .datatypes import BY_NAME, Datatype
from .errors import FormatError
from .filters import FilterPipeline, FilterSpec
from .reversers.common import Stage, StageError

__all__ = ["UnsupportedFilter", "StageError", "reverser", "output_type", "reverse_chunk"]


class UnsupportedFilter(FormatError):
    """A filter this version of tdbfs cannot reverse; the filter is named in the message."""


# Filter id -> (module of reversers/, function). A module is imported the first time one
# of its filters is met: the codecs, hashlib, cryptography and Pillow cost a mount's
# start-up ~40 ms, and most arrays need one or two of them.
_ROUTES = {
    0: ("noop", "reverse_noop"),
    1: ("compressors", "reverse_compressor"), 2: ("compressors", "reverse_compressor"),
    3: ("compressors", "reverse_compressor"), 5: ("compressors", "reverse_compressor"),
    4: ("compressors", "reverse_rle"),
    9: ("shuffles", "reverse_byteshuffle"), 8: ("shuffles", "reverse_bitshuffle"),
    6: ("deltas", "reverse_double_delta"), 19: ("deltas", "reverse_delta"), 10: ("deltas", "reverse_positive_delta"),
    7: ("bit_width", "reverse_bit_width"),
    15: ("scale_float", "reverse_scale_float"),
    16: ("xor", "reverse_xor"),
    18: ("webp", "reverse_webp"),
    12: ("checksums", "reverse_checksum"), 13: ("checksums", "reverse_checksum"),
    11: ("encryption", "reverse_aes256gcm"),
    14: ("var_strings", "reverse_dictionary"),
}
#: RLE as the first filter of a var-string attribute or dimension (§3.4): not classic RLE.
_VAR_STRING_RLE = ("var_strings", "reverse_var_strings")
_loaded: dict = {}


def reverser(route: tuple[str, str]):
    fn = _loaded.get(route)
    if fn is None:
        module = importlib.import_module(f".reversers.{route[0]}", __package__)
        fn = _loaded[route] = getattr(module, route[1])
    return fn


_SIGNED_BY_SIZE = {1: "INT8", 2: "INT16", 4: "INT32", 8: "INT64"}


def output_type(spec: FilterSpec, dtype: Datatype) -> Datatype:
    """The datatype a filter hands to the next one (§2.3, each filter's output_datatype in TileDB):
    SCALE_FLOAT gives the signed integer of its byte width, XOR the signed integer of the
    same width, DELTA and DOUBLE_DELTA their reinterpret type unless it is ANY; the rest keep it.
    Options that do not say (short or invalid) keep the type; the reverser then complains."""
    if spec.id == 15 and spec.options.get("byte_width") in _SIGNED_BY_SIZE:
        return BY_NAME[_SIGNED_BY_SIZE[spec.options["byte_width"]]]
    if spec.id == 16 and dtype.size in _SIGNED_BY_SIZE:
        return BY_NAME[_SIGNED_BY_SIZE[dtype.size]]
    if spec.id in (6, 19):
        name = spec.options.get("reinterpret_type")
        if name in BY_NAME and name != "ANY":
            return BY_NAME[name]
    return dtype


def reverse_chunk(md: memoryview, data: memoryview, header, pipeline: FilterPipeline, ctx, file: str, structure: str):
    """Unfilter one chunk. Returns (bytes, stage records in pipeline order, checksum failures)."""
    types = [ctx.datatype]
    for spec in pipeline.filters:
        types.append(output_type(spec, types[-1]))
    limit = 2 * header.unfiltered_size + (1 << 20)
    stages: list[dict] = []
    failures: list[str] = []
    for i in range(len(pipeline.filters) - 1, -1, -1):
        spec = pipeline.filters[i]
        route = _ROUTES.get(spec.id)
        if route is None:
            raise UnsupportedFilter(file, structure, header.offset,
                                    f"filter {spec.name} (id {spec.id}, position {i} of the pipeline) is not a filter TileDB defines")
        rev = reverser(_VAR_STRING_RLE if spec.id == 4 and i == 0 and ctx.var_strings else route)
        try:
            md, data, record = rev(spec, md, data, Stage(types[i], limit, ctx))
        except StageError as exc:
            raise FormatError(file, structure, header.metadata_offset,
                              f"chunk {header.index}, filter {spec.name} (position {i}): {exc}") from None
        failures.extend(record.pop("_failures", []))
        stages.append({"filter": spec.name, "position": i, **record})
    if len(md):
        raise FormatError(file, structure, header.metadata_offset,
                          f"chunk {header.index}: {len(md)} metadata bytes left over after reversing every filter")
    stages.reverse()
    return data, stages, failures
