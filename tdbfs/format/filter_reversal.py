"""Reversing each filter of a pipeline on one chunk (FORMAT.md §2.3).

The reversers themselves live in `reversers/`, one module per family of
filters; this module routes each filter id to its reverser, works out the
datatype each stage saw, and turns a stage's complaint into a FormatError
with the file and the offset of the chunk.
"""

from __future__ import annotations

from .datatypes import Datatype
from .errors import FormatError
from .filters import FilterPipeline, FilterSpec
from .reversers.checksums import reverse_checksum
from .reversers.common import Stage, StageError
from .reversers.compressors import reverse_compressor, reverse_rle
from .reversers.noop import reverse_noop
from .reversers.shuffles import reverse_byteshuffle

__all__ = ["UnsupportedFilter", "StageError", "REVERSERS", "output_type", "reverse_chunk"]


class UnsupportedFilter(FormatError):
    """A filter this version of tdbfs cannot reverse; the filter is named in the message."""


REVERSERS = {
    0: reverse_noop,
    1: reverse_compressor, 2: reverse_compressor, 3: reverse_compressor, 5: reverse_compressor,
    4: reverse_rle,
    9: reverse_byteshuffle,
    12: reverse_checksum, 13: reverse_checksum,
}


def output_type(spec: FilterSpec, dtype: Datatype) -> Datatype:
    """The datatype a filter hands to the next one (§2.3): all filters reversed here keep it."""
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
                                    f"filter {spec.name} (id {spec.id}, position {i} of the pipeline) is not supported yet")
        if spec.id == 4 and ctx.var_strings:
            raise UnsupportedFilter(file, structure, header.offset,
                                    "filter RLE on var-sized string data (offsets rebuilt from the runs) "
                                    "is not supported yet")
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
