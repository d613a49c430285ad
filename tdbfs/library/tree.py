"""Any file of the tree a mount shows (docs/views), read without FUSE: the nodes of
views/tree.py's build_root, walked as `tdbfs ls/cat` walk them."""

from __future__ import annotations

import posixpath

from ..errors import NotFoundError, TdbfsError


class NotADirectoryInTreeError(TdbfsError, NotADirectoryError):
    """A path that goes through, or lists, a file of the tree as if it were a folder."""


class IsADirectoryInTreeError(TdbfsError, IsADirectoryError):
    """A folder of the tree read as a file."""


class ViewTree:
    """The tree of one store: open_view(path) -> bytes, listdir(path), info(path)."""

    def __init__(self, root):
        self._root = root

    def _walk(self, path: str, follow_last: bool = True):
        from ..views.nodes import FolderUnreadable, LinkLoop, NoSuchPath, NotAFolder, walk

        try:
            return walk(self._root, path or "", follow_links=True, follow_last=follow_last)
        except NoSuchPath:
            raise NotFoundError(f"no such path in the tree: {path.strip('/')}") from None
        except NotAFolder as exc:
            raise NotADirectoryInTreeError(f"not a folder in the tree: {exc.path}") from None
        except LinkLoop:
            raise NotFoundError(f"too many levels of symbolic links: {path}") from None
        except FolderUnreadable:
            raise   # a ViewError: the folder's problem says why

    def node(self, path: str, follow_last: bool = True):
        return self._walk(path, follow_last)[0]

    def listdir(self, path: str = "") -> list[str]:
        """The names in the folder `path` ('' is the root), in the order the mount lists them."""
        from ..views.nodes import DirNode

        node, where = self._walk(path)
        if not isinstance(node, DirNode):
            raise NotADirectoryInTreeError(f"not a folder in the tree: {where}")
        return list(node.children())

    def open_view(self, path: str) -> bytes:
        """The whole file at `path`, as `cat MNT/path` reads it; ViewError when it cannot be built (the
        reason is among the problems)."""
        return self.read_range(path, 0, None)

    def read_range(self, path: str, start: int, end: int | None) -> bytes:
        node = self._file(path)
        size = node.size()
        end = size if end is None else max(0, min(end, size))
        out = []
        pos = max(0, start)
        while pos < end:   # in pieces, as a reader of the mount does: a cells.csv is rendered per tile
            data = node.read(pos, min(1 << 24, end - pos))
            if not data:
                break
            out.append(bytes(data))
            pos += len(data)
        return b"".join(out)

    def size(self, path: str) -> int:
        return self._file(path).size()

    def _file(self, path: str):
        from ..views.nodes import DirNode, FileNode

        node, where = self._walk(path)
        if isinstance(node, DirNode):
            raise IsADirectoryInTreeError(f"a folder, not a file: {where or '/'}")
        if not isinstance(node, FileNode):
            raise NotFoundError(f"not a file: {where}")
        return node

    def info(self, path: str) -> dict:
        """name, type ('file' or 'directory', of what a symlink points at), exact size; a symlink adds
        islink and destination, as fsspec's local filesystem does."""
        from ..views.nodes import DirNode, SymlinkNode

        link, where = self._walk(path, follow_last=False)
        out: dict = {"name": where}
        node = link
        if isinstance(link, SymlinkNode):
            out.update(islink=True, destination=link.target)
            node = self.node(path)
        if isinstance(node, DirNode):
            out.update(type="directory", size=0)
        else:
            out.update(type="file", size=node.size())
        try:
            out["mtime"] = node.mtime()
        except Exception:  # noqa: BLE001 -- a time is a nicety; the entry still shows
            out["mtime"] = 0.0
        return out

    def walk_files(self, path: str = ""):
        """Every file path below `path` (symlinks not followed), depth first, in listing order."""
        from ..views.nodes import DirNode, SymlinkNode

        node, where = self._walk(path)
        if not isinstance(node, DirNode):
            yield where
            return
        for name, child in node.children().items():
            sub = posixpath.join(where, name) if where else name
            if isinstance(child, DirNode):
                yield from self.walk_files(sub)
            elif not isinstance(child, SymlinkNode):
                yield sub
