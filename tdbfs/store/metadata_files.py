"""The `__meta/` folder, which arrays and groups keep alike (docs/format.md §7.1): its files, each
decoded once, and the metadata a reader merges from them."""

from __future__ import annotations

import os
from dataclasses import dataclass

META_DIR = "__meta"


@dataclass(frozen=True)
class MergedMetadata:
    """The metadata as a reader sees it: every `__meta` file applied in timestamp order."""

    applied: tuple[str, ...]        # names of the files applied, in order
    skipped: tuple[str, ...]        # relative paths of the files a .vac lists (vacuumed)
    records: dict                   # key -> MetadataRecord, the last one written


class MetadataFiles:
    """What a store of an array or a group knows of its `__meta/` folder (a mixin on BaseStore)."""

    @staticmethod
    def timestamped_name(rel: str):
        """The FragmentName the last component of `rel` is (timestamps, format version), or None."""
        from ..format.names import try_parse_name
        return try_parse_name(os.path.basename(rel))

    def metadata_files(self) -> list[str]:
        return [f"{META_DIR}/{n}" for n in self.storage.regular_names(META_DIR)]

    @staticmethod
    def metadata_path(name: str) -> str:
        return f"{META_DIR}/{name}"

    def array_metadata(self, rel: str):
        from ..format.array_metadata import parse_array_metadata
        return self.parsed("array metadata", rel, lambda data: parse_array_metadata(
            self.generic_tile(rel, 0, "array metadata").payload, rel))

    def vacuum_file(self, rel: str) -> list:
        from ..format.commits import parse_vacuum_file
        return self.parsed("vac", rel, lambda data: list(parse_vacuum_file(data, rel)))

    def vacuumed_metadata(self) -> frozenset:
        """Relative paths of the `__meta` files a `.vac` there lists (their failures recorded)."""
        out = set()
        for rel in self.metadata_files():
            if rel.endswith(".vac"):
                for entry in self.attempt(lambda rel=rel: self.vacuum_file(rel), rel, "vacuum file") or ():
                    out.add(f"{META_DIR}/" + os.path.basename(entry))
        return frozenset(out)

    def merged_metadata(self) -> MergedMetadata:
        """Every `__meta` file applied in timestamp order; files listed in a .vac are skipped, files that do
        not decode are left out (their failures recorded)."""
        from ..format.array_metadata import merge_metadata
        vacuumed = self.vacuumed_metadata()
        files = []
        skipped = []
        for rel in self.metadata_files():
            base = os.path.basename(rel)
            if base.endswith((".vac", ".tmp")):
                continue
            if rel in vacuumed:
                skipped.append(rel)
                continue
            n = self.timestamped_name(base)
            records = self.attempt(lambda rel=rel: self.array_metadata(rel), rel, "array metadata")
            if records is not None:
                files.append(((n.t1, n.t2, base) if n else (0, 0, base), base, records))
        files.sort(key=lambda x: x[0])
        merged = merge_metadata([(base, records) for _, base, records in files])
        return MergedMetadata(tuple(b for _, b, _ in files), tuple(skipped), merged)
