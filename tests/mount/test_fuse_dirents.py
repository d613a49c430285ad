"""A big listing written into libfuse 3's readdir reply in bulk (tdbfs/mount/fuse_dirents.py).

* the records are byte for byte the kernel's struct fuse_dirent and fuse_direntplus (fuse_kernel.h),
  packed here one by one: names of one length, of one record size, of many sizes;
* against a reply laid out as libfuse's `struct fuse_dh` and a filler that writes as libfuse's
  `fill_dir`, each request (from the start, and continuing at the offset where the last one filled)
  holds exactly the bytes the filler alone would have written; a reply of another handle, or of
  another layout, is left to the filler, name by name, with the same result;
* through a real libfuse 3 mount, libc's readdir sees every name with its type, inode and offset, from
  the start and after seekdir to any offset, for fragment names of one length and of many, and the
  daemon's log says they went in bulk.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import stat
import struct
import subprocess

import pytest

from tdbfs.mount import fuse_dirents
from tdbfs.mount.fuse_dirents import BulkFill, _records
from tdbfs.mount.fuse_ops import TdbfsOperations
from tdbfs.mount.fuse_readdir import _BULK_MIN, _FILL_CALL_3, _FILLER_3, _fill_dir
from tdbfs.mount.libfuse import mfusepy
from tdbfs.store import ArrayStore
from tdbfs.views.tree import build_root

from test_many_fragments import add_fragment, age, make_fragments

UNKNOWN_INO = 0xFFFFFFFF
DT_DIR = 4
#: a READDIRPLUS record's struct fuse_entry_out, as libfuse fills it for a name without attributes:
#: only attr.ino and attr.mode set (nodeid 0 tells the kernel to ignore the rest)
ENTRY_OUT = struct.pack("<QQQQII", 0, 0, 0, 0, 0, 0) + struct.pack("<QQQQQQIIIIIIIIII", UNKNOWN_INO, 0, 0, 0, 0, 0,
                                                                   0, 0, 0, stat.S_IFDIR | 0o555, 0, 0, 0, 0, 0, 0)
assert len(ENTRY_OUT) == 128


def record(name: bytes, off: int, ftype: int, plus: bool, ino: int = UNKNOWN_INO) -> bytes:
    """One record as fuse_add_direntry(_plus) of libfuse's fuse_lowlevel.c packs it."""
    body = (ENTRY_OUT if plus else b"") + struct.pack("<QQII", ino, off, len(name), ftype) + name
    return body + bytes(-len(body) % 8)


@pytest.mark.parametrize("plus", [False, True])
@pytest.mark.parametrize("names", [
    [b"__1732550000001_1732550000001_%032x_22" % i for i in range(300)],     # one length
    [b"x" * (41 + i % 8) for i in range(300)],                              # lengths of one record size
    [b"tile_%d.bin" % i for i in range(300)],                               # sizes in long runs
    [b"__%d_%d_%032x_22" % (t, t, t) for t in sorted(range(1, 400), key=str)],  # sizes in turn
])
def test_records_are_the_kernels_records(names, plus):
    prefix = (ENTRY_OUT if plus else b"") + struct.pack("<Q", UNKNOWN_INO)
    name_at = 152 if plus else 24
    lens = [len(n) for n in names]
    sizes = [(name_at + n + 7) & ~7 for n in lens]
    assert bytes(_records(names, lens, sizes, 7, prefix, DT_DIR, name_at)) == b"".join(
        record(n, 7 + i, DT_DIR, plus) for i, n in enumerate(names))


