"""The group store against tiledb-py's Group API: members, types, locations and metadata at every
level; history; members missing, outside, unknown, cyclic; damaged details files; check."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import groups  # noqa: E402
from tdbfs.check.check import check_array  # noqa: E402
from tdbfs.format.array_metadata import MetadataRecord  # noqa: E402
from tdbfs.store import ArrayStore  # noqa: E402
from tdbfs.store.open_array import open_array  # noqa: E402
from tdbfs.store.group_store import Cycle, GroupStore, MemberError  # noqa: E402


@pytest.fixture(scope="module")
def nested(tmp_path_factory):
    return groups.build_nested(tmp_path_factory.mktemp("nested"))


def store_at(root: GroupStore, member_path: str):
    store = root
    for part in filter(None, member_path.split("/")):
        store = store.member_store(part)
    return store


def plain(value):
    return list(value) if isinstance(value, tuple) else value


def test_members_types_locations_and_metadata_equal_tiledbs_at_every_level(nested):
    root = open_array(str(nested.path))
    assert isinstance(root, GroupStore)
    for member_path, folder in nested.groups.items():
        store = store_at(root, member_path)
        assert isinstance(store, GroupStore) and store.path == str(folder)
        got = sorted((m.member.name, m.member.type_name, store.location(m.member)) for m in store.members())
        assert got == groups.oracle_members(folder), member_path
        merged = store.merged_metadata().records
        want = groups.oracle_metadata(folder)
        assert set(merged) == set(want)
        for k, rec in merged.items():
            assert isinstance(rec, MetadataRecord) and plain(rec.value) == plain(want[k]), (member_path, k)
        assert store.format_version() == 2
        assert store.findings() == [] or member_path == ""
    for member_path, folder in nested.arrays.items():
        store = store_at(root, member_path)
        assert type(store) is ArrayStore and store.path == str(folder)
        assert len(store.fragment_paths()) >= 1


def test_removed_members_leave_the_list_and_show_in_the_history(nested):
    store = open_array(str(nested.path))
    assert "gone" not in [m.shown for m in store.members()]
    history = store.history()
    assert [[m.name for m in h.removed] for h in history] == [[], [], ["gone"]]
    assert sorted(m.name for m in history[0].added) == ["d", "gone", "s"]
    assert sorted(m.name for m in history[1].added) == ["ext", "mid"]
    # the folder of the removed member stays on disk, as TileDB leaves it: no problem, the history names it
    assert (nested.path / "gone").is_dir() and store.findings() == []


def test_the_absolute_member_is_opened_where_it_points(nested):
    store = open_array(str(nested.path))
    ext = store.member("ext")
    assert not ext.member.relative and ext.member.uri == "file://" + str(nested.arrays["ext"])
    assert store.member_store("ext").path == str(nested.arrays["ext"])
    assert store.member_prefix(ext) == str(nested.arrays["ext"])


def test_a_cycle_is_found_by_location_and_not_opened(tmp_path):
    built = groups.build_cycle(tmp_path)
    root = open_array(str(built.path))
    b = root.member_store("b")
    up = b.member_store("up")
    assert up == Cycle(0, str(built.path))
    result = check_array(root)
    assert result.clean and [m.array for m in result.members] == ["b", "x"]


def copy_of(nested, tmp_path):
    top = tmp_path / "copy" / "top"
    shutil.copytree(nested.path, top, symlinks=True)
    return top


def test_a_member_folder_deleted_is_a_problem_and_the_others_still_open(nested, tmp_path):
    top = copy_of(nested, tmp_path)
    shutil.rmtree(top / "s")
    store = open_array(str(top))
    with pytest.raises(MemberError) as info:
        store.member_store("s")
    p = info.value.problem
    assert p.file == store.member("s").file and p.within == "group details payload"
    assert p.offset == store.member("s").member.offset and "member missing" in p.message
    assert p in store.findings()
    assert type(store.member_store("d")) is ArrayStore
    result = check_array(store)
    assert not result.clean and p in result.errors
    # members inside the group are named from it, the one outside by where it is
    assert sorted(m.array for m in result.members) == sorted(["d", "mid", str(nested.arrays["ext"])])


def test_a_member_of_no_known_kind_or_a_symlink_is_a_problem(nested, tmp_path):
    top = copy_of(nested, tmp_path)
    shutil.rmtree(top / "d")
    (top / "d").mkdir()
    shutil.rmtree(top / "s")
    os.symlink(nested.arrays["s"], top / "s")
    store = open_array(str(top))
    with pytest.raises(MemberError, match="neither a TileDB array nor a group"):
        store.member_store("d")
    with pytest.raises(MemberError, match="symbolic link, not a folder"):
        store.member_store("s")
    assert type(store.member_store("ext")) is ArrayStore


def test_unknown_schemes_and_duplicates_and_version_1_files(tmp_path):
    """Details files written by hand: a version 1 file (the whole list) then a version 2 file adding a
    member on a scheme no backend serves and a second entry with one name."""
    g = tmp_path / "g"
    groups.small_array(g / "a", "dense")
    (g / "__tiledb_group.tdb").write_bytes(b"")
    groups.write_details(g, "__1_1_" + "0" * 32 + "_1", groups.details_payload(1, [
        groups.member_bytes(1, 2, True, "a", "a"), groups.member_bytes(1, 2, True, "old", "old")]))
    v2 = groups.details_payload(2, [
        groups.member_bytes(2, 2, False, "nosuchscheme://bucket/arr", "remote"),
        groups.member_bytes(2, 2, True, "a", "twice"), groups.member_bytes(2, 1, True, "a", "twice")])
    groups.write_details(g, "__2_2_" + "1" * 32 + "_2", v2 + b"\0\0")
    store = open_array(str(g))
    assert [m.shown for m in store.members()] == ["a", "old", "remote", "twice"]
    with pytest.raises(MemberError, match="nosuchscheme://bucket/arr"):
        store.member_store("remote")
    with pytest.raises(MemberError, match="member missing"):
        store.member_store("old")
    findings = store.findings()
    dup = [p for p in findings if "listed twice" in p.message]
    assert len(dup) == 1 and dup[0].file.endswith("_2") and dup[0].offset > 12
    (extra,) = [p for p in findings if "after the last member" in p.message]
    assert (extra.offset, extra.severity, extra.message) == (len(v2), "warning",
                                                             "2 bytes after the last member (TileDB ignores them)")
    # the second 'twice' (a group) wins, as in TileDB, and disagrees with the array on disk
    assert store.member("twice").member.type_name == "group"
    store.member_store("twice")
    assert any("listed as group, but the folder holds a TileDB array" in p.message for p in store.findings())
    # version 1 replaced the list; then version 2 added to it
    assert [len(h.added) for h in store.history()] == [2, 2]


def test_a_damaged_details_file_is_a_problem_with_file_and_offset_and_the_rest_is_read(nested, tmp_path):
    top = copy_of(nested, tmp_path)
    last = groups.details_files(top)[-1]
    payload = ArrayStore(str(top)).generic_tile(f"__group/{last.name}", 0, "group details").payload
    last.write_bytes(groups.plain_generic_tile(bytes(payload)[:-3]))    # the last member cut short
    store = open_array(str(top))
    rel = f"__group/{last.name}"
    (problem,) = [p for p in store.findings() if p.file == rel]
    # the name 'gone' (4 bytes, then the deleted flag) is where the bytes run out
    assert problem.within == "group details payload" and problem.offset == len(payload) - 5, problem
    assert problem.structure == "group member 4 ('gone')" and problem.message == "name needs 4 bytes but only 2 remain"
    assert store.history()[-1].details is None
    # without the removal, 'gone' is back: what TileDB itself would list from the files it can read
    assert sorted(m.shown for m in store.members()) == ["d", "ext", "gone", "mid", "s"]
    assert type(store.member_store("mid")) is GroupStore


def test_a_group_with_only_the_marker_has_its_arrays_and_groups_as_members(tmp_path):
    """Groups written before TileDB 2.9 (no __group/): the marker alone makes the group, and its members
    are the arrays and groups in its folder; a folder that holds neither is warned about."""
    g = tmp_path / "old"
    groups.small_array(g / "arr", "sparse")
    (g / "sub").mkdir()
    (g / "sub" / "__tiledb_group.tdb").write_bytes(b"")
    (g / "notes").mkdir()
    (g / "__tiledb_group.tdb").write_bytes(b"")
    store = open_array(str(g))
    assert isinstance(store, GroupStore) and store.marker_only() and store.format_version() is None
    assert [(m.shown, m.member.type_name, m.file) for m in store.members()] == [("arr", "array", None),
                                                                                ("sub", "group", None)]
    assert type(store.member_store("arr")) is ArrayStore and store.member_store("sub").members() == []
    (p,) = store.findings()
    assert (p.file, p.severity, p.message) == ("notes", "warning", "folder present but not a member of the group")
    result = check_array(store)
    assert result.clean and sorted(m.array for m in result.members) == ["arr", "sub"] and len(result.warnings) == 1
