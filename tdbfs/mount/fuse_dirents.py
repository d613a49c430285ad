"""A big listing written into libfuse 3's readdir reply in bulk, not one filler call per name.

libfuse's high-level readdir gives the filesystem a filler, `fill_dir` (lib/fuse.c), that appends one
record to the reply of the open folder: a `struct fuse_dirent`, or a `struct fuse_direntplus` for a
READDIRPLUS (the kernel's fuse_kernel.h). The reply is the open folder's `struct fuse_dh`: `contents`,
filled up to `len` of the `needlen` bytes the kernel asked for. Called from Python, every name goes
through ctypes and libffi: 0.4-1 µs each, most of the daemon's time for `ls fragments/` of 100,000
fragments (docs/performance.md §5).

So only the first name of a request goes through the filler. What it wrote tells whether the reply is
laid out as libfuse 3.3 to 3.17 lay it out: the folder handle's fields where `struct fuse_dh` puts
them (its `last` pointing at its own `first`, its `fh` ours, nothing listed its own way), and one
record of the size the kernel's format gives, holding the name, the offset and the file type where it
puts them. Then the names after it are written as copies of that record (name, its length and the
offset changed), a run of names of one length at a time in a few C-level joins, and `len` is moved
past them. Names that come joined and of one length (joined_names.py: the fragments `tdbfs mount`
listed) are written from one slice of them, with no object per name. If anything differs,
`fill_after` says so and the filler is called for each name.
"""

from __future__ import annotations

import array
import bisect
import ctypes
import itertools
import os
import stat
import struct
from collections.abc import Sequence

from .joined_names import SEPARATOR, JoinedNames

#: sizeof(pthread_mutex_t), which begins struct fuse_dh, in glibc on the machines it is known for
_MUTEX_SIZE = {"x86_64": 40, "aarch64": 48}.get(os.uname().machine)
#: where the name begins in a record: struct fuse_dirent (ino, off, namelen, type), and in a
#: READDIRPLUS the struct fuse_entry_out before it (fuse_kernel.h: FUSE_NAME_OFFSET,
#: FUSE_NAME_OFFSET_DIRENTPLUS)
_NAME_AT = {False: 24, True: 152}
#: the record's off, namelen and type, just before the name
_TAIL = struct.Struct("<QII")
#: the longest name the kernel takes in a record (fuse_kernel.h: FUSE_NAME_MAX)
_NAME_MAX = 1024
#: a record's size and its padding after the name, by the name's length, for READDIR and READDIRPLUS
_SIZES = {plus: [(at + n + 7) & ~7 for n in range(_NAME_MAX + 1)] for plus, at in _NAME_AT.items()}
#: a record's padding after its name, by how long it is
_ZEROS = [bytes(n) for n in range(8)]
#: names measured at a time: a reply of 1 MiB holds about 13,000 of fragments/
_BLOCK = 4096
#: the ino libfuse gives a name the filesystem gives none (fuse.h: FUSE_UNKNOWN_INO)
_UNKNOWN_INO = 0xFFFFFFFF


def _padded(n: int) -> int:
    return (n + 7) & ~7  # FUSE_DIRENT_ALIGN


def _records(names: list, lens: list, sizes: list, off: int, prefix: bytes, ftype: int, name_at: int) -> bytearray:
    """The records of `names` (of lengths `lens`, records of `sizes`) with offsets from `off` on: each
    `prefix` (what the record holds before its off, as the filler wrote it), off, namelen, type, the
    name and zero padding to a multiple of 8 bytes."""
    runs = [(size, len(list(run))) for size, run in itertools.groupby(sizes)]
    if len(runs) * 16 > len(names):  # records of many sizes in turn: a piece per field of each
        pads = map(_ZEROS.__getitem__, map(int.__sub__, sizes, map(name_at.__add__, lens)))
        return bytearray(b"".join(itertools.chain.from_iterable(zip(
            itertools.repeat(prefix, len(names)),
            map(_TAIL.pack, range(off, off + len(names)), lens, itertools.repeat(ftype)), names, pads))))
    data = bytearray()
    at = 0
    for size, count in runs:
        data += _same_size(names[at:at + count], lens[at:at + count], size, off + at, prefix, ftype, name_at)
        at += count
    return data


