"""Enumerations."""

from __future__ import annotations

from ...format.enumeration import Enumeration
from ...format.schema import plain


def describe_enumeration(e: Enumeration) -> dict:
    out = {
        "version": e.version,
        "name": e.name,
        "path_name": e.path_name,
        "datatype": e.datatype.name,
        "cell_val_num": "var" if e.var_sized else e.cell_val_num,
        "ordered": e.ordered,
        "data_size": len(e.data),
    }
    if e.offsets is not None:
        out["offsets"] = list(e.offsets)
    out["value_count"] = len(e.values)
    out["values"] = [plain(v) for v in e.values]
    if e.trailing_bytes:
        out["trailing_bytes"] = e.trailing_bytes
    return out
