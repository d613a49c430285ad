"""The array as a reader opening it at timestamp T sees it: its fragments, its schema, its metadata.

tiledb-py's `tiledb.open(uri, timestamp=T)` opens the range [0, T]. The rules are TileDB 2.30.1's
`tiledb/sm/array/array_directory.cc` (`ArrayDirectory::load` and what it calls), followed step by
step below; `tiledb/sm/fragment/fragment_info.cc` (`load_array_schemas_and_fragment_metadata`)
filters the fragments with `full_overlap_only` = the schema in force is dense, and
`tiledb/sm/array/array.cc` (`do_load_metadata`) reads the metadata files `load_array_meta_uris`
chose, in `Metadata::deserialize` (`tiledb/sm/metadata/metadata.cc`).
"""

from __future__ import annotations

import bisect
import os
import time
import weakref
from dataclasses import dataclass

from ..format.array_metadata import merge_metadata
from ..format.names import try_parse_name
from .array_store import COMMITS_DIR, FRAGMENT_METADATA_FILE, FRAGMENTS_DIR, LEGACY_SCHEMA
from .metadata_files import META_DIR, MergedMetadata
from .std_sort import std_sort

#: constants::consolidation_with_timestamps_min_version (tiledb/sm/misc/constants.cc): from this format
#: on, a sparse reader keeps a fragment whose range only partly overlaps [0, T] and filters its cells
#: by their timestamps (t.tdb)
CONSOLIDATION_WITH_TIMESTAMPS_MIN_VERSION = 15
#: symlinks the `fragments/` folders of the times as_of/ lists hold in all, beyond two per fragment: N writes
#: without consolidation make N times of up to N fragments each, ~N^2/2 symlinks (100,000 writes: 5 billion)
LINKS_LISTED = 10_000
#: constants::array_dir_names that is_fragment excludes at the array root
_NOT_FRAGMENTS = ("__schema", "__commits", "__meta", "__fragments", "__fragment_meta")


@dataclass(frozen=True)
class FragmentsAsOf:
    fragments: tuple[str, ...]   # relative paths of the fragment folders read, in TileDB's order (by t1)
    missing: tuple[str, ...]     # committed fragments in range whose folders are not there (TileDB fails)
    replaced: tuple[str, ...]    # committed fragments in range that a .vac in range lists


def schema_as_of(store, t: int) -> str | None:
    """The schema a reader at T uses (ArrayDirectory::select_latest_array_schema_uri): the __schema
    file with the greatest timestamps whose t2 <= T; when none is, the first schema of the listing
    (the legacy __array_schema.tdb if there is one)."""
    files = store.schema_files()
    best = None
    for rel in files:
        if rel == LEGACY_SCHEMA:
            continue
        n = try_parse_name(os.path.basename(rel))
        if n is not None and n.t2 <= t and (best is None or (n.t1, n.t2, n.stem) > best[0]):
            best = ((n.t1, n.t2, n.stem), rel)
    if best is not None:
        return best[1]
    return files[0] if files else None


def listed_times(store, times: list[int]) -> list[int]:
    """The times as_of/ lists, of `times` (ascending): the newest, back to where the `fragments/` folders of
    the times listed would hold more than LINKS_LISTED symlinks plus two per fragment, so that a walk of
    the mount stays linear in the fragments. A time's folder is counted as the committed fragments that
    start by it (at least what it holds, whatever the array type). Always the newest time; every other
    time is still found when typed."""
    candidates, _ = _candidates(store)
    starts = sorted(n.t1 for _, n in candidates)
    budget = LINKS_LISTED + 2 * len(starts)
    out: list[int] = []
    for t in reversed(times):
        budget -= bisect.bisect_right(starts, t)
        if budget < 0 and out:
            break
        out.append(t)
    return out[::-1]


def reader_fragments(store, t: int) -> FragmentsAsOf:
    """The fragments a reader at T reads, given the schema in force at T (none without a schema: TileDB
    then refuses to open the array)."""
    rel = schema_as_of(store, t)
    if rel is None:
        return FragmentsAsOf((), (), ())
    return fragments_as_of(store, t, dense=store.schema(rel).dense)


def fragments_as_of(store, t: int, dense: bool) -> FragmentsAsOf:
    """The fragments a reader at T reads (ArrayDirectory::filtered_fragment_uris(full_overlap_only =
    `dense`), from the candidates `load` lists)."""
    candidates, vac_files = _candidates(store)
    # compute_uris_to_vacuum: the entries of every .vac in range name fragments that are replaced
    replaced = set()
    for name, entries in vac_files:
        if _in_range(name, t, dense):
            replaced.update(entries)
    live = set(store.fragment_paths())
    read, missing, listed = [], [], []
    for rel, name in candidates:
        if not _in_range(name, t, dense):
            continue
        (listed if rel in replaced else read if rel in live else missing).append(rel)
    return FragmentsAsOf(tuple(read), tuple(missing), tuple(listed))


