"""The FUSE front end: a thin adapter from mfusepy callbacks to the view tree.

Everything the kernel asks for is answered from the nodes of `tdbfs.views.nodes`:

* ``getattr``  -> mode (write bits cleared, masked by ``perm_mask``), exact ``st_size`` from
  ``node.size()``, ``st_mtime`` from ``node.mtime()``, the mounting user's uid/gid;
* ``readdir``  -> names with their ``st_mode`` (so ``find``/``ls`` need no per-entry lookup); in a
  READDIRPLUS of a small folder, its subfolders with their attributes too (no LOOKUP to walk in);
* ``open``/``read``/``release`` -> a handle table: a path is resolved once per open, and a
  rendered file that can change is rendered once per open (``node.fresh()``);
* every write-type operation -> ``EROFS``.

Errors never reach libfuse as Python exceptions: a missing path is ``ENOENT``, a
view that cannot be built (`ViewError`) is ``EIO`` with its reason logged, and any
other exception is ``EIO`` with the traceback logged; the daemon keeps running.

mfusepy is loaded by libfuse.py; libfuse's loop over this adapter is fuse_loop.py, its readdir
fuse_readdir.py, and the stop signals stop_signals.py.
"""

from __future__ import annotations

import errno
import functools
import itertools
import logging
import os
import threading
import time
from typing import Callable, Mapping, Optional

from .fuse_readdir import _DIR_MODE
from .fuse_setup import FuseOptions
from .joined_names import encoded_entries
from .libfuse import FuseOSError, _OperationsBase, libfuse_version, mfusepy
from ..store.stopping import Stopped
from ..views.nodes import DirNode, FileNode, Node, NoSuchPath, NotAFolder, SymlinkNode, ViewError, walk

log = logging.getLogger("tdbfs.fuse")

#: how long the kernel may keep the attributes of an immutable node (a tile file). `cat` of a tile file
#: asked for them 3 times with timeout 0 (its fstat, then each read past the size the kernel held: 3 of
#: the open's 7 requests). A path walk still revalidates the name after `entry_timeout` (its LOOKUP
#: brings fresh attributes), so a vanished fragment is noticed as soon as before.
IMMUTABLE_ATTR_TIMEOUT = 3600.0
#: under threads, how long after a callback returned its reply is taken as sent: libfuse reads the shared
#: attribute timeout a few instructions after the callback returns, on the same thread
REPLY_SENT_S = 0.05
_NOT_YET = float("inf")


# --------------------------------------------------------------------------- adapter

_WRITE_BITS = 0o222
#: what stat shows as the best I/O size: `cat`, `cp` and Python read that much per call, and with
#: the mount's read-ahead raised (`FuseOptions.read_ahead_kb`) a tile of up to 1 MiB is then one
#: FUSE request instead of 4-8 (128 KiB calls, 256 KiB requests)
_BLKSIZE = 1 << 20
#: fuse_common.h (libfuse 3): the kernel revalidates attributes before each cached read
FUSE_CAP_AUTO_INVAL_DATA = 1 << 12


def _guard(func):
    """Turn whatever a callback raises into an errno, log it, and never let it escape."""
    op = func.__name__

    @functools.wraps(func)
    def wrapper(self, path, *args):
        try:
            return func(self, path, *args)
        except FuseOSError:
            raise
        except Stopped:   # the mount is gone and the work with it (mount/shutdown.py): no error of the array
            raise FuseOSError(errno.EINTR) from None
        except ViewError as exc:
            self._log_once(logging.WARNING, "%s %s: I/O error: %s", op, path, exc)
            raise FuseOSError(errno.EIO) from None
        except Exception as exc:  # a bug in a view: EIO, traceback in the log, keep serving
            self._log_once(logging.ERROR, "%s %s: internal error: %s: %s", op, path, type(exc).__name__, exc,
                           exc_info=True)
            raise FuseOSError(errno.EIO) from None

    return wrapper


def _read_only(func):
    """A write-type callback: always EROFS (the kernel already refuses them on a ro mount)."""

    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        raise FuseOSError(errno.EROFS)

    return wrapper


