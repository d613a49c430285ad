"""Folder listings of an object store, as LIST requests give them, and how long each is trusted.

A LIST with the delimiter '/' gives one folder: its files (size, mtime, ETag) and its sub-folders
(common prefixes). A LIST without a delimiter gives every object under a prefix at once, in pages
of 1,000 (S3, GCS) or 5,000 (Azure) keys: the listing of the folder and of every folder under it.
An array's `__fragments/` is listed that way (docs/format.md §2: a fragment folder holds a handful
of files) the first time, and in a pass over its fragments, so that the first look at any fragment,
and a summary over all of them, needs no LIST of its own: 2,000 fragments of 5 files are 10 pages
instead of 2,001 requests. Whether the folder changed since is asked with a LIST of it alone, a page
per 1,000 fragments, not per 1,000 files (remote.py, `_tree_for`).

A listing is trusted for the TTL after its fetch. Within a pass (`Listings.pinned`, a summary's
render), every listing that was trusted when the pass began stays trusted until it ends: a render
of 2,000 fragments reads them as one listing showed them, not some from a listing fetched again
half way. A folder found missing is remembered too (for the TTL), so asking for `__meta/` of an
array that has none is not a LIST at every look.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass

from . import FOLDER, REGULAR, Entry

__all__ = ["Listing", "absent", "Listings", "flat_listing", "tree_listings"]


@dataclass(frozen=True)
class Listing:
    """One folder as one LIST saw it."""

    entries: tuple            # Entry, sorted by name
    by_name: dict             # name -> Entry
    etags: dict               # file name -> ETag (or '' when the store gives none)
    mtime_ns: int             # the folder's own: newest object's mtime + number of entries (see remote.py)
    fetched: float            # time.monotonic() of the fetch (or of the last failed re-fetch)
    absent: bool = False      # the store has nothing under this folder: kept so that it is not asked again


def absent() -> Listing:
    """What a folder the store has nothing under is kept as."""
    return Listing((), {}, {}, 0, time.monotonic(), absent=True)


def _listing(by_name: dict, etags: dict, newest: int, fetched: float) -> Listing | None:
    if not by_name:
        return None
    entries = tuple(by_name[n] for n in sorted(by_name))
    return Listing(entries, by_name, etags, newest + len(entries), fetched)


def flat_listing(path: str, infos: list[dict], mtime_ns, dir_mode: int, file_mode: int) -> Listing | None:
    """The listing of the folder `path` from what one delimited LIST gave; None when it holds nothing."""
    by_name: dict = {}
    etags: dict = {}
    newest = 0
    for info in infos:
        name = str(info.get("name", "")).rstrip("/")
        base = name.rpartition("/")[2]
        if not base or name == path.rstrip("/") or base in (".", ".."):
            continue
        if info.get("type") == "directory":
            by_name[base] = Entry(base, FOLDER, 0, 0, dir_mode)   # a folder's own mtime needs its own LIST
        elif base not in by_name:   # a key beside a prefix of the same name: the folder is what TileDB reads
            mtime = mtime_ns(info)
            by_name[base] = Entry(base, REGULAR, int(info.get("size") or 0), mtime, file_mode)
            etags[base] = str(info.get("ETag") or info.get("etag") or "")
            newest = max(newest, mtime)
    return _listing(by_name, etags, newest, time.monotonic())


def tree_listings(path: str, infos, mtime_ns, dir_mode: int, file_mode: int) -> dict[str, Listing]:
    """{folder: listing} of `path` and of every folder under it, from the objects one LIST without a
    delimiter gave (their full names): each the listing a delimited LIST of that folder gives (its mtime
    from its own files, as there: a folder's listing is the same whichever way it was fetched). Folders
    with nothing under them are left out."""
    root = path.rstrip("/")
    files: dict = {}     # folder -> {name: info}
    subdirs: dict = {}   # folder -> {name}
    for info in infos:
        name = str(info.get("name", "")).rstrip("/")
        if not name.startswith(root + "/") or info.get("type") == "directory":
            continue
        parts = name[len(root) + 1:].split("/")
        if any(p in ("", ".", "..") for p in parts):
            continue
        folder = root
        for part in parts[:-1]:
            subdirs.setdefault(folder, set()).add(part)
            folder = f"{folder}/{part}"
        files.setdefault(folder, {})[parts[-1]] = info
    fetched = time.monotonic()
    out: dict = {}
    for folder in set(files) | set(subdirs):
        by_name: dict = {}
        etags: dict = {}
        newest = 0
        for base in subdirs.get(folder, ()):
            by_name[base] = Entry(base, FOLDER, 0, 0, dir_mode)
        for base, info in files.get(folder, {}).items():
            if base not in by_name:   # a key beside a prefix of the same name: the folder is what TileDB reads
                mtime = mtime_ns(info)
                by_name[base] = Entry(base, REGULAR, int(info.get("size") or 0), mtime, file_mode)
                etags[base] = str(info.get("ETag") or info.get("etag") or "")
                newest = max(newest, mtime)
        found = _listing(by_name, etags, newest, fetched)
        if found is not None:
            out[folder] = found
    return out


class Listings:
    """The listings kept, least recently fetched dropped beyond `capacity`; which are trusted now."""

    def __init__(self, ttl_s: float, capacity: int):
        self.ttl_s = ttl_s
        self.capacity = capacity
        self._kept: OrderedDict[str, Listing] = OrderedDict()
        self._lock = threading.Lock()
        self._pass = threading.local()   # .since: time.monotonic() when this thread's pass began

    @contextmanager
    def pinned(self):
        """A pass: the listings trusted when it begins stay trusted in this thread until it ends."""
        outer = getattr(self._pass, "since", None) is not None
        if not outer:
            self._pass.since = time.monotonic()
        try:
            yield
        finally:
            if not outer:
                self._pass.since = None

    def pass_began(self) -> float | None:
        """time.monotonic() when this thread's pass began; None outside a pass."""
        return getattr(self._pass, "since", None)

    def get(self, path: str) -> Listing | None:
        """The listing kept for `path` (`absent()` for a folder found missing), trusted or not; None if none."""
        with self._lock:
            return self._kept.get(path)

    def trusted(self, kept: Listing) -> bool:
        now = time.monotonic()
        if now - kept.fetched < self.ttl_s:
            return True
        since = getattr(self._pass, "since", None)
        return since is not None and kept.fetched + self.ttl_s > since

    def put(self, found: dict[str, Listing]) -> None:
        with self._lock:
            for path, listing in found.items():
                self._kept[path] = listing
                self._kept.move_to_end(path)
            while len(self._kept) > self.capacity:
                self._kept.popitem(last=False)

    def drop_under(self, path: str, keep) -> None:
        """Forget the listings of folders under `path` that are not in `keep` (gone since the last tree)."""
        prefix = path.rstrip("/") + "/"
        with self._lock:
            for p in [p for p in self._kept if p.startswith(prefix) and p not in keep]:
                del self._kept[p]
