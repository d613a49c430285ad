"""TileDB groups (docs/format.md §7.7): the `__tiledb_group.tdb` marker and the group details
generic tiles in `__group/`.

A group details payload (spec: `format_spec/group.md`; code: `tiledb/sm/group/group_details.cc`,
`group_details_v1.cc`, `group_details_v2.cc`, `group_member_v1.cc`, `group_member_v2.cc`) is

    u32 details_version (1 or 2), u64 member_count,
    member_count x { u32 member_version (1 or 2), u8 object_type, u8 relative, u64 uri_len, uri,
                     u8 name_set, [u64 name_len, name], [u8 deleted: member version 2 only] }

The spec's table says `u32 uri length` and omits the name; TileDB's code writes a u64 and the
optional name, and so does every file it writes: the code is followed. Object types are
`tiledb/sm/enums/object_type.h`: 0 INVALID, 1 GROUP, 2 ARRAY. A version 2 details file lists
only what one write changed: members added (deleted = 0) and members removed (deleted = 1);
readers apply every file of `__group/` in timestamp order, a member's key being its name, or its
URI when it has none (`GroupMember::key`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .cursor import Cursor
from .errors import safety_net

MARKER_FILE = "__tiledb_group.tdb"
DETAILS_DIR = "__group"
STRUCTURE = "group details"

OBJECT_TYPES = {0: "invalid", 1: "group", 2: "array"}
#: the smallest member a version can hold: version, type, relative, uri length, name_set (+ deleted)
_MIN_MEMBER_SIZE = {1: 4 + 1 + 1 + 8 + 1, 2: 4 + 1 + 1 + 8 + 1 + 1}


@dataclass(frozen=True)
class GroupMarker:
    """The `__tiledb_group.tdb` file: TileDB writes it empty and reads nothing from it."""

    size: int


@dataclass(frozen=True)
class GroupMember:
    version: int                 # member format version, 1 or 2
    object_type: int             # 0 INVALID, 1 GROUP, 2 ARRAY
    relative: bool               # the URI is relative to the group's own URI
    uri: str                     # as stored
    name: str | None             # None when the member was added without a name
    deleted: bool                # a removal (version 2 only; version 1 members are never deleted)
    offset: int                  # payload offset of the member
    uri_offset: int              # payload offset of the URI bytes
    name_offset: int | None      # payload offset of the name bytes

    @property
    def type_name(self) -> str:
        return OBJECT_TYPES.get(self.object_type, f"unknown({self.object_type})")

    @property
    def key(self) -> str:
        """What TileDB identifies the member by: its name, else its URI."""
        return self.name if self.name is not None else self.uri


@dataclass(frozen=True)
class GroupDetails:
    version: int                            # 1 or 2
    members: tuple[GroupMember, ...]        # in stored order
    end: int                                # payload offset where the last member ends
    trailing_bytes: int                     # bytes after it (TileDB ignores them)


def parse_group_marker(data) -> GroupMarker:
    return GroupMarker(len(data))


@safety_net(STRUCTURE)
def parse_group_details(payload, file: str, within: str = "generic tile payload") -> GroupDetails:
    cur = Cursor(payload, file, STRUCTURE, within=within)
    version = cur.u32("group details version")
    if version not in (1, 2):
        raise cur.error(f"unsupported group details version {version} (TileDB reads 1 and 2)", offset=0)
    count = cur.u64_count(_MIN_MEMBER_SIZE[1], "member count", "members")
    members = []
    for i in range(count):
        members.append(_member(cur, i))
    return GroupDetails(version, tuple(members), cur.pos, cur.remaining)


def _member(cur: Cursor, i: int) -> GroupMember:
    start = cur.pos
    cur.structure = f"group member {i}"
    version = cur.u32("member version")
    if version not in (1, 2):
        raise cur.error(f"unsupported group member version {version} (TileDB reads 1 and 2)", offset=start)
    object_type = cur.u8("object type")
    relative = cur.bool("relative flag")
    uri_len = cur.u64("URI length")
    uri_offset = cur.pos
    uri = cur.string(uri_len, "URI")
    cur.structure = f"group member {i} ({uri!r})"
    name = None
    name_offset = None
    if cur.bool("name set flag"):
        name_len = cur.u64("name length")
        name_offset = cur.pos
        name = cur.string(name_len, "name")
    deleted = cur.bool("deleted flag") if version == 2 else False
    return GroupMember(version, object_type, relative, uri, name, deleted, start, uri_offset, name_offset)
