"""Commit-side files: consolidated commits (`.con`) and delete/update conditions (`.del`, `.upd`)."""

from __future__ import annotations

from ...format.commits import (ConditionCommit, ConditionExpression, ConditionNode, ConsolidatedCommits,
                               condition_to_text, decode_member)
from ...format.datatypes import Datatype
from ...format.schema import plain


def describe_consolidated_commits(con: ConsolidatedCommits) -> dict:
    """`{"entries": [{path, kind, offset[, embedded_offset, embedded_size]}...]}`."""
    out = []
    for e in con:
        d = {"path": e.path, "kind": e.kind, "offset": e.offset}
        if e.embedded is not None:
            d["embedded_offset"] = e.embedded_offset
            d["embedded_size"] = e.embedded_size
        out.append(d)
    return {"entries": out}


def describe_condition(node: ConditionNode | None, types: dict[str, Datatype] | None = None):
    """The tree as nested dicts; values are decoded where `types` (field name -> Datatype) knows the field."""
    types = types or {}
    if node is None:
        return None
    if isinstance(node, ConditionExpression):
        return {"node": "expression", "combination_op": node.op_name, "offset": node.offset,
                "children": [describe_condition(c, types) for c in node.children]}
    out = {"node": "value", "op": node.op_name, "field": node.field, "offset": node.offset,
           "value_hex": node.value.hex()}
    dt = types.get(node.field)
    if dt is not None:
        out["datatype"] = dt.name
    if node.offsets is not None:
        out["offsets"] = list(node.offsets)
        if dt is not None:
            out["values"] = [plain(decode_member(m, dt)[0]) for m in node.members]
    elif dt is not None:
        out["value"] = plain(decode_member(node.value, dt)[0])
    return out


def describe_condition_commit(commit: ConditionCommit, types: dict[str, Datatype] | None = None) -> dict:
    """`.del` / `.upd` view: the stored (negated) condition as text and tree, plus update values."""
    types = types or {}
    out = {"stored_condition": condition_to_text(commit.condition, types),
           "deletes_cells_where" if not commit.is_update else "updates_cells_where":
               _user_condition_text(commit.condition, types),
           "condition": describe_condition(commit.condition, types)}
    if commit.is_update:
        vals = []
        for uv in commit.update_values:
            d = {"field": uv.field, "value_hex": uv.value.hex()}
            dt = types.get(uv.field)
            if dt is not None:
                d["datatype"] = dt.name
                d["value"] = plain(decode_member(uv.value, dt)[0])
            vals.append(d)
        out["update_values"] = vals
    if commit.trailing_bytes:
        out["trailing_bytes"] = commit.trailing_bytes
    return out


def _user_condition_text(node, types) -> str:
    """The user's condition: the stored tree is its negation, so strip one NOT when present."""
    if isinstance(node, ConditionExpression) and node.combination_op == 2 and len(node.children) == 1:
        return condition_to_text(node.children[0], types)
    return f"NOT({condition_to_text(node, types)})"
