"""Findings that need only listings, `lstat` and the footers: the state of an array's folders.

They are computed again whenever a summary is rendered (fragment.yaml, array.yaml) and by
`tdbfs check`, from the same functions, so the mount and `check` list them in the same words
from the first read: commit state, missing and extra files, file sizes against the footer,
entries that are not regular files (never opened), commits and vacuum lists that name
fragments which are not there.
"""

from __future__ import annotations

import os

from .footer_checks import footer_size_finding
from .fragment_digest import kept_findings
from .fragment_interface import DATA, VALIDITY, VAR
from .storage import FOLDER, REGULAR, NotRegularError
from .problems import ERROR, Problem, WARNING, unique

#: entries TileDB itself keeps at an array's root (formats 1-22), by kind
_ROOT_FOLDERS = {"__schema", "__meta", "__commits", "__fragment_meta", "__fragments", "__labels"}
_ROOT_FILES = {"__array_schema.tdb", "__lock.tdb"}
_ROOT_FILE_SUFFIXES = (".ok", ".vac", ".meta")   # commit markers, vacuum lists, consolidated metadata (< 12)
#: the report `tdbfs salvage` leaves in the array it builds (tdbfs/salvaging/report.py): TileDB ignores it,
#: and a salvaged copy of a healthy array must check clean
_TDBFS_ROOT_FILES = {"salvage.yaml"}


def not_regular(rel: str, entry) -> Problem:
    """The finding for an entry that is not a regular file: the same words as the error raised when
    something tries to open it (storage.NotRegularError), so it is listed once."""
    return Problem(rel, "file", None, NotRegularError(rel, entry.kind, entry.target).strerror)


def _not_folder(rel: str, entry, what: str) -> Problem:
    target = f" (to {entry.target})" if entry.target is not None else ""
    return Problem(rel, "folder", None, f"{what} is a {entry.kind}{target}, not a folder: it is never followed")


# -- the array ------------------------------------------------------------------------------

def array_findings(store) -> list[Problem]:
    """What the root's and the array folders' listings show, and what the commits say of fragments
    (a TileDB array of format 1 to 22)."""
    out: list[dict] = []
    fragment_names = set(store.fragment_index())
    for e in store.entries(""):
        if e.name in _ROOT_FOLDERS:
            if not e.is_dir:
                out.append(_not_folder(e.name, e, e.name))
            continue
        if e.name in fragment_names:
            continue
        if e.name in _ROOT_FILES or e.name in _TDBFS_ROOT_FILES or e.name.endswith(_ROOT_FILE_SUFFIXES):
            if not e.is_file:
                out.append(not_regular(e.name, e))
            continue
        if e.name.startswith("__") and _looks_like_fragment(e.name) and not e.is_dir:
            out.append(_not_folder(e.name, e, "a fragment folder"))
            continue
        out.append(_extra(e.name, e, "the array folder"))
    # every name of 100,000 fragments parsed again only when __fragments/ changes
    out += store.per_listing("__fragments findings", ("__fragments",), lambda: _fragments_folder_findings(store))
    for folder in ("__schema", "__schema/__enumerations", "__meta", "__commits", "__fragment_meta"):
        for e in store.entries(folder):
            rel = f"{folder}/{e.name}"
            if e.is_file or (folder == "__schema" and e.name == "__enumerations" and e.is_dir):
                continue
            out.append(not_regular(rel, e) if e.kind != FOLDER else _extra(rel, e, f"{folder}/"))
    out += _commit_findings(store, fragment_names)
    return out


def _fragments_folder_findings(store) -> list[Problem]:
    out = []
    for e in store.entries("__fragments"):
        rel = f"__fragments/{e.name}"
        if e.is_dir:
            bad_name = _name_problem(rel, e.name)
            if bad_name is not None:
                out.append(bad_name)
        elif e.kind == REGULAR:
            out.append(_extra(rel, e, "__fragments/"))
        else:
            out.append(_not_folder(rel, e, "a fragment folder"))
    return out


