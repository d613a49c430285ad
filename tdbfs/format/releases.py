"""Which TileDB release first wrote each format version, so the oldest that reads it: a release reads
every format up to the one it writes. From docs/format.md §6.2, checked against `format_version` in
tiledb/sm/misc/constants.cc at each release tag; TileDB's own format_spec/history.md ("Introduced in
TileDB ...") agrees from version 11 on."""

from __future__ import annotations

FIRST_RELEASE = {
    1: "1.4.0", 2: "1.4.1", 3: "1.6", 4: "1.7", 5: "2.0", 6: "2.1", 7: "2.2.0", 8: "2.2.3", 9: "2.3",
    10: "2.4", 11: "2.7", 12: "2.8", 13: "2.9", 14: "2.10", 15: "2.11", 16: "2.12", 17: "2.14", 18: "2.15",
    19: "2.16", 20: "2.17", 21: "2.19", 22: "2.25",
}


def oldest_reader(version: int) -> str | None:
    """'TileDB 2.25 or later' for format 22; None for a version no release wrote (23 is only on dev)."""
    release = FIRST_RELEASE.get(version)
    return f"TileDB {release} or later" if release else None
