"""The `tdbfs` fsspec protocol: the tree a mount shows, read-only, to anything that takes fsspec URLs.

    fsspec.filesystem("tdbfs", location="s3://bucket/array", s3={...}).ls("fragments")
    pandas.read_csv("tdbfs::s3://bucket/array/fragments/F/cells.csv", storage_options={"s3": {...}})

Registered through the `fsspec.specs` entry point (pyproject.toml). A chained URL (`tdbfs::URL`,
fsspec's URL chaining) hands this filesystem the target's path and options (`fo`, `target_protocol`,
`target_options`); the array, group or workspace is the longest leading part of that path that holds
one, and the rest is the path in its tree. `tdbfs://URL` and `tdbfs://::URL` (the form pandas before
3.0 takes as a URL) work alike. Sizes are exact, reads are ranged: the same nodes as the mount serve
(views/tree.py), through library/tree.py.
"""

from __future__ import annotations

import errno
import posixpath
import threading
from collections import OrderedDict

from fsspec.spec import AbstractBufferedFile

try:  # fsspec's marker for a filesystem layered on another: a chained URL then gives it the whole path
    from fsspec.implementations.chained import ChainedFileSystem as _Base
except ImportError:  # older fsspec
    from fsspec.spec import AbstractFileSystem as _Base

from ..errors import NotFoundError
from ..store import NotAnArrayError
from ..location import SCHEMES

PROTOCOL = "tdbfs"


class TdbfsFileSystem(_Base):
    """The tree of one TileDB array, group or 0.x workspace, read-only.

    `location`: the array (a path or an s3://, gs://, az:// URL); else found from `fo`, the path a chained
    URL gives. `target_protocol`/`target_options` (chained URLs) or `s3=`, `gcs=`, `az=` (per protocol):
    the object store's fsspec options. `key`: an encrypted array's key. `cache_mb`: as tdbfs.open's."""

    protocol = PROTOCOL
    root_marker = ""

    def __init__(self, location=None, fo=None, target_protocol=None, target_options=None, key=None,
                 cache_mb: int = 512, **kwargs):
        options = {name: kwargs.pop(name) for name in list(kwargs) if name in SCHEMES and isinstance(kwargs[name], dict)}
        super().__init__(**kwargs)
        if target_protocol and target_protocol not in ("file", "local") and target_options:
            options[target_protocol] = dict(target_options)
        self._prefix = self._shown = ""   # the location's part of the paths callers pass; how ls shows it
        if location is not None:
            self.obj = _open(str(location), key, options, cache_mb)
            self._prefix = _bare(str(location))   # accepted in paths; names stay relative to the tree
        elif fo:
            self.obj, self._shown = _discover(_full(str(fo), target_protocol), key, options, cache_mb)
            self._prefix = _bare(self._shown)
        else:
            raise ValueError("the tdbfs filesystem needs location=ARRAY, or a chained URL (tdbfs::s3://bucket/array/...)")
        self.tree = self.obj.tree

    # -- paths: what callers pass (with the array's own prefix from a chained URL, or in the tree) --------
    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, (list, tuple)):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        for head in (f"{PROTOCOL}://::", f"{PROTOCOL}::", f"{PROTOCOL}://"):
            if path.startswith(head):
                path = path[len(head):]
                break
        return path.rstrip("/") if path != "/" else path

    @staticmethod
    def _get_kwargs_from_urls(path):
        # tdbfs://s3://bucket/array/... or tdbfs:///local/array/...: the rest is where the tree is found
        rest = TdbfsFileSystem._strip_protocol(path)
        return {"fo": rest} if rest and "::" not in path else {}

    def _inner(self, path) -> str:
        """The path in the tree of what a caller passes."""
        p = self._strip_protocol(path)
        p = _bare(p)
        if self._prefix and (p == self._prefix or p.startswith(self._prefix + "/")):
            p = p[len(self._prefix):]
        return p.strip("/")

    def _outer(self, inner: str) -> str:
        """The name ls/info give for a path of the tree: the caller's form."""
        if not self._shown:
            return inner
        return f"{self._shown}/{inner}" if inner else self._shown

    # -- reading --------------------------------------------------------------------------------
    def info(self, path, **kwargs):
        inner = self._inner(path)
        out = self.tree.info(inner)
        out["name"] = self._outer(inner)
        return out

    def ls(self, path="", detail=True, **kwargs):
        inner = self._inner(path)
        entries = []
        kind = self.tree.info(inner)["type"]
        if kind != "directory":
            entries = [self.info(path)]
        else:
            for name in self.tree.listdir(inner):
                sub = posixpath.join(inner, name) if inner else name
                entry = self.tree.info(sub)
                entry["name"] = self._outer(sub)
                entries.append(entry)
        return entries if detail else [e["name"] for e in entries]

    def cat_file(self, path, start=None, end=None, **kwargs):
        inner = self._inner(path)
        size = self.tree.size(inner)
        start = 0 if start is None else (max(0, size + start) if start < 0 else start)
        end = size if end is None else (max(0, size + end) if end < 0 else min(end, size))
        return self._read(inner, start, end)

    def _read(self, inner: str, start: int, end: int) -> bytes:
        from ..views.nodes import ViewError
        try:
            return self.tree.read_range(inner, start, end)
        except ViewError as exc:   # the mount's EIO: the reason is among the problems
            raise OSError(errno.EIO, f"{inner}: cannot be read: {exc}") from exc

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        if mode != "rb":
            raise PermissionError(errno.EROFS, "the tdbfs filesystem is read-only", path)
        inner = self._inner(path)
        return TreeFile(self, path, inner, self.tree.size(inner), block_size=block_size or "default",
                        cache_options=cache_options)

    def ukey(self, path):
        info = self.info(path)
        return f"{info['name']}:{info['size']}:{info.get('mtime', 0)}"

    def _rm(self, path):
        raise PermissionError(errno.EROFS, "the tdbfs filesystem is read-only", path)

    def mkdir(self, path, create_parents=True, **kwargs):
        raise PermissionError(errno.EROFS, "the tdbfs filesystem is read-only", path)

    makedirs = mkdir


