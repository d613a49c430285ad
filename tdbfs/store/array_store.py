"""The store of a TileDB array (formats 1 to 22): its schemas, commits, metadata and fragments.

BaseStore reads, parses and caches; this adds what the 2.x layout keeps where, and decodes each
array-level file once, the same for views and `check`.
"""

from __future__ import annotations

import os

from ..errors import TdbfsError
from .base_store import BaseStore
from .metadata_files import META_DIR, MetadataFiles
from .cache import ByteLRU
from .fragment_listing import FRAGMENTS_DIR, FragmentListing
from .problems import Problem
from .storage import Storage

SCHEMA_DIR = "__schema"
ENUMERATIONS_DIR = "__schema/__enumerations"
LEGACY_SCHEMA = "__array_schema.tdb"
COMMITS_DIR = "__commits"
FRAGMENT_META_DIR = "__fragment_meta"
LABELS_DIR = "__labels"
FRAGMENT_METADATA_FILE = "__fragment_metadata.tdb"
GROUP_FILE = "__tiledb_group.tdb"     # a TileDB group, not an array (and a 0.x group: see open_array)
GROUP_DIR = "__group"


class NotAnArrayError(TdbfsError):
    """The path exists but holds no TileDB array."""


class ArrayStore(MetadataFiles, BaseStore):
    #: commit files and vacuum lists live in __commits/ (format >= 12) and at the root (before)
    COMMIT_FOLDERS = (COMMITS_DIR, "")
    #: every folder whose listing array.yaml, stats.csv, timeline.csv and fragments.svg are built from
    SUMMARY_FOLDERS = ("", FRAGMENTS_DIR, COMMITS_DIR, SCHEMA_DIR, ENUMERATIONS_DIR, META_DIR, FRAGMENT_META_DIR,
                       LABELS_DIR)

    def __init__(self, storage: Storage | str, cache_bytes: int = 512 << 20, key=None, cache: ByteLRU | None = None,
                 drop_served: bool = True, listings=None):
        """`listings`: folder listings made before this store was (`take(rel, mtime_now)` gives the names
        of folder `rel` while it is as it was then, else None: a sequence of them, `decoded()` as str),
        which a front end may hand back as it took them (`listed_fragment_names`); else it lists itself."""
        super().__init__(storage, cache_bytes, cache, drop_served)
        # a fragment folder holds a handful of files: on an object store, one LIST of everything under
        # __fragments/ lists them all, and the first look at any fragment then costs no LIST of its own
        self.storage.list_tree(FRAGMENTS_DIR)
        self.key = key                   # EncryptionKey of an AES-256-GCM array, or None (never shown)
        self._listings = listings

    def encryption_type(self, rel: str | None = None) -> int:
        """encryption_type of the generic tile header of `rel` (default: the latest schema); 0 if unreadable.

        Only the unencrypted 34-byte header is read, so this works without the key.
        """
        rel = rel or self.latest_schema_file()
        if not rel:
            return 0
        try:
            head = self.file_head(rel, 34)
        except OSError:
            return 0
        return head[29] if len(head) == 34 else 0

    def schema_envelope(self, rel: str):
        """The GenericTileEnvelope of a schema file: what an encrypted schema shows without its key."""
        from ..format.generic_tile import read_generic_tile_envelope
        return self.parsed("schema envelope", rel, lambda data: read_generic_tile_envelope(data, 0, rel, "array schema"))

    # -- schemas -------------------------------------------------------------
    def schema_files(self) -> list[str]:
        """Relative paths of every schema file: the legacy one first, then __schema/ by name."""
        out = [LEGACY_SCHEMA] if self.isfile(LEGACY_SCHEMA) else []
        out += [f"{SCHEMA_DIR}/{n}" for n in self._regular_files(SCHEMA_DIR)]
        return out

    def _regular_files(self, rel: str) -> list[str]:
        """Names of the regular files in the folder `rel` (anything else there is a finding, never read)."""
        return self.storage.regular_names(rel)

    def schema(self, rel: str):
        from ..format.schema import parse_schema

        def parse(data):
            schema = parse_schema(self.generic_tile(rel, 0, "array schema").payload, rel)
            for e in schema.enumerations:
                enum = f"{ENUMERATIONS_DIR}/{e.file_name}"
                if not self.isfile(enum):
                    self.problems.add(Problem(enum, "enumeration", None,
                                              f"file missing: the array schema {rel} names it for {e.name!r}"))
            return schema

        return self.parsed("schema", rel, parse)

    def schema_by_name(self, name: str):
        """The schema a fragment footer names (v>=10), or the legacy schema for ''."""
        if not name:
            return self.schema(LEGACY_SCHEMA)
        return self.schema(f"{SCHEMA_DIR}/{name}")

    def latest_schema_file(self) -> str | None:
        files = self.schema_files()
        modern = [f for f in files if f.startswith(SCHEMA_DIR + "/")]
        if modern:
            return max(modern, key=lambda f: _timestamp_key(os.path.basename(f)))
        return files[0] if files else None

    def enumeration_files(self) -> list[str]:
        return [f"{ENUMERATIONS_DIR}/{n}" for n in self._regular_files(ENUMERATIONS_DIR)]

    def enumeration(self, rel: str):
        from ..format.enumeration import parse_enumeration
        return self.parsed("enumeration", rel,
                           lambda data: parse_enumeration(self.generic_tile(rel, 0, "enumeration").payload, rel))

    # -- every other array-level file: one parse each, the same for views and `check` --------
    def ignore_file(self, rel: str) -> list:
        from ..format.commits import parse_ignore_file
        return self.parsed("ign", rel, lambda data: list(parse_ignore_file(data, rel)))

    def consolidated_commits(self, rel: str):
        from ..format.commits import parse_consolidated_commits
        return self.parsed("con", rel, lambda data: parse_consolidated_commits(data, rel))

    def embedded_conditions(self, rel: str) -> dict:
        """Offset of each `.del` entry of the `.con` file `rel` -> its condition (the `.del` file embedded
        after the entry, docs/format.md §7.3); one that does not decode is recorded and left out."""
        from ..format.commits import parse_delete_condition
        from ..format.generic_tile import read_generic_tile

        def parse(entry):
            tile = read_generic_tile(entry.embedded, 0, rel, "embedded delete condition", key=self.key)
            return parse_delete_condition(tile.payload, rel)

        out = {}
        for entry in self.consolidated_commits(rel):
            if entry.kind == "del":
                condition = self.attempt(lambda entry=entry: self.parsed(f"con del {entry.offset}", rel,
                                                                         lambda data: parse(entry)),
                                         rel, "embedded delete condition")
                if condition is not None:
                    out[entry.offset] = condition
        return out

    def condition(self, rel: str):
        """A delete (.del) or update (.upd) commit's condition."""
        from ..format import commits
        if rel.endswith(".del"):
            return self.parsed("del", rel, lambda data: commits.parse_delete_condition(
                self.generic_tile(rel, 0, "delete condition").payload, rel))
        return self.parsed("upd", rel, lambda data: commits.parse_update_condition(
            self.generic_tile(rel, 0, "update condition").payload, rel))

    def consolidated_fragment_metadata(self, rel: str):
        """The entries of a `__fragment_meta` file; each footer is compared with the fragment's own, and a
        difference is recorded among the array's problems. An entry of a fragment that is not there is no
        problem: vacuuming fragments leaves the `__fragment_meta` files as they are, and TileDB takes from
        them only the footers of the fragments it lists (FragmentMetadata::load in
        tiledb/sm/fragment/fragment_metadata.cc looks its own name up among the entries), so a file written
        before a consolidation and a vacuum keeps naming the fragments they removed. A fragment that went
        missing without a vacuum still has its commit, which the commit findings name."""
        from ..format.consolidated_fragment_metadata import STRUCTURE, parse_consolidated_fragment_metadata
        tile = self.generic_tile(rel, 0, STRUCTURE)
        entries = self.parsed("cfm", rel, lambda data: parse_consolidated_fragment_metadata(
            tile.payload, rel, within=STRUCTURE + " payload"))
        live = {os.path.basename(p): p for p in self.fragment_paths()}
        for entry in entries:
            frag_rel = live.get(entry.fragment_name)
            if frag_rel is None:
                continue
            own = self.fragment(frag_rel).own_footer_bytes()
            if own is not None and own != bytes(entry.footer):
                at = next((i for i, (a, b) in enumerate(zip(own, entry.footer)) if a != b),
                          min(len(own), len(entry.footer)))
                self.problems.add(Problem(rel, "consolidated fragment metadata", entry.footer_offset + at,
                                          f"footer of {entry.fragment_name} differs from the fragment's own footer "
                                          f"(first at footer byte {at}; {len(entry.footer)} vs {len(own)} bytes)",
                                          within="consolidated fragment metadata payload"))
        return entries

    def consolidated_footers(self, rel: str):
        """Every entry of a `__fragment_meta` file with its footer decoded against the schema it names
        (format.consolidated_fragment_metadata.DecodedFooter each)."""
        from ..format.consolidated_fragment_metadata import STRUCTURE, decode_consolidated_footers
        tile = self.generic_tile(rel, 0, STRUCTURE)
        return self.parsed("cfm footers", rel,
                           lambda data: decode_consolidated_footers(tile.payload, rel, self.schema_by_name))

    # -- fragments -----------------------------------------------------------
    def fragment_paths(self) -> list[str]:
        """Relative paths of fragment folders: `__fragments/*` and legacy ones at the root; listed again only
        when `__fragments/` or the root changed (one stat each, for 100,000 fragments)."""
        return list(self._fragment_listing().paths)

    def fragment_index(self) -> dict[str, str]:
        """Fragment folder name -> its relative path as `fragment_paths` lists it. Shared: only read it."""
        return self._fragment_listing().index

    def fragment_names(self) -> list[str]:
        """The fragment folders' names in the order of `fragment_index`. Shared: only read it."""
        return self._fragment_listing().names

    def fragment_listing(self) -> FragmentListing:
        """The same, as the listing object itself: the same object while the listing stays as it is
        (`fragments/` keeps what it prepared from it), and its names as the listings given to this
        store had them (`listed_fragment_names`) without a str of each. Shared: only read it."""
        return self._fragment_listing()

    def _fragment_listing(self) -> FragmentListing:
        return self.per_listing("fragment listing", (FRAGMENTS_DIR, ""), self._list_fragments)

    def _list_fragments(self) -> FragmentListing:
        # scandir's d_type answers "is it a folder" without a stat per fragment (100,000 fragments)
        root = self._prelisted("")
        root_names = root.decoded() if root is not None else self._subdirs("")
        legacy = [n for n in root_names if n.startswith("__") and n not in _KNOWN_DIRS and _looks_like_fragment(n)]
        listed = self._prelisted(FRAGMENTS_DIR)
        if listed is not None:
            return FragmentListing(None, legacy, listed=listed)
        return FragmentListing(self._subdirs(FRAGMENTS_DIR), legacy)

    def listed_fragment_names(self, listing: FragmentListing):
        """The names of `listing`, which fragment_listing() gave, as the listings this store was given
        had them, where it is still the current listing and came from them; else None."""
        with self._lock:
            hit = self._per_listing.get("fragment listing")
        if hit is None or hit[1] is not listing:
            return None
        return listing.listed

    def uncommitted_fragment_paths(self) -> list[str]:
        return self.per_listing("uncommitted", (FRAGMENTS_DIR, "", COMMITS_DIR), lambda: [
            rel for name, rel in self.fragment_index().items() if name not in self.committed_fragment_names()])

    def _prelisted(self, rel: str):
        """The subfolders of `rel` as the listings given to this store hold them, if unchanged since."""
        if self._listings is None:
            return None
        return self._listings.take(rel, lambda: self.storage.stat(rel).mtime_ns)

    def _subdirs(self, rel: str) -> list[str]:
        return self.storage.subdirs(rel)

    def fragment_path_of(self, name: str) -> str | None:
        """The relative path `fragment_paths` lists for the fragment folder `name`, or None; without
        listing the others (a lookup of one fragment among 10,000)."""
        if not name or "/" in name or name in (".", ".."):
            return None
        if self.isdir(f"{FRAGMENTS_DIR}/{name}"):
            return f"{FRAGMENTS_DIR}/{name}"
        if name.startswith("__") and name not in _KNOWN_DIRS and self.isdir(name) and _looks_like_fragment(name):
            return name
        return None

    def fragment_gone(self, name: str) -> bool:
        """Whether the fragment folder `name`, found before, has vanished (vacuumed): one lstat, for every
        request under it (fragment_path_of would walk the path safely)."""
        return self.storage.gone(f"{FRAGMENTS_DIR}/{name}") and (
            not name.startswith("__") or self.storage.gone(name))

    def _make_fragment(self, rel: str):
        from .fragment import Fragment
        return Fragment(self, rel)

    # -- commits, metadata, consolidated fragment metadata ---------------------
    def commit_files(self) -> list[str]:
        """Relative paths of the commit files, listed again only when `__commits/` or the root changed."""
        return list(self.per_listing("commit files", self.COMMIT_FOLDERS, self._list_commit_files))

    def _list_commit_files(self) -> tuple[str, ...]:
        out = [f"{COMMITS_DIR}/{n}" for n in self._regular_files(COMMITS_DIR)]
        # Before format 12 commit markers and vacuum files lived at the root.
        out += [n for n in self._regular_files("") if n.endswith((".ok", ".vac"))]
        return tuple(out)

    def fragment_meta_files(self) -> list[str]:
        out = [f"{FRAGMENT_META_DIR}/{n}" for n in self._regular_files(FRAGMENT_META_DIR)]
        out += [n for n in self._regular_files("") if n.endswith(".meta")]
        return out

    def committed_fragment_names(self) -> dict[str, str]:
        """Fragment name -> the commit that marks it (.wrt, .ok, or an entry of a .con file)."""
        # fragment.yaml of 100,000 fragments would otherwise list and parse __commits 100,000 times
        return self.per_listing("committed", self.COMMIT_FOLDERS, self._committed_fragment_names)

    def kept_committed_fragment_names(self) -> dict[str, str] | None:
        """committed_fragment_names() if it is kept for the commits as they are now, else None."""
        return self.kept_listing("committed", self.COMMIT_FOLDERS)

    def _committed_fragment_names(self) -> dict[str, str]:
        out = {}
        for rel in self.commit_files():
            base = os.path.basename(rel)
            if base.endswith(".wrt") or base.endswith(".ok"):
                out[base.rsplit(".", 1)[0]] = rel
            elif base.endswith(".con"):
                self._add_consolidated(out, rel)
        # Formats 1-4 had no marker: a root fragment folder with its metadata file counts as committed.
        for n in self.listdir(""):
            if n not in out and _legacy_unmarked(n) and self.isfile(f"{n}/{FRAGMENT_METADATA_FILE}"):
                out[n] = f"{n}/{FRAGMENT_METADATA_FILE}"
        return out

    def _add_consolidated(self, out: dict[str, str], rel: str) -> None:
        """The fragments the `.con` file `rel` commits, into `out` where they are not yet."""
        try:
            for entry in self.consolidated_commits(rel).entries:
                p = entry.path.rsplit("/", 1)[-1]
                if p.endswith(".wrt"):
                    out.setdefault(p[:-4], rel)
        except Exception as exc:  # recorded, the rest still works
            self.problems.add_error(exc, rel, "consolidated commits")

    def commit_file_of(self, name: str) -> str | None:
        """committed_fragment_names().get(name), without making that map of every fragment unless a
        summary's pass keeps it (fragment.yaml of one among 100,000 fragments: the map is 14 MB). The
        map's order decides alike: a `.wrt` or `.ok` file (the last in commit_files' order: the root's
        `.ok`, then `__commits/`'s `.wrt`, then its `.ok`), else the first `.con` file that lists the
        fragment, else the rule of formats 1-4."""
        kept = self.kept_committed_fragment_names()
        if kept is not None:
            return kept.get(name)
        for rel in (f"{name}.ok", f"{COMMITS_DIR}/{name}.wrt", f"{COMMITS_DIR}/{name}.ok"):
            if self.isfile(rel):
                return rel
        hit = self._consolidated_committed().get(name)
        if hit is not None:
            return hit
        if _legacy_unmarked(name) and name in self.listdir("") and self.isfile(f"{name}/{FRAGMENT_METADATA_FILE}"):
            return f"{name}/{FRAGMENT_METADATA_FILE}"
        return None

    def _consolidated_committed(self) -> dict[str, str]:
        """Fragment name -> the first `.con` file that commits it."""
        def make():
            out: dict[str, str] = {}
            for rel in self.commit_files():
                if rel.endswith(".con"):
                    self._add_consolidated(out, rel)
            return out
        return self.per_listing("consolidated committed", self.COMMIT_FOLDERS, make)

    def vacuum_lists(self) -> dict[str, str]:
        """Fragment name -> the vacuum file (`.vac`) that lists it as obsolete."""
        return self.per_listing("vacuum", self.COMMIT_FOLDERS, self._vacuum_lists)

    def _vacuum_lists(self) -> dict[str, str]:
        out = {}
        for rel in self.commit_files():
            if not rel.endswith(".vac"):
                continue
            try:
                entries = self.vacuum_file(rel)
            except Exception as exc:
                self.problems.add_error(exc, rel, "vacuum file")
                continue
            for entry in entries:
                out.setdefault(os.path.basename(entry.rstrip("/")), rel)
        return out

    def fragment_findings(self, frag) -> list[Problem]:
        """findings.fragment_findings(frag), computed again only when the fragment's folder or the commits
        changed (array.yaml asks for every fragment's at each render); kept in the bounded cache."""
        from .findings import fragment_findings
        commits = self.commits_state()
        if commits is None:
            return fragment_findings(frag)
        try:
            key = ("findings", self.path, frag.rel, frag.signature(), commits)
        except OSError:
            return fragment_findings(frag)
        return self.cache.get_or_make(key, lambda: _with_cost(fragment_findings(frag)))

    def listing_findings(self) -> list[Problem]:
        from .findings import array_findings
        return array_findings(self)

    # -- where each file of the array lives ----------------------------------------------------
    @staticmethod
    def schema_path(name: str) -> str:
        """The relative path of the schema file `name` (the legacy one sits at the root)."""
        return name if name == LEGACY_SCHEMA else f"{SCHEMA_DIR}/{name}"

    @staticmethod
    def enumeration_path(name: str) -> str:
        return f"{ENUMERATIONS_DIR}/{name}"

    def commit_path(self, name: str) -> str:
        """The relative path of the commit file `name`: in __commits/, or at the root (format < 12)."""
        rel = f"{COMMITS_DIR}/{name}"
        return rel if self.isfile(rel) else name

    def fragment_meta_path(self, name: str) -> str:
        """The relative path of the consolidated fragment metadata file `name`: in __fragment_meta/, or at
        the root (format < 12)."""
        rel = f"{FRAGMENT_META_DIR}/{name}"
        return rel if self.isfile(rel) else name

    def has_enumerations(self) -> bool:
        return self.isdir(ENUMERATIONS_DIR)

    # -- dimension labels: each a TileDB array of its own -------------------------------------
    def has_labels(self) -> bool:
        return self.isdir(LABELS_DIR)

    def label_names(self) -> list[str]:
        """Names of the label arrays (real folders in __labels/)."""
        return self._subdirs(LABELS_DIR)

    def label_store(self, name: str) -> "ArrayStore":
        """The store of the dimension label `name`; NotAnArrayError when its folder holds no array."""
        return open_tiledb_array(self.storage.child(f"{LABELS_DIR}/{name}"), self.cache.capacity, key=self.key)


