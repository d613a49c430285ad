"""`tdbfs.salvage(...)`: the library's door to `tdbfs salvage` (tdbfs/salvaging/), apart from frontends.py
because it opens its source as `tdbfs.open` does (opening.py, which frontends.py must not import: the
objects it makes run their checks through frontends.py)."""

from __future__ import annotations


def salvage(src, dest, as_of: int | None = None, *, key=None, storage_options: dict | None = None,
            cache_mb: int = 512, progress=None):
    """`tdbfs salvage`: a new array at the local folder `dest` (which must not exist) that TileDB opens,
    holding every cell of the array at `src` (a path or an s3://, gs://, az:// URL, opened as `tdbfs.open`
    opens it) that survives, as read at `as_of` (ms since the epoch; None: now). `key`: an encrypted
    source's key, which encrypts the copy too. Returns the salvage Report (`exit_code`, `totals`,
    `to_dict()`: what `dest/salvage.yaml` holds); SalvageError when nothing could be written."""
    from ..salvaging import SalvageError, salvage_store
    from .opening import open as open_object

    obj = open_object(src, key=key, storage_options=storage_options, cache_mb=cache_mb)
    try:
        if obj.kind != "array":
            raise SalvageError(f"{obj.uri} is a {obj.kind}, not an array: salvage its member arrays one by one")
        return salvage_store(obj.store, dest, as_of, progress)
    finally:
        obj.close()
