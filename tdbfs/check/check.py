"""`tdbfs check`: the fsck of TileDB arrays, built on the store.

Every structure is decoded on its own (schemas, enumerations, array metadata,
commit files, consolidated fragment metadata, and per fragment its metadata --
the footer and each generic tile of `__fragment_metadata.tdb`, or a 0.x
book-keeping -- and every tile of every stream), and then cross-checked: footer
file sizes and tile offsets against the files, fragment folders against commit
markers, vacuum lists against live fragments, `__fragment_meta` footers against
each fragment's own. Fragments of both layouts are checked alike, through the
fragment interface (store/fragment_interface.py); a 0.x workspace is checked
array by array. A TileDB group is checked member by member, recursively, after its
own files (details, metadata) and its listing (members missing, folders that are
not members, duplicate names); each member gets its own result. A failure is one
problem naming file, structure and byte offset; nothing here prints, and the
array is only ever read. With `--jobs N` or `--dask`, the fragments (split into tile ranges when
big) are checked by worker processes through work.py; what they found is merged into this
store's logs in the order a check in one process finds it, so the report is the same.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field, replace
from typing import Callable

from .work import check_fragment, died, plan, run_task
from ..problem import ERROR, WARNING, Problem, unique  # noqa: F401 -- WARNING: states TileDB itself leaves behind
from ..store.checked import array_files
from ..store.group_store import Cycle, GroupStore, MemberError

#: a fragment whose files hold more than this is checked by several tasks (field, stream, tile range), so
#: that one big fragment keeps every worker busy
SPLIT_BYTES = 64 << 20


@dataclass
class CheckResult:
    array: str
    problems: list[Problem] = field(default_factory=list)
    counts: dict = field(default_factory=dict)    # what was decoded: fragments, tiles, generic tiles, ...
    #: a group's: one result per member, recursively (their problems are also in `problems`)
    members: list["CheckResult"] | None = None

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
        """One line; for a group, one per member (recursively) and the group's own last."""
        if self.members is not None:
            own = self._line(f"group of {self.counts.get('members', 0)} members, ")
            return "\n".join([m.summary() for m in self.members] + [own])
        return self._line()

    def _line(self, kind: str = "") -> str:
        c = self.counts
        what = (f"{c.get('fragments', 0)} fragments, {c.get('tiles', 0)} tiles, "
                f"{c.get('generic_tiles', 0)} generic tiles, {c.get('files', 0)} files")
        verdict = "clean" if self.clean else f"{len(self.errors)} problems"
        warn = f", {len(self.warnings)} warnings" if self.warnings else ""
        return f"{self.array}: {kind}{verdict}{warn} ({what} checked)"

    def to_dict(self) -> dict:
        out = {"array": self.array, "clean": self.clean, "errors": len(self.errors),
               "warnings": len(self.warnings), "counts": dict(self.counts),
               "problems": [p.printable().to_dict() for p in self.problems]}
        if self.members is not None:
            out["members"] = [m.to_dict() for m in self.members]
        return out


@dataclass
class Tally:
    """What the workers of a parallel check have done so far (the progress bar's figures)."""

    tiles: int = 0
    bytes_read: int = 0
    requests: int = 0


#: progress(done, total, what, tally): steps done of total (a parallel check: fragments, with its Tally)
Progress = Callable[..., None]


def check_array(store, progress: Progress | None = None, executor=None, spec=None,
                split_bytes: int = SPLIT_BYTES) -> CheckResult:
    """Check the array of `store` (an ArrayStore, a 0.x array store, a 0.x workspace store, whose every
    array is checked, or a GroupStore, whose every member is); never raises for damage it finds.

    Everything is decoded through the store, which records what fails; the result lists the store's
    findings, the list array.yaml shows, so a mount that has read everything says the same.

    With an `executor` (work.py: `run(fn, spec, tasks)`), the fragments are checked by its workers,
    each opening the array from `spec` (a work.StoreSpec); their problems go into this store's logs
    in the order `--jobs 1` finds them, so the result is the same, byte for byte."""
    if isinstance(store, GroupStore):
        return _check_group(store, progress, executor, spec, split_bytes)
    checker = _Checker(store, progress or (lambda done, total, what, tally=None: None))
    if store.legacy0x_layout == "workspace":
        for rel in store.array_paths():
            checker.run(store.array(rel))
    elif executor is not None:
        checker.run_parallel(store, executor, spec, split_bytes)
    else:
        checker.run(store)
    checker.result.problems = store.findings()
    return checker.result