class FakeReply:
    """A reply laid out as libfuse 3's `struct fuse_dh` (as fuse_dirents declares it; the real one is
    checked through a mount below), with a filler that writes as libfuse's `fill_dir` does at a
    non-zero offset: one record at `len` if it fits in `needlen`, else "full"."""

    def __init__(self, fh: int, needlen: int, plus: bool):
        self.dh = fuse_dirents._FuseDh()
        self.buffer = ctypes.create_string_buffer(needlen)
        self.dh.contents = ctypes.addressof(self.buffer)
        self.dh.size = self.dh.needlen = needlen
        self.dh.fh = fh
        self.dh.req = 1
        self.dh.last = ctypes.addressof(self.dh) + type(self.dh).first.offset
        self.plus, self.calls, self.written, self.ino, self.spell = plus, 0, 0, UNKNOWN_INO, bytes

        def fill(buf, name, st_address, off, flags):
            assert buf == ctypes.addressof(self.dh)
            self.calls += 1
            mode = ctypes.cast(st_address, ctypes.POINTER(mfusepy.c_stat)).contents.st_mode
            rec = record(self.spell(name), off, stat.S_IFMT(mode) >> 12, self.plus, self.ino)
            if self.dh.len + len(rec) > self.dh.needlen:
                return 1
            ctypes.memmove(self.dh.contents + self.dh.len, rec, len(rec))
            self.dh.len += len(rec)
            return 0

        self._callback = _FILLER_3(fill)
        self.filler = ctypes.cast(self._callback, _FILL_CALL_3)

    def request(self, ops, path: bytes, fh: int, offset: int, bulk: bool) -> bytes:
        self.dh.len = 0
        with_bulk = BulkFill(ctypes.addressof(self.dh), fh, self.plus) if bulk else None
        assert _fill_dir(ops, path, self.filler, ctypes.c_void_p(ctypes.addressof(self.dh)), offset, fh, 0,
                         plus=self.plus, bulk=with_bulk) == 0
        self.written += with_bulk.written if with_bulk else 0
        return ctypes.string_at(self.dh.contents, self.dh.len)


def _requests(ops, path: str, reply: FakeReply, bulk: bool, fh=None) -> list[bytes]:
    """Every reply of a listing of `path`, each request continuing at the offset of its last record."""
    fh = ops.opendir(path) if fh is None else fh
    replies, offset = [], 0
    while True:
        got = reply.request(ops, path.encode(), fh, offset, bulk)
        if not got:
            return replies
        replies.append(got)
        name_at = 152 if reply.plus else 24
        at = 0
        while at < len(got):  # the offset of the reply's last record
            (namelen,) = struct.unpack_from("<I", got, at + name_at - 8)
            offset = struct.unpack_from("<Q", got, at + name_at - 16)[0]
            at += (name_at + namelen + 7) & ~7


@pytest.fixture(scope="module")
def arrays(tmp_path_factory):
    """Two arrays of 700 fragments: names of one length (timestamps of 13 digits, as TileDB writes
    them), and of many (timestamps 1-700)."""
    base = tmp_path_factory.mktemp("dirents")
    mixed = base / "mixed"
    make_fragments(mixed, 700)
    even = base / "even"
    make_fragments(even, 1)
    for i in range(1, 700):
        add_fragment(even, 1_732_550_000_000 + i)
    age(even)
    return {"even": even, "mixed": mixed}


@pytest.mark.parametrize("plus", [False, True])
@pytest.mark.parametrize("kind", ["even", "mixed"])
def test_bulk_replies_hold_what_the_filler_alone_writes(arrays, kind, plus):
    ops = TdbfsOperations(build_root(ArrayStore(str(arrays[kind]))))
    reply = FakeReply(fh=0, needlen=8192, plus=plus)
    fh = ops.opendir("/fragments")
    reply.dh.fh = fh
    one_by_one = _requests(ops, "/fragments", reply, bulk=False, fh=fh)
    calls_one_by_one = reply.calls
    reply.calls = 0
    bulk = _requests(ops, "/fragments", reply, bulk=True, fh=fh)
    assert bulk == one_by_one and len(bulk) > 5
    # the filler took the dots, the first name of each request and the last few names, no more
    assert reply.calls <= 2 + len(bulk) + _BULK_MIN and calls_one_by_one > 700
    names = sorted(os.listdir(arrays[kind] / "__fragments"))
    listed = []
    for got in bulk:
        name_at, at = (152 if plus else 24), 0
        while at < len(got):
            off, namelen, ftype = struct.unpack_from("<QII", got, at + name_at - 16)
            listed.append((got[at + name_at:at + name_at + namelen].decode(), off, ftype))
            at += (name_at + namelen + 7) & ~7
    assert listed == [(n, i + 1, DT_DIR) for i, n in enumerate([".", ".."] + names)]


