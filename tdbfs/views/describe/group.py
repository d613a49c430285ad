"""Groups: the group details files and their members."""

from __future__ import annotations

from ...format.group import GroupDetails, GroupMember


def describe_group_member(m: GroupMember) -> dict:
    """A member as stored, offsets in the payload."""
    out = {"name": m.name, "type": m.type_name, "uri": m.uri, "relative": m.relative}
    if m.version >= 2:
        out["deleted"] = m.deleted
    out.update({"member_version": m.version, "object_type": m.object_type, "offset": m.offset,
                "uri_offset": m.uri_offset, "name_offset": m.name_offset})
    return out


def describe_group_details(d: GroupDetails) -> dict:
    out = {"version": d.version, "member_count": len(d.members),
           "members": [describe_group_member(m) for m in d.members]}
    if d.trailing_bytes:
        out["trailing_bytes"] = d.trailing_bytes
    return out


def describe_changes(version: int, added, removed, kept) -> dict:
    """What one details file changed, as (name, type, uri, relative) of the members it added, removed
    and listed again unchanged."""
    short = lambda m: {"name": m.name, "type": m.type_name, "uri": m.uri, "relative": m.relative}
    return {"version": version, "added": [short(m) for m in added], "removed": [short(m) for m in removed],
            "listed_again": [short(m) for m in kept]}
