"""What an Array, a Group and a Workspace share: how they were opened, their tree, their check."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Opened:
    """What every object of the library keeps of how it was opened (a check's workers open it again)."""

    location: str                  # absolute local path, or the URL as given
    cache_mb: int
    remote: object = None          # store.storage.remote.RemoteSettings, or None for a local path
    key: object = field(default=None, repr=False)   # format.reversers.keys.EncryptionKey, or None


class StoreObject:
    """One opened array, group or workspace. `store` is the store underneath (tdbfs/store), for code
    that needs more than this API shows."""

    kind = "object"

    def __init__(self, store, opened: Opened):
        self.store = store
        self._opened = opened
        self._tree = None
        self._closed = False

    # -- where ---------------------------------------------------------------------------
    @property
    def uri(self) -> str:
        """The location the store reads: an absolute path, or the URL."""
        return self.store.path

    @property
    def location(self) -> str:
        return self._opened.location

    # -- the tree of the mount ----------------------------------------------------------------
    @property
    def tree(self):
        """The tree the mount shows (library/tree.py ViewTree), built on first use."""
        if self._tree is None:
            from ..views.tree import build_root
            from .tree import ViewTree
            self._tree = ViewTree(build_root(self.store))
        return self._tree

    def open_view(self, path: str) -> bytes:
        """The bytes of the file at `path` in the tree (`array.yaml`, `fragments/F/cells.csv`, ...),
        exactly what `cat MNT/path` reads from a mount."""
        return self.tree.open_view(path)

    def listdir(self, path: str = "") -> list[str]:
        """The names in the folder `path` of the tree ('' is its root), as `ls MNT/path` lists them."""
        return self.tree.listdir(path)

    # -- findings ----------------------------------------------------------------------------
    def check(self, jobs: int = 1):
        """Decode and cross-check everything, as `tdbfs check` does: a CheckResult whose `problems` are the
        findings it prints, `clean` its verdict, `summary()` its last line(s) and `to_dict()` its `--json`.
        `jobs` > 1 checks the fragments in that many worker processes (the same result)."""
        from .frontends import run_check
        return run_check(self, jobs)

    # -- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        """Let go of what is kept in memory (decoded tiles and structures); the object is not used again."""
        if not self._closed:
            self._closed = True
            self._tree = None
            self.store.cache.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<tdbfs.{type(self).__name__} {self.uri!r}{self._repr_extra()}>"

    def _repr_extra(self) -> str:
        return ""
