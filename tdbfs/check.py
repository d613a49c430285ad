"""`tdbfs check`: the fsck of TileDB arrays, built on the store.

Every structure is decoded on its own (schemas, enumerations, array metadata,
commit files, consolidated fragment metadata, and per fragment the footer, each
generic tile of `__fragment_metadata.tdb` and every tile of every stream), and
then cross-checked: footer file sizes and tile offsets against the files,
fragment folders against commit markers, vacuum lists against live fragments,
`__fragment_meta` footers against each fragment's own. A failure is one problem
naming file, structure and byte offset; nothing here prints, and the array is
only ever read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

from .format.errors import FormatError

ERROR = "error"
WARNING = "warning"   # a state TileDB itself produces (consolidated, not yet vacuumed): reported, not failed


@dataclass(frozen=True)
class Problem:
    file: str
    structure: str
    offset: int | None          # byte offset in `file`, or in the payload named by `within`
    message: str
    severity: str = ERROR
    within: str = ""

    def line(self) -> str:
        where = "-" if self.offset is None else str(self.offset)
        inside = f" ({self.within}, payload byte {self.offset})" if self.within else ""
        return f"{self.file}:{where}: {self.structure}{inside}: {self.message}"

    def to_dict(self) -> dict:
        out = {"file": self.file, "structure": self.structure, "offset": self.offset,
               "message": self.message, "severity": self.severity}
        if self.within:
            out["within"] = self.within
        return out


@dataclass
class CheckResult:
    array: str
    problems: list[Problem] = field(default_factory=list)
    counts: dict = field(default_factory=dict)    # what was decoded: fragments, tiles, generic tiles, ...

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == ERROR]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity != ERROR]

    @property
    def clean(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        c = self.counts
        what = (f"{c.get('fragments', 0)} fragments, {c.get('tiles', 0)} tiles, "
                f"{c.get('generic_tiles', 0)} generic tiles, {c.get('files', 0)} files")
        verdict = "clean" if self.clean else f"{len(self.errors)} problems"
        warn = f", {len(self.warnings)} warnings" if self.warnings else ""
        return f"{self.array}: {verdict}{warn} ({what} checked)"

    def to_dict(self) -> dict:
        return {"array": self.array, "clean": self.clean, "errors": len(self.errors),
                "warnings": len(self.warnings), "counts": dict(self.counts),
                "problems": [p.to_dict() for p in self.problems]}


Progress = Callable[[int, int, str], None]


def check_array(store, progress: Progress | None = None) -> CheckResult:
    """Check the array of `store` (an ArrayStore, or a 0.x store); never raises for damage it finds."""
    checker = _Checker(store, progress or (lambda done, total, what: None))
    if getattr(store, "zero_layout", None):
        checker.run_zero()
    else:
        checker.run()
    return checker.result


class _Checker:
    def __init__(self, store, progress: Progress):
        self.store = store
        self.progress = progress
        self.result = CheckResult(getattr(store, "path", ""), counts={"fragments": 0, "tiles": 0, "generic_tiles": 0, "files": 0})
        self._seen: set = set()

    # -- problems -------------------------------------------------------------------------
    def add(self, file: str, structure: str, offset, message: str, severity: str = ERROR, within: str = ""):
        key = (file, structure, offset, message, within)
        if key not in self._seen:
            self._seen.add(key)
            self.result.problems.append(Problem(file, structure, offset, message, severity, within))

    def add_dict(self, p: dict) -> None:
        self.add(p.get("file") or "", p.get("structure") or "", p.get("offset"), p.get("message") or "",
                 within=p.get("within", ""))

    def attempt(self, fn, file: str, structure: str):
        """fn(), or None with its failure recorded (FormatError says where; anything else is blamed on `file`)."""
        try:
            return fn()
        except FormatError as exc:
            self.add_dict(exc.as_problem())
        except FileNotFoundError as exc:
            self.add(file, structure, None, f"file missing: {exc.filename or exc}")
        except (MemoryError, RecursionError) as exc:
            self.add(file, structure, None, f"{type(exc).__name__} while decoding (a length field is not bounded)")
        except Exception as exc:  # noqa: BLE001 -- a checker reports every failure, it never stops
            self.add(file, structure, None, f"{type(exc).__name__}: {exc}")
        return None

    def count(self, what: str, n: int = 1) -> None:
        self.result.counts[what] = self.result.counts.get(what, 0) + n

    # -- the whole array -----------------------------------------------------------------
    def run(self) -> None:
        store = self.store
        fragments = store.fragment_paths()
        steps = 4 + len(fragments)
        done = 0
        self.progress(done, steps, "schemas")
        for rel in store.schema_files():
            self._generic_file(rel, "array schema", lambda rel=rel: store.schema(rel))
        for rel in store.enumeration_files():
            self._generic_file(rel, "enumeration", lambda rel=rel: store.enumeration(rel))
        done += 1
        self.progress(done, steps, "array metadata")
        self._metadata_files()
        done += 1
        self.progress(done, steps, "commits")
        self._commit_files(fragments)
        done += 1
        for rel in fragments:
            self.progress(done, steps, os.path.basename(rel))
            self._fragment(store.fragment(rel))
            done += 1
        self.progress(done, steps, "consolidated fragment metadata")
        self._fragment_meta_files()
        for p in store.all_problems():   # what the store recorded on its own (e.g. checksums of tiles)
            self.add_dict(p)
        self.progress(steps, steps, "done")

    def run_zero(self) -> None:
        """TileDB 0.x: decode every tile through the views its store backs (read every file of the tree)."""
        from .views.tree import build_root
        from .views.nodes import DirNode, FileNode, ViewError

        root = build_root(self.store)
        todo = [("", root)]
        while todo:
            path, node = todo.pop()
            try:
                if isinstance(node, DirNode):
                    todo.extend((f"{path}/{n}", c) for n, c in node.children().items())
                    if os.path.basename(os.path.dirname(path)) == "fragments":
                        self.count("fragments")
                elif isinstance(node, FileNode):
                    node.read(0, node.size())
                    self.count("files")
                    name = os.path.basename(path)
                    if name.startswith("tile_") and name.endswith(".bin"):
                        self.count("tiles")
            except ViewError as exc:
                self.add(path.lstrip("/"), "view", None, str(exc))
            except FormatError as exc:   # a 0.x view that let a decoding error through
                self.add_dict(exc.as_problem())
            except Exception as exc:  # noqa: BLE001 -- a checker reports every failure, it never stops
                self.add(path.lstrip("/"), "view", None, f"{type(exc).__name__}: {exc}")
        problems = self.store.all_problems() if hasattr(self.store, "all_problems") else []
        for p in problems:
            self.add_dict(p)

    def _generic_file(self, rel: str, structure: str, parse) -> None:
        self.count("files")
        tile = self.attempt(lambda: self.store.generic_tile(rel, 0, structure), rel, structure)
        if tile is None:
            return
        self.count("generic_tiles")
        for failure in tile.checksum_failures:
            self.add(rel, f"{structure} generic tile", tile.header.payload_offset, failure)
        self.attempt(parse, rel, structure)

    def _metadata_files(self) -> None:
        from .format.array_metadata import parse_array_metadata
        from .format.commits import parse_vacuum_file
        store = self.store
        for rel in store.metadata_files():
            if rel.endswith(".tmp"):
                continue
            if rel.endswith(".vac"):
                self.count("files")
                self.attempt(lambda rel=rel: parse_vacuum_file(store.read_file(rel), rel), rel, "vacuum file")
                continue
            self._generic_file(rel, "array metadata", lambda rel=rel: parse_array_metadata(
                store.generic_tile(rel, 0, "array metadata").payload, rel))

    def _commit_files(self, fragment_paths: list[str]) -> None:
        from .format import commits
        store = self.store
        live = {os.path.basename(p) for p in fragment_paths}
        ignored = set()   # commits an .ign file tells readers to skip (their fragment was vacuumed)
        for rel in store.commit_files():
            if rel.endswith(".ign"):
                entries = self.attempt(lambda rel=rel: commits.parse_ignore_file(store.read_file(rel), rel),
                                       rel, "ignore file")
                ignored.update(os.path.basename(e.rstrip("/")) for e in entries or ())
        for rel in store.commit_files():
            base = os.path.basename(rel)
            if base.endswith((".wrt", ".ok")):
                self.count("files")
                frag = base.rsplit(".", 1)[0]
                if frag not in live:
                    self.add(rel, "commit file", None, f"commits fragment {frag}, which is not in the array")
            elif base.endswith(".vac"):
                self.count("files")
                self.attempt(lambda rel=rel: commits.parse_vacuum_file(store.read_file(rel), rel), rel, "vacuum file")
            elif base.endswith(".ign"):
                self.count("files")
            elif base.endswith(".con"):
                self.count("files")
                con = self.attempt(lambda rel=rel: commits.parse_consolidated_commits(store.read_file(rel), rel),
                                   rel, "consolidated commits")
                for entry in (con.entries if con else ()):
                    name = entry.path.rsplit("/", 1)[-1]
                    if name.endswith(".wrt") and name[:-4] not in live and name not in ignored:
                        self.add(rel, "consolidated commits", None,
                                 f"commits fragment {name[:-4]}, which is not in the array")
            elif base.endswith((".del", ".upd")):
                parse = commits.parse_delete_condition if base.endswith(".del") else commits.parse_update_condition
                self._generic_file(rel, "commit file", lambda rel=rel, parse=parse: parse(
                    store.generic_tile(rel, 0, "commit file").payload, rel))
            else:
                self.add(rel, "commit file", None, "unknown kind of commit file", WARNING)
        committed = store.committed_fragment_names()
        for rel in fragment_paths:
            name = os.path.basename(rel)
            if name not in committed:
                self.add(rel, "fragment", None, "no commit marks this fragment: TileDB ignores it "
                                                "(a write that did not finish, or a lost commit file)")
        for name, vac in store.vacuum_lists().items():
            if name in live:
                self.add(vac, "vacuum file", None, f"lists the live fragment {name}: consolidated but not yet "
                                                   "vacuumed, TileDB reads the consolidated fragment instead", WARNING)

    def _fragment_meta_files(self) -> None:
        from .format.consolidated_fragment_metadata import parse_consolidated_fragment_metadata
        store = self.store
        live = {os.path.basename(p): p for p in store.fragment_paths()}
        for rel in store.fragment_meta_files():
            self.count("files")
            tile = self.attempt(lambda rel=rel: store.generic_tile(rel, 0, "consolidated fragment metadata"),
                                rel, "consolidated fragment metadata")
            if tile is None:
                continue
            self.count("generic_tiles")
            entries = self.attempt(lambda: parse_consolidated_fragment_metadata(tile.payload, rel), rel,
                                   "consolidated fragment metadata")
            for entry in entries or ():
                frag_rel = live.get(entry.fragment_name)
                if frag_rel is None:
                    self.add(rel, "consolidated fragment metadata", entry.entry_offset,
                             f"names fragment {entry.fragment_name}, which is not in the array", WARNING,
                             within="consolidated fragment metadata payload")
                    continue
                own = self._own_footer_bytes(store.fragment(frag_rel))
                if own is not None and own != bytes(entry.footer):
                    at = next((i for i, (a, b) in enumerate(zip(own, entry.footer)) if a != b),
                              min(len(own), len(entry.footer)))
                    self.add(rel, "consolidated fragment metadata", entry.footer_offset + at,
                             f"footer of {entry.fragment_name} differs from the fragment's own footer "
                             f"(first at footer byte {at}; {len(entry.footer)} vs {len(own)} bytes)",
                             within="consolidated fragment metadata payload")

    def _own_footer_bytes(self, frag) -> bytes | None:
        try:
            footer = frag.footer()
            if footer.generic_tile_offsets is None:
                return None
            return bytes(frag.metadata_bytes()[footer.offset:footer.offset + footer.footer_length])
        except Exception:  # noqa: BLE001 -- already reported by the fragment's own check
            return None

    # -- one fragment -----------------------------------------------------------------------
    def _fragment(self, frag) -> None:
        from .store.fragment import DATA, VAR, VALIDITY
        self.count("fragments")
        md = f"{frag.rel}/{frag.METADATA_FILE}"
        files = dict(frag.files())
        self.count("files", len(files))
        if frag.METADATA_FILE not in files:
            self.add(md, "fragment metadata", None, "file missing: the fragment cannot be read")
            return
        footer = self.attempt(frag.footer, md, "footer")
        if footer is None:
            return
        g = footer.generic_tile_offsets
        if g is not None:
            self._metadata_generic_tiles(frag, md, g)
        self.attempt(frag.rtree, md, "R-tree")
        fields = self.attempt(frag.stored_fields, md, "fields")
        if fields is None:
            return
        expected_files = {frag.METADATA_FILE}
        tile_counts = set()
        for f in fields:
            streams = [DATA] + ([VAR] if f.var_sized else []) + ([VALIDITY] if f.nullable else [])
            ntiles = self.attempt(lambda f=f: frag.tile_count(f.idx), md, f"tile offsets of {f.stem}")
            if ntiles is None:
                continue
            tile_counts.add(ntiles)
            for stream in streams:
                name = {DATA: f.file, VAR: f.var_file, VALIDITY: f.validity_file}[stream]
                expected_files.add(name)
                self._stream(frag, f, stream, name, files.get(name), ntiles)
        if not footer.dense and tile_counts and tile_counts != {footer.sparse_tile_num}:
            self.add(md, "footer", footer.offset, f"sparse_tile_num is {footer.sparse_tile_num} but the fields "
                                                  f"have {sorted(tile_counts)} tile offsets")
        elif len(tile_counts) > 1:
            self.add(md, "footer", footer.offset, f"fields disagree on the tile count: {sorted(tile_counts)}")
        for name in sorted(set(files) - expected_files):
            if footer.version >= 5 and name.endswith(".tdb"):
                self.add(f"{frag.rel}/{name}", "fragment folder", None,
                         "file not named by the footer's fields (extra file)", WARNING)

    def _metadata_generic_tiles(self, frag, md: str, g) -> None:
        """Every generic tile the footer points at, decoded on its own, with its checksums."""
        offsets: list[tuple[int, str]] = [(g.rtree, "R-tree")]
        for kind in ("tile_offsets", "tile_var_offsets", "tile_var_sizes", "tile_validity_offsets",
                     "tile_min_offsets", "tile_max_offsets", "tile_sum_offsets", "tile_null_count_offsets"):
            for i, off in enumerate(getattr(g, kind) or ()):
                offsets.append((off, f"{kind}[{i}]"))
        for single in ("fragment_min_max_sum_null_count", "processed_conditions"):
            if getattr(g, single) is not None:
                offsets.append((getattr(g, single), single.replace("_", " ")))
        for off, structure in offsets:
            tile = self.attempt(lambda off=off, s=structure: self.store.generic_tile(md, off, s), md, structure)
            if tile is None:
                continue
            self.count("generic_tiles")
            for failure in tile.checksum_failures:
                self.add(md, f"{structure} generic tile", tile.header.payload_offset, failure)
        fields = frag.fields()
        for f in fields:
            for getter, what in ((frag.tile_offsets, "tile offsets"), (frag.tile_var_offsets, "tile var offsets"),
                                 (frag.tile_var_sizes, "tile var sizes")):
                self.attempt(lambda getter=getter, f=f: getter(f.idx), md, f"{what} of {f.stem}")
            if g.tile_validity_offsets is not None:
                self.attempt(lambda f=f: frag.tile_validity_offsets(f.idx), md, f"tile validity offsets of {f.stem}")
            if g.tile_min_offsets is not None:
                self.attempt(lambda f=f: frag.tile_min_max("min", f.idx), md, f"tile mins of {f.stem}")
                self.attempt(lambda f=f: frag.tile_min_max("max", f.idx), md, f"tile maxes of {f.stem}")
                self.attempt(lambda f=f: frag.tile_sums(f.idx), md, f"tile sums of {f.stem}")
                self.attempt(lambda f=f: frag.tile_null_counts(f.idx), md, f"tile null counts of {f.stem}")
        if g.fragment_min_max_sum_null_count is not None:
            self.attempt(frag.fragment_min_max_sum_null_count, md, "fragment min/max/sum/null count")
        if g.processed_conditions is not None:
            self.attempt(frag.processed_conditions, md, "processed conditions")

    def _stream(self, frag, f, stream: str, name: str, actual: int | None, ntiles: int) -> None:
        from .store.fragment import DATA, VAR, VALIDITY
        rel = f"{frag.rel}/{name}"
        footer = frag.footer()
        sizes = {DATA: footer.file_sizes, VAR: footer.file_var_sizes, VALIDITY: footer.file_validity_sizes}[stream]
        declared = int(sizes[f.idx]) if sizes is not None and f.idx < len(sizes) else None
        if actual is None:
            if ntiles and not (stream == DATA and frag.offsets_embedded(f)):
                self.add(rel, "data file", None, f"file missing ({ntiles} tiles of {f.stem} are in it)")
                return
        elif declared is not None and declared != actual:
            self.add(rel, "data file", min(declared, actual),
                     f"the footer says {declared} bytes, the file has {actual}")
        getter = {DATA: frag.tile_offsets, VAR: frag.tile_var_offsets, VALIDITY: frag.tile_validity_offsets}[stream]
        offsets = self.attempt(lambda: getter(f.idx), rel, "tile offsets")
        if offsets is not None and len(offsets):
            size = actual if actual is not None else 0
            prev = 0
            for k, off in enumerate(int(o) for o in offsets):
                if off < prev or off > size:
                    self.add(rel, f"tile {k}", off, f"tile offset {off} is out of order or past the end of "
                                                   f"the {size}-byte file (previous tile at {prev})")
                    break
                prev = off
        bounds = self._min_max(frag, f) if stream == DATA else None
        for k in range(ntiles):
            tile = self.attempt(lambda k=k: frag.tile(f, k, stream), rel, f"tile {k}")
            if tile is None:
                continue
            self.count("tiles")
            if bounds is not None and k < len(bounds[0]):
                self._compare_min_max(frag, f, k, tile.data, bounds, rel)

    def _min_max(self, frag, f):
        """(mins, maxes) the footer's generic tiles hold for a fixed numeric attribute, else None."""
        from .format import fragment_metadata as fm
        g = frag.footer().generic_tile_offsets
        # Dense tiles hold fill values outside the written cells, which TileDB leaves out of min/max.
        if (g is None or g.tile_min_offsets is None or frag.footer().dense or f.kind != fm.ATTRIBUTE or f.var_sized or f.nullable
                or f.cell_val_num != 1 or not f.has_min_max or f.datatype.is_string):
            return None
        try:
            mins, maxes = frag.tile_min_max("min", f.idx), frag.tile_min_max("max", f.idx)
        except Exception:  # noqa: BLE001 -- reported by the metadata check
            return None
        return (mins, maxes) if len(mins) == len(maxes) else None

    def _compare_min_max(self, frag, f, k: int, data: bytes, bounds, rel: str) -> None:
        """A tile whose values fall outside its recorded min/max is another tile's bytes (swapped or
        rewritten in place), which no length check can see."""
        import numpy as np
        dt = np.dtype(f.datatype.dtype)
        values = np.frombuffer(data[:len(data) - len(data) % dt.itemsize], dt)
        if not len(values) or (dt.kind == "f" and np.isnan(values).any()):
            return
        lo, hi = values.min(), values.max()
        if lo != bounds[0][k] or hi != bounds[1][k]:
            loc = frag.location(f, k, "data")
            self.add(rel, f"tile {k}", loc.offset,
                     f"values span {lo.item()}..{hi.item()} but the fragment metadata records "
                     f"{bounds[0][k].item()}..{bounds[1][k].item()} for this tile (tiles swapped or overwritten?)")
