"""Filter pipelines (docs/format.md §3.1-§3.2): their serialisation. What each filter id means is in filter_registry."""

from __future__ import annotations

from dataclasses import dataclass, field

from .cursor import Cursor
from .filter_registry import decode_options, filter_name, filter_type


@dataclass(frozen=True)
class FilterSpec:
    """One serialised filter: its id, the options decoded by name, and the raw option bytes."""

    id: int
    options: dict = field(default_factory=dict, hash=False, compare=False)
    raw_options: bytes = b""

    @property
    def name(self) -> str:
        return filter_name(self.id)


@dataclass(frozen=True)
class FilterPipeline:
    max_chunk_size: int
    filters: tuple[FilterSpec, ...]

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.filters]


EMPTY_PIPELINE = FilterPipeline(65536, ())


def parse_pipeline(cur: Cursor, version: int) -> FilterPipeline:
    """Read one serialised pipeline (§3.1) at the cursor.

    `version` is the schema or generic tile version. The reinterpret byte of DELTA
    (>=19) and DOUBLE_DELTA (>=20) only shows in option sizes, so the options are
    decoded by what their bytes hold, not by the version.
    """
    max_chunk_size = cur.u32("filter pipeline max_chunk_size")
    nfilters = cur.u32_count(5, "filter pipeline filter count", "filter pipeline filters")
    filters = []
    for _ in range(nfilters):
        fid = cur.u8("filter type")
        olen = cur.u32("filter options length")
        entry = filter_type(fid)
        raw = cur.bytes(olen, f"options of filter {entry.name if entry else fid}")
        filters.append(FilterSpec(fid, decode_options(fid, raw), raw))
    return FilterPipeline(max_chunk_size, tuple(filters))
