"""The root of the tree (docs/tour.md) and its array-level folders."""

from __future__ import annotations

import posixpath

from ..store import ArrayStore
from .common import KeyedDir, yaml_file
from .nodes import FOREVER, PER_OPEN, BytesFile, DirNode, DynamicDir, FileNode, SymlinkNode, ViewError
from .readme import README_TEXT
from .render import to_yaml
from . import array_views
from .fragment_views import fragment_dir
from .timeline_views import timeline_file
from .as_of_views import as_of_dir
from .stats_views import root_pictures_and_stats
from .array_folders import _MAP_DIRS, build_metadata_dir, with_byte_maps

#: fragment folder nodes kept with what they rendered (about 60 KiB each after a walk): a walk of
#: 10,000 fragments keeps the last 64 (the store keeps 256 parsed fragments, which cost less).
FRAGMENT_NODES_KEPT = 64


def build_root(store: ArrayStore) -> DirNode:
    if store.legacy0x_layout:  # a TileDB 0.x array or workspace (GenomicsDB)
        from .legacy0x_views import build_legacy0x_root
        return build_legacy0x_root(store)
    if not isinstance(store, ArrayStore):  # a GroupStore, whose module a mount of an array never imports
        from .group_views import build_group_root
        return build_group_root(store, build_root)
    mtime = lambda: store.mtime("")

    def children():
        # fragments/ first of the folders: `find MNT -name footer.yaml` reaches a footer before it lists
        # the commits of 100,000 fragments
        out = {
            "README.txt": readme,
            "array.yaml": array_yaml,
            "fragments": fragments_dir,
            "schema": schema_dir,
            "metadata": metadata_dir,
            "commits": commits_dir,
            "fragment_meta": fragment_meta_dir,
            "timeline.csv": timeline_csv,
            "as_of": as_of,
            **summaries,
        }
        if store.has_labels():
            out["labels"] = labels_dir
        return out

    readme = BytesFile(lambda: README_TEXT.encode(), FOREVER, mtime=store.mtime(""))
    timeline_csv = timeline_file(store)
    as_of = as_of_dir(store)
    summaries = root_pictures_and_stats(store)  # stats.csv, fragments.svg
    array_yaml = array_views.summary_file(store, lambda: to_yaml(array_views.array_summary(store)), "array summary",
                                            checked=True)
    schema_dir = _schema_dir(store)
    metadata_dir = build_metadata_dir(store)
    commits_dir = KeyedDir(*with_byte_maps(
        store, lambda: [posixpath.basename(f) + ".yaml" for f in store.commit_files()],
        lambda name: _commit_file(store, name), store.commit_files), mtime=lambda: store.mtime("__commits"),
        mode=lambda name: DirNode.mode if name in _MAP_DIRS else FileNode.mode)
    fragment_meta_dir = KeyedDir(*with_byte_maps(
        store, lambda: [posixpath.basename(f) + ".yaml" for f in store.fragment_meta_files()],
        lambda name: _fragment_meta_file(store, name), store.fragment_meta_files),
        mtime=lambda: store.mtime("__fragment_meta"))
    fragments_dir = KeyedDir(
        store.fragment_listing,
        # one stat finds one fragment, whether __fragments/ is being written to or not (no listing of 100,000)
        lambda name: fragment_dir(store, store.fragment_path_of(name) or name),
        mtime=lambda: store.mtime("__fragments"),
        exists=lambda name: store.fragment_path_of(name) is not None, gone=store.fragment_gone, mode=DirNode.mode,
        keep=FRAGMENT_NODES_KEPT, listed=store.listed_fragment_names)
    labels_dir = KeyedDir(store.label_names, lambda name: _label_array(store, name),
                          mtime=lambda: store.mtime("__labels"))
    return DynamicDir(children, mtime)


def _label_array(store: ArrayStore, name: str) -> DirNode:
    """A dimension label is a whole TileDB array of its own: shown with the same tree."""
    holder = {}

    def children():
        if "root" not in holder:
            try:
                holder["root"] = build_root(store.label_store(name))
            except Exception as exc:
                problem = store.problems.add_error(exc, f"__labels/{name}", "dimension label array")
                raise ViewError(problem.message) from None
        return holder["root"].children()

    return DynamicDir(children, lambda: store.mtime(f"__labels/{name}"))


def _schema_dir(store: ArrayStore) -> DirNode:
    def schema_names():
        out = [posixpath.basename(f) + ".yaml" for f in store.schema_files()]
        latest = store.latest_schema_file()
        if latest:
            out.append("current.yaml")
        if store.has_enumerations():
            out.append("enumerations")
        return out

    def make(name):
        if name == "current.yaml":
            return _CurrentSchemaLink(store)
        if name == "enumerations":
            return KeyedDir(*with_byte_maps(
                store, lambda: [posixpath.basename(f) + ".yaml" for f in store.enumeration_files()],
                lambda n: _enumeration_file(store, n), store.enumeration_files))
        rel = store.schema_path(name[:-5])
        return yaml_file(lambda: array_views.schema_view(store, rel), store.problems,
                         rel, "array schema", mtime=store.mtime(rel))

    return KeyedDir(*with_byte_maps(store, schema_names, make, store.schema_files),
                    mtime=lambda: store.mtime("__schema"))


class _CurrentSchemaLink(SymlinkNode):
    def __init__(self, store):
        self._store = store

    @property
    def target(self) -> str:
        latest = self._store.latest_schema_file()
        return posixpath.basename(latest) + ".yaml" if latest else ""


def _enumeration_file(store, name):
    rel = store.enumeration_path(name[:-5])
    return yaml_file(lambda: array_views.enumeration_view(store, rel), store.problems,
                     rel, "enumeration", mtime=store.mtime(rel))


def _commit_file(store, name):
    rel = store.commit_path(name[:-5])
    return yaml_file(lambda: array_views.commit_view(store, rel), store.problems,
                     rel, "commit file", keep=PER_OPEN, mtime=store.mtime(rel))


def _fragment_meta_file(store, name):
    rel = store.fragment_meta_path(name[:-5])
    return yaml_file(lambda: array_views.fragment_meta_view(store, rel), store.problems,
                     rel, "consolidated fragment metadata", mtime=store.mtime(rel))
