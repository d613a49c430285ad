"""Folders of an array's (or a group's) own files, each beside its byte maps: metadata/, and the
helper commits/, schema/ and the others are made with."""

from __future__ import annotations

import posixpath

from . import array_views, layout_views
from .common import KeyedDir, guarded, yaml_file
from .nodes import LIVE, BytesFile, DirNode
from .render import to_yaml


_MAP_DIRS = ("layout", "hex")


def build_metadata_dir(store) -> DirNode:
    """metadata/ of an array or a group: merged.yaml, one YAML per `__meta` file, their byte maps."""
    return KeyedDir(*with_byte_maps(
        store, lambda: ["merged.yaml"] + [posixpath.basename(f) + ".yaml" for f in store.metadata_files()],
        lambda name: _metadata_file(store, name), store.metadata_files), mtime=lambda: store.mtime("__meta"))


def with_byte_maps(store, names, make, files):
    """(names, make) of a folder of array-level files plus its `layout/` and `hex/` byte maps."""
    maps: dict = {}

    def all_names():
        return names() + list(_MAP_DIRS)

    def make_node(name):
        if name in _MAP_DIRS:
            if not maps:
                maps.update(layout_views.array_file_dirs(store, files))
            return maps[name]
        return make(name)

    return all_names, make_node


def _metadata_file(store, name):
    if name == "merged.yaml":
        return BytesFile(guarded(lambda: to_yaml(array_views.merged_metadata(store)), store.problems,
                                "__meta", "array metadata"), LIVE)
    rel = store.metadata_path(name[:-5])
    return yaml_file(lambda: array_views.metadata_file_view(store, rel), store.problems,
                     rel, "array metadata", mtime=store.mtime(rel))