class _Checker:
    def __init__(self, store, progress: Progress):
        self.progress = progress
        self.result = CheckResult(getattr(store, "path", ""),
                                  counts={"fragments": 0, "tiles": 0, "generic_tiles": 0, "files": 0})

    def count(self, what: str, n: int = 1) -> None:
        self.result.counts[what] = self.result.counts.get(what, 0) + n

    # -- the whole array -----------------------------------------------------------------
    def run(self, store) -> None:
        fragments = store.fragment_paths()
        steps = 4 + len(fragments)
        self.progress(0, steps, "schemas")
        files = array_files(store)
        self._array_level(store, steps)
        done = 3
        for rel in fragments:
            self.progress(done, steps, posixpath.basename(rel))
            frag = store.fragment(rel)
            check_fragment(store, frag, self.result.counts)
            store.checked.mark_fragment(frag, tiles=True)
            done += 1
        self._consolidated(store, lambda: self.progress(done, steps, "consolidated fragment metadata"))
        store.checked.mark_files(files)   # array.yaml's `checked:` (store/checked.py)
        self.progress(steps, steps, "done")

    def run_parallel(self, store, executor, spec, split_bytes: int) -> None:
        """As run(), with the fragments checked by `executor`'s workers: their results are merged in task
        order, so each log holds what run() would have put there, in the same order."""
        tally = Tally()
        tasks = plan(store, spec, split_bytes)
        frags = list(dict.fromkeys(t.fragment for t in tasks))
        left = {rel: 0 for rel in frags}   # tasks not yet done, per fragment
        for t in tasks:
            left[t.fragment] += 1
        self.progress(0, len(frags), "array files", tally)
        files = array_files(store)
        self._array_level(store, 0, lambda *a: None)
        results = {}
        done = 0
        for r in executor.run(run_task, spec, tasks):
            results[r.index] = r
            tally.tiles += r.counts.get("tiles", 0)
            tally.bytes_read += r.bytes_read
            tally.requests += r.requests
            rel = tasks[r.index].fragment
            left[rel] -= 1
            done += not left[rel]
            self.progress(done, len(frags), posixpath.basename(rel), tally)
        for t in tasks:
            r = results.get(t.index) or died(t, "it sent no result")
            for p in r.store_problems:
                store.problems.add(p)
            log = store.fragment(t.fragment).problems
            for p in r.fragment_problems:
                log.add(p)
            for what, n in r.counts.items():
                self.count(what, n)
        # checked whole where every task of it gave its result, and no worker died on one
        unfinished = {t.fragment for t in tasks if t.index not in results
                      or any(p.structure == "check" for p in results[t.index].fragment_problems)}
        for rel in frags:
            if rel not in unfinished:
                store.checked.mark_fragment(store.fragment(rel), tiles=True)
        self._consolidated(store, lambda: self.progress(len(frags), len(frags), "consolidated fragment metadata",
                                                          tally))
        store.checked.mark_files(files)
        self.progress(len(frags), len(frags), "done", tally)

    def _array_level(self, store, steps: int, progress: Progress | None = None) -> None:
        if store.legacy0x_layout:
            for rel in store.schema_files():   # 0.x keeps nothing else at the array level
                self.count("files")
                store.attempt(store.legacy0x_schema, rel, "0.x array schema")
        else:
            self._array_files(store, steps, progress or self.progress)

    def _consolidated(self, store, announce) -> None:
        if not store.legacy0x_layout:
            announce()
            for rel in store.fragment_meta_files():
                self.count("files")
                if store.attempt(lambda rel=rel: store.consolidated_fragment_metadata(rel), rel,
                                 "consolidated fragment metadata") is not None:
                    self.count("generic_tiles")

    def _array_files(self, store, steps: int, progress: Progress) -> None:
        """The array-level files of TileDB 2.x: schemas, enumerations, array metadata, commits."""
        for rel in store.schema_files():
            self._generic_file(store, rel, "array schema", store.schema)
        for rel in store.enumeration_files():
            self._generic_file(store, rel, "enumeration", store.enumeration)
        progress(1, steps, "array metadata")
        self._metadata_files(store)
        progress(2, steps, "commits")
        for rel in store.commit_files():
            self.count("files")
            if rel.endswith(".vac"):
                store.attempt(lambda rel=rel: store.vacuum_file(rel), rel, "vacuum file")
            elif rel.endswith(".ign"):
                store.attempt(lambda rel=rel: store.ignore_file(rel), rel, "ignore file")
            elif rel.endswith(".con"):
                store.attempt(lambda rel=rel: store.embedded_conditions(rel), rel, "consolidated commits")
            elif rel.endswith((".del", ".upd")):
                self.count("files", -1)
                kind = "delete condition" if rel.endswith(".del") else "update condition"
                self._generic_file(store, rel, kind, store.condition)

    def _metadata_files(self, store) -> None:
        """`__meta/` of an array or a group."""
        for rel in store.metadata_files():
            if rel.endswith(".tmp"):
                continue
            if rel.endswith(".vac"):
                self.count("files")
                store.attempt(lambda rel=rel: store.vacuum_file(rel), rel, "vacuum file")
                continue
            self._generic_file(store, rel, "array metadata", store.array_metadata)

    def _generic_file(self, store, rel: str, structure: str, parse) -> None:
        self.count("files")
        if store.attempt(lambda: store.generic_tile(rel, 0, structure), rel, structure) is None:
            return
        self.count("generic_tiles")
        store.attempt(lambda: parse(rel), rel, structure)


