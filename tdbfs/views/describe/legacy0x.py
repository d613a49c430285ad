"""TileDB 0.x: the schema, its per-field codecs, the book-keeping and the fragment names."""

from __future__ import annotations

from ...format.legacy0x.book_keeping import BookKeeping
from ...format.legacy0x.names import Legacy0xFragmentName
from ...format.legacy0x.schema import ORDERS, PRE_FILTERS, Codec, Legacy0xSchema


def describe_codec(codec: Codec) -> dict:
    out = {"compressor": codec.compressor_name, "raw": codec.raw}
    if codec.level is not None:
        out["level"] = codec.level
    if codec.pre_filter:
        out["pre_filter"] = PRE_FILTERS.get(codec.pre_filter, f"UNKNOWN({codec.pre_filter})")
    if codec.post_filter:
        out["post_filter"] = codec.post_filter
    return out


def describe_legacy0x_schema(s: Legacy0xSchema) -> dict:
    out = {"file": s.file, "layout": "TileDB 0.x",
           "form": "GenomicsDB fork (versioned)" if s.version is not None else "original Intel-HLS (no version tag)"}
    if s.version is not None:
        out["version"] = s.version
        out["workspace"] = s.workspace
    out.update({"array_name": s.array_name, "array_type": "dense" if s.dense else "sparse",
                "tile_order": ORDERS[s.tile_order], "cell_order": ORDERS[s.cell_order], "capacity": s.capacity})
    out["dimensions"] = [{"name": d, "type": s.coord_type.name, "domain": list(r),
                          "tile_extent": s.tile_extents[i] if s.tile_extents else None}
                         for i, (d, r) in enumerate(zip(s.dimensions, s.domain))]
    out["coordinates"] = {"type": s.coord_type.name, "compression": describe_codec(s.coords_compression)}
    attrs = []
    for a in s.attributes:
        entry = {"name": a.name, "type": a.datatype.name, "cell_val_num": "var" if a.var_sized else a.cell_val_num,
                 "compression": describe_codec(a.compression)}
        if a.offsets_compression is not None:
            entry["offsets_compression"] = describe_codec(a.offsets_compression)
        attrs.append(entry)
    out["attributes"] = attrs
    out["size"] = s.size
    return out


def describe_book_keeping(bk: BookKeeping, schema: Legacy0xSchema) -> dict:
    dims = schema.dimensions
    names = [a.name for a in schema.attributes]
    return {
        "file": bk.file,
        "gzip_size": bk.gzip_size,
        "decompressed_size": bk.size,
        "non_empty_domain": {d: list(r) for d, r in zip(dims, bk.non_empty_domain)},
        "mbr_num": len(bk.mbrs),
        "mbrs": [[list(r) for r in m] for m in bk.mbrs.tolist()],
        "bounding_coords_num": len(bk.bounding_coords),
        "bounding_coords": [{"first": list(b[0]), "last": list(b[1])} for b in bk.bounding_coords.tolist()],
        "tile_offsets": {n: v.tolist() for n, v in zip(names + ["__coords"], bk.tile_offsets)},
        "tile_var_offsets": {n: v.tolist() for n, v in zip(names, bk.tile_var_offsets)},
        "tile_var_sizes": {n: v.tolist() for n, v in zip(names, bk.tile_var_sizes)},
        "last_tile_cell_num": bk.last_tile_cell_num,
    }


def describe_legacy0x_name(n: Legacy0xFragmentName) -> dict:
    out = {"writer_id": n.writer_id, "writer_kind": n.writer_kind}
    if n.uuid:
        out["uuid"] = n.uuid
    if n.mac:
        out["mac"] = n.mac
    if n.thread_id is not None:
        out["thread_id"] = n.thread_id
    out["timestamp_ms"] = n.timestamp_ms
    out["timestamp_iso"] = n.timestamp_iso
    out["hidden"] = n.hidden
    return out
