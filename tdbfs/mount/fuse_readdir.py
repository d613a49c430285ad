"""READDIR through libfuse's filler: the entries of an open folder handed to it from an offset on,
without a Python object per entry (`_fill_dir`), the big ones of libfuse 3 in bulk (fuse_dirents.py)."""

from __future__ import annotations

import ctypes
import functools
import itertools
import logging
import stat

from .joined_names import JoinedNames
from .libfuse import mfusepy

log = logging.getLogger("tdbfs.fuse")

#: the st_mode of "." and ".." (only the type bits are used)
_DIR_MODE = stat.S_IFDIR | 0o555

#: libfuse's fuse_fill_dir_t (fuse.h), with the buffer and the stat as plain addresses
_FILLER_2 = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int64)
_FILLER_3 = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int64,
                             ctypes.c_int)
#: how `_fill_dir` calls the filler: with no argument types on a 64-bit ABI. ctypes then passes the
#: buffer and stat addresses (c_void_p), the name (bytes) and the offset and flags (int) as they are,
#: where a typed prototype converts every argument through a from_param call (listing 100,000 fragments:
#: 0.65 -> 0.40 µs per entry, docs/performance.md §5). The offset goes as a C int, which libffi widens to
#: the full register an off_t takes on x86-64 and arm64 (a listing never nears 2**31 entries); elsewhere
#: the typed prototype.
_UNTYPED_CALLS = ctypes.sizeof(ctypes.c_void_p) == 8
_FILL_CALL_2 = ctypes.CFUNCTYPE(ctypes.c_int) if _UNTYPED_CALLS else _FILLER_2
_FILL_CALL_3 = ctypes.CFUNCTYPE(ctypes.c_int) if _UNTYPED_CALLS else _FILLER_3
#: libfuse 3's fill flags, none (not FUSE_FILL_DIR_PLUS)
_NO_FILL_FLAGS = 0
#: libfuse 3's readdir flag FUSE_READDIR_PLUS (the kernel sent READDIRPLUS), and its fill flag
#: FUSE_FILL_DIR_PLUS (this entry's stat is complete: libfuse makes its node, the kernel its dentry)
_READDIR_PLUS = 1
_FILL_DIR_PLUS = 2
#: what a READDIRPLUS reply holds at least (a page), and what each entry takes of it: a struct
#: fuse_direntplus and the name, padded to 8 bytes (fuse_kernel.h)
_PLUS_REPLY = 4096
_DIRENTPLUS_SIZE = 152


#: the fewest names after the first of a request that `_fill_dir` writes in bulk: below, the filler's
#: calls cost less than reading the reply's layout
_BULK_MIN = 64


def _fits_one_plus_reply(names) -> bool:
    return sum(_DIRENTPLUS_SIZE + ((len(n) + 7) & ~7) for n in names) + 2 * (_DIRENTPLUS_SIZE + 8) <= _PLUS_REPLY


def _fill_dir(operations, path, filler, buf, offset, fh, *flags, plus=False, bulk=None) -> int:
    """Hand the entries of an open folder from `offset` on to libfuse's filler, each with the offset of
    the next: libfuse then writes them straight into the reply (no copy of the listing of its own) and
    says when the reply is full, and the kernel asks again from there. mfusepy's loop (offsets 0) built
    a tuple and encoded a name per entry, and libfuse copied each into a list of its own (a malloc and a
    strdup) before the first reply: 0.3 s of the daemon's 0.4 s for `ls` of 100,000 fragments.

    With `plus` (a READDIRPLUS), the subfolders of a folder listed whole in one reply come with their
    attributes: the kernel then walks into them without a LOOKUP each (`find` and `ls -R` walk a
    fragment's 10 folders in 10 round trips fewer of about 55). A listing that may not fit in one
    reply gets none: libfuse counts a lookup for an entry with attributes even when it does not fit,
    and never learns that the kernel did not see it.

    `bulk` (a fuse_dirents.BulkFill, libfuse 3), for a big listing of one file type: the filler takes
    the first name of the request, and the rest are written into the reply in bulk where it is laid
    out as expected."""
    path = None if path is None else path.decode("utf-8", "surrogateescape")
    names, modes = operations.dirents(path, fh, offset)
    st = mfusepy.c_stat()
    at = ctypes.c_void_p(ctypes.addressof(st))
    fill = functools.partial(filler, buf)
    if offset < 2:
        st.st_mode = _DIR_MODE
        for off, name in ((1, b"."), (2, b".."))[offset:]:
            if fill(name, at, off, *flags):
                return 0
    if plus and offset == 0 and path is not None and not isinstance(modes, int) and _fits_one_plus_reply(names):
        for off, name, mode in zip(itertools.count(3), names, modes):
            sub = operations.entry_stat(path, name) if stat.S_ISDIR(mode) else None
            if sub is not None:
                full = fill(name, ctypes.c_void_p(ctypes.addressof(sub)), off, _FILL_DIR_PLUS)
            else:
                st.st_mode = mode
                full = fill(name, at, off, *flags)
            if full:
                break
        return 0
    start = max(offset, 2)
    if isinstance(modes, int):
        st.st_mode = modes
        if bulk is not None and isinstance(names, _LISTS) and len(names) - (start - 2) > _BULK_MIN:
            first = names[start - 2]
            bulk.start()
            if fill(first, at, start + 1, *flags):
                return 0
            if bulk.fill_after(first, start + 1, modes, names, start - 1):
                return 0
            _unexpected_reply()
            start += 1  # the filler takes the rest
        rest = _names_from(names, start - 2)
        # one C-level loop (any() stops at the first "full"): no Python bytecode per entry
        any(map(filler, itertools.repeat(buf), rest, itertools.repeat(at), itertools.count(start + 1),
                *map(itertools.repeat, flags)))
    else:
        for off, name, mode in zip(itertools.count(start + 1), _names_from(names, start - 2), modes[start - 2:]):
            st.st_mode = mode
            if fill(name, at, off, *flags):
                break
    return 0


@functools.cache
def _unexpected_reply() -> None:
    log.warning("libfuse's readdir reply is not laid out as tdbfs expects (fuse_dirents.py): every name of a "
                "listing goes through its filler, one call each")


#: listings that index and slice at once (a list, or its names joined: joined_names.py)
_LISTS = (list, JoinedNames)


def _names_from(names, index: int):
    # a list is sliced (copying pointers) where islice would step through every name before `index`
    return iter(names[index:]) if isinstance(names, _LISTS) else itertools.islice(names, index, None)
