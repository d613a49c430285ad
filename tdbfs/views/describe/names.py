"""Timestamped names of fragments and of the files beside them."""

from __future__ import annotations

from ...format.names import FragmentName


def describe_fragment_name(n: FragmentName) -> dict:
    out = {"name": n.name, "t1": n.t1, "t2": n.t2, "t1_iso": n.t1_iso, "t2_iso": n.t2_iso,
           "uuid": n.uuid, "format_version": n.format_version, "name_version": n.name_version}
    if n.extension:
        out["extension"] = n.extension
    return out
