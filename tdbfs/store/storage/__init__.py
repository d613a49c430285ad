"""Where an array's files live: the one interface the store reads them through.

A backend provides four primitives: list a folder (kind, size and mtime of each entry), stat one
path, read a byte range of a regular file and read a small file whole. Everything else here is
built on them once. Paths are relative to the storage's root, '/'-separated; none leaves the root.
A symbolic link is reported as one and never followed, and anything but a regular file is never
read: an array folder can hold a symlink to /etc planted as a fragment folder or a FIFO in place
of a data file.
"""

from __future__ import annotations

import contextlib
import errno
import stat
from abc import ABC, abstractmethod
from collections import namedtuple

__all__ = ["Entry", "FOLDER", "NotRegularError", "REGULAR", "Storage", "kind_of", "path_parts"]

#: the kinds of entries a folder can hold, as shown in views and problems
REGULAR = "file"
FOLDER = "folder"


def kind_of(mode: int) -> str:
    """What an entry is, in words ('file', 'folder', 'symbolic link', 'FIFO', ...)."""
    if stat.S_ISREG(mode):
        return REGULAR
    if stat.S_ISDIR(mode):
        return FOLDER
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    return "unknown kind of file"


class NotRegularError(OSError):
    """The entry exists but is not a regular file (or a path component is not a real folder): never opened."""

    def __init__(self, path: str, kind: str, target: str | None = None):
        what = f"a {kind}" + (f" (to {target})" if target is not None else "")
        super().__init__(errno.EINVAL, f"{path} is {what}, not a regular file: it is never opened", path)
        self.kind = kind
        self.target = target


class Entry(namedtuple("Entry", "name kind size mtime_ns mode target", defaults=(None,))):
    """One entry as `lstat` sees it (a symlink is a symlink, never what it points at): `name`, `kind`
    (kind_of(mode)), `size`, `mtime_ns`, `mode` (permission bits and type), and `target`, for a
    symbolic link, where it points (read with readlink, never followed).

    A named tuple, not a dataclass: `tdbfs mount` lists the fragments for its daemon with this module
    (mount/prelisted.py), and `dataclasses` with its `inspect` took 13 ms of that listing's start."""

    __slots__ = ()

    @property
    def is_file(self) -> bool:
        return self.kind == REGULAR

    @property
    def is_dir(self) -> bool:
        return self.kind == FOLDER

    @property
    def mtime(self) -> float:
        """The mtime in seconds, the very float `os.stat` gives (the mount's times must not move by a bit)."""
        sec, nsec = divmod(self.mtime_ns, 1_000_000_000)
        return sec + nsec * 1e-9


class Storage(ABC):
    """An array's files under one root: the four primitives a backend provides, and what is built on them."""

    #: the root as the user would name it; shown in summaries and messages
    uri: str
    #: requests sent and bytes read (counters.RequestCounters), for backends that count them
    counters = None
    #: requests worth sending at once (`prefetch_small`): 1 where a read costs no latency to hide (a local disk)
    concurrency = 1

    # -- the primitives --------------------------------------------------------------------
    @abstractmethod
    def entries(self, rel: str = "") -> list[Entry]:
        """Every entry of the folder `rel`, sorted by name; [] when there is no such folder."""

    @abstractmethod
    def stat(self, rel: str) -> Entry:
        """The entry at `rel` (the root for ''); FileNotFoundError when there is none, NotRegularError when a
        folder on the way is not a real one."""

    @abstractmethod
    def pread(self, rel: str, offset: int, size: int) -> bytes:
        """At most `size` bytes of the regular file `rel` from `offset`, never past its size: a length read
        from a damaged file never sizes an allocation beyond the file. NotRegularError for anything else."""

    @abstractmethod
    def read(self, rel: str) -> bytes:
        """The whole regular file `rel`; NotRegularError for anything else."""

    @abstractmethod
    def child(self, rel: str) -> "Storage":
        """The same storage rooted at the folder `rel` (a dimension label, an array of a workspace)."""

    def prefetch(self, ranges: list[tuple[str, int, int]], budget: int) -> None:
        """Start reading these (rel, offset, size) ranges ahead, holding at most `budget` bytes, for preads of
        exactly them that follow (store/prefetch.py); a new call drops what the last one left. Only backends
        with latency to hide do anything."""

    def prefetch_small(self, ranges: list[tuple[str, int, int]], budget: int) -> None:
        """As `prefetch`, for the small reads of a summary (the footers of many fragments): a plan of its own,
        which neither drops nor is dropped by the tiles'. Only backends with latency to hide do anything."""

    def list_tree(self, rel: str) -> None:
        """List the folder `rel` from now on with every folder under it at once, where a backend can (an object
        store: one paginated LIST without a delimiter instead of one LIST per folder), for a folder of many
        small folders that are each looked into (`__fragments/`). Nothing else changes."""

    def pinned(self):
        """A pass over many files (a summary's render): the listings trusted as it begins stay trusted in this
        thread until it ends, so it reads them as one listing showed them. A context manager."""
        return contextlib.nullcontext()

    def access_mask(self) -> int | None:
        """The read/execute bits (as `local.access_mask`) others may get in a view of this folder, where the
        storage has permissions of its own (a local folder); None where it has none (an object store)."""
        return None

    # -- built on them ---------------------------------------------------------------------
    def describe(self, rel: str = "") -> str:
        """`rel` as a user would name it, for messages."""
        return f"{self.uri}/{rel}" if rel else self.uri

    def names(self, rel: str = "") -> list[str]:
        """Names in the folder `rel`, whatever they are."""
        return [e.name for e in self.entries(rel)]

    def subdirs(self, rel: str = "") -> list[str]:
        """Names of the real folders (not symlinks to folders) in `rel`."""
        return [e.name for e in self.entries(rel) if e.is_dir]

    def regular_names(self, rel: str = "") -> list[str]:
        """Names of the regular files in `rel`."""
        return [e.name for e in self.entries(rel) if e.is_file]

    def entry(self, rel: str) -> Entry | None:
        """The entry at `rel`, or None when there is none."""
        try:
            return self.stat(rel)
        except (FileNotFoundError, NotADirectoryError, NotRegularError):
            return None

    def is_dir(self, rel: str) -> bool:
        e = self.entry(rel)
        return e is not None and e.is_dir

    def gone(self, rel: str) -> bool:
        """Whether nothing is at `rel` now. Only to tell that something found before has vanished: where it
        says False, `entry` decides what is there."""
        return self.entry(rel) is None

    def is_file(self, rel: str) -> bool:
        e = self.entry(rel)
        return e is not None and e.is_file

    def regular_entry(self, rel: str) -> Entry:
        """The entry of the regular file `rel`; NotRegularError (naming a link's target) for anything else."""
        e = self.stat(rel)
        if not e.is_file:
            raise NotRegularError(rel, e.kind, e.target)
        return e

    def file_size(self, rel: str) -> int:
        return self.regular_entry(rel).size


def path_parts(rel: str) -> list[str]:
    """The names along `rel`, refusing any path that would leave the root."""
    if rel.startswith("/"):
        raise FileNotFoundError(errno.ENOENT, "an absolute path is never followed out of the array", rel)
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise FileNotFoundError(errno.ENOENT, "'..' is never followed out of the array", rel)
    return parts