class TreeFile(AbstractBufferedFile):
    """A file of the tree, read in ranges (a big cells.csv renders only the tiles a range covers)."""

    def __init__(self, fs: TdbfsFileSystem, path: str, inner: str, size: int, **kwargs):
        self._inner_path = inner
        super().__init__(fs, path, mode="rb", size=size, **kwargs)

    def _fetch_range(self, start, end):
        return self.fs._read(self._inner_path, start, min(end, self.size))


def _bare(path: str) -> str:
    """A path or URL without its scheme and slashes at either end: how prefixes are compared."""
    scheme, sep, rest = path.partition("://")
    return (rest if sep and scheme.lower() in SCHEMES else path).strip("/")


def _full(fo: str, protocol) -> str:
    """The location a chained URL's target names: `protocol://fo`, or the local path."""
    if "://" in fo or not protocol or protocol in ("file", "local"):
        return fo
    return f"{protocol}://{fo}"


def _open(location: str, key, options: dict, cache_mb: int):
    from .opening import open as open_location
    return open_location(location, key=key, storage_options=options or None, cache_mb=cache_mb)


#: arrays a chained URL found, kept for the next URL into the same array: each file's URL makes a
#: filesystem of its own (fsspec keys instances by `fo`), which then reuses the array's store
_FOUND: OrderedDict = OrderedDict()
FOUND_KEPT = 8
_found_lock = threading.Lock()


def _discover(location: str, key, options: dict, cache_mb: int):
    """(object, that part) of the longest leading part of `location` that holds an array, group or
    workspace; the part as fsspec names paths (no scheme: `bucket/array`, `/local/array`)."""
    from fsspec.utils import tokenize

    token = tokenize(options, None if key is None else str(key), cache_mb)
    bare = _bare(location)
    with _found_lock:
        hits = sorted(((prefix, found) for (prefix, tok), found in _FOUND.items()
                       if tok == token and (bare == prefix or bare.startswith(prefix + "/"))),
                      key=lambda hit: -len(hit[0]))
    for prefix, found in hits:
        # the path in that tree must be there: else a deeper part may hold another array (a group's
        # member in its folder), which the probe finds first
        try:
            found[0].tree.info(bare[len(prefix):].strip("/"))
        except Exception:  # noqa: BLE001 -- not in this tree: probe
            continue
        return found
    found = _probe(location, key, options, cache_mb)
    with _found_lock:
        _FOUND[(_bare(found[1]), token)] = found
        while len(_FOUND) > FOUND_KEPT:
            _FOUND.popitem(last=False)
    return found


def _probe(location: str, key, options: dict, cache_mb: int):
    scheme, sep, rest = location.partition("://")
    head = f"{scheme}://" if sep else ("/" if location.startswith("/") else "")
    parts = [p for p in (rest if sep else location).split("/") if p]
    for i in range(len(parts), 0, -1):
        candidate = head + "/".join(parts[:i])
        if not sep:
            import os
            if not os.path.isdir(candidate):
                continue
        try:
            return _open(candidate, key, options, cache_mb), candidate[len(head):] if sep else candidate.rstrip("/")
        except (NotFoundError, NotAnArrayError):
            continue
    raise NotFoundError(f"no TileDB array, group or workspace in any leading part of {location}")
