"""The tree of a TileDB 0.x array (docs/arrays.md, "TileDB 0.x arrays and GenomicsDB workspaces").

Same shape as a 2.x array: README.txt, array.yaml, schema/, fragments/<name>/ with
fragment.yaml, book_keeping.yaml (instead of footer.yaml), rtree/, tiles.csv, attrs/, dims/,
raw/. Stems are attribute names as on disk; the coordinates are under dims/__coords/ as
stored and split per dimension under dims/<dimension name>/. A workspace (or group) shows
each of its arrays as arrays/<name>/ with that tree.

A fragment's folder is the one of fragment_views.py; what is 0.x's own in it is in
legacy0x_fragment_views.py (`Legacy0xViews`: book_keeping.yaml, the MBRs, and the 0.x wording of
summaries and records).
"""

from __future__ import annotations

from ..store.legacy0x import SCHEMA_FILE, Legacy0xArrayStore, Legacy0xWorkspaceStore
from ..text import escape_name
from ..store.problems import unique
from .common import KeyedDir, guarded, yaml_file
from .describe.legacy0x import describe_legacy0x_schema
from .fragment_views import fragment_dir
from .timeline_views import timeline_file
from .array_views import checked_summary
from .nodes import FOREVER, LIVE, PER_OPEN, BytesFile, DirNode, DynamicDir, FileNode, SymlinkNode, ViewError
from .render import to_yaml
from .stats_views import root_pictures_and_stats

SCHEMA_VIEW = SCHEMA_FILE + ".yaml"


def build_legacy0x_root(store) -> DirNode:
    if isinstance(store, Legacy0xWorkspaceStore):
        return workspace_root(store)
    return array_root(store)


# -- workspace --------------------------------------------------------------------------

def workspace_root(ws: Legacy0xWorkspaceStore) -> DirNode:
    mtime = lambda: ws.mtime("")
    readme = BytesFile(lambda: WORKSPACE_README.encode(), FOREVER, mtime=ws.mtime(""))
    summary = BytesFile(guarded(lambda: to_yaml(workspace_summary(ws)), ws.problems, "", "workspace summary"), LIVE,
                        mtime=ws.mtime(""))
    arrays = KeyedDir(lambda: [escape_name(p) for p in ws.array_paths()],
                      lambda name: _lazy_array(ws, unescape_name(name)), mtime=mtime)
    files = KeyedDir(lambda: [n for n, _ in ws.other_files()], lambda name: StoreFile(ws, name), mtime=mtime)
    return DynamicDir(lambda: {"README.txt": readme, "workspace.yaml": summary, "arrays": arrays, "files": files},
                      mtime)


def _lazy_array(ws: Legacy0xWorkspaceStore, rel: str) -> DirNode:
    holder = {}

    def children():
        if "root" not in holder:
            holder["root"] = array_root(ws.array(rel))
        return holder["root"].children()

    return DynamicDir(children, lambda: ws.array(rel).mtime(""))


class StoreFile(FileNode):
    """A file shown byte for byte, read through its store: views never open a path themselves."""

    def __init__(self, store, rel: str):
        self._store, self._rel = store, rel

    def mtime(self) -> float:
        return self._store.mtime(self._rel)

    def size(self) -> int:
        try:
            return self._store.file_size(self._rel)
        except OSError as exc:
            raise ViewError(f"{self._rel}: not readable ({exc})") from None

    def read(self, offset: int, size: int) -> bytes:
        try:
            return self._store.pread(self._rel, offset, size)
        except OSError as exc:
            raise ViewError(f"{self._rel}: not readable ({exc})") from None


def workspace_summary(ws: Legacy0xWorkspaceStore) -> dict:
    out = {"uri": ws.path, "layout": "TileDB 0.x", "kind": ws.kind}
    arrays = {}
    for rel in ws.array_paths():
        store = ws.array(rel)
        entry = {"path": rel}
        try:
            s = store.legacy0x_schema()
            entry["array_type"] = "dense" if s.dense else "sparse"
            entry["schema_form"] = "versioned" if s.version is not None else "original"
        except Exception as exc:
            entry["error"] = str(exc)
        paths = store.fragment_paths()
        entry["fragments"] = len(paths)
        entry["uncommitted_fragments"] = sum(1 for p in paths if store.fragment(p).uncommitted_reasons())
        arrays[escape_name(rel)] = entry
    out["arrays"] = arrays
    out["groups"] = ws.group_paths()
    out["files"] = {n: size for n, size in ws.other_files()}
    out["problems"] = [p.to_dict() for p in unique(ws.problems.items,
                                                   *(ws.array(rel).findings() for rel in ws.array_paths()))]
    return out


# -- one array ----------------------------------------------------------------------------

