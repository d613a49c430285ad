"""open_array decides the layout of a folder, once, and the store constructors only build."""

from __future__ import annotations

import os

import pytest
import tiledb

import legacy0x_arrays as Z
from tdbfs.store import ArrayStore, NotAnArrayError
from tdbfs.store.open_array import open_array
from tdbfs.store.legacy0x import Legacy0xArrayStore, Legacy0xWorkspaceStore


def test_a_tiledb_array_gets_an_array_store(array_factory):
    built = array_factory("sparse", ndim=1, n_fragments=2)
    store = open_array(str(built.path))
    assert type(store) is ArrayStore
    assert store.path == os.path.abspath(built.path)
    assert len(store.fragment_paths()) == 2


def test_a_group_gets_a_group_store_a_plain_folder_a_file_and_nothing_are_refused(tmp_path):
    from tdbfs.store.group_store import GroupStore
    tiledb.group_create(str(tmp_path / "grp"))
    assert type(open_array(str(tmp_path / "grp"))) is GroupStore
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotAnArrayError, match="no __schema/ and no __array_schema.tdb"):
        open_array(str(tmp_path / "empty"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotAnArrayError, match="not a directory"):
        open_array(str(tmp_path / "file"))
    with pytest.raises(FileNotFoundError, match="array not found"):
        open_array(str(tmp_path / "missing"))


@pytest.fixture(scope="module")
def zero(tmp_path_factory):
    if Z.wheel_library_path() is None:
        pytest.skip("genomicsdb==0.1.6 (its TileDB 0.x library) is not installed")
    return Z.load_corpus(tmp_path_factory.mktemp("zero"))


def test_a_legacy0x_array_and_workspace_get_their_stores(zero):
    path, _spec = zero["arrays"]["sparse_gzip"]
    store = open_array(path)
    assert type(store) is Legacy0xArrayStore
    assert store.schema_files() == ["__array_schema.tdb"]
    assert store.legacy0x_schema().attributes[0].name == "a1"
    assert len(store.fragment_paths()) == 2
    # what a 0.x folder has not, the TileDB 2.x answers already say
    assert store.commit_files() == [] and store.metadata_files() == [] and store.enumeration_files() == []
    assert store.committed_fragment_names() == {} and store.vacuum_lists() == {}
    assert store.findings() == []

    ws = open_array(zero["ws"])
    assert type(ws) is Legacy0xWorkspaceStore and ws.kind == "workspace"
    assert "sparse_gzip" in ws.array_paths() and "grp/in_group" in ws.array_paths()
    assert ws.array("sparse_gzip").cache is ws.cache      # the arrays of a workspace share its cache
    assert {"callset.json", "vidmap.json"} <= {n for n, _ in ws.other_files()}
    assert ws.read_file("callset.json") == b'{"callsets": []}\n'
    assert ws.findings() == []


def test_a_backcompat_array_of_format_1_is_not_taken_for_0x():
    path = os.path.join(os.path.dirname(__file__), "..", "data", "backcompat_arrays", "v0_pre_format_1.3.0",
                        "dense_array_v1_3_0")
    if not os.path.isdir(path):
        pytest.skip("back-compat corpus absent")
    store = open_array(path)
    assert type(store) is ArrayStore
    assert store.schema_files() == ["__array_schema.tdb"]


def test_the_store_takes_its_settings_when_built_and_its_members_share_them(array_factory, tmp_path):
    """drop_served and the listings made before go to the store as it is built (a mount with
    -o direct_io keeps what it served); a group's members share its cache, so its policy too."""
    from tdbfs.store.group_store import GroupStore
    built = array_factory("sparse", ndim=1, n_fragments=1)
    assert open_array(str(built.path)).cache.drop_served is True
    assert open_array(str(built.path), drop_served=False).cache.drop_served is False
    group = tmp_path / "grp"
    tiledb.group_create(str(group))
    with tiledb.Group(str(group), "w") as g:
        g.add(str(built.path), name="a")
    store = open_array(str(group), drop_served=False)
    assert type(store) is GroupStore and store.cache.drop_served is False
    member = store.member_store("a")
    assert type(member) is ArrayStore and member.cache is store.cache
    assert [m.shown for m in store.members()] == ["a"] and len(member.fragment_paths()) == 1

    class Listings:
        def __init__(self):
            self.asked = []

        def take(self, rel, mtime_now):
            self.asked.append(rel)
            return None   # changed since: the store lists for itself

    listings = Listings()
    store = open_array(str(built.path), listings=listings)
    assert len(store.fragment_paths()) == 1 and sorted(listings.asked) == ["", "__fragments"]
