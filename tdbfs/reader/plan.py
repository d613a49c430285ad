"""What a read at T takes: the fragments in TileDB's priority order, the schema in force, and the delete
commits in force (docs/reader.md; tiledb/sm/array/array_directory.cc, array_operations.cc).

tiledb-py's `tiledb.open(uri, timestamp=T)` opens [0, T]; without a timestamp, [0, now].
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..errors import TdbfsError
from ..format.names import try_parse_name
from ..store.as_of import reader_fragments, schema_as_of
from .batch import ReadPlan

COMMITS_DIR = "__commits"


class ReadError(TdbfsError):
    """A read TileDB itself would refuse (no schema, a committed fragment missing, a condition it cannot
    evaluate); the message names the file."""


@dataclass(frozen=True)
class Delete:
    """A delete commit in force at T: its timestamp, its marker (as fragments' processed conditions name
    it), the stored keep-condition, and the file it was read from."""
    timestamp: int
    marker: str
    condition: object      # format.commits ConditionNode (the negated delete condition), None = keep all
    file: str


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def make_plan(store, as_of: int | None = None, subarray=None) -> ReadPlan:
    """The ReadPlan of a read at `as_of` (ms; None: now). ReadError when TileDB would refuse the read."""
    t = now_ms() if as_of is None else int(as_of)
    schema_rel = schema_as_of(store, t)
    if schema_rel is None:
        raise ReadError("__schema: no array schema: TileDB cannot open the array")
    at = reader_fragments(store, t)
    if at.missing:
        raise ReadError(f"{at.missing[0]}: committed but not there: TileDB refuses to open the array at {t}")
    return ReadPlan(t, schema_rel, tuple(at.fragments), subarray)


def deletes_in_force(store, t: int) -> list[Delete]:
    """The delete (and update) commits with a timestamp <= T, in time order
    (ArrayDirectory::load_delete_and_update_conditions and the `.del` entries embedded in `.con` files).
    An update's values are ignored by readers, which only apply its condition (SparseIndexReaderBase)."""
    found: dict[str, Delete] = {}
    for rel in sorted(store.commit_files()):
        if not rel.startswith(COMMITS_DIR + "/"):
            continue
        if rel.endswith(".con"):
            con = store.attempt(lambda rel=rel: store.consolidated_commits(rel), rel, "consolidated commits") or ()
            conditions = store.embedded_conditions(rel) if any(e.kind == "del" for e in con) else {}
            for entry in con:
                if entry.kind == "del" and entry.offset in conditions:
                    _add(found, entry.path, conditions[entry.offset].condition, rel, t)
        elif rel.endswith((".del", ".upd")):
            commit = store.attempt(lambda rel=rel: store.condition(rel), rel, "delete condition")
            if commit is not None:
                _add(found, rel, commit.condition, rel, t)
    return sorted(found.values(), key=lambda d: (d.timestamp, d.marker))


def _add(found: dict, marker: str, condition, file: str, t: int) -> None:
    n = try_parse_name(os.path.basename(marker))
    if n is None or n.t1 > t or marker in found:
        return
    found[marker] = Delete(n.t1, marker, condition, file)