def _same_size(names, lens, size, off, prefix, ftype, name_at) -> bytearray:
    """Records of one size: copies of one record in one join, and the fields that differ (off, and
    namelen where the names' lengths differ) set each in one strided assignment."""
    width = size - name_at
    if lens[0] == lens[-1] and min(lens) == max(lens):
        head = prefix + _TAIL.pack(0, lens[0], ftype)
        pad = bytes(width - lens[0])
        data = bytearray(head)
        data += (pad + head).join(names)
        data += pad
    else:
        head = prefix + _TAIL.pack(0, 0, ftype)
        data = bytearray(head)
        data += head.join(map(bytes.ljust, names, itertools.repeat(width), itertools.repeat(b"\0")))
        memoryview(data).cast("I")[(name_at - 8) // 4::size // 4] = array.array("I", lens)
    _set_offsets(data, size, off, len(names), name_at)
    return data


def _joined_records(joined: bytes, count: int, width: int, size: int, off, prefix, ftype, name_at) -> bytearray:
    """The records of `count` names of `width` bytes each, joined by NUL in `joined`: each joint
    replaced by what lies between two names (the padding, then the next record's head)."""
    head = prefix + _TAIL.pack(0, width, ftype)
    pad = bytes(size - name_at - width)
    data = bytearray(head)
    data += joined.replace(SEPARATOR, pad + head)
    data += pad
    _set_offsets(data, size, off, count, name_at)
    return data


def _set_offsets(data: bytearray, size: int, off: int, count: int, name_at: int) -> None:
    """Each record's off (records of `size` bytes), from `off` on, in one strided assignment."""
    memoryview(data).cast("Q")[(name_at - 16) // 8::size // 8] = array.array("Q", range(off, off + count))


def _dh_type(mutex_size: int):
    class FuseDh(ctypes.Structure):
        """struct fuse_dh of lib/fuse.c, libfuse 3.3-3.17 (3.0-3.2 had an `allocated` after `last`)."""
        _fields_ = [("lock", ctypes.c_ubyte * mutex_size), ("fuse", ctypes.c_void_p), ("req", ctypes.c_void_p),
                    ("contents", ctypes.c_void_p), ("first", ctypes.c_void_p), ("last", ctypes.c_void_p),
                    ("len", ctypes.c_uint), ("size", ctypes.c_uint), ("needlen", ctypes.c_uint),
                    ("filled", ctypes.c_int), ("fh", ctypes.c_uint64), ("error", ctypes.c_int),
                    ("nodeid", ctypes.c_uint64)]
    return FuseDh


_FuseDh = _dh_type(_MUTEX_SIZE) if _MUTEX_SIZE else None
_FIRST_AT = _FuseDh.first.offset if _FuseDh else 0


class BulkFill:
    """One readdir request of libfuse 3's high-level API: `dh` its open folder's reply (the `buf` the
    filler takes), `fh` the folder's handle, `plus` a READDIRPLUS. Take `start()` before the filler
    writes the request's first name, then `fill_after` for the names after it. `written` counts the
    names it wrote."""

    __slots__ = ("_dh", "_fh", "_plus", "_len0", "written")

    def __init__(self, dh: int, fh: int, plus: bool):
        self._dh = _FuseDh.from_address(dh) if _FuseDh is not None and dh else None
        self._fh, self._plus, self._len0 = fh, plus, None
        self.written = 0

    def start(self) -> None:
        if self._dh is not None:
            self._len0 = self._dh.len

    def fill_after(self, name: bytes, off: int, mode: int, names: Sequence[bytes], index: int) -> bool:
        """Write `names[index:]` (encoded, all of file type `mode`), with offsets from `off + 1` on,
        after the record the filler wrote for `name` at offset `off`, as far as they fit (the kernel
        asks again from there). False when the reply is not laid out as expected: then nothing was
        written, and the caller goes on with the filler."""
        head = self._record_head(name, off, mode)
        if head is None:
            return False
        dh, name_at = self._dh, _NAME_AT[self._plus]
        sizes = _SIZES[self._plus]
        prefix, ftype = head[:name_at - 16], stat.S_IFMT(mode) >> 12
        room = dh.needlen - dh.len
        if isinstance(names, JoinedNames) and names.width is not None and names.width <= _NAME_MAX:
            # names of one length (fragment folders): the records of the request are slices of one object
            fit = min(len(names) - index, room // sizes[names.width])
            if fit:
                self._append(_joined_records(names.span(index, index + fit), fit, names.width, sizes[names.width],
                                             off + 1, prefix, ftype, name_at))
                self.written += fit
            return True
        next_off = off + 1
        while index < len(names):
            block = names[index:index + _BLOCK]
            lens = list(map(len, block))
            if max(lens) > _NAME_MAX:  # not a name the kernel takes: the filler writes it, libfuse says
                block = block[:next(i for i, n in enumerate(lens) if n > _NAME_MAX)]
                lens = lens[:len(block)]
                if not block:
                    return True  # the filler writes it, at the start of the next request
            shortest, longest = min(lens), max(lens)
            if sizes[shortest] == sizes[longest]:  # records of one size (fragment folders: names of one length)
                fit = min(len(block), room // sizes[shortest])
                data = _same_size(block[:fit], lens[:fit], sizes[shortest], next_off, prefix, ftype, name_at) \
                    if fit else b""
            else:
                rec_sizes = list(map(sizes.__getitem__, lens))
                fit = bisect.bisect_right(list(itertools.accumulate(rec_sizes)), room)
                data = _records(block[:fit], lens[:fit], rec_sizes[:fit], next_off, prefix, ftype, name_at) \
                    if fit else b""
            if fit:
                self._append(data)
                room -= len(data)
                next_off += fit
                index += fit
                self.written += fit
            if fit < len(block):
                break  # the next name does not fit, or is not for the kernel
        return True

    def _append(self, data: bytearray) -> None:
        """Records after what the reply holds (they fit: the caller measured the room)."""
        dh = self._dh
        ctypes.memmove(dh.contents + dh.len, (ctypes.c_char * len(data)).from_buffer(data), len(data))
        dh.len += len(data)

    def _record_head(self, name: bytes, off: int, mode: int) -> bytes | None:
        """The bytes before the name of the record the filler wrote for `name`, if the reply and the
        record are laid out as this module expects; else None."""
        dh = self._dh
        if dh is None or self._len0 is None:
            return None
        name_at = _NAME_AT[self._plus]
        size = _padded(name_at + len(name))
        if (dh.first or dh.filled or dh.fh != self._fh or dh.last != ctypes.addressof(dh) + _FIRST_AT
                or not dh.req or not dh.contents or dh.len != self._len0 + size
                or not dh.len <= dh.needlen <= dh.size):
            return None
        record = ctypes.string_at(dh.contents + self._len0, size)
        rec_off, rec_len, rec_type = _TAIL.unpack_from(record, name_at - 16)
        ino = struct.unpack_from("<Q", record, name_at - 24)[0]
        if (record[name_at:name_at + len(name)] != name or any(record[name_at + len(name):])
                or (rec_off, rec_len, rec_type) != (off, len(name), stat.S_IFMT(mode) >> 12)
                or ino not in (_UNKNOWN_INO, 0)):
            return None
        return record[:name_at]
