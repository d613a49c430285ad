"""Folder listings that `tdbfs mount` takes while its daemon starts, handed to the daemon in a memfd.

The daemon spends its first 0.15 s importing and mounting, on one core; listing the `__fragments/`
of 100,000 fragments (getdents, a name object each, sorting) takes about as long again, and the first
`ls fragments/` used to wait for it. The parent process waits for the mount anyway, so it lists the
folders meanwhile, on the other core, with the same storage code (no symlink followed, folders only
by d_type), and the daemon takes each listing once, if the folder has not changed since.

A listing is valid for the daemon only as `BaseStore.per_listing` would keep its own: the folder's
mtime, taken before the listing, is what it is now, and it was at least MTIME_TICK_NS old when it was
taken (a change in the same tick of the clock could otherwise keep the same mtime). Anything else, or a
parent that failed or did not finish writing, and the daemon lists the folder itself.

Layout of the memfd (little-endian): MAGIC, u64 length of the rest; then per folder: u32 length and
the folder's relative path (UTF-8), i64 time taken (ns), i64 mtime (ns), u32 count, u64 length and
the names joined by NUL (UTF-8, surrogateescape). The header is written last: a parent that stopped
half way leaves zeros there.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import time

from .joined_names import JoinedNames

MAGIC = b"tdbfs-prelisted1"
_HEAD = struct.Struct("<16sQ")
_FOLDER = struct.Struct("<qqIQ")
#: what a listing handed over may hold at most: 10 million names of 255 bytes, the parent being ours
MAX_BYTES = 1 << 32


def write_listings(fd: int, storage, folders) -> None:
    """List `folders` of `storage` (a LocalStorage) into the memfd `fd`. A folder that cannot be
    listed is left out: the daemon will list it and report what it finds."""
    parts = []
    for rel in folders:
        taken = time.time_ns()
        try:
            stamp = storage.stat(rel).mtime_ns
            names = storage.subdirs(rel)
        except OSError:
            continue
        blob = "\0".join(names).encode("utf-8", "surrogateescape")
        path = rel.encode("utf-8", "surrogateescape")
        parts += [struct.pack("<I", len(path)), path, _FOLDER.pack(taken, stamp, len(names), len(blob)), blob]
    size = sum(map(len, parts))
    # the parts as they are (4 a folder), not first joined into one more copy of the names
    if os.pwritev(fd, parts, _HEAD.size) != size:
        return  # no header: the daemon lists for itself
    os.pwrite(fd, _HEAD.pack(MAGIC, size), 0)


def read_listings(fd: int) -> dict[str, tuple[int, int, JoinedNames]]:
    """{folder: (time taken, mtime, names encoded)} from the memfd `fd`; {} when the parent did not
    finish. The names stay encoded and joined, as the memfd holds them: `ls fragments/` needs no str
    of them, nor an object each (store/fragment_listing.py decodes them on first use)."""
    head = os.pread(fd, _HEAD.size, 0)
    if len(head) != _HEAD.size:
        return {}
    magic, size = _HEAD.unpack(head)
    if magic != MAGIC or size > MAX_BYTES:
        return {}
    out, at, end = {}, _HEAD.size, _HEAD.size + size
    try:
        while at < end:
            (n,) = struct.unpack("<I", os.pread(fd, 4, at))
            if at + 4 + n + _FOLDER.size > end:
                return {}
            fixed = _pread_all(fd, n + _FOLDER.size, at + 4)
            rel = fixed[:n].decode("utf-8", "surrogateescape")
            taken, stamp, count, nbytes = _FOLDER.unpack_from(fixed, n)
            at += 4 + n + _FOLDER.size
            if at + nbytes > end:
                return {}
            # each folder's names read into one object and kept joined: 100,000 names split into as
            # many objects (and the body copied once more) took most of this read
            blob = _pread_all(fd, nbytes, at)
            encoded = JoinedNames.of(blob, count) if len(blob) == nbytes else None
            at += nbytes
            if encoded is None:
                return {}
            out[rel] = (taken, stamp, encoded)
    except (struct.error, UnicodeDecodeError):
        return {}
    return out


def _pread_all(fd: int, size: int, offset: int) -> bytes:
    parts, got = [], 0
    while got < size:
        chunk = os.pread(fd, size - got, offset + got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


class Prelisted:
    """The listings in the memfd `fd`, read on first use (the parent has had the daemon's start-up to
    write them), each given out once, and the memfd closed then: it holds as much as the listings."""

    def __init__(self, fd: int, folders, tick_ns: int):
        self._fd, self._folders, self._tick_ns = fd, frozenset(folders), tick_ns
        self._listings: dict | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the memfd unread: for a store that lists for itself."""
        with self._lock:
            if self._listings is None:
                self._listings = {}
                with contextlib.suppress(OSError):
                    os.close(self._fd)

    def take(self, rel: str, mtime_now) -> JoinedNames | None:
        """The names listed of folder `rel`, encoded (UTF-8, surrogateescape), if `mtime_now()` says it
        is as it was then; else None."""
        if rel not in self._folders:
            return None  # without reading the memfd: the parent may still be writing
        with self._lock:
            if self._listings is None:
                try:
                    self._listings = read_listings(self._fd)
                except OSError:
                    self._listings = {}
                with contextlib.suppress(OSError):
                    os.close(self._fd)
            hit = self._listings.pop(rel, None)
        if hit is None:
            return None
        taken, stamp, encoded = hit
        try:
            unchanged = taken - stamp >= self._tick_ns and mtime_now() == stamp
        except OSError:
            unchanged = False
        import logging   # here: `tdbfs mount` lists with this module, and logs nothing (~6 ms less)

        logging.getLogger("tdbfs.store").debug("%s/ as tdbfs mount listed it (%d names): %s", rel or ".",
                                               len(encoded), "taken" if unchanged else "changed since, listed again")
        return encoded if unchanged else None
