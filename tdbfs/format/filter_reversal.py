"""Reversing each filter of a pipeline on one chunk (FORMAT.md §2.3).

The reversers themselves live in `reversers/`, one module per family of
filters; this module routes each filter id to its reverser, works out the
datatype each stage saw, and turns a stage's complaint into a FormatError
with the file and the offset of the chunk.
"""

from __future__ import annotations

from .datatypes import BY_NAME, Datatype
from .errors import FormatError
from .filters import FilterPipeline, FilterSpec
from .reversers.checksums import reverse_checksum
from .reversers.common import Stage, StageError
from .reversers.compressors import reverse_compressor, reverse_rle
from .reversers.noop import reverse_noop
from .reversers.shuffles import reverse_bitshuffle, reverse_byteshuffle
from .reversers.bit_width import reverse_bit_width
from .reversers.deltas import reverse_delta, reverse_double_delta, reverse_positive_delta
from .reversers.scale_float import reverse_scale_float
from .reversers.webp import reverse_webp
from .reversers.xor import reverse_xor
from .reversers.encryption import reverse_aes256gcm
from .reversers.var_strings import reverse_dictionary, reverse_var_strings

__all__ = ["UnsupportedFilter", "StageError", "REVERSERS", "output_type", "reverse_chunk"]


class UnsupportedFilter(FormatError):
    """A filter this version of tdbfs cannot reverse; the filter is named in the message."""


REVERSERS = {
    0: reverse_noop,
    1: reverse_compressor, 2: reverse_compressor, 3: reverse_compressor, 5: reverse_compressor,
    4: reverse_rle,
    9: reverse_byteshuffle,
    6: reverse_double_delta, 19: reverse_delta, 10: reverse_positive_delta,
    7: reverse_bit_width, 8: reverse_bitshuffle, 15: reverse_scale_float, 16: reverse_xor, 18: reverse_webp,
    12: reverse_checksum, 13: reverse_checksum,
    11: reverse_aes256gcm,
    14: reverse_dictionary,
}


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
        rev = REVERSERS.get(spec.id)
        if rev is None:
            raise UnsupportedFilter(file, structure, header.offset,
                                    f"filter {spec.name} (id {spec.id}, position {i} of the pipeline) is not a filter TileDB defines")
        if spec.id == 4 and i == 0 and ctx.var_strings:
            rev = reverse_var_strings  # var-string RLE (§3.4), not classic RLE; it also rebuilds the offsets
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
