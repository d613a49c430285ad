"""The listings `tdbfs mount` takes while its daemon starts (mount/prelisted.py): written and read back
as the storage lists them, given out once and only for a folder unchanged since, and ignored whole when
the parent did not finish writing them."""

from __future__ import annotations

import os
import stat
import time

import numpy as np
import pytest
import tiledb

from tdbfs.mount.fuse_ops import TdbfsOperations
from tdbfs.store import ArrayStore
from tdbfs.store.base_store import MTIME_TICK_NS
from tdbfs.store.fragment_listing import LISTED_FOLDERS, FragmentListing
from tdbfs.mount.prelisted import Prelisted, read_listings, write_listings
from tdbfs.store.storage.local import LocalStorage
from tdbfs.views.tree import build_root


def _age(*folders) -> None:
    t = time.time() - 60
    for d in folders:
        os.utime(d, (t, t))


@pytest.fixture
def folder(tmp_path):
    """__fragments/ with two folders, a file, a symlink to a folder and a name that is not UTF-8."""
    frags = tmp_path / "__fragments"
    frags.mkdir()
    for name in ("__2_2_b_22", "__1_1_a_22", os.fsdecode(b"__3_3_\xff_22")):
        (frags / name).mkdir()
    (frags / "stray.txt").write_bytes(b"x")
    os.symlink(frags / "__1_1_a_22", frags / "__9_9_link_22")
    _age(tmp_path, frags)
    return tmp_path


def _memfd(storage, folders=LISTED_FOLDERS) -> int:
    fd = os.memfd_create("test-listing")
    write_listings(fd, storage, folders)
    return fd


def test_the_listings_read_back_are_what_the_storage_lists(folder):
    storage = LocalStorage(str(folder))
    fd = _memfd(storage)
    try:
        got = read_listings(fd)
    finally:
        os.close(fd)
    assert set(got) == {"", "__fragments"}
    taken, stamp, encoded = got["__fragments"]
    assert storage.subdirs("__fragments") == ["__1_1_a_22", "__2_2_b_22", os.fsdecode(b"__3_3_\xff_22")]
    assert list(encoded) == [b"__1_1_a_22", b"__2_2_b_22", b"__3_3_\xff_22"]
    assert encoded.width == 10 and encoded[2] == b"__3_3_\xff_22"
    assert stamp == os.stat(folder / "__fragments").st_mtime_ns
    assert taken - stamp > 59 * 10**9
    assert list(got[""][2]) == [b"__fragments"]


@pytest.mark.parametrize("damage", ["no header", "short body", "other magic", "count off"])
def test_a_listing_the_parent_did_not_finish_is_ignored_whole(folder, damage):
    storage = LocalStorage(str(folder))
    fd = _memfd(storage)
    try:
        size = os.fstat(fd).st_size
        if damage == "no header":
            os.pwrite(fd, bytes(24), 0)
        elif damage == "short body":
            os.ftruncate(fd, size - 3)
        elif damage == "other magic":
            os.pwrite(fd, b"x", 0)
        else:  # the count of the last folder says one name more
            data = os.pread(fd, size, 0)
            at = data.rindex(b"__fragments") + len(b"__fragments") + 16
            os.pwrite(fd, (int.from_bytes(data[at:at + 4], "little") + 1).to_bytes(4, "little"), at)
        assert read_listings(fd) == {}
    finally:
        os.close(fd)


