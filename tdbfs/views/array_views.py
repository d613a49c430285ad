"""Content of the array-level views: array.yaml, schemas, enumerations, metadata, commits, .meta files."""

from __future__ import annotations

import posixpath

from ..store.pass_gc import fewer_collections
from .common import guarded
from .nodes import BytesFile, Summary


def summary_file(store, render, structure: str, checked: bool = False) -> BytesFile:
    """An array-wide summary (array.yaml, stats.csv, timeline.csv, fragments.svg): one pass over the
    listings and the fragment metadata, each fragment folder listed once (store.one_pass), each footer
    parsed once for the four (store/fragment_digest.py), kept until store.summary_state() changes; never
    a data tile."""
    def in_one_pass() -> bytes:
        with store.one_pass():
            with store.digests.render(store.summary_state()), fewer_collections():
                return render()

    state = store.summary_state
    if checked:   # array.yaml: also what has been checked (check/background.py marks it as it goes)
        def state():
            now = store.summary_state()
            return None if now is None else (now, store.checked.state())
    return BytesFile(guarded(in_one_pass, store.problems, "", structure),
                     Summary(state, store.cache, ("summary", store.path, structure), settled=store.summary_state),
                     mtime=lambda: store.mtime(""))


def _timestamps(store, rel: str) -> dict | None:
    n = store.timestamped_name(rel)
    return {"t1": n.t1, "t2": n.t2, "t1_iso": n.t1_iso, "t2_iso": n.t2_iso} if n else None


def array_summary(store) -> dict:
    out: dict = {"uri": store.path, "checked": None}
    latest = store.latest_schema_file()
    schema_versions = set()
    if latest:
        try:
            schema = store.schema(latest)
            out["array_type"] = "dense" if schema.dense else "sparse"
            out["latest_schema"] = latest
        except Exception as exc:
            store.problems.add_error(exc, latest, "array schema")
    for rel in store.schema_files():
        try:
            schema_versions.add(store.schema(rel).version)
        except Exception as exc:
            store.problems.add_error(exc, rel, "array schema")
    paths = store.fragment_paths()
    overviews = _overviews(store)
    out["format_versions"] = {
        "schemas": sorted(schema_versions),
        # the version each fragment's metadata records, as fragment.yaml's `version` (the name's only where
        # the metadata does not decode): a name without `_<v>` does not tell format 1 from 2, nor 3 from 4
        "fragments": sorted({o.format_version for o in overviews or () if o.format_version is not None}),
    }
    commits = store.commit_files()
    committed = store.committed_fragment_names()
    out["counts"] = {
        "fragments": len(paths),
        "committed_fragments": sum(1 for p in paths if posixpath.basename(p) in committed),
        "schemas": len(store.schema_files()),
        "enumerations": len(store.enumeration_files()),
        "commit_files": len(commits),
        "metadata_files": len(store.metadata_files()),
        "fragment_meta_files": len(store.fragment_meta_files()),
    }
    out["sizes"] = None   # last: the fragment folders listed for the hints and findings are not listed again
    out["encryption"] = _encryption(store, latest)
    hints = _hints(store, schema_versions, overviews)  # first: what it finds wrong is among the problems
    # before the problems: what is marked checked now has its problems in the logs already
    out["checked"] = checked_summary(store, paths)
    out["problems"] = [p.to_dict() for p in store.findings()]
    out["hints"] = hints
    out["sizes"] = store.disk_usage(store.digests.usage_seen())
    return out


def checked_summary(store, paths) -> dict:
    """`checked:` of array.yaml: how far its problem list goes (store/checked.py)."""
    from ..store.checked import array_files
    return store.checked.summary(store, array_files(store), paths)


def _overviews(store) -> list:
    """Every fragment's overview (store/fragment_overview.py), made once for the versions and the hints."""
    from ..store.fragment_overview import fragment_overviews
    try:
        return fragment_overviews(store)
    except Exception as exc:  # noqa: BLE001 -- array.yaml shows the rest whatever a fragment meets
        store.problems.add_error(exc, "", "array hints")
        return None


def _hints(store, schema_versions, overviews) -> list:
    from .hints import array_hints
    if overviews is None:
        return []
    try:
        return array_hints(store, schema_versions, overviews)
    except Exception as exc:  # noqa: BLE001 -- array.yaml shows the rest whatever a hint meets
        store.problems.add_error(exc, "", "array hints")
        return []


def _encryption(store, latest) -> dict:
    """Whether the array is encrypted (from the unencrypted schema tile header) and whether a key was given;
    for an encrypted schema, its generic tile header, chunk headers and AES-256-GCM part headers."""
    from .describe.generic_tile import describe_generic_tile_envelope
    enc = store.encryption_type(latest) if latest else 0
    out: dict = {"type": {0: "NONE", 1: "AES_256_GCM"}.get(enc, f"UNKNOWN({enc})"), "key_given": store.key is not None}
    if enc and latest:
        try:
            out["schema_generic_tile"] = describe_generic_tile_envelope(store.schema_envelope(latest))
        except Exception as exc:
            store.problems.add_error(exc, latest, "array schema")
    return out


