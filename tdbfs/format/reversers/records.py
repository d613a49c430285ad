"""Keeping the stage records of tile_K.yaml readable when a tile has many parts or windows."""

from __future__ import annotations

SHOW_ALL = 64   # lists longer than this are cut to their first SHOW_FIRST entries
SHOW_FIRST = 8


def summarise(record: dict, key: str, total: int | None = None) -> None:
    """Long per-part/per-window lists stay readable in tile_K.yaml: the first few and a note."""
    items = record.get(key)
    total = len(items) if total is None and items is not None else total
    if items is not None and total > SHOW_ALL:
        record[key] = items[:SHOW_FIRST]
        record[f"{key}_shown"] = f"first {SHOW_FIRST} of {total}"
