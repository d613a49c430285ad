"""TileDB 0.x arrays and GenomicsDB workspaces: the store side (docs/format-0x.md).

open_array() tells the 0.x layout (and workspaces/groups holding such arrays) from TileDB 2.x and
opens these stores for it. As for a 2.x array (BaseStore), nothing is parsed when the store is
created, files are read on demand through the same byte-bounded cache, and decoded tiles are cached
there. Nothing is ever written: the 0.x library's lock file (`.__consolidation_lock`) is never
opened.
"""

from __future__ import annotations

from ..format.errors import FormatError
from ..format.legacy0x.names import parse_fragment_name
from ..format.legacy0x.schema import Legacy0xSchema, parse_schema
from .array_store import GROUP_FILE, ArrayStore
from .base_store import BaseStore
from .legacy0x_fragment import BOOK_KEEPING_FILE, Legacy0xFragment
from .problems import Problem, unique
from .storage import Storage

SCHEMA_FILE = "__array_schema.tdb"


class Legacy0xArrayStore(ArrayStore):
    """A 0.x array folder. What it shares with a TileDB 2.x array is answered the same way: its schema
    file is __array_schema.tdb, and a 0.x writer makes no commit, metadata, enumeration or
    consolidated-metadata files, so those listings come out empty (files a user dropped in with those
    names would be listed, as in any array). Its schema's encoding, its fragments and what its
    listings show differ."""

    legacy0x_layout = "array"

    # -- schema --------------------------------------------------------------
    def legacy0x_schema(self) -> Legacy0xSchema:
        return self.parsed("zero schema", SCHEMA_FILE, lambda data: parse_schema(data, SCHEMA_FILE))

    # -- fragments -------------------------------------------------------------
    def fragment_paths(self) -> list[str]:
        """Every fragment folder, committed or not (hidden `.__*` ones and unmarked ones too), oldest first."""
        out = []
        for n in self.listdir(""):
            if not self.isdir(n) or not n.lstrip(".").startswith("__"):
                continue
            try:
                ts = parse_fragment_name(n).timestamp_ms
            except FormatError:
                if not self.isfile(f"{n}/{BOOK_KEEPING_FILE}"):
                    continue
                ts = -1
            out.append((ts, n))
        return [n for _, n in sorted(out)]

    def _make_fragment(self, rel: str) -> Legacy0xFragment:
        return Legacy0xFragment(self, rel)

    # -- problems: a fragment's commit state and files are said by its book-keeping's parse -----------
    def listing_findings(self) -> list[Problem]:
        from .findings import special_entries
        return special_entries(self, "")

    def fragment_findings(self, frag) -> list[Problem]:
        from .findings import folder_findings
        return folder_findings(frag)


class Legacy0xWorkspaceStore(BaseStore):
    """A TileDB 0.x workspace (or group): its arrays, found in it and its groups, each a Legacy0xArrayStore
    sharing the workspace's cache; the files at its root are read through it."""

    legacy0x_layout = "workspace"

    def __init__(self, storage: Storage | str, cache_bytes: int = 512 << 20, kind: str = "workspace",
                 drop_served: bool = True):
        super().__init__(storage, cache_bytes, drop_served=drop_served)
        self.kind = kind
        self._arrays: dict = {}

    def array_paths(self) -> list[str]:
        """Relative paths of the arrays, through nested groups, sorted."""
        out = []

        def walk(rel: str, depth: int):
            for e in self.entries(rel):
                if not e.is_dir or e.name.startswith("."):
                    continue
                sub = f"{rel}/{e.name}" if rel else e.name
                if self.isfile(f"{sub}/{SCHEMA_FILE}"):
                    out.append(sub)
                elif self.isfile(f"{sub}/{GROUP_FILE}") and depth < 16:
                    walk(sub, depth + 1)

        walk("", 0)
        return out

    def group_paths(self) -> list[str]:
        out = []
        for rel in self.array_paths():
            parts = rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                g = "/".join(parts[:i])
                if g not in out:
                    out.append(g)
        return out

    def array(self, rel: str) -> Legacy0xArrayStore:
        with self._lock:
            store = self._arrays.get(rel)
            if store is None:
                store = self._arrays[rel] = Legacy0xArrayStore(self.storage.child(rel), cache=self.cache)
            return store

    def other_files(self) -> list[tuple[str, int]]:
        """Files at the workspace root (GenomicsDB keeps callset.json, vidmap.json, vcfheader.vcf there)."""
        return [(e.name, e.size) for e in self.entries("") if e.is_file]

    def findings(self) -> list[Problem]:
        """What was found wrong with the workspace, then with each of its arrays."""
        return unique(self.problems.items, *(self.array(rel).findings() for rel in self.array_paths()))

