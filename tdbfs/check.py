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
from .text import shown

from .store.problems import ERROR, WARNING  # noqa: F401 -- WARNING: states TileDB itself leaves behind


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

    @classmethod
    def of(cls, p: dict) -> "Problem":
        """A problem as printed: names that are not UTF-8 escaped, as the mount's YAML shows them."""
        return cls(shown(p.get("file") or ""), shown(p.get("structure") or ""), p.get("offset"),
                   shown(p.get("message") or ""), p.get("severity") or ERROR, shown(p.get("within") or ""))


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
    """Check the array of `store` (an ArrayStore, or a 0.x store); never raises for damage it finds.

    Everything is decoded through the store, which records what fails; the result lists the store's
    findings, the list array.yaml shows, so a mount that has read everything says the same."""
    checker = _Checker(store, progress or (lambda done, total, what: None))
    if getattr(store, "legacy0x_layout", None):
        checker.run_legacy0x()
    else:
        checker.run()
    findings = store.findings() if hasattr(store, "findings") else store.all_problems()
    checker.result.problems = [Problem.of(p) for p in findings]
    return checker.result


class _Checker:
    def __init__(self, store, progress: Progress):
        self.store = store
        self.progress = progress
        self.result = CheckResult(getattr(store, "path", ""),
                                  counts={"fragments": 0, "tiles": 0, "generic_tiles": 0, "files": 0})

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
            self._generic_file(rel, "array schema", store.schema)
        for rel in store.enumeration_files():
            self._generic_file(rel, "enumeration", store.enumeration)
        done += 1
        self.progress(done, steps, "array metadata")
        for rel in store.metadata_files():
            if rel.endswith(".tmp"):
                continue
            if rel.endswith(".vac"):
                self.count("files")
                store.attempt(lambda rel=rel: store.vacuum_file(rel), rel, "vacuum file")
                continue
            self._generic_file(rel, "array metadata", store.array_metadata)
        done += 1
        self.progress(done, steps, "commits")
        for rel in store.commit_files():
            self.count("files")
            if rel.endswith(".vac"):
                store.attempt(lambda rel=rel: store.vacuum_file(rel), rel, "vacuum file")
            elif rel.endswith(".ign"):
                store.attempt(lambda rel=rel: store.ignore_file(rel), rel, "ignore file")
            elif rel.endswith(".con"):
                store.attempt(lambda rel=rel: store.consolidated_commits(rel), rel, "consolidated commits")
            elif rel.endswith((".del", ".upd")):
                self.count("files", -1)
                kind = "delete condition" if rel.endswith(".del") else "update condition"
                self._generic_file(rel, kind, store.condition)
        done += 1
        for rel in fragments:
            self.progress(done, steps, os.path.basename(rel))
            self._fragment(store.fragment(rel))
            done += 1
        self.progress(done, steps, "consolidated fragment metadata")
        for rel in store.fragment_meta_files():
            self.count("files")
            if store.attempt(lambda rel=rel: store.consolidated_fragment_metadata(rel), rel,
                             "consolidated fragment metadata") is not None:
                self.count("generic_tiles")
        self.progress(steps, steps, "done")

    def run_legacy0x(self) -> None:
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
            except ViewError:
                pass  # the view recorded its problem in the store, which the result lists
            except FormatError as exc:   # a 0.x view that let a decoding error through
                self.store.problems.add_error(exc, path.lstrip("/"), "view")

    def _generic_file(self, rel: str, structure: str, parse) -> None:
        self.count("files")
        store = self.store
        if store.attempt(lambda: store.generic_tile(rel, 0, structure), rel, structure) is None:
            return
        self.count("generic_tiles")
        store.attempt(lambda: parse(rel), rel, structure)

    # -- one fragment -----------------------------------------------------------------------
    def _fragment(self, frag) -> None:
        from .store.fragment import DATA, VAR, VALIDITY
        self.count("fragments")
        store = self.store
        md = f"{frag.rel}/{frag.METADATA_FILE}"
        self.count("files", len(frag.files()))
        store.fragment_findings(frag)
        frag.attempt(lambda: frag.parsed_name, frag.rel, "fragment name")
        self.count("generic_tiles", frag.decode_metadata())
        fields = frag.attempt(frag.stored_fields, md, "fields")
        for f in fields or ():
            ntiles = frag.attempt(lambda f=f: frag.tile_count(f.idx), md, f"tile offsets of {f.stem}")
            for stream in [DATA] + ([VAR] if f.var_sized else []) + ([VALIDITY] if f.nullable else []):
                for k in range(ntiles or 0):
                    if frag.attempt(lambda k=k, f=f, stream=stream: frag.tile(f, k, stream),
                                    f"{frag.rel}/{f.stem}", f"tile {k}") is not None:
                        self.count("tiles")
