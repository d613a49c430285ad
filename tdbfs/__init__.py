"""tdbfs: a read-only view of a TileDB array's on-disk structures as decoded files, through a FUSE
mount, a command line and this Python library (docs/library.md):

    import tdbfs
    with tdbfs.open("path/or/s3://bucket/array") as array:
        frag = array.fragments[0]
        frag.footer, frag.tile("a", 0), array.check().problems

`import tdbfs` stays light (a mount's start-up imports this package): each name below is imported
on first use.
"""

__version__ = "0.1.0"

__all__ = ["open", "Array", "Group", "Workspace", "Member", "Fragment", "Fragments", "Field", "TileInfo",
           "VarTile", "AsOf", "TdbfsError", "FormatError", "NotFoundError", "NotAnArrayError", "ViewError",
           "Problem", "CheckResult", "salvage", "SalvageError"]

#: name -> (module, attribute): where each public name lives
_EXPORTS = {
    "open": ("tdbfs.library.opening", "open"),
    "Array": ("tdbfs.library.array", "Array"),
    "Fragments": ("tdbfs.library.array", "Fragments"),
    "AsOf": ("tdbfs.library.array", "AsOf"),
    "Group": ("tdbfs.library.group", "Group"),
    "Member": ("tdbfs.library.group", "Member"),
    "Workspace": ("tdbfs.library.group", "Workspace"),
    "Fragment": ("tdbfs.library.fragment", "Fragment"),
    "Field": ("tdbfs.library.fragment", "Field"),
    "TileInfo": ("tdbfs.library.fragment", "TileInfo"),
    "VarTile": ("tdbfs.library.fragment", "VarTile"),
    "TdbfsError": ("tdbfs.errors", "TdbfsError"),
    "NotFoundError": ("tdbfs.errors", "NotFoundError"),
    "FormatError": ("tdbfs.format.errors", "FormatError"),
    "NotAnArrayError": ("tdbfs.store.array_store", "NotAnArrayError"),
    "ViewError": ("tdbfs.views.nodes", "ViewError"),
    "Problem": ("tdbfs.problem", "Problem"),
    "CheckResult": ("tdbfs.library.frontends", "CheckResult"),
    "salvage": ("tdbfs.library.salvage", "salvage"),
    "SalvageError": ("tdbfs.salvaging.plan", "SalvageError"),
}


def __getattr__(name):
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module 'tdbfs' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