def special_entries(store, rel: str) -> list[Problem]:
    """The entries of the folder `rel` that are neither regular files nor real folders."""
    return [not_regular(f"{rel}/{e.name}" if rel else e.name, e)
            for e in store.entries(rel) if not e.is_file and not e.is_dir]


def _extra(rel: str, entry, where: str) -> Problem:
    if entry.is_file:
        return Problem(rel, "extra file", None, f"not part of a TileDB array ({entry.size} bytes in {where}): "
                                                 "TileDB ignores it", WARNING)
    if entry.is_dir:
        return Problem(rel, "extra folder", None, f"not part of a TileDB array (a folder in {where}): "
                                                   "TileDB ignores it", WARNING)
    return not_regular(rel, entry)


def _commit_findings(store, live: set) -> list[Problem]:
    from ..format import commits

    out = []
    ignored: set = set()
    for rel in store.commit_files():
        if rel.endswith(".ign"):
            entries = store.attempt(lambda rel=rel: commits.parse_ignore_file(store.read_file(rel), rel),
                                    rel, "ignore file")
            ignored.update(os.path.basename(e.rstrip("/")) for e in entries or ())
    for rel in store.commit_files():
        base = os.path.basename(rel)
        if base.endswith((".wrt", ".ok")):
            frag = base.rsplit(".", 1)[0]
            if frag not in live:
                out.append(Problem(rel, "commit file", None, f"commits fragment {frag}, which is not in the array"))
        elif base.endswith(".con"):
            con = store.attempt(lambda rel=rel: store.parsed(
                "con", rel, lambda d: commits.parse_consolidated_commits(d, rel)), rel, "consolidated commits")
            for entry in (con.entries if con else ()):
                name = entry.path.rsplit("/", 1)[-1]
                if name.endswith(".wrt") and name[:-4] not in live and name not in ignored:
                    out.append(Problem(rel, "consolidated commits", None,
                                       f"commits fragment {name[:-4]}, which is not in the array"))
        elif not base.endswith((".vac", ".ign", ".del", ".upd")):
            out.append(Problem(rel, "commit file", None, "unknown kind of commit file: TileDB ignores it", WARNING))
    # a vacuum file naming fragments still present is the state consolidation leaves until a vacuum: TileDB
    # means it (readers skip them), so it is the `not_vacuumed` hint of array.yaml, not a problem
    return out


def _name_problem(rel: str, name: str) -> Problem | None:
    """The problem of a folder in __fragments/ whose name is not a fragment's (the same one the fragment's
    own name parse records: TileDB refuses to open the array)."""
    from ..format.errors import FormatError
    from ..format.names import parse_fragment_name
    try:
        parse_fragment_name(name)
    except FormatError as exc:
        return Problem(rel, "fragment name", exc.offset, exc.message)
    return None


def _looks_like_fragment(name: str) -> bool:
    from ..format.names import try_parse_name
    try:
        return try_parse_name(name) is not None
    except Exception:  # noqa: BLE001 -- a name that does not parse is not a fragment's
        return False


# -- one fragment ----------------------------------------------------------------------------

def folder_findings(frag, entries: dict | None = None) -> list[Problem]:
    """The entries of the fragment's folder that are not regular files (`entries`: name -> Entry, when
    listed already)."""
    if entries is None:
        entries = {e.name: e for e in frag.store.entries(frag.rel)}
    return [not_regular(f"{frag.rel}/{e.name}", e) if e.kind != FOLDER
            else _extra(f"{frag.rel}/{e.name}", e, "a fragment folder")
            for e in entries.values() if not e.is_file]


