"""Reversing each filter of a pipeline on one chunk (docs/format.md §2.3).

The reversers themselves live in `reversers/`, one module per family of
filters, and `filter_registry` says which one undoes each filter id; this
module runs them in reverse pipeline order, works out the datatype each stage
saw, and turns a stage's complaint into a FormatError with the file and the
offset of the chunk.
"""

from __future__ import annotations

import importlib

from .datatypes import Datatype
from .errors import FormatError
from .filter_registry import filter_type
from .filters import FilterPipeline, FilterSpec
from .reversers.common import Stage, StageError

__all__ = ["UnsupportedFilter", "StageError", "reverser", "output_type", "reverse_chunk"]


class UnsupportedFilter(FormatError):
    """A filter this version of tdbfs cannot reverse; the filter is named in the message."""


# A reverser's module is imported the first time one of its filters is met: the codecs,
# hashlib, cryptography and Pillow cost a mount's start-up ~40 ms, and most arrays need
# one or two of them.
_loaded: dict = {}


def reverser(route: tuple[str, str]):
    fn = _loaded.get(route)
    if fn is None:
        module = importlib.import_module(f".reversers.{route[0]}", __package__)
        fn = _loaded[route] = getattr(module, route[1])
    return fn


def output_type(spec: FilterSpec, dtype: Datatype) -> Datatype:
    """The datatype a filter hands to the next one (§2.3, each filter's output_datatype in TileDB)."""
    entry = filter_type(spec.id)
    return entry.output_type(spec.options, dtype) if entry else dtype


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
        entry = filter_type(spec.id)
        if entry is None or entry.reverser is None:
            raise UnsupportedFilter(file, structure, header.offset,
                                    f"filter {spec.name} (id {spec.id}, position {i} of the pipeline) is not a filter TileDB defines")
        # Only the first filter of a var tile can carry the offsets (ctx.var_strings says the field's does).
        embedded = i == 0 and ctx.var_strings and entry.var_string_reverser is not None
        rev = reverser(entry.var_string_reverser if embedded else entry.reverser)
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
