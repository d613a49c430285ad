"""The one place that decides which layout a folder holds, and opens the store for it."""

from __future__ import annotations

from ..format.errors import FormatError
from ..format.generic_tile import HEADER_BASE_SIZE, is_whole_file_tile
from .array_store import (FRAGMENT_METADATA_FILE, GROUP_DIR, GROUP_FILE, LEGACY_SCHEMA, SCHEMA_DIR,
                          NotAnArrayError, open_tiledb_array)
from .storage import Storage
from .storage.opening import open_storage

__all__ = ["open_array", "open_location", "open_object", "open_tiledb_array", "NotAnArrayError"]

#: a TileDB 0.x workspace (GenomicsDB); the 0.x stores (legacy0x.py) are imported only for 0.x
#: folders, as they cost a mount's start-up ~10 ms
WORKSPACE_MARKER = "__tiledb_workspace.tdb"


def open_array(path: str, cache_bytes: int = 512 << 20, key=None, **settings):
    """The store of the array, group (or TileDB 0.x workspace) at `path` (see open_object, and its
    `settings`). FileNotFoundError when nothing is at `path`, NotAnArrayError when it holds neither."""
    try:
        storage = open_storage(path)
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"array not found: {exc.filename}") from None
    except NotADirectoryError as exc:
        raise NotAnArrayError(f"not a TileDB array (not a directory): {exc.filename}") from None
    return open_object(storage, cache_bytes, key, **settings)


def open_location(location, cache_bytes: int = 512 << 20, key=None, remote=None, **settings):
    """The store of what a Location (or the text of one: a local path or an object store's URL) holds
    (see open_object); `remote` (RemoteSettings) says how to reach a URL. open_array's errors, and
    RemoteOpenError for a URL."""
    from ..location import Location

    location = Location.of(location)
    if not location.remote:
        return open_array(location.path, cache_bytes, key, **settings)
    return open_object(open_storage(location, remote), cache_bytes, key, **settings)


def open_object(storage: Storage, cache_bytes: int = 512 << 20, key=None, cache=None, ancestors: tuple = (),
                drop_served: bool = True, listings=None):
    """The store of what `storage` holds.

    A TileDB 0.x array, workspace or group (GenomicsDB) gets a legacy0x store; a TileDB group
    (`__group/`, or only the `__tiledb_group.tdb` marker of groups before TileDB 2.9) a GroupStore,
    the marker alone being told from a 0.x group's by the layout of the arrays in it,
    whose `ancestors` are the groups shown above it; anything else is opened as a TileDB array of
    format 1 to 22, sharing `cache` when given. NotAnArrayError when it holds none of them. Views
    and `check` serve whichever store they are given. Set once here, never changed afterwards: a cache
    made for the store drops what it served unless `drop_served` is False (ByteLRU); `listings` are
    folder listings made before, which a TileDB array of format 1 to 22 takes (ArrayStore) and any
    other store leaves to its maker."""
    if storage.is_file(WORKSPACE_MARKER):
        from .legacy0x import Legacy0xWorkspaceStore
        return Legacy0xWorkspaceStore(storage, cache_bytes, "workspace", drop_served)
    if _is_legacy0x_array(storage):
        from .legacy0x import Legacy0xArrayStore
        return Legacy0xArrayStore(storage, cache_bytes, drop_served=drop_served)
    if storage.is_file(GROUP_FILE) and not storage.is_dir(GROUP_DIR) and _holds_legacy0x_arrays(storage):
        from .legacy0x import Legacy0xWorkspaceStore
        return Legacy0xWorkspaceStore(storage, cache_bytes, "group", drop_served)
    if storage.entry(GROUP_FILE) is not None or storage.is_dir(GROUP_DIR):
        from .group_store import GroupStore
        return GroupStore(storage, cache_bytes, cache=cache, key=key, ancestors=ancestors, drop_served=drop_served,
                          opener=open_object)
    return open_tiledb_array(storage, cache_bytes, key, cache, drop_served, listings)


#: arrays of a marker-only group looked at to tell a TileDB 0.x group from a TileDB group (2.x before 2.9)
_GROUP_ARRAYS_LOOKED_AT = 64


def _holds_legacy0x_arrays(storage: Storage) -> bool:
    """A folder with only the group marker, which TileDB 0.x groups and TileDB groups written before 2.9
    share: a 0.x group when the arrays in it (and in the marker-only groups in it) are 0.x arrays by
    their own layout and none is a TileDB 1.x/2.x array. A TileDB group may hold a 0.x array among
    others: it stays a TileDB group, and that member is opened as the 0.x array it is."""
    seen_0x = False
    budget = _GROUP_ARRAYS_LOOKED_AT

    def walk(folder: Storage, depth: int) -> bool:   # False: a TileDB array or group found
        nonlocal seen_0x, budget
        for name in folder.subdirs(""):
            if name.startswith(".") or budget <= 0:
                continue
            sub = folder.child(name)
            if sub.entry(SCHEMA_DIR) is not None or sub.entry(GROUP_DIR) is not None:
                return False
            if sub.is_file(LEGACY_SCHEMA):
                budget -= 1
                if not _is_legacy0x_array(sub):
                    return False
                seen_0x = True
            elif sub.is_file(GROUP_FILE) and depth < 16 and not walk(sub, depth + 1):
                return False
        return True

    return walk(storage, 0) and seen_0x


def _is_legacy0x_array(storage: Storage) -> bool:
    """A TileDB 0.x array: its schema file with no __schema/ beside it, told from a TileDB 1.x/2.x
    `__array_schema.tdb` by the bytes of the file itself (the fork's version tag; a generic tile
    whose header accounts for the whole file, docs/format.md §2.1, or TileDB 1.3's older one), else
    by the fragments' files, else by a complete 0.x decode."""
    if not storage.is_file(LEGACY_SCHEMA) or storage.is_dir(SCHEMA_DIR):
        return False
    from ..format.legacy0x.schema import parse_schema
    from .legacy0x import BOOK_KEEPING_FILE

    try:
        size = storage.file_size(LEGACY_SCHEMA)
        head = storage.pread(LEGACY_SCHEMA, 0, HEADER_BASE_SIZE)
        if len(head) >= 4 and int.from_bytes(head[:4], "little") >= 0x80000000:
            return True  # the fork's version tag
        if is_whole_file_tile(head, size):
            return False
        checked = 0
        for entry in storage.entries(""):
            if entry.is_dir and entry.name.lstrip(".").startswith("__"):
                if storage.is_file(f"{entry.name}/{BOOK_KEEPING_FILE}"):
                    return True
                if storage.is_file(f"{entry.name}/{FRAGMENT_METADATA_FILE}"):
                    return False
                checked += 1
                if checked >= 8:
                    break
        # No fragment tells: an original (untagged) 0.x schema decodes completely, a 1.x/2.x one does not.
        if size > 1 << 20:
            return False
        parse_schema(storage.read(LEGACY_SCHEMA))
        return True
    except (OSError, FormatError):
        return False
