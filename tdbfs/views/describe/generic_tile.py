"""Generic tiles."""

from __future__ import annotations

from ...format.datatypes import datatype_name
from ...format.generic_tile import ENCRYPTION_TYPES, GenericTileEnvelope, GenericTileHeader
from .filters import describe_pipeline


def describe_generic_tile_header(h: GenericTileHeader) -> dict:
    return {
        "offset": h.offset, "version": h.version, "persisted_size": h.persisted_size,
        "tile_size": h.tile_size, "datatype": datatype_name(h.datatype), "cell_size": h.cell_size,
        "encryption_type": h.encryption_type, "filter_pipeline_size": h.filter_pipeline_size,
        "filter_pipeline": describe_pipeline(h.filters),
    }


def describe_generic_tile_envelope(env: GenericTileEnvelope) -> dict:
    """The header, then per chunk its sizes and, under AES-256-GCM, its part headers."""
    header = env.header
    out = describe_generic_tile_header(header)
    out["encryption"] = ENCRYPTION_TYPES.get(header.encryption_type, f"UNKNOWN({header.encryption_type})")
    chunks = []
    for c in env.chunks:
        h = c.header
        entry = {"index": h.index, "offset": h.offset, "unfiltered_size": h.unfiltered_size,
                 "filtered_size": h.filtered_size, "metadata_size": h.metadata_size}
        if c.aes_parts is not None:
            entry["aes_256_gcm_parts"] = [p.to_dict() for p in c.aes_parts]
        chunks.append(entry)
    out["chunks"] = chunks
    return out
