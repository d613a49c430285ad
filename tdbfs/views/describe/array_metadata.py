"""Array metadata."""

from __future__ import annotations

from ...format.array_metadata import MetadataRecord
from ...format.schema import plain


def describe_metadata_record(rec: MetadataRecord) -> dict:
    out = {"key": rec.key, "deleted": rec.deleted}
    if not rec.deleted:
        out["type"] = rec.value_type.name
        out["count"] = rec.value_count
        out["value"] = plain(rec.value)
        out["value_hex"] = rec.raw.hex()
    return out


def describe_merged_metadata(merged: dict[str, MetadataRecord]) -> dict:
    """The merged view as `key → {type, count, value}`."""
    return {k: {"type": r.value_type.name, "count": r.value_count, "value": plain(r.value)}
            for k, r in merged.items()}
