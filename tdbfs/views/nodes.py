"""Node types of the view tree: directories, files and symlinks.

Front ends (FUSE, CLI) only ever see these classes. A node that cannot be built
raises ViewError, which front ends turn into EIO; the reason is recorded as a
problem by whoever raised it.
"""

from __future__ import annotations

import stat
from typing import Callable, Mapping

from ..errors import TdbfsError


class ViewError(TdbfsError):
    """A view that cannot be rendered (corrupt input, unknown filter, vanished file)."""


class Node:
    """Base of every node. `immutable` nodes never change once built (fragment contents),
    so front ends may let the kernel cache them without limit."""

    mode: int = 0
    immutable: bool = False

    def mtime(self) -> float:
        return 0.0


class DirNode(Node):
    mode = stat.S_IFDIR | 0o555
    #: True when `child` finds one entry without listing the folder (fragments/ of 10,000)
    cheap_child: bool = False

    def children(self) -> Mapping[str, Node]:
        raise NotImplementedError

    def child(self, name: str) -> "Node | None":
        """The entry `name`, or None."""
        return self.children().get(name)


class FileNode(Node):
    mode = stat.S_IFREG | 0o444
    def size(self) -> int:
        raise NotImplementedError

    def read(self, offset: int, size: int) -> bytes | memoryview:
        """At most `size` bytes from `offset`, as bytes or a memoryview (no copy of cached data)."""
        raise NotImplementedError


class SymlinkNode(Node):
    mode = stat.S_IFLNK | 0o777

    def __init__(self, target: str):
        self.target = target

    def size(self) -> int:
        return len(self.target.encode())


class StaticDir(DirNode):
    """A directory whose children are produced once by a function, on first listing.

    `mtime` is a number, or a function called on the first ask (listing 10,000 fragment folders
    then costs no stat each)."""

    def __init__(self, make_children: Callable[[], Mapping[str, Node]], immutable: bool = False,
                 mtime: float | Callable[[], float] = 0.0):
        self._make = make_children
        self._children: Mapping[str, Node] | None = None
        self.immutable = immutable
        self._mtime = mtime

    def children(self) -> Mapping[str, Node]:
        if self._children is None:
            self._children = self._make()
        return self._children

    def mtime(self) -> float:
        if callable(self._mtime):
            self._mtime = self._mtime()
        return self._mtime


class DynamicDir(DirNode):
    """A directory whose children are recomputed on each listing (things that come and go)."""

    def __init__(self, make_children: Callable[[], Mapping[str, Node]], mtime: Callable[[], float] | None = None):
        self._make = make_children
        self._mtime = mtime

    def children(self) -> Mapping[str, Node]:
        return self._make()

    def mtime(self) -> float:
        return self._mtime() if self._mtime else 0.0


class Keep:
    """How long a BytesFile serves one rendering: the only thing its kinds differ in.

    This base is PER_OPEN: rendered once, and again at each `fresh()` (the front ends call it once
    per open of a file that is not immutable)."""

    immutable = False   # never changes once rendered: front ends let the kernel cache it

    def data(self, f: "BytesFile") -> bytes:
        if f._data is None:
            f._data = f._render()
        return f._data

    def fresh(self, f: "BytesFile") -> bytes:
        f._data = None
        return self.data(f)

    def size(self, f: "BytesFile") -> int:
        return len(self.data(f))


class _Forever(Keep):
    immutable = True

    def fresh(self, f: "BytesFile") -> bytes:
        return self.data(f)


class _Live(Keep):
    """Rendered again at every stat: array-wide summaries that grow as problems are found."""

    def size(self, f: "BytesFile") -> int:
        return len(self.fresh(f))

    def fresh(self, f: "BytesFile") -> bytes:
        # a render can find problems (a schema that does not decode) that change the render itself:
        # render again until two agree, so what is served is complete and current
        data = f._render()
        for _ in range(3):
            again = f._render()
            if again == data:
                break
            data = again
        f._data = data
        return data


class Summary(Keep):
    """Rendered again only when `state()` changes (the array-wide summaries: store.summary_state, which
    changes when a fragment, commit, schema or metadata file comes or goes, or a problem is found): a look
    when nothing changed costs the state, not a pass over 100,000 fragments. A render after which the
    state differs (it found a problem) is done again, and with no state to tell (None) renders are
    repeated until two agree, as LIVE's are. The rendering is kept in the store's bounded cache under
    (`key`, state), not in the node: timeline.csv of 100,000 fragments is 38 MB.

    `settled` (default: `state`) is the part of the state a render must leave as it found to be served:
    array.yaml's state also holds how far the background check has got, which moves on during a render
    of 100,000 fragments without making it stale (its `checked:` is taken before its problems, so it
    never says more is checked than the problems listed show); the next look renders it again."""

    def __init__(self, state: Callable[[], object], cache, key, settled: Callable[[], object] | None = None):
        self._state, self._cache, self._key = state, cache, key
        self._settled = settled or state

    def data(self, f: "BytesFile") -> bytes:
        state = self._state()
        if state is not None:
            kept = self._cache.get((self._key, state))
            if kept is not None:
                return kept
        before = state if self._settled is self._state else self._settled()
        data = f._render()
        after = before
        for _ in range(3):
            # the whole state first: a settled part found unchanged after it was unchanged when it was taken
            # (listings' mtimes and problems found only move on); the rendering is kept under it, saying at
            # most less than is checked by then
            state = self._state()
            after = state if self._settled is self._state else self._settled()
            if after is not None and after == before:
                break   # nothing the render found changed what it shows
            again = f._render()
            if after is None and again == data:
                break
            data, before = again, after
        if after is not None and state is not None:
            self._cache.put((self._key, state), data, len(data) + 64)
        return data

    def fresh(self, f: "BytesFile") -> bytes:
        return self.data(f)