_KNOWN_DIRS = {SCHEMA_DIR, META_DIR, COMMITS_DIR, FRAGMENT_META_DIR, FRAGMENTS_DIR, LABELS_DIR, "__enumerations"}


def open_tiledb_array(storage: Storage, cache_bytes: int = 512 << 20, key=None, cache=None,
                      drop_served: bool = True, listings=None) -> ArrayStore:
    """The store of the TileDB array (format 1 to 22) in `storage`; NotAnArrayError when it holds none."""
    # a __schema that is not a real folder (a symlink) still makes an array: shown, with its problem
    if not (storage.entry(SCHEMA_DIR) is not None or storage.is_file(LEGACY_SCHEMA)):
        if storage.entry(GROUP_FILE) is not None or storage.is_dir(GROUP_DIR):
            raise NotAnArrayError(f"not a TileDB array: {storage.describe()} is a TileDB group")
        raise NotAnArrayError(f"not a TileDB array (no __schema/ and no __array_schema.tdb): {storage.describe()}")
    return ArrayStore(storage, cache_bytes, key=key, cache=cache, drop_served=drop_served, listings=listings)


def _with_cost(problems: list) -> tuple[list, int]:
    """Findings with what they cost the cache: the key's folder signature and the list (tracemalloc)."""
    return problems, 512 + 400 * len(problems)


def _looks_like_fragment(name: str) -> bool:
    from ..format.names import parse_fragment_name
    try:
        return parse_fragment_name(name) is not None
    except Exception:
        return False


def _legacy_unmarked(name: str) -> bool:
    """A fragment name without a version suffix (formats 1-4), which TileDB commits without a marker."""
    from ..format.names import try_parse_name
    n = try_parse_name(name)
    return n is not None and not n.extension and n.format_version is None


def _timestamp_key(name: str):
    parts = name.lstrip("_").split("_")
    try:
        return (int(parts[0]), int(parts[1]), name)
    except (ValueError, IndexError):
        return (-1, -1, name)