class _Handle:
    """An open file: its node, and for rendered files that can change the one rendering it serves."""

    __slots__ = ("node", "data", "attrs")

    def __init__(self, node: FileNode, data: Optional[bytes]):
        self.node = node
        self.data = data
        self.attrs: Optional[dict] = None  # of an immutable node, kept for every fstat of this open


class TdbfsOperations(_OperationsBase):
    """mfusepy operations over a root `DirNode`. Use with ``mfusepy.FUSE(ops, mnt, raw_fi=True, ...)``."""

    use_ns = True  # times in integer nanoseconds (mfusepy's non-deprecated mode)

    def __init__(self, root: DirNode, options: Optional[FuseOptions] = None,
                 on_init: Optional[Callable[[], None]] = None, perm_mask: int = 0o555,
                 mask_at: Optional[Callable[[str], int]] = None):
        """`perm_mask`: the read/execute bits every node may have (see `access_mask`); `mask_at`, where
        they differ below it (a group's members: `group_views.access_masks`), those of the node at a path."""
        self.root = root
        self.perm_mask = perm_mask & 0o555
        self._mask_at = mask_at
        self.options = options or FuseOptions()
        self.on_init = on_init
        self.uid = os.getuid()
        self.gid = os.getgid()
        self.mount_time_ns = time.time_ns()
        self._handles: dict[int, _Handle] = {}
        self._dir_handles: dict[int, Optional[tuple]] = {}  # open folder -> the listing its readdirs serve
        self._fh_counter = itertools.count(1)
        self._ttl = self.options.lookup_ttl()
        self._listings: dict[str, tuple[Mapping[str, Node], float]] = {}
        self._found: dict[str, tuple[Node, float]] = {}  # path -> (entry found alone, until when)
        self._next_prune = 0.0
        self._logged: set = set()
        # who else may come in: then every request is checked against the modes the nodes show
        self._others = any(k in self.options.extra for k in ("allow_other", "allow_root"))
        self._live_config = None  # libfuse3's own fuse_config, when attr_timeout may be set per node
        # under threads: the threads whose last LOOKUP or GETATTR was of a node that can change -> when
        # that callback returned (_NOT_YET until then)
        self._short_pending: dict[int, float] = {}
        self._timeout_lock = threading.Lock()

    def _attr_timeout_for(self, node: Node) -> None:
        """Make libfuse's reply to this LOOKUP or GETATTR carry `node`'s own attribute timeout.

        libfuse's high-level API has one `attr_timeout` for every node, read from its `fuse_config`
        after the getattr callback returns, to fill the reply (fuse.c: `fuse_lib_getattr`,
        `lookup_path`). With a single-threaded loop no other request runs in between, so setting
        it here gives each reply the timeout of its own node.

        Under threads another thread's reply may read the value set here. The only harm would be a
        node that can change (a summary) getting an immutable node's long timeout, so: a thread that
        answers for such a node sets the short timeout and stays registered until its next LOOKUP or
        GETATTR, or until `REPLY_SENT_S` after its callback returned (`callback_done`): libfuse fills
        the reply on that thread right after the callback returns. The long one is set only while no
        thread is registered, both under one lock. An immutable node may then get the short timeout:
        one GETATTR more. Without the second way out, threads that answered a summary once and then
        sat idle (libfuse runs 8 or more) kept every tile file at the short timeout: 2 GETATTR more
        per `cat`."""
        conf = self._live_config
        if conf is None:
            return
        short = self.options.attr_timeout
        long = max(IMMUTABLE_ATTR_TIMEOUT, short)
        if not self.options.threads:
            conf.attr_timeout = long if node.immutable else short
            return
        me = threading.get_ident()
        with self._timeout_lock:
            pending = self._short_pending
            if node.immutable:
                pending.pop(me, None)
                if pending:
                    now = time.monotonic()
                    for thread in [t for t, done in pending.items() if now - done > REPLY_SENT_S]:
                        del pending[thread]
                if not pending:
                    conf.attr_timeout = long
            else:
                pending[me] = _NOT_YET
                conf.attr_timeout = short

    def callback_done(self) -> None:
        """The callback on this thread has returned (fuse_loop._Fuse._wrapper): see `_attr_timeout_for`."""
        if self._short_pending:
            me = threading.get_ident()
            with self._timeout_lock:
                if self._short_pending.get(me) == _NOT_YET:
                    self._short_pending[me] = time.monotonic()

    def _require(self, path: str, want: int) -> None:
        """EACCES unless the calling process has `want` (4 read, 1 execute) on the node at `path` and execute
        on every folder above it. A node's bits (`_mask`) are never more than those of the folders above it,
        so its own say it all, and the caller's class decides: root, the mounting user (owner), its group,
        or others."""
        if not self._others or mfusepy is None:
            return
        uid, gid, _pid = mfusepy.fuse_get_context()
        if uid == 0:
            return
        shift = 6 if uid == self.uid else 3 if gid == self.gid else 0
        have = (self._mask(path) >> shift) & 0o5
        need = want | (1 if path.strip("/") else 0)
        if have & need != need:
            raise FuseOSError(errno.EACCES)

    def _mask(self, path: str) -> int:
        return self.perm_mask if self._mask_at is None else self.perm_mask & self._mask_at(path)

    # -- helpers -----------------------------------------------------------------
    def _log_once(self, level, msg, *args, exc_info=False):
        """Log a failure; the same (message) again only at DEBUG, so a broken file read
        a thousand times does not flood the log."""
        key = msg % args
        if key in self._logged:
            log.debug(msg, *args)
            return
        if len(self._logged) > 10000:
            self._logged.clear()
        self._logged.add(key)
        log.log(level, msg, *args, exc_info=exc_info)

    def _children(self, dpath: str, node: DirNode, fresh: bool = False) -> Mapping[str, Node]:
        """The listing of the folder at `dpath`, reused for lookups for at most `lookup_ttl`
        seconds (a folder such as fragments/ is re-listed from disk on every call)."""
        now = time.monotonic()
        if not fresh and self._ttl > 0:
            hit = self._listings.get(dpath)
            if hit is not None and hit[1] > now:
                return hit[0]
        kids = node.children()
        if self._ttl > 0:
            self._prune(now)
            self._listings[dpath] = (kids, now + self._ttl)
        return kids

    def _prune(self, now: float) -> None:
        if now >= self._next_prune or len(self._listings) > 20000 or len(self._found) > 20000:
            # drop expired listings so vanished folders (and their nodes) are freed
            self._listings = {k: v for k, v in self._listings.items() if v[1] > now}
            self._found = {k: v for k, v in self._found.items() if v[1] > now}
            if len(self._listings) > 20000:
                self._listings = {}
            if len(self._found) > 20000:
                self._found = {}
            # every TTL: an expired listing holds its folder's nodes (and what they rendered)
            # alive, 30 MiB after 10 s of `ls -lR` over fragments
            self._next_prune = now + max(self._ttl, 1.0)

    def _node(self, path: str) -> Node:
        """The node at `path`: FuseOSError(ENOENT) if absent, ENOTDIR through a file."""
        try:
            return walk(self.root, path, child=self._child)[0]
        except NoSuchPath:
            raise FuseOSError(errno.ENOENT) from None
        except NotAFolder:
            raise FuseOSError(errno.ENOTDIR) from None

    def _child(self, node: DirNode, name: str, where: str) -> Optional[Node]:
        key = f"/{where}"
        if node.cheap_child:
            # one entry of a big folder (fragments/): found on its own, listed or not, since looking it up
            # in a listing of 100,000 names first builds their set (10 ms, a first `find` or `ls -l`)
            return self._one_child(key, node, name)
        hit = self._listings.get(key) if self._ttl > 0 else None
        child = _get(hit[0], name) if hit is not None and hit[1] > time.monotonic() else None
        if child is None:
            # not listed yet, or appeared since the cached listing: ask the folder again
            child = _get(self._children(key, node, fresh=True), name)
        return child

    def _one_child(self, key: str, node: DirNode, name: str) -> Optional[Node]:
        """An entry found on its own (a stat of one fragment folder), then reused for `lookup_ttl` as the
        kernel reuses the name: every request below a fragment names the fragment again, and a walk of
        fragments/ outlasts the folder's cached listing (a fifth of the daemon's time in `find`, py-spy)."""
        if self._ttl <= 0:
            return node.child(name)
        path = f"{key}/{name}"
        now = time.monotonic()
        hit = self._found.get(path)
        if hit is not None and hit[1] > now:
            # still there? (one stat): a fragment vacuumed meanwhile answers ENOENT at once, not for a TTL more
            if node.has(name):
                return hit[0]
            del self._found[path]
            return None
        child = node.child(name)
        if child is not None:
            self._prune(now)
            self._found[path] = (child, now + self._ttl)
        return child

    def _attrs(self, node: Node, size: Optional[int] = None, path: str = "/") -> dict:
        mtime = node.mtime()
        ns = int(mtime * 1e9) if mtime else self.mount_time_ns
        st = {
            "st_mode": self._mode(node, path),
            "st_uid": self.uid,
            "st_gid": self.gid,
            "st_nlink": 1,
            "st_mtime": ns,
            "st_atime": ns,
            "st_ctime": ns,
            "st_blksize": _BLKSIZE,
        }
        if isinstance(node, DirNode):
            st["st_nlink"] = 2
            st["st_size"] = 0
        elif isinstance(node, FileNode):
            if size is None:
                size = node.size()
            st["st_size"] = size
            st["st_blocks"] = (size + 511) // 512
        elif isinstance(node, SymlinkNode):
            st["st_size"] = len(node.target.encode("utf-8", "surrogateescape"))
        return st

    def _mode(self, node: Node, path: str = "/") -> int:
        if isinstance(node, SymlinkNode):
            return node.mode  # the kernel ignores a symlink's bits
        mode = node.mode & ~_WRITE_BITS & (self._mask(path) | ~0o777)
        if isinstance(node, DirNode):
            # whoever may read the files may also walk to them
            mode = (mode & ~0o111) | ((mode & 0o444) >> 2)
        return mode

    def _handle(self, fi) -> Optional[_Handle]:
        if fi is None:
            return None
        fh = fi if isinstance(fi, int) else getattr(fi, "fh", 0)
        return self._handles.get(fh) if fh else None

    # -- lifecycle ---------------------------------------------------------------
    def init_with_config(self, conn_info, config_3) -> None:
        """Called once the kernel has answered FUSE_INIT: the mount is live."""
        if conn_info is not None and self.options.max_read:
            # libfuse3 refuses max_read unless the connection asks for the same value
            try:
                conn_info.max_read = int(self.options.max_read)
            except AttributeError:
                pass
        if conn_info is not None and libfuse_version() is not None and libfuse_version()[0] == 3:
            # libfuse3 turns auto_inval_data on, and the kernel then asks for the attributes before
            # every read of a cached file (attr_timeout is 0): 3 of a tile file's 11 requests. Tile
            # and raw files are immutable; other files are opened without keep_cache (their pages go at
            # each open) or with direct_io, and a read past the known size still asks for the size.
            conn_info.want &= ~FUSE_CAP_AUTO_INVAL_DATA
        if config_3 is not None:
            # per-file caching is decided in open(); never cache everything globally
            # unless the user asked for it with -o kernel_cache / auto_cache
            if "kernel_cache" not in self.options.extra:
                config_3.kernel_cache = 0
            if "direct_io" not in self.options.extra:
                config_3.direct_io = 0
            self._live_config = config_3
        if conn_info is not None:
            log.info("FUSE session up: protocol %s.%s, max_readahead %s, max_write %s",
                     getattr(conn_info, "proto_major", "?"), getattr(conn_info, "proto_minor", "?"),
                     getattr(conn_info, "max_readahead", "?"), getattr(conn_info, "max_write", "?"))
        if self.on_init is not None:
            try:
                self.on_init()
            except Exception:
                log.exception("init hook failed")

    def destroy(self, path) -> None:
        log.info("FUSE session ended")
        self._handles.clear()
        self._listings.clear()
        self._found.clear()
        self._dir_handles.clear()

    # -- reading -----------------------------------------------------------------
    @_guard
    def getattr(self, path, fh=None):
        if self._others and path.strip("/"):   # the folder's path worked out only where it is checked
            self._require(os.path.dirname(path.rstrip("/")) or "/", 0)
        handle = self._handle(fh)
        if handle is not None:
            self._attr_timeout_for(handle.node)
            if handle.attrs is not None:
                return handle.attrs
            size = len(handle.data) if handle.data is not None else None
            attrs = self._attrs(handle.node, size, path)
            if handle.node.immutable:
                # where the kernel keeps no attributes (libfuse2; at times under -o threads) a tile file is asked for
                # them 1-2 times per open (cat's fstat, each read past the cached size): worked out once
                handle.attrs = attrs
            return attrs
        node = self._node(path)
        self._attr_timeout_for(node)
        return self._attrs(node, path=path)

    @_guard
    def readdir(self, path, fh):
        """mfusepy's readdir: (name, st_mode, 0) each, "." and ".." first. The mount itself is served
        by `_fill_dir`, from `dirents` without a Python object per entry."""
        names, modes = self._dirents(path)
        entries = [(".", _DIR_MODE, 0), ("..", _DIR_MODE, 0)]  # only the type bits are used
        decoded = (name.decode("utf-8", "surrogateescape") for name in names)
        if isinstance(modes, int):
            entries.extend((name, modes, 0) for name in decoded)
        else:
            entries.extend(zip(decoded, modes, itertools.repeat(0)))
        return entries

    def entry_stat(self, path: str, name: bytes):
        """The attributes of entry `name` of the folder at `path` as GETATTR would give them (and its
        attribute timeout set for libfuse's reply, `_attr_timeout_for`), in a c_stat; None when
        GETATTR would fail."""
        try:
            attrs = self.getattr(f"{path.rstrip('/')}/{name.decode('utf-8', 'surrogateescape')}")
        except FuseOSError:
            return None
        st = mfusepy.c_stat()
        mfusepy.set_st_attrs(st, attrs, use_ns=self.use_ns)
        return st

    @_guard
    def opendir(self, path):
        # a folder gone meanwhile (under a vacuumed fragment) answers ENOENT here: an error of the READDIR
        # that follows reads as the end of an empty listing
        self._node(path)
        fh = next(self._fh_counter)
        self._dir_handles[fh] = None
        return fh

    def releasedir(self, path, fh):
        self._dir_handles.pop(fh, None)
        return 0

    @_guard
    def dirents(self, path, fh, offset):
        """(names encoded, st_mode of all or of each) of the folder at `path`, "." and ".." left out.
        At offset 0 (a listing starts, or rewinddir) the folder is listed afresh and kept for this open
        folder; libfuse asks again, at the offset where its buffer filled, until the listing is served,
        and those requests continue the same listing."""
        listing = self._dir_handles.get(fh) if offset else None
        if listing is None:
            listing = self._dirents(path)
            if fh in self._dir_handles:
                self._dir_handles[fh] = listing
        return listing

    def _dirents(self, path):
        self._require(path, 4)
        node = self._node(path)
        if not isinstance(node, DirNode):
            raise FuseOSError(errno.ENOTDIR)
        kids = self._children(path if path != "" else "/", node, fresh=True)
        # libfuse passes the file type to the kernel with each name, so `find` and `ls` need no
        # lookup per entry
        prepared = getattr(kids, "prepared", None)  # a listing that has them without making nodes
        if prepared is not None:
            return prepared(encoded_entries)
        return ([name.encode("utf-8", "surrogateescape") for name in kids],
                [child.mode for child in kids.values()])

    @_guard
    def readlink(self, path):
        self._require(os.path.dirname(path.rstrip("/")) or "/", 0)
        node = self._node(path)
        if not isinstance(node, SymlinkNode):
            raise FuseOSError(errno.EINVAL)
        return node.target

    @_guard
    def open(self, path, fi):
        flags = fi if isinstance(fi, int) else fi.flags
        if (flags & os.O_ACCMODE) != os.O_RDONLY or flags & (os.O_TRUNC | os.O_CREAT | os.O_APPEND):
            raise FuseOSError(errno.EROFS)
        self._require(path, 4)
        node = self._node(path)
        if isinstance(node, DirNode):
            raise FuseOSError(errno.EISDIR)
        if not isinstance(node, FileNode):
            raise FuseOSError(errno.EINVAL)
        fresh = None if node.immutable else getattr(node, "fresh", None)
        # a rendering that can change (array.yaml): one per open, so that every read and
        # fstat of this open agree with each other whatever is rendered meanwhile
        data = fresh() if fresh is not None else None
        fh = next(self._fh_counter)
        self._handles[fh] = _Handle(node, data)
        if isinstance(fi, int):
            return fh
        fi.fh = fh
        # immutable content: the kernel may keep its page cache across opens
        fi.keep_cache = 1 if node.immutable else 0
        # ... and a rendering of this open only: no page or size the kernel holds from
        # another rendering may stand in for it
        fi.direct_io = 1 if data is not None else 0
        return 0

    @_guard
    def read(self, path, size, offset, fi):
        """At most `size` bytes at `offset`, as any bytes-like object: a decoded tile comes as a
        memoryview into the cached tile, copied once, by `_Fuse.read`, into libfuse's buffer."""
        handle = self._handle(fi)
        if handle is None:  # not opened by us (should not happen): resolve the path
            node = self._node(path)
            if not isinstance(node, FileNode):
                raise FuseOSError(errno.EISDIR if isinstance(node, DirNode) else errno.EINVAL)
            handle = _Handle(node, None)
        if handle.data is not None:
            return handle.data[offset:offset + size]
        data = handle.node.read(offset, size)
        if len(data) > size:
            data = data[:size]
        return data

    def release(self, path, fi):
        fh = fi if isinstance(fi, int) else getattr(fi, "fh", 0)
        self._handles.pop(fh, None)
        return 0

    @_guard
    def access(self, path, amode):
        """access(2): read and execute as the modes say (folders r-x, files r--), never write."""
        if amode & os.W_OK:
            raise FuseOSError(errno.EROFS)
        node = self._node(path)
        if amode & os.X_OK and not isinstance(node, DirNode):
            raise FuseOSError(errno.EACCES)
        self._require(path, (4 if amode & os.R_OK else 0) | (1 if amode & os.X_OK else 0))
        return 0

    def statfs(self, path):
        return {
            "f_bsize": _BLKSIZE,
            "f_frsize": 4096,
            "f_blocks": 0,
            "f_bfree": 0,
            "f_bavail": 0,
            "f_files": 0,
            "f_ffree": 0,
            "f_favail": 0,
            "f_namemax": 255,
        }

    # -- writing: never ----------------------------------------------------------
    @_read_only
    def write(self, path, data, offset, fh): ...

    @_read_only
    def create(self, path, mode, fi=None): ...

    @_read_only
    def mkdir(self, path, mode): ...

    @_read_only
    def mknod(self, path, mode, dev): ...

    @_read_only
    def unlink(self, path): ...

    @_read_only
    def rmdir(self, path): ...

    @_read_only
    def rename(self, old, new): ...

    @_read_only
    def symlink(self, target, source): ...

    @_read_only
    def link(self, target, source): ...

    @_read_only
    def chmod(self, path, mode): ...

    @_read_only
    def chown(self, path, uid, gid): ...

    @_read_only
    def truncate(self, path, length, fh=None): ...

    @_read_only
    def utimens(self, path, times=None): ...

    @_read_only
    def setxattr(self, path, name, value, options, position=0): ...

    @_read_only
    def removexattr(self, path, name): ...

    @_read_only
    def fallocate(self, path, mode, offset, size, fh): ...


def _get(mapping: Mapping[str, Node], name: str) -> Optional[Node]:
    try:
        return mapping[name]
    except KeyError:
        return None