def fragment_findings(frag) -> list[Problem]:
    """What the fragment folder's listing, the commits and the footer's file sizes show (a fragment of a
    TileDB array of format 1 to 22)."""
    entries = {e.name: e for e in frag.store.entries(frag.rel)}
    out = folder_findings(frag, entries)
    if not frag.committed:
        out.append(Problem(frag.rel, "fragment", None, "no commit marks this fragment: TileDB ignores it "
                                                       "(a write that did not finish, or a lost commit file)"))
    md = f"{frag.rel}/{frag.METADATA_FILE}"
    if frag.METADATA_FILE not in entries:
        out.append(Problem(md, "fragment metadata", None, "file missing: the fragment cannot be read"))
        return out
    if not entries[frag.METADATA_FILE].is_file:
        return out
    try:
        footer = frag.footer()
        fields = frag.stored_fields()
    except Exception:  # noqa: BLE001 -- recorded among the fragment's problems by the footer's parse
        return out
    expected = {frag.METADATA_FILE}
    for f in fields:
        for stream in [DATA] + ([VAR] if f.var_sized else []) + ([VALIDITY] if f.nullable else []):
            name = {DATA: f.file, VAR: f.var_file, VALIDITY: f.validity_file}[stream]
            expected.add(name)
            p = data_file_finding(frag, f, stream, entries.get(name))
            if p is not None:
                out.append(p)
    if footer.version >= 5:
        for name in sorted(set(entries) - expected):
            if entries[name].is_file:
                out.append(Problem(f"{frag.rel}/{name}", "extra file", None,
                                   "not named by the footer's fields: TileDB ignores it", WARNING))
    return out


def data_file_finding(frag, field, stream: str, entry) -> Problem | None:
    """A data file missing, or of another size than the footer says (None: as the footer says).
    Reading a tile from a missing file gives this same finding."""
    footer = frag.footer()
    name = {DATA: field.file, VAR: field.var_file, VALIDITY: field.validity_file}[stream]
    rel = f"{frag.rel}/{name}"
    sizes = {DATA: footer.file_sizes, VAR: footer.file_var_sizes, VALIDITY: footer.file_validity_sizes}[stream]
    declared = int(sizes[field.idx]) if sizes is not None and field.idx < len(sizes) else None
    if entry is None:
        if stream == DATA and frag.offsets_embedded(field):
            return None  # the lengths live in the var data (§3.4): the offsets file may be absent
        try:
            ntiles = frag.tile_count(field.idx)
        except Exception:  # noqa: BLE001 -- the tile offsets' own problem says why
            ntiles = None
        if ntiles == 0:
            return None
        held = f"{ntiles} tiles of {field.stem} are in it" if ntiles else f"the data of {field.stem} is in it"
        return Problem(rel, "data file", None, f"file missing ({held})")
    if not entry.is_file:
        return None  # said by not_regular
    if declared is not None and declared != entry.size:
        wrong_field = footer_size_finding(frag, field, stream, declared, entry.size)
        if wrong_field is not None:
            return wrong_field
        return Problem(rel, "data file", min(declared, entry.size),
                       f"the footer says {declared} bytes, the file has {entry.size}")
    return None


def all_findings(store) -> list[Problem]:
    """Everything known to be wrong with the array now: the listings' findings for the array and every
    fragment, then what decoding found (array-level files, then each fragment, then the rest). One
    fragment object at a time: a pass over 100,000 holds no more of them than the store keeps, and the
    footers parsed for it serve the other summaries (store/fragment_digest.py)."""
    paths = store.fragment_paths()
    store.forget_vanished(paths)
    lists = [store.listing_findings()]
    for rel in paths:
        # a committed fragment's, kept with its digest while its folder lists the same entries
        kept = kept_findings(store, rel)
        lists.append(kept if kept is not None else store.fragment_findings(store.fragment(rel)))
    lists.append(store.problems.items)
    for rel in paths:
        # a decoded structure may have found more since: the fragment's own log, as fragment.yaml shows it
        log = store.problem_log(rel)
        if log is not None:
            lists.append(log.items)
    lists.append(store.all_problems())
    return unique(*lists)


__all__ = ["array_findings", "special_entries", "folder_findings", "fragment_findings", "data_file_finding",
           "all_findings", "ERROR", "WARNING"]