#: contents that never change (a committed fragment's views, README.txt)
FOREVER = _Forever()
#: may change between opens (commit views of a fragment still being written)
PER_OPEN = Keep()
#: may change at any moment (array.yaml, merged.yaml)
LIVE = _Live()


def kept(fixed: bool) -> Keep:
    """FOREVER for the views of a committed fragment, else PER_OPEN."""
    return FOREVER if fixed else PER_OPEN


class WhileState(Keep):
    """Rendered again only when `state()` changes, or always while it is None (fragment.yaml: only
    its commit and vacuum status and its problems can change). One per file."""

    def __init__(self, state: Callable[[], object]):
        self._state = state
        self._seen = None

    def data(self, f: "BytesFile") -> bytes:
        for _ in range(4):
            state = self._state()
            if f._data is not None and state is not None and state == self._seen:
                break
            f._data = f._render()
            self._seen = self._state()
            if self._seen is None or self._seen == state:
                break  # nothing the render found changed what it shows (or nothing can tell)
        return f._data

    def fresh(self, f: "BytesFile") -> bytes:
        return self.data(f)


class InCache(Keep):
    """The bytes live in the store's bounded cache under `key`, not in the node: per-tile text and
    YAML, which are many and may be large. A callable `key` is asked at each access (array-level
    files, whose views must not outlive the version of the file they show)."""

    def __init__(self, cache, key, immutable: bool = True):
        self._cache = cache
        self._key = key
        self.immutable = immutable

    def data(self, f: "BytesFile") -> bytes:
        key = self._key() if callable(self._key) else self._key
        return self._cache.get_or_make(key, lambda: with_cost(f._render()))

    def fresh(self, f: "BytesFile") -> bytes:
        return self.data(f)


def with_cost(data: bytes) -> tuple[bytes, int]:
    """(data, what it costs the cache): the bytes plus the object around them."""
    return data, len(data) + 64


class BytesFile(FileNode):
    """A file whose whole content a function renders (YAML, CSV, text), kept as `keep` says.

    The render is done lazily on the first size() or read(); an exception from it becomes
    ViewError on every access. `mtime` is a number or a function giving one."""

    def __init__(self, render: Callable[[], bytes], keep: Keep = PER_OPEN, mtime: float | Callable[[], float] = 0.0):
        self._render = render
        self._data: bytes | None = None
        self._keep = keep
        self.immutable = keep.immutable
        self._mtime = mtime

    def data(self) -> bytes:
        return self._keep.data(self)

    def fresh(self) -> bytes:
        """The bytes as of now. Front ends take one such rendering per open of a file that is not
        immutable and serve every read and fstat of that open from it, so size and bytes agree and
        no read mixes two renderings."""
        return self._keep.fresh(self)

    def size(self) -> int:
        return self._keep.size(self)

    def read(self, offset: int, size: int) -> bytes:
        return self.data()[offset:offset + size]

    def mtime(self) -> float:
        return self._mtime() if callable(self._mtime) else self._mtime


class PathError(KeyError):
    """A path that names no node of the tree; `path` is the part walked when it went wrong."""

    def __init__(self, path: str):
        super().__init__(path)
        self.path = path


class NoSuchPath(PathError):
    pass


class NotAFolder(PathError):
    pass


class LinkLoop(PathError):
    pass


class FolderUnreadable(ViewError):
    """A folder on the way that cannot be listed (EIO); `path` is that folder."""

    def __init__(self, path: str, reason: ViewError):
        super().__init__(str(reason))
        self.path = path


#: symlinks followed in one lookup before giving up, as Linux's MAXSYMLINKS
MAX_LINKS = 40


def walk(root: DirNode, path: str, *, follow_links: bool = False, follow_last: bool = True,
         child: Callable[[DirNode, str, str], "Node | None"] | None = None) -> tuple[Node, str]:
    """(node, canonical path) of the '/'-separated `path` below `root`: the one path resolver of the
    front ends. With `follow_links`, symlinks (the last one only when `follow_last`) and `..` are
    resolved as a shell does; FUSE leaves both to the kernel. `child(folder, name, folder_path)`
    finds one entry (default: `folder.child(name)`); a folder that cannot be listed raises
    FolderUnreadable."""
    find = child or (lambda folder, name, _where: folder.child(name))
    todo = [p for p in path.split("/") if p not in ("", ".")]
    trail: list[tuple[str, Node]] = []   # (name, node) of each folder entered below root
    where = ""                            # the names of `trail`, '/'-separated: kept as it grows (every request walks)
    node: Node = root
    links = 0
    while todo:
        part = todo.pop(0)
        if part == ".." and follow_links:
            if trail:
                trail.pop()
                where = "/".join(name for name, _ in trail)
            node = trail[-1][1] if trail else root
            continue
        if not isinstance(node, DirNode):
            raise NotAFolder(where)
        try:
            found = find(node, part, where)
        except FolderUnreadable:
            raise
        except ViewError as exc:
            raise FolderUnreadable(where, exc) from None
        if found is None:
            raise NoSuchPath(path.strip("/"))
        if follow_links and isinstance(found, SymlinkNode) and (todo or follow_last):
            links += 1
            if links > MAX_LINKS:
                raise LinkLoop(path)
            if found.target.startswith("/"):
                trail, node, where = [], root, ""
            todo = [p for p in found.target.split("/") if p not in ("", ".")] + todo
            continue
        trail.append((part, found))
        where = f"{where}/{part}" if where else part
        node = found
    return node, where


def resolve(root: DirNode, path: str) -> Node:
    """The node at `path` ('/'-separated, relative to root), symlinks not followed; PathError (a
    KeyError) if absent."""
    return walk(root, path)[0]