def array_root(store: Legacy0xArrayStore) -> DirNode:
    problems = store.problems
    mtime = lambda: store.mtime("")
    readme = BytesFile(lambda: ARRAY_README.encode(), FOREVER, mtime=store.mtime(""))
    summary = BytesFile(guarded(lambda: to_yaml(array_summary(store)), problems, "", "array summary"), LIVE,
                        mtime=store.mtime(""))
    schema_dir = KeyedDir(lambda: [SCHEMA_VIEW, "current.yaml"] if store.schema_files() else [],
                          lambda name: SymlinkNode(SCHEMA_VIEW) if name == "current.yaml" else yaml_file(
                              lambda: describe_legacy0x_schema(store.legacy0x_schema()), problems, SCHEMA_FILE,
                              "0.x array schema", keep=PER_OPEN, mtime=store.mtime(SCHEMA_FILE)), mtime=mtime)
    fragments = KeyedDir(store.fragment_paths, lambda name: fragment_dir(store, name), mtime=mtime)
    summaries = root_pictures_and_stats(store)  # stats.csv, fragments.svg
    timeline = timeline_file(store)
    return DynamicDir(lambda: {"README.txt": readme, "array.yaml": summary, "schema": schema_dir,
                               "fragments": fragments, "timeline.csv": timeline, **summaries}, mtime)


def array_summary(store: Legacy0xArrayStore) -> dict:
    out: dict = {"uri": store.path, "checked": None, "layout": "TileDB 0.x"}
    try:
        s = store.legacy0x_schema()
        out["array_type"] = "dense" if s.dense else "sparse"
        out["schema_form"] = ("GenomicsDB fork, schema version %d" % s.version if s.version is not None
                              else "original Intel-HLS (no version tag)")
        out["array_name_in_schema"] = s.array_name
    except Exception as exc:
        store.problems.add_error(exc, SCHEMA_FILE, "0.x array schema")
    paths = store.fragment_paths()
    uncommitted = [p for p in paths if store.fragment(p).uncommitted_reasons()]
    out["counts"] = {"fragments": len(paths), "committed_fragments": len(paths) - len(uncommitted),
                     "uncommitted_fragments": len(uncommitted), "schemas": len(store.schema_files())}
    if uncommitted:
        out["uncommitted_fragments"] = uncommitted
    out["sizes"] = store.disk_usage()
    out["checked"] = checked_summary(store, paths)   # before the problems (store/checked.py)
    out["problems"] = [p.to_dict() for p in store.findings()]
    return out


# -- names -------------------------------------------------------------------------------------

def unescape_name(name: str) -> str:
    from urllib.parse import unquote
    return unquote(name)


ARRAY_README = """\
tdbfs: a read-only view of a TileDB 0.x array (Intel-HLS TileDB / GenomicsDB)
==============================================================================

Every file here is computed from the array's own files on demand; nothing is ever
written to the array (not even the lock file the 0.x library uses). Sizes are exact.
A file that cannot be built reads as an I/O error; the reason, with the file and
byte offset, is under `problems` in array.yaml and in the fragment's fragment.yaml.

  array.yaml              path, dense/sparse, schema form, fragment counts
                          (committed and not), sizes, problems found so far
  schema/                 __array_schema.tdb decoded (versioned GenomicsDB form or
                          the original untagged form); current.yaml links to it
  stats.csv               per field per fragment: tile_count, cell_count,
                          stored_bytes, decoded_bytes, ratio, filters (codec);
                          then field_total rows and the array_total row
  fragments.svg           each fragment's non-empty domain on the first two
                          dimensions, coloured by its timestamp
  timeline.csv            each fragment written and committed, at the ms its name
                          holds: time_ms,time_utc,event,subject,file,t1,t2,into,detail
  fragments/<name>/       one folder per fragment folder, named as on disk, hidden
                          `.__*` and unfinished ones included (they are flagged)
    fragment.yaml         parsed name (writer id: uuid/MAC/thread id, timestamp in
                          ms and ISO 8601), committed or why not, dense/sparse,
                          tile and cell counts, non-empty domain, files, problems
    book_keeping.yaml     __book_keeping.tdb.gz decoded: non-empty domain, MBRs,
                          bounding coordinates, tile offsets, var tile offsets and
                          sizes, last tile cell number
    rtree/level_0.csv     the MBR of every data tile (sparse fragments)
    stats.csv             the rows of the top stats.csv for this fragment
    tiles.csv             per tile: offset, size on disk and decoded size in every
                          data file
    attrs/<name>/         per attribute, named as on disk (`<name>.tdb`):
      info.yaml           type, cell_val_num, compression (offsets and values)
      tile_K.bin          tile K decompressed, pre-filters undone (var-sized: its
                          uint64 offsets as stored, relative to the fragment)
      tile_K.var.bin      var-sized: tile K's values
      tile_K.txt          tile K's cells, one JSON value per line
      tile_K.yaml         where tile K is on disk, its codec, and for var-sized
                          attributes the offsets both as stored and tile-relative
    dims/__coords/        the coordinates tiles as stored (interleaved per cell)
    dims/<dimension>/     the same coordinates split per dimension; its tile_K.yaml
                          names the __coords tile it is cut from
    raw/                  the fragment's files, byte for byte

Tile numbers K start at 0 and follow the order of tiles in the data file.
"""

WORKSPACE_README = """\
tdbfs: a read-only view of a TileDB 0.x workspace (e.g. a GenomicsDB workspace)
================================================================================

  workspace.yaml          the arrays (with fragment counts, uncommitted ones
                          included), groups and files of the workspace
  arrays/<name>/          each array, found in the workspace and its groups, shown
                          with the tree of a 0.x array (its README.txt says more);
                          an array inside a group is named <group>%2F<array>
  files/                  the files at the workspace root (GenomicsDB keeps
                          callset.json, vidmap.json, vcfheader.vcf there), byte for byte
"""
