"""tdbfs as a Python library: `tdbfs.open(location)` and what it returns (docs/library.md).

Modules: opening.py (tdbfs.open, storage options, keys); base.py (what an array, a group and a
workspace share: the tree, check, close); array.py (Array, Fragments, AsOf); fragment.py (Fragment,
Field, TileInfo, VarTile); cells.py (a fragment's cells as numpy columns); cell_batches.py (the cells a read
at T returns, or one fragment's, as a stream of batches); export.py (them to CSV or Parquet);
arrow_columns.py (TileDB's types as Arrow's); group.py (Group, Member, Workspace); tree.py (any file of
the mount's tree, without FUSE); filesystem.py (the `tdbfs` fsspec protocol); frontends.py (the one door
to `check`);
salvage.py (`tdbfs.salvage`).

Built on tdbfs/store, tdbfs/reader and tdbfs/views only; `import tdbfs` imports none of it until it is used.
"""
