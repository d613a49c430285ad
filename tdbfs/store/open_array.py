"""The one place that decides which layout a folder holds, and opens the store for it."""

from __future__ import annotations

from .array_store import ArrayStore, NotAnArrayError
from .legacy0x import open_legacy0x

__all__ = ["open_array", "NotAnArrayError"]


def open_array(path: str, cache_bytes: int = 512 << 20, key=None):
    """The store of the array (or TileDB 0.x workspace) at `path`.

    A TileDB 0.x array, workspace or group (GenomicsDB) gets a legacy0x store; anything else is
    opened as a TileDB array of format 1 to 22, which raises FileNotFoundError or NotAnArrayError
    when `path` holds none. Views and `check` serve whichever store they are given."""
    return open_legacy0x(path, cache_bytes) or ArrayStore(path, cache_bytes=cache_bytes, key=key)