def test_a_reply_of_another_handle_or_layout_is_left_to_the_filler(arrays):
    ops = TdbfsOperations(build_root(ArrayStore(str(arrays["even"]))))
    reply = FakeReply(fh=0, needlen=8192, plus=False)
    fh = ops.opendir("/fragments")
    reply.dh.fh = fh
    expected = _requests(ops, "/fragments", reply, bulk=False, fh=fh)
    for spoil, value in (("fh", fh + 1), ("last", 0), ("filled", 1)):
        reply = FakeReply(fh=fh, needlen=8192, plus=False)
        setattr(reply.dh, spoil, value)
        assert _requests(ops, "/fragments", reply, bulk=True, fh=fh) == expected
        assert reply.written == 0 and reply.calls > 700
    # a filler that gives each name an inode of its own (libfuse's readdir_ino: no two records alike)
    # ... or that writes names its own way
    for spoil, value in (("ino", 5), ("spell", bytes.upper)):
        reply = FakeReply(fh=fh, needlen=8192, plus=False)
        setattr(reply, spoil, value)
        own_way = _requests(ops, "/fragments", reply, bulk=False, fh=fh)
        assert own_way != expected
        assert _requests(ops, "/fragments", reply, bulk=True, fh=fh) == own_way and reply.written == 0


def _libc_listing(path: str, seek: int | None = None) -> list[tuple[str, int, int, int]]:
    """(name, d_type, d_ino, d_off) of each entry libc's readdir gives, after seekdir(`seek`) if given."""

    class Dirent(ctypes.Structure):
        _fields_ = [("d_ino", ctypes.c_uint64), ("d_off", ctypes.c_int64), ("d_reclen", ctypes.c_ushort),
                    ("d_type", ctypes.c_ubyte), ("d_name", ctypes.c_char * 256)]

    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.opendir.restype = ctypes.c_void_p
    libc.opendir.argtypes = [ctypes.c_char_p]
    libc.readdir64.restype = ctypes.POINTER(Dirent)
    libc.readdir64.argtypes = [ctypes.c_void_p]
    libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
    libc.closedir.argtypes = [ctypes.c_void_p]
    d = libc.opendir(path.encode())
    assert d, os.strerror(ctypes.get_errno())
    try:
        if seek is not None:
            libc.seekdir(d, seek)
        out = []
        while True:
            ctypes.set_errno(0)
            e = libc.readdir64(d)
            if not e:
                assert ctypes.get_errno() == 0
                return out
            out.append((e.contents.d_name.decode(), e.contents.d_type, e.contents.d_ino, e.contents.d_off))
    finally:
        libc.closedir(d)


@pytest.mark.parametrize("kind", ["even", "mixed"])
def test_readdir_through_libfuse3_sees_every_entry_as_the_filler_gives_it(arrays, kind, mount, tmp_path):
    names = sorted(os.listdir(arrays[kind] / "__fragments"))
    log = tmp_path / "daemon.log"
    mnt = mount(arrays[kind], env={"TDBFS_LIBFUSE": "3"}, extra_args=["--log", str(log), "--debug"])
    where = str(mnt / "fragments")
    whole = [(".", DT_DIR, UNKNOWN_INO, 1), ("..", DT_DIR, UNKNOWN_INO, 2)] + [
        (n, DT_DIR, UNKNOWN_INO, i + 3) for i, n in enumerate(names)]
    assert _libc_listing(where) == whole
    for seek in (3, 100, 333, len(names) + 1):
        assert _libc_listing(where, seek) == whole[seek:]
    listed = subprocess.run(["ls", "-f", where], capture_output=True, text=True, check=True).stdout.split()
    assert listed == [".", ".."] + names
    text = log.read_text()
    assert "names written in bulk" in text and "not laid out as tdbfs expects" not in text
    for seek in (100, 333):
        assert re.search(f"readdir of /fragments from {seek}: [1-9][0-9]* names written in bulk", text)
