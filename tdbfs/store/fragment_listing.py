"""The fragment folders of an array as one listing shows them: `__fragments/*`, and the legacy
fragment folders of formats 1-4 at the array's root (docs/format.md §2).

A listing of 100,000 fragments is read whenever `__fragments/` changes, and `ls fragments/` needs only
its names: the paths and the name -> path index are built on first use, once per listing.
"""

from __future__ import annotations

FRAGMENTS_DIR = "__fragments"
#: the folders a listing is made from (the root for the legacy ones)
LISTED_FOLDERS = ("", FRAGMENTS_DIR)


class FragmentListing:
    """`in_folder`: the sorted names of `__fragments/`, or None where `listed` has them (decoded on
    first use: `ls fragments/` hands the listing on as it came and needs no str of the names);
    `legacy`: the sorted fragment names at the root. Iterated, the names. Shared by every caller of the
    store while the folders stay unchanged: callers only read it."""

    __slots__ = ("_in_folder", "_legacy", "_listed", "_names", "_paths", "_index")

    def __init__(self, in_folder: list[str] | None, legacy: list[str], listed=None):
        self._in_folder = in_folder
        self._legacy = legacy
        # in_folder as the listings the store was given hold it (a sized sequence, `decoded()` as str)
        self._listed = listed
        self._names = self._paths = self._index = None

    def _folder(self) -> list[str]:
        if self._in_folder is None:
            # one decode and one split for them all (100,000 names: 14 ms; a decode per name, 12 ms more)
            self._in_folder = self._listed.decoded() if self._listed else []
        return self._in_folder

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        listed = self.listed
        return len(listed) if listed is not None else len(self.names)

    @property
    def listed(self):
        """`names` as the store's listings had them, if the listing came from them; else None."""
        return self._listed if not self._legacy else None

    @property
    def names(self) -> list[str]:
        """Each fragment folder's name once, in the order of `index`: the legacy ones, then those of
        `__fragments/` (a name in both places is listed once, where the legacy one is)."""
        if self._names is None:
            if not self._legacy:
                self._names = self._folder()
            else:
                self._names = list(self.index)
        return self._names

    @property
    def paths(self) -> tuple[str, ...]:
        """Relative paths: `__fragments/<name>` each, then the legacy folders."""
        if self._paths is None:
            self._paths = tuple([f"{FRAGMENTS_DIR}/{n}" for n in self._folder()] + self._legacy)
        return self._paths

    @property
    def index(self) -> dict[str, str]:
        """Name -> relative path; a name in both places is the folder in `__fragments/`."""
        if self._index is None:
            index = dict(zip(self._legacy, self._legacy))
            index.update(zip(self._folder(), self.paths))
            self._index = index
        return self._index