def _gtile_info(store, rel: str, structure: str) -> dict:
    from .describe.generic_tile import describe_generic_tile_header
    tile = store.generic_tile(rel, 0, structure)
    return describe_generic_tile_header(tile.header)


def schema_view(store, rel: str) -> dict:
    from .describe.schema import describe_schema
    out = {"file": rel}
    timestamps = _timestamps(store, rel)
    if timestamps:
        out["timestamps"] = timestamps
    out["generic_tile"] = _gtile_info(store, rel, "array schema")
    out.update(describe_schema(store.schema(rel)))
    return out


def enumeration_view(store, rel: str) -> dict:
    from .describe.enumeration import describe_enumeration
    out = {"file": rel, "generic_tile": _gtile_info(store, rel, "enumeration")}
    out.update(describe_enumeration(store.enumeration(rel)))
    return out


def metadata_file_view(store, rel: str) -> dict:
    from .describe.array_metadata import describe_metadata_record
    base = posixpath.basename(rel)
    out: dict = {"file": rel}
    if base.endswith(".vac"):
        out["kind"] = "vacuum list of metadata files"
        out["vacuumed"] = store.vacuum_file(rel)
        return out
    if base.endswith(".tmp"):
        out["kind"] = "write in progress (skipped by readers)"
        return out
    timestamps = _timestamps(store, rel)
    if timestamps:
        out["timestamps"] = timestamps
    out["generic_tile"] = _gtile_info(store, rel, "array metadata")
    out["records"] = [describe_metadata_record(r) for r in store.array_metadata(rel)]
    out["vacuumed"] = rel in store.vacuumed_metadata()
    return out


def merged_metadata(store, merged=None) -> dict:
    """Every __meta file applied in timestamp order; files listed in a .vac are skipped (or `merged`, the
    store's MergedMetadata as of a time: as_of/<T>/metadata.yaml)."""
    from .describe.array_metadata import describe_merged_metadata
    merged = merged or store.merged_metadata()
    return {"files_applied": list(merged.applied), "files_skipped_as_vacuumed": list(merged.skipped),
            "metadata": describe_merged_metadata(merged.records)}


def commit_view(store, rel: str) -> dict:
    from .describe.commits import describe_condition_commit, describe_consolidated_commits
    base = posixpath.basename(rel)
    out: dict = {"file": rel, "size": store.file_size(rel)}
    timestamps = _timestamps(store, rel)
    if timestamps:
        out["timestamps"] = timestamps
    if base.endswith((".wrt", ".ok")):
        frag = base.rsplit(".", 1)[0]
        out["kind"] = "write commit" if base.endswith(".wrt") else "commit marker (format < 12)"
        out["fragment"] = frag
        out["fragment_exists"] = store.fragment_path_of(frag) is not None  # no listing per commit file
    elif base.endswith(".vac"):
        out["kind"] = "vacuum list"
        out["vacuumed"] = store.vacuum_file(rel)
    elif base.endswith(".ign"):
        out["kind"] = "ignore list"
        out["ignored"] = store.ignore_file(rel)
    elif base.endswith(".con"):
        out["kind"] = "consolidated commits"
        out.update(describe_consolidated_commits(store.consolidated_commits(rel)))
    elif base.endswith((".del", ".upd")):
        out["kind"] = "delete condition" if base.endswith(".del") else "update condition"
        out["generic_tile"] = _gtile_info(store, rel, out["kind"])
        out.update(describe_condition_commit(store.condition(rel), _field_types(store)))
    else:
        out["kind"] = "unknown"
    return out


def _field_types(store) -> dict:
    """Field name -> Datatype from the latest schema, so condition values read as values, not hex."""
    latest = store.latest_schema_file()
    if not latest:
        return {}
    try:
        schema = store.schema(latest)
    except Exception:
        return {}
    return {f.name: f.datatype for f in (*schema.dimensions, *schema.attributes)}


def fragment_meta_view(store, rel: str) -> dict:
    from .describe.consolidated_fragment_metadata import describe_consolidated_fragment_metadata
    store.consolidated_fragment_metadata(rel)  # records what differs from the fragments' own footers
    out: dict = {"file": rel, "generic_tile": _gtile_info(store, rel, "consolidated fragment metadata")}
    out.update(describe_consolidated_fragment_metadata(store.consolidated_footers(rel)))
    # entries of fragments vacuumed since this file was written: TileDB skips them (store docstring)
    live = {posixpath.basename(p) for p in store.fragment_paths()}
    gone = 0
    for item in out["fragments"]:
        item["in_array"] = item.get("fragment", item["name"]) in live
        gone += not item["in_array"]
    out["not_in_array"] = gone
    return out
