"""`as_of/<T>/`: the array as a reader opening it at timestamp T (ms) sees it (store/as_of.py).

`as_of/` lists the timeline's distinct times, the newest of them when the folders of all would hold too
many symlinks to walk (store.as_of.listed_times), and finds any other T typed: any non-negative integer
written without leading zeros.
"""

from __future__ import annotations

import posixpath
import re

from ..format.names import U64_MAX, iso8601_ms
from . import array_views
from .common import KeyedDir, guarded
from .nodes import BytesFile, DirNode, DynamicDir, SymlinkNode, WhileState
from .render import to_yaml

_DECIMAL = re.compile(r"(0|[1-9][0-9]*)\Z")
#: as_of/now/: the array as a reader opening it now sees it (found when typed, not listed)
NOW = "now"
#: as_of/<T>/ folders kept with what they rendered
MOMENTS_KEPT = 16


def as_of_dir(store) -> DirNode:
    def times():
        from ..store.as_of import listed_times
        from ..store.timeline import distinct_times, timeline
        # the timeline lists every fragment: built again only when the array's listings change
        return store.per_summary("as_of times", lambda: [
            str(t) for t in listed_times(store, distinct_times(timeline(store)))])

    return KeyedDir(guarded(times, store.problems, "", "timeline"),
                    lambda name: moment_dir(store, None if name == NOW else int(name)),
                    mtime=lambda: store.mtime(""),
                    exists=lambda name: name == NOW or is_timestamp(name), mode=DirNode.mode, keep=MOMENTS_KEPT)


def is_timestamp(name: str) -> bool:
    return bool(_DECIMAL.match(name)) and int(name) <= U64_MAX


def moment_state(store):
    """A key that changes whenever a file that decides what a reader at any T sees comes or goes (the
    commits, schemas, fragment folders, metadata files), or None when that cannot be told: while one of
    their folders changed within the last second (mtimes tick coarsely, as store.commits_state says)."""
    return store.listing_stamps(store.COMMIT_FOLDERS + ("__schema", "__fragments", "__meta"))


def moment_dir(store, when: int | None) -> DirNode:
    """as_of/<T>/; `when` None: as_of/now/, T the time of each use (what tiledb.open(uri) takes)."""
    import time
    from ..store import as_of
    from .as_of_cells import cells_children
    seen: dict = {}

    def at() -> int:
        return time.time_ns() // 1_000_000 if when is None else when

    def reader_fragments():
        """as_of.reader_fragments, again only when a commit, schema or fragment folder came or went:
        `find` lstats every symlink of fragments/, and each lookup asks."""
        state = moment_state(store)
        if state is not None and when is not None and seen.get("state") == state:
            return seen["value"]
        value = as_of.reader_fragments(store, at())
        seen.update(state=state, value=value, names={posixpath.basename(r) for r in value.fragments})
        return value

    def fragment_names():
        return [posixpath.basename(rel) for rel in reader_fragments().fragments]

    def has_fragment(name):
        reader_fragments()
        return name in seen["names"]

    def schema():
        rel = as_of.schema_as_of(store, at())
        if rel is None:
            raise FileNotFoundError("__schema")
        return array_views.schema_view(store, rel)

    def reader():
        rel = as_of.schema_as_of(store, at())
        read = reader_fragments()
        t = at()
        return {"timestamp": t, "time_utc": iso8601_ms(t), "schema": rel,
                "array_type": None if rel is None else "dense" if store.schema(rel).dense else "sparse",
                "fragments_read": [posixpath.basename(r) for r in read.fragments],
                "fragments_replaced": [posixpath.basename(r) for r in read.replaced],
                "fragments_missing": [posixpath.basename(r) for r in read.missing]}

    def guard(render, file, structure):
        return guarded(render, store.problems, file, structure)

    # the mount's fragments/<name>, from as_of/<T>/fragments/<name>
    fragments = KeyedDir(guard(fragment_names, "__schema", "array schema"),
                         lambda name: SymlinkNode(f"../../../fragments/{name}"), mtime=lambda: store.mtime(""),
                         exists=lambda name: guard(lambda: has_fragment(name), "__schema", "array schema")(),
                         mode=SymlinkNode.mode)

    def kept():
        # which schema, fragments and metadata files are in force at T changes as files are written
        return WhileState(lambda: moment_state(store))

    children = {
        "fragments": fragments,
        "reader.yaml": BytesFile(guard(lambda: to_yaml(reader()), "__schema", "array schema"), kept()),
        "metadata.yaml": BytesFile(guard(lambda: to_yaml(array_views.merged_metadata(
            store, as_of.metadata_as_of(store, at()))), "__meta", "array metadata"), kept()),
    }
    schema_file = BytesFile(guard(lambda: to_yaml(schema()), "__schema", "array schema"), kept())
    # like schema/current.yaml, there only when there is a schema file; so are the cells a reader returns
    with_schema = {**children, "schema.yaml": schema_file, **cells_children(store, at, lambda: moment_state(store))}
    return DynamicDir(lambda: with_schema if as_of.schema_as_of(store, at()) else children,
                      mtime=lambda: store.mtime(""))
