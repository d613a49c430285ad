"""Group details (docs/format.md §7.7) decoded from files TileDB wrote, compared with what TileDB
reads from them; versions 1 and 2 written by hand per `group_member_v1.cc`/`group_member_v2.cc`;
every truncation, bad version and random damage is a FormatError naming file, structure and offset."""

from __future__ import annotations

import os
import sys

import pytest
import tiledb

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

import groups  # noqa: E402
import hostile  # noqa: E402
from tdbfs.format.errors import FormatError  # noqa: E402
from tdbfs.format.generic_tile import read_generic_tile  # noqa: E402
from tdbfs.format.group import GroupMember, parse_group_details, parse_group_marker  # noqa: E402
from tdbfs.views.describe.group import describe_group_details  # noqa: E402


def payload_of(path) -> bytes:
    data = path.read_bytes()
    return bytes(read_generic_tile(data, 0, path.name, "group details").payload)


def test_every_details_file_tiledb_wrote_decodes_to_the_members_tiledb_reads(tmp_path):
    built = groups.build_nested(tmp_path)
    for group in built.groups.values():
        files = groups.details_files(group)
        assert files, group
        live: dict[str, GroupMember] = {}
        for f in files:
            d = parse_group_details(payload_of(f), f.name)
            assert d.version == 2 and d.trailing_bytes == 0
            for m in d.members:
                assert m.version == 2
                if m.deleted:
                    live.pop(m.key, None)
                else:
                    live[m.key] = m
        want = groups.oracle_members(group)
        got = []
        for m in live.values():
            where = os.path.normpath(os.path.join(group, m.uri)) if m.relative else m.uri.removeprefix("file://")
            got.append((m.name, m.type_name, where))
        assert sorted(got) == want


def test_a_removal_is_a_deleted_member_with_the_name_and_uri_of_the_added_one(tmp_path):
    built = groups.build_nested(tmp_path)
    members = [m for f in groups.details_files(built.path)
               for m in parse_group_details(payload_of(f), f.name).members if m.name == "gone"]
    # every write of a version 2 file lists the members it keeps again: only the last one removes it
    assert [m.deleted for m in members][-1] is True and not any(m.deleted for m in members[:-1])
    assert {(m.uri, m.relative, m.type_name) for m in members} == {("gone", True, "array")}


def test_member_fields_sit_at_the_offsets_given():
    uri, name = "file:///data/arr", "arr"
    payload = groups.details_payload(2, [groups.member_bytes(2, 2, False, uri, name),
                                         groups.member_bytes(2, 1, True, "sub", None, deleted=True)])
    d = parse_group_details(payload, "f")
    first, second = d.members
    assert (first.offset, first.uri_offset) == (12, 12 + 14)
    assert payload[first.uri_offset:first.uri_offset + len(uri)] == uri.encode()
    assert payload[first.name_offset:first.name_offset + 3] == b"arr"
    assert (second.name, second.key, second.type_name, second.relative, second.deleted) == \
        (None, "sub", "group", True, True)
    assert second.offset == first.name_offset + 3 + 1


def test_version_1_members_have_no_deleted_flag():
    payload = groups.details_payload(1, [groups.member_bytes(1, 2, True, "a", "a"),
                                         groups.member_bytes(1, 1, True, "g", None)])
    d = parse_group_details(payload, "f")
    assert d.version == 1 and [(m.name, m.uri, m.deleted, m.version) for m in d.members] == \
        [("a", "a", False, 1), (None, "g", False, 1)]
    assert d.trailing_bytes == 0


def test_trailing_bytes_are_counted_not_decoded():
    payload = groups.details_payload(2, [groups.member_bytes(2, 2, True, "a", "a")]) + b"xyz"
    d = parse_group_details(payload, "f")
    assert (d.end, d.trailing_bytes) == (len(payload) - 3, 3)


def test_every_truncation_is_a_format_error_at_or_before_the_cut():
    payload = groups.details_payload(2, [groups.member_bytes(2, 2, True, "arr", "arr"),
                                         groups.member_bytes(2, 2, False, "file:///x", "x")])
    for cut in range(len(payload)):
        with pytest.raises(FormatError) as info:
            parse_group_details(payload[:cut], "__group/f")
        e = info.value
        assert e.file == "__group/f" and e.within == "generic tile payload"
        assert e.structure.startswith(("group details", "group member")) and 0 <= e.offset <= cut, (cut, e)


@pytest.mark.parametrize("where, value, message", [(0, 3, "unsupported group details version 3"),
                                                   (12, 7, "unsupported group member version 7")])
def test_unknown_versions_are_refused_where_they_are(where, value, message):
    payload = bytearray(groups.details_payload(2, [groups.member_bytes(2, 2, True, "a", "a")]))
    payload[where:where + 4] = value.to_bytes(4, "little")
    with pytest.raises(FormatError, match=message) as info:
        parse_group_details(bytes(payload), "f")
    assert info.value.offset == where


def test_a_huge_member_count_or_uri_length_is_refused_before_allocating():
    payload = bytearray(groups.details_payload(2, [groups.member_bytes(2, 2, True, "a", "a")]))
    payload[4:12] = (1 << 60).to_bytes(8, "little")
    with pytest.raises(FormatError, match="count"):
        parse_group_details(bytes(payload), "f")
    payload = bytearray(groups.details_payload(2, [groups.member_bytes(2, 2, True, "a", "a")]))
    payload[18:26] = (1 << 62).to_bytes(8, "little")
    with pytest.raises(FormatError, match="URI needs") as info:
        parse_group_details(bytes(payload), "f")
    assert info.value.offset == 26


def test_the_marker_tiledb_writes_is_empty(tmp_path):
    tiledb.Group.create(str(tmp_path / "g"))
    assert parse_group_marker((tmp_path / "g" / "__tiledb_group.tdb").read_bytes()).size == 0


def test_damaged_payloads_never_escape_as_anything_but_a_format_error(tmp_path):
    """The shared harness of tests/format/hostile.py (time, memory, safety net) on real payloads, the
    YAML presentation included; and on a whole details file, generic tile and all."""
    built = groups.build_nested(tmp_path)
    targets = []
    for f in groups.details_files(built.path) + groups.details_files(built.groups["mid"]):
        targets.append(hostile.Target(f"group details {f.name}", payload_of(f),
                                      lambda d, n=f.name: describe_group_details(parse_group_details(d, n))))
        targets.append(hostile.Target(f"group details file {f.name}", f.read_bytes(),
                                      lambda d, n=f.name: parse_group_details(
                                          read_generic_tile(d, 0, n, "group details").payload, n)))
    assert all(hostile.check(t, t.data) is None for t in targets)
    assert hostile.run(targets, 300) == []