def _candidates(store):
    """(((relative path, FragmentName), ...) of every committed fragment in TileDB's order (by t1; equal t1
    in the order of ArrayDirectory::load's listing up to 16 fragments, past that as std::sort leaves them),
    ((.vac FragmentName, its entries), ...)): what does not depend on T, kept while the commits stay."""
    def make():
        con_set = _consolidated_commits(store)
        named = {}
        for rel in _root_fragments(store, con_set) + _commits_dir_fragments(store, con_set):
            n = try_parse_name(os.path.basename(rel))
            if n is not None:
                named.setdefault(rel, n)
        vacs = []
        for rel in store.commit_files():
            n = try_parse_name(os.path.basename(rel))
            if rel.endswith(".vac") and n is not None:
                entries = store.attempt(lambda rel=rel: store.vacuum_file(rel), rel, "vacuum file") or ()
                vacs.append((n, frozenset(entries)))
        # compute_filtered_uris: std::sort by t1 alone over the listing's order (not stable past 16)
        ordered = std_sort(list(named.items()), lambda x, y: x[1].t1 < y[1].t1)
        return tuple(ordered), tuple(vacs)

    return store.per_listing("as_of candidates", store.COMMIT_FOLDERS, make)


def metadata_as_of(store, t: int) -> MergedMetadata:
    """The metadata a reader at T sees (ArrayDirectory::load_array_meta_uris, full overlap only): the
    __meta files with t2 <= T, less those a __meta .vac with t2 <= T lists, applied in time order."""
    in_range = [rel for n, rel in _meta_listing(store) if _in_range(n, t, True)]
    replaced = set()
    for rel in in_range:
        if rel.endswith(".vac"):
            entries = store.attempt(lambda rel=rel: store.vacuum_file(rel), rel, "vacuum file") or ()
            replaced.update(f"{META_DIR}/{os.path.basename(e)}" for e in entries)
    applied, skipped = [], []
    for rel in in_range:
        if rel.endswith(".vac"):
            continue
        if rel in replaced:
            skipped.append(rel)
            continue
        records = store.attempt(lambda rel=rel: store.array_metadata(rel), rel, "array metadata")
        if records is not None:
            applied.append((os.path.basename(rel), records))
    return MergedMetadata(tuple(b for b, _ in applied), tuple(skipped), merge_metadata(applied))


#: store -> (state of __meta, _meta_listing): `find` on as_of/ asks for every time in turn
_META_LISTINGS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _meta_listing(store) -> tuple:
    """((FragmentName, relative path) of every __meta file but `.tmp` ones, in time order), listed
    again only when the folder changed."""
    try:
        stamp = store.stat(META_DIR).mtime_ns
    except OSError:
        stamp = None
    fresh = stamp is not None and time.time_ns() - stamp < 1_000_000_000   # mtimes tick coarsely
    hit = _META_LISTINGS.get(store)
    if hit is not None and hit[0] == stamp and not fresh:
        return hit[1]
    named = ((try_parse_name(os.path.basename(rel)), rel) for rel in store.metadata_files() if not rel.endswith(".tmp"))
    listing = tuple(sorted(((n, rel) for n, rel in named if n is not None), key=lambda item: item[0].sort_key))
    if not fresh:
        _META_LISTINGS[store] = (stamp, listing)
    return listing


def _in_range(n, t: int, full_overlap_only: bool) -> bool:
    """ArrayDirectory::timestamps_overlap of the name `n` for the range [0, T], with consolidation with
    timestamps when `full_overlap_only` is off and the name's format supports it
    (ArrayDirectory::consolidation_with_timestamps_supported)."""
    if not full_overlap_only and n.assumed_format_version >= CONSOLIDATION_WITH_TIMESTAMPS_MIN_VERSION:
        return n.t1 <= t
    return n.t2 <= t


def _consolidated_commits(store) -> set[str]:
    """The entries of every __commits .con file, as paths relative to the array, less those a .ign file
    lists (ArrayDirectory::load_consolidated_commit_uris: neither kind is filtered by time)."""
    commits = [rel for rel in store.commit_files() if rel.startswith(COMMITS_DIR + "/")]
    ignored = set()
    for rel in commits:
        if rel.endswith(".ign"):
            ignored.update(store.attempt(lambda rel=rel: store.ignore_file(rel), rel, "ignore file") or ())
    out = set()
    for rel in commits:
        if rel.endswith(".con"):
            con = store.attempt(lambda rel=rel: store.consolidated_commits(rel), rel, "consolidated commits")
            out.update(e.path for e in con or () if e.path not in ignored)
    return out


def _root_fragments(store, con_set: set[str]) -> list[str]:
    """Committed fragments at the array root, formats 1-11 (compute_fragment_uris_v1_v11, is_fragment):
    a `<name>.ok` at the root or in a .con commits one; before format 5 its metadata file does."""
    root = set(store.listdir(""))
    out = []
    for name in sorted(store.storage.subdirs("")):   # VFS::ls_with_sizes lists in byte order
        if "." in name or "_" not in name or name in _NOT_FRAGMENTS:
            continue
        n = try_parse_name(name)
        if f"{name}.ok" in root or f"{name}.ok" in con_set:
            out.append(name)
        elif n is not None and n.assumed_format_version < 5 and store.isfile(f"{name}/{FRAGMENT_METADATA_FILE}"):
            out.append(name)
    return out


def _commits_dir_fragments(store, con_set: set[str]) -> list[str]:
    """Fragments of format 12 on (load_commits_dir_uris_v12_or_higher): the .wrt entries of the .con
    files, then each __commits .wrt file that no .con lists."""
    out = [f"{FRAGMENTS_DIR}/{os.path.basename(p)[:-4]}" for p in sorted(con_set) if p.endswith(".wrt")]
    for rel in sorted(store.commit_files()):
        if rel.startswith(COMMITS_DIR + "/") and rel.endswith(".wrt") and rel not in con_set:
            out.append(f"{FRAGMENTS_DIR}/{os.path.basename(rel)[:-4]}")
    return out