# -- groups ------------------------------------------------------------------------------------

def _check_group(store: GroupStore, progress: Progress | None, executor, spec, split_bytes: int) -> CheckResult:
    """The group's own files, then every member it lists (a member that is a group: recursively;
    one leading back to a group above it: not again). Member results name files from the group's
    folder (`obs/__fragments/...`), or from the member's own location when it lies elsewhere."""
    checker = _Checker(store, progress or (lambda done, total, what: None))
    members = store.members()
    checker.progress(0, len(members) + 1, "group details")
    files = array_files(store)
    for rel in store.details_files():
        checker._generic_file(store, rel, "group details", store.group_details)
    checker._metadata_files(store)
    store.checked.mark_files(files)
    result = checker.result
    own = store.findings()   # opens every member: those missing are among its problems
    results = []
    for i, member in enumerate(members):
        checker.progress(i + 1, len(members) + 1, member.shown)
        try:
            target = store.member_store(member.shown)
        except MemberError:
            continue
        if isinstance(target, Cycle):
            continue
        member_spec = replace(spec, location=target.path) if spec is not None else None
        results.append(_prefixed(check_array(target, progress, executor, member_spec, split_bytes),
                                 store.member_prefix(member)))
    for sub in results:
        for what, n in sub.counts.items():
            result.counts[what] = result.counts.get(what, 0) + n
    result.counts["members"] = len(members)
    result.members = results
    result.problems = unique(own, *(sub.problems for sub in results))
    return result


def _prefixed(result: CheckResult, prefix: str, top: bool = True) -> CheckResult:
    """`result` of the member at `prefix` with its files (and its own members, which its group named
    from its folder) named from the group's folder; absolute locations stay as they are."""
    def under(path: str) -> str:
        if path.startswith("/") or "://" in path:
            return path
        return f"{prefix}/{path}" if path else prefix

    problems = [Problem(under(p.file), p.structure, p.offset, p.message, p.severity, p.within)
                for p in result.problems]
    members = [_prefixed(m, prefix, False) for m in result.members] if result.members is not None else None
    return CheckResult(prefix if top else under(result.array), problems, dict(result.counts), members)
