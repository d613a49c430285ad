"""Content of the array-level views: array.yaml, schemas, enumerations, metadata, commits, .meta files."""

from __future__ import annotations

import os

from ..format.names import try_parse_name


def array_summary(store) -> dict:
    out: dict = {"uri": store.path}
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
    fragment_versions: dict = {}
    paths = store.fragment_paths()
    for p in paths:
        n = try_parse_name(os.path.basename(p))
        v = n.assumed_format_version if n else None
        fragment_versions[v] = fragment_versions.get(v, 0) + 1
    out["format_versions"] = {
        "schemas": sorted(schema_versions),
        "fragments": sorted(k for k in fragment_versions if k is not None),
    }
    commits = store.commit_files()
    committed = store.committed_fragment_names()
    out["counts"] = {
        "fragments": len(paths),
        "committed_fragments": sum(1 for p in paths if os.path.basename(p) in committed),
        "schemas": len(store.schema_files()),
        "enumerations": len(store.enumeration_files()),
        "commit_files": len(commits),
        "metadata_files": len(store.metadata_files()),
        "fragment_meta_files": len(store.fragment_meta_files()),
    }
    out["sizes"] = store.disk_usage()
    out["encryption"] = _encryption(store, latest)
    out["problems"] = store.findings()
    return out


def _encryption(store, latest) -> dict:
    """Whether the array is encrypted (from the unencrypted schema tile header) and whether a key was given;
    for an encrypted schema, its generic tile header, chunk headers and AES-256-GCM part headers."""
    from ..format.generic_tile import generic_tile_envelope
    enc = store.encryption_type(latest) if latest else 0
    out: dict = {"type": {0: "NONE", 1: "AES_256_GCM"}.get(enc, f"UNKNOWN({enc})"), "key_given": store.key is not None}
    if enc and latest:
        try:
            out["schema_generic_tile"] = generic_tile_envelope(store.read_file(latest), 0, latest, "array schema")
        except Exception as exc:
            store.problems.add_error(exc, latest, "array schema")
    return out


def _gtile_info(store, rel: str, structure: str) -> dict:
    from ..format.generic_tile import header_to_dict
    tile = store.generic_tile(rel, 0, structure)
    return header_to_dict(tile.header)


def schema_view(store, rel: str) -> dict:
    from ..format.schema import schema_to_dict
    out = {"file": rel}
    n = try_parse_name(os.path.basename(rel))
    if n:
        out["timestamps"] = {"t1": n.t1, "t2": n.t2, "t1_iso": n.t1_iso, "t2_iso": n.t2_iso}
    out["generic_tile"] = _gtile_info(store, rel, "array schema")
    out.update(schema_to_dict(store.schema(rel)))
    return out


def enumeration_view(store, rel: str) -> dict:
    from ..format.enumeration import enumeration_to_dict
    out = {"file": rel, "generic_tile": _gtile_info(store, rel, "enumeration")}
    out.update(enumeration_to_dict(store.enumeration(rel)))
    return out


def metadata_file_view(store, rel: str) -> dict:
    from ..format.array_metadata import record_to_dict
    base = os.path.basename(rel)
    out: dict = {"file": rel}
    if base.endswith(".vac"):
        out["kind"] = "vacuum list of metadata files"
        out["vacuumed"] = store.vacuum_file(rel)
        return out
    if base.endswith(".tmp"):
        out["kind"] = "write in progress (skipped by readers)"
        return out
    n = try_parse_name(base)
    if n:
        out["timestamps"] = {"t1": n.t1, "t2": n.t2, "t1_iso": n.t1_iso, "t2_iso": n.t2_iso}
    out["generic_tile"] = _gtile_info(store, rel, "array metadata")
    out["records"] = [record_to_dict(r) for r in store.array_metadata(rel)]
    out["vacuumed"] = rel in _vacuumed_metadata(store)
    return out


def _vacuumed_metadata(store) -> set:
    out = set()
    for rel in store.metadata_files():
        if rel.endswith(".vac"):
            for entry in store.attempt(lambda rel=rel: store.vacuum_file(rel), rel, "vacuum file") or ():
                out.add("__meta/" + os.path.basename(entry))
    return out


def merged_metadata(store) -> dict:
    """Every __meta file applied in timestamp order; files listed in a .vac are skipped."""
    from ..format.array_metadata import merge_metadata, merged_to_dict
    vacuumed = _vacuumed_metadata(store)
    files = []
    skipped = []
    for rel in store.metadata_files():
        base = os.path.basename(rel)
        if base.endswith((".vac", ".tmp")):
            continue
        if rel in vacuumed:
            skipped.append(rel)
            continue
        n = try_parse_name(base)
        records = store.attempt(lambda rel=rel: store.array_metadata(rel), rel, "array metadata")
        if records is not None:
            files.append(((n.t1, n.t2, base) if n else (0, 0, base), base, records))
    files.sort(key=lambda x: x[0])
    merged = merge_metadata([(base, records) for _, base, records in files])
    return {"files_applied": [b for _, b, _ in files], "files_skipped_as_vacuumed": skipped,
            "metadata": merged_to_dict(merged)}


def commit_view(store, rel: str) -> dict:
    from ..format import commits
    base = os.path.basename(rel)
    out: dict = {"file": rel, "size": store.file_size(rel)}
    n = try_parse_name(base)
    if n:
        out["timestamps"] = {"t1": n.t1, "t2": n.t2, "t1_iso": n.t1_iso, "t2_iso": n.t2_iso}
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
        out.update(commits.consolidated_commits_to_dict(store.consolidated_commits(rel)))
    elif base.endswith((".del", ".upd")):
        out["kind"] = "delete condition" if base.endswith(".del") else "update condition"
        out["generic_tile"] = _gtile_info(store, rel, out["kind"])
        out.update(commits.condition_to_dict(store.condition(rel), _field_types(store)))
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
    from ..format import consolidated_fragment_metadata as cfm
    store.consolidated_fragment_metadata(rel)  # records what differs from the fragments' own footers
    out: dict = {"file": rel, "generic_tile": _gtile_info(store, rel, cfm.STRUCTURE)}
    out.update(cfm.consolidated_to_dict(store.generic_tile(rel, 0, cfm.STRUCTURE).payload, rel, store))
    return out