def test_a_folder_is_given_once_and_only_while_unchanged(folder):
    storage = LocalStorage(str(folder))
    mtime = lambda rel: storage.stat(rel).mtime_ns  # noqa: E731
    fd = _memfd(storage)
    pre = Prelisted(fd, LISTED_FOLDERS, MTIME_TICK_NS)
    assert pre.take("__labels", lambda: mtime("__labels")) is None
    os.fstat(fd)  # a folder it does not hold leaves the memfd unread and open
    encoded = pre.take("__fragments", lambda: mtime("__fragments"))
    assert [os.fsdecode(n) for n in encoded] == storage.subdirs("__fragments")
    with pytest.raises(OSError):
        os.fstat(fd)  # read once, closed
    assert pre.take("__fragments", lambda: mtime("__fragments")) is None  # given once
    (folder / "__fragments" / "__4_4_d_22").mkdir()
    assert pre.take("", lambda: mtime("")) is not None  # the root did not change

    _age(folder / "__fragments")
    pre = Prelisted(_memfd(storage), LISTED_FOLDERS, MTIME_TICK_NS)
    (folder / "__fragments" / "__5_5_e_22").mkdir()  # made after the listing: the folder's mtime moved
    assert pre.take("__fragments", lambda: mtime("__fragments")) is None
    _age(folder / "__fragments")
    pre = Prelisted(_memfd(storage), LISTED_FOLDERS, MTIME_TICK_NS)
    assert pre.take("__fragments", lambda: mtime("__fragments"))[-1] == b"__5_5_e_22"


def test_a_folder_changed_within_the_tick_before_the_listing_is_not_given(folder):
    storage = LocalStorage(str(folder))
    (folder / "__fragments" / "__4_4_d_22").mkdir()  # mtime now: a change in the same tick keeps it
    fd = _memfd(storage)
    pre = Prelisted(fd, LISTED_FOLDERS, MTIME_TICK_NS)
    assert pre.take("__fragments", lambda: storage.stat("__fragments").mtime_ns) is None
    assert pre.take("", lambda: storage.stat("").mtime_ns) is not None


def _array(path, n: int) -> None:
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 99), tile=10, dtype=np.int64))
    tiledb.Array.create(str(path), tiledb.ArraySchema(domain=dom, attrs=[tiledb.Attr("a", dtype=np.int32)]))
    for t in range(1, n + 1):
        with tiledb.open(str(path), "w", timestamp=t) as A:
            A[0:10] = {"a": np.arange(10, dtype=np.int32) * t}


def test_the_store_shows_the_listing_it_was_handed_as_its_own(tmp_path):
    """An array of 3 fragments: the store given the parent's listings lists what a store listing for
    itself does, in the same order, with the names encoded as given; a fragment written after the
    parent listed shows (the folder changed, so the store lists it again)."""
    path = tmp_path / "arr"
    _array(path, 3)
    _age(path, path / "__fragments")
    own = ArrayStore(str(path)).fragment_names()
    assert len(own) == 3 and own == sorted(os.listdir(path / "__fragments"))
    store = ArrayStore(str(path), listings=Prelisted(_memfd(LocalStorage(str(path))), LISTED_FOLDERS, MTIME_TICK_NS))
    ops = TdbfsOperations(build_root(store))
    encoded, mode = ops.dirents("/fragments", ops.opendir("/fragments"), 0)
    assert list(encoded) == [n.encode() for n in own] and mode == stat.S_IFDIR | 0o555
    listing = store.fragment_listing()
    assert store.listed_fragment_names(listing) is encoded
    assert listing._in_folder is None  # `ls fragments/` decoded no name: it needs no str of them
    assert len(listing) == 3 and list(listing) == own
    names = store.fragment_names()
    assert names == own
    assert store.fragment_listing() is listing
    assert store.listed_fragment_names(FragmentListing(None, [], listing.listed)) is None  # not the store's
    assert [u.rsplit("/", 1)[-1] for u in tiledb.array_fragments(str(path)).uri] == names

    store = ArrayStore(str(path), listings=Prelisted(_memfd(LocalStorage(str(path))), LISTED_FOLDERS, MTIME_TICK_NS))
    with tiledb.open(str(path), "w", timestamp=4) as A:
        A[0:10] = {"a": np.zeros(10, dtype=np.int32)}
    names = store.fragment_names()
    assert len(names) == 4 and names == sorted(os.listdir(path / "__fragments"))
    assert store.listed_fragment_names(names) is None
