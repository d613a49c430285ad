"""Byte-for-byte copies from the source (any storage the store reads) into the local folder being built,
and the commit markers that make TileDB read a fragment (format_spec/array_file_hierarchy.md;
tiledb/sm/array/array_directory.cc `load`):

- formats 12 on: `__fragments/<name>/` committed by an empty `__commits/<name>.wrt`;
- formats 5 to 11: `<name>/` at the array root committed by an empty `<name>.ok` beside it;
- formats 1 to 4: `<name>/` at the root, committed by its own `__fragment_metadata.tdb`.

A marker is written last, once every file of its folder is in place: TileDB fails to open an array
whose `.wrt` names a folder without its metadata file. It is written under a `.tmp` name (which TileDB
ignores) and renamed.
"""

from __future__ import annotations

import os

from ..format.names import try_parse_name
from ..store.array_store import COMMITS_DIR
from ..store.fragment_listing import FRAGMENTS_DIR

#: bytes read from the source per request
CHUNK = 16 << 20


def copy_file(store, rel: str, dest_root: str, to: str | None = None) -> int:
    """Copy the regular file `rel` of the source to `to` (default: the same relative path) under
    `dest_root`; the bytes copied. The size is taken once, before the copy: a file that grows meanwhile
    is copied as it was then."""
    size = store.file_size(rel)
    path = os.path.join(dest_root, to or rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    done = 0
    with open(path, "xb") as out:
        while done < size:
            data = store.storage.pread(rel, done, min(CHUNK, size - done))
            if not data:
                raise OSError(f"{rel}: the file ended at byte {done}, before its {size} bytes")
            out.write(data)
            done += len(data)
    return done


def write_file(dest_root: str, rel: str, data: bytes) -> None:
    path = os.path.join(dest_root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "xb") as out:
        out.write(data)


def copy_fragment(store, rel: str, dest_root: str) -> int:
    """Every regular file of the fragment folder `rel`, then its commit marker; the bytes copied."""
    os.makedirs(os.path.join(dest_root, rel), exist_ok=True)
    nbytes = 0
    for entry in store.entries(rel):
        if entry.is_file:
            nbytes += copy_file(store, f"{rel}/{entry.name}", dest_root)
    commit(dest_root, rel)
    return nbytes


def marker_of(rel: str) -> str | None:
    """The commit marker of the fragment folder `rel` (relative to the array), None for formats 1-4."""
    name = os.path.basename(rel)
    if rel.startswith(FRAGMENTS_DIR + "/"):
        return f"{COMMITS_DIR}/{name}.wrt"
    n = try_parse_name(name)
    if n is not None and n.assumed_format_version >= 5:
        return f"{name}.ok"
    return None


def commit(dest_root: str, rel: str) -> None:
    marker = marker_of(rel)
    if marker is None:
        return
    path = os.path.join(dest_root, marker)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path + ".tmp", "wb").close()
    os.replace(path + ".tmp", path)


def rename_fragment(dest_root: str, rel: str, t1: int) -> str:
    """Rename the fragment `rel` that TileDB wrote as `__t2_t2_<uuid>_<v>` (a write takes one time) to
    `__t1_t2_<uuid>_<v>`, with its marker: a fragment's time range is its name's, which no file in it
    repeats (format_spec/fragment.md), so the result reads as a fragment of [t1, t2]."""
    folder, name = os.path.split(rel)
    n = try_parse_name(name)
    if n is None or n.t1 == t1:
        return rel
    new = "_".join(["", "", str(t1)] + name.split("_")[3:])
    new_rel = f"{folder}/{new}" if folder else new
    old_marker, new_marker = marker_of(rel), marker_of(new_rel)
    os.rename(os.path.join(dest_root, rel), os.path.join(dest_root, new_rel))
    if old_marker is not None:
        os.rename(os.path.join(dest_root, old_marker), os.path.join(dest_root, new_marker))
    return new_rel
