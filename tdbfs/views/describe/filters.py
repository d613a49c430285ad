"""Filter pipelines."""

from __future__ import annotations

from ...format.filters import FilterPipeline


def describe_pipeline(p: FilterPipeline) -> dict:
    """Filters by name with their options; options tdbfs does not decode are shown as hex."""
    out = []
    for f in p.filters:
        entry = {"name": f.name, "id": f.id}
        if f.options:
            entry["options"] = dict(f.options)
        elif f.raw_options:
            entry["raw_options"] = f.raw_options.hex()
        out.append(entry)
    return {"max_chunk_size": p.max_chunk_size, "filters": out}
