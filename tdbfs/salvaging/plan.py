"""What a salvaged copy of an array as of T holds, decided from the store before anything is written.

The files a reader at T uses (store/as_of.py follows TileDB 2.30's `ArrayDirectory`): the schema in
force at T and every earlier one, the enumerations, the `__meta` files in range, the delete conditions in
range (also those a `.con` embeds: without them deleted cells come back), and the fragments read at T.
Each file is kept only when it decodes; each fragment is checked as `tdbfs check` checks it
(check/work.py: its listing, its metadata, every tile and checksum) and is `sound` when that found
nothing, else `damaged` (rewritten from its surviving cells), or `missing` when committed without a folder.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..check.work import check_fragment
from ..errors import TdbfsError
from ..format.names import try_parse_name
from ..problem import ERROR, Problem, unique
from ..store.array_store import COMMITS_DIR, LEGACY_SCHEMA
from ..store.as_of import reader_fragments, schema_as_of


class SalvageError(TdbfsError):
    """Salvage cannot start (nothing written): one line saying why."""


SOUND, DAMAGED, MISSING = "sound", "damaged", "missing"


@dataclass(frozen=True)
class FileCopy:
    """One array-level file to copy byte for byte: from `source` (relative to SRC), or `data` when it
    comes out of a `.con` (an embedded delete condition), to `rel` (relative to DEST)."""
    rel: str
    source: str | None = None
    data: bytes | None = None


@dataclass(frozen=True)
class FragmentPlan:
    rel: str                        # relative path of the fragment folder, kept in DEST
    state: str                      # SOUND, DAMAGED or MISSING
    problems: tuple = ()            # Problem, why it is damaged
    schema: str | None = None       # the schema file its footer names (relative path), when it decodes


@dataclass(frozen=True)
class Plan:
    t: int                          # the time read (ms)
    schema: str                     # the schema in force at T
    schemas: tuple[str, ...]        # schema files to copy, oldest first (the one in force among them)
    enumerations: tuple[str, ...]
    metadata: tuple[str, ...]       # __meta files (and .vac files whose consolidated file is kept)
    conditions: tuple[FileCopy, ...]
    fragments: tuple[FragmentPlan, ...]   # in TileDB's order (by t1)
    lost_files: tuple[Problem, ...]  # array-level files in range that do not decode


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def make_plan(store, t: int | None = None) -> Plan:
    """The plan of a salvage of `store` (an ArrayStore of a TileDB 2.x array) as of `t` (ms; None: now).
    SalvageError when the schema in force does not decode: nothing could be read back."""
    if getattr(store, "legacy0x_layout", None):
        raise SalvageError(f"{store.path} is a TileDB 0.x array, which TileDB 2 does not open: "
                           "salvage writes arrays TileDB 2 opens")
    t = now_ms() if t is None else int(t)
    current = schema_as_of(store, t)
    if current is None:
        raise SalvageError(f"{store.path}: no array schema in force at {t}")
    schema = store.attempt(lambda: store.schema(current), current, "array schema")
    if schema is None:
        first = next((p for p in store.all_problems() if p.file == current), None)
        raise SalvageError(first.line() if first is not None else f"{current}: the array schema does not decode")
    lost: list[Problem] = []
    schemas = _schemas(store, t, current, lost)
    enumerations = tuple(rel for rel in store.enumeration_files()
                         if _decodes(store, rel, "enumeration", store.enumeration, lost))
    metadata = _metadata(store, t, lost)
    conditions = _conditions(store, t, lost)
    lost += _not_regular(store)
    read = reader_fragments(store, t)
    fragments = [_fragment_plan(store, rel) for rel in read.fragments]
    fragments += [FragmentPlan(rel, MISSING, (Problem(rel, "fragment", None,
                                                      "committed, but its folder is not there"),))
                  for rel in read.missing]
    order = {rel: i for i, rel in enumerate(_in_order(read))}
    fragments.sort(key=lambda f: order.get(f.rel, 0))
    return Plan(t, current, schemas, enumerations, metadata, tuple(conditions), tuple(fragments), tuple(lost))


def _in_order(read) -> list[str]:
    """The fragments read and missing, by t1 (TileDB's order)."""
    def key(rel):
        n = try_parse_name(os.path.basename(rel))
        return (n.t1, n.t2) if n is not None else (0, 0)
    return sorted(list(read.fragments) + list(read.missing), key=key)


def _decodes(store, rel: str, structure: str, parse, lost: list) -> bool:
    def run():
        store.generic_tile(rel, 0, structure)
        return parse(rel)
    if store.attempt(run, rel, structure) is not None:
        return True
    problem = next((p for p in store.all_problems() if p.file == rel), None)
    lost.append(problem or Problem(rel, structure, None, "does not decode"))
    return False


def _schemas(store, t: int, current: str, lost: list) -> tuple[str, ...]:
    """The schema files of time <= T (the legacy one first), oldest first, those that decode; the one in
    force always."""
    out = []
    for rel in store.schema_files():
        n = try_parse_name(os.path.basename(rel))
        if rel != current and rel != LEGACY_SCHEMA and (n is None or n.t2 > t):
            continue
        if rel == current or _decodes(store, rel, "array schema", store.schema, lost):
            out.append(rel)

    def key(rel):
        n = try_parse_name(os.path.basename(rel))
        return (-1, -1, "") if rel == LEGACY_SCHEMA or n is None else (n.t1, n.t2, n.stem)
    return tuple(sorted(out, key=key))


def _metadata(store, t: int, lost: list) -> tuple[str, ...]:
    """The __meta files of time <= T that decode; a .vac only with the consolidated file it stands for
    (it hides the files that file merged: without that file, they must be read)."""
    files, vacs = [], []
    for rel in store.metadata_files():
        n = try_parse_name(os.path.basename(rel))
        if rel.endswith(".tmp") or n is None or n.t2 > t:
            continue
        if rel.endswith(".vac"):
            vacs.append(rel)
        elif _decodes(store, rel, "array metadata", store.array_metadata, lost):
            files.append(rel)
    kept = set(files)
    for rel in vacs:
        if rel[:-4] in kept and store.attempt(lambda rel=rel: store.vacuum_file(rel), rel, "vacuum file") is not None:
            files.append(rel)
    return tuple(files)


def _conditions(store, t: int, lost: list) -> list[FileCopy]:
    """The delete conditions of time <= T: each __commits .del file that decodes, and each one a .con
    embeds (written out as the .del file it was). Update conditions are not applied by reads."""
    out: dict[str, FileCopy] = {}
    for rel in store.commit_files():
        if not rel.startswith(COMMITS_DIR + "/"):
            continue
        n = try_parse_name(os.path.basename(rel))
        if n is None or n.t2 > t:
            continue
        if rel.endswith(".del") and _decodes(store, rel, "delete condition", store.condition, lost):
            out[rel] = FileCopy(rel, source=rel)
    for rel in store.commit_files():
        if not (rel.startswith(COMMITS_DIR + "/") and rel.endswith(".con")):
            continue
        entries = store.attempt(lambda rel=rel: store.consolidated_commits(rel), rel, "consolidated commits") or ()
        decoded = store.embedded_conditions(rel)
        for entry in entries:
            if entry.kind != "del":
                continue
            name = os.path.basename(entry.path)
            n = try_parse_name(name)
            if n is None or n.t2 > t:
                continue
            target = f"{COMMITS_DIR}/{name}"
            if entry.offset in decoded:
                out.setdefault(target, FileCopy(target, data=bytes(entry.embedded)))
            else:
                lost.append(Problem(rel, "embedded delete condition", entry.offset,
                                    f"the delete condition {name} does not decode"))
    return [out[k] for k in sorted(out)]


def _not_regular(store) -> list[Problem]:
    """Entries of the schema, metadata and commit folders that are not regular files (a FIFO, a device, a
    symlink: never opened, store/findings.py): what was a file there is lost."""
    folders = ("__schema/", "__meta/", COMMITS_DIR + "/")
    return [p for p in store.listing_findings() if p.severity == ERROR and p.file.startswith(folders)
            and p.structure == "file"]


def _fragment_plan(store, rel: str) -> FragmentPlan:
    """Checked as `tdbfs check` checks a fragment: sound when that finds nothing at all."""
    frag = store.fragment(rel)
    counts = {"fragments": 0, "tiles": 0, "generic_tiles": 0, "files": 0}
    try:
        check_fragment(store, frag, counts)
    except Exception as exc:  # noqa: BLE001 -- the check records what it meets; anything else damages too
        frag.problems.add_error(exc, rel, "fragment")
    problems = tuple(unique(store.fragment_findings(frag), frag.problems.items))
    schema = None
    try:
        name = frag.footer().array_schema_name
        schema = f"__schema/{name}" if name else LEGACY_SCHEMA
    except Exception:  # noqa: BLE001 -- among its problems already
        pass
    return FragmentPlan(rel, DAMAGED if problems else SOUND, problems, schema)

