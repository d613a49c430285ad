"""The storage interface on a real folder: listings, lstat semantics, bounded reads, paths kept inside."""

from __future__ import annotations

import os

import pytest

from tdbfs.store.storage import FOLDER, REGULAR, NotRegularError, Storage
from tdbfs.store.storage.opening import open_storage
from tdbfs.store.storage.local import LocalStorage


@pytest.fixture
def tree(tmp_path):
    """root/ with a file, a folder holding a file, a symlink to a file outside, a symlink to a folder
    outside, and a FIFO; `outside/` beside root holds what the links point at."""
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret").write_bytes(b"never read")
    (outside / "sub" / "inner").write_bytes(b"never read either")
    root = tmp_path / "root"
    (root / "dir").mkdir(parents=True)
    (root / "data.bin").write_bytes(bytes(range(100)))
    (root / "dir" / "small").write_bytes(b"hello")
    os.symlink(outside / "secret", root / "link")
    os.symlink(outside / "sub", root / "dirlink")
    os.mkfifo(root / "fifo")
    return root


def test_listing_gives_kind_size_and_mtime_as_lstat_does(tree):
    storage = open_storage(str(tree))
    entries = storage.entries("")
    assert [e.name for e in entries] == ["data.bin", "dir", "dirlink", "fifo", "link"]
    for e in entries:
        st = os.lstat(tree / e.name)
        assert (e.size, e.mtime_ns, e.mode) == (st.st_size, st.st_mtime_ns, st.st_mode)
        assert e.mtime == st.st_mtime  # the very float os.stat gives: mount times do not move
    kinds = {e.name: e.kind for e in entries}
    assert kinds == {"data.bin": REGULAR, "dir": FOLDER, "dirlink": "symbolic link", "fifo": "FIFO",
                     "link": "symbolic link"}
    assert storage.entries("dir")[0].size == 5
    assert storage.entries("no such folder") == []


def test_the_listings_by_kind_agree_with_the_generic_ones(tree):
    storage = open_storage(str(tree))
    for rel in ("", "dir", "dirlink", "missing"):
        assert storage.names(rel) == Storage.names(storage, rel)
        assert storage.subdirs(rel) == Storage.subdirs(storage, rel)
        assert storage.regular_names(rel) == Storage.regular_names(storage, rel)
    assert storage.subdirs("") == ["dir"]
    assert storage.regular_names("") == ["data.bin"]


def test_a_symlink_is_reported_and_never_followed(tree):
    storage = open_storage(str(tree))
    link = storage.stat("link")
    assert link.kind == "symbolic link" and link.target == str(tree.parent / "outside" / "secret")
    assert not storage.is_file("link") and not storage.is_dir("dirlink")
    with pytest.raises(NotRegularError, match="symbolic link .*never opened") as exc:
        storage.read("link")
    assert exc.value.target == link.target
    with pytest.raises(NotRegularError):
        storage.pread("link", 0, 4)
    with pytest.raises(NotRegularError):
        storage.file_size("link")
    # nor on the way to something else
    assert storage.entries("dirlink") == []
    with pytest.raises(NotRegularError):
        storage.read("dirlink/inner")
    assert storage.entry("dirlink/inner") is None


def test_a_fifo_is_never_opened(tree):
    storage = open_storage(str(tree))
    assert storage.stat("fifo").kind == "FIFO"
    with pytest.raises(NotRegularError, match="FIFO"):
        storage.read("fifo")    # would block forever if it were opened for reading without O_NONBLOCK
    with pytest.raises(NotRegularError, match="FIFO"):
        storage.pread("fifo", 0, 10)


def test_reads_are_bounded_by_the_file_size(tree):
    storage = open_storage(str(tree))
    assert storage.file_size("data.bin") == 100
    assert storage.read("data.bin") == bytes(range(100))
    assert storage.pread("data.bin", 10, 5) == bytes(range(10, 15))
    assert storage.pread("data.bin", 90, 1 << 40) == bytes(range(90, 100))   # no allocation past the end
    assert storage.pread("data.bin", 200, 10) == b""
    with pytest.raises(ValueError):
        storage.pread("data.bin", -1, 10)
    with pytest.raises(FileNotFoundError):
        storage.read("missing")


def test_paths_never_leave_the_root(tree):
    storage = open_storage(str(tree / "dir"))
    assert storage.read("small") == b"hello"
    for rel in ("../data.bin", "x/../../data.bin", "/data.bin", str(tree / "data.bin")):
        with pytest.raises(FileNotFoundError):
            storage.read(rel)
        assert storage.entry(rel) is None
    with pytest.raises(FileNotFoundError):
        storage.child("..")


def test_the_root_is_checked_once_and_a_child_is_rooted_below(tree, tmp_path):
    with pytest.raises(FileNotFoundError):
        open_storage(str(tmp_path / "missing"))
    with pytest.raises(NotADirectoryError):
        open_storage(str(tree / "data.bin"))
    os.symlink(tree, tmp_path / "named")   # the path the user names may itself be a symlink
    storage = open_storage(str(tmp_path / "named"))
    assert isinstance(storage, LocalStorage) and storage.uri == str(tmp_path / "named")
    assert storage.stat("").kind == FOLDER
    child = storage.child("dir")
    assert child.uri == str(tmp_path / "named" / "dir") and child.read("small") == b"hello"
    assert storage.describe("dir/small") == f"{storage.uri}/dir/small"
