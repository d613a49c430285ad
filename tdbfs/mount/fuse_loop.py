"""libfuse's loop over the adapter (fuse_ops.TdbfsOperations): mfusepy's FUSE with tdbfs's own read
and readdir callbacks, the mount served until it is unmounted or a stop signal comes, and the mount's
read-ahead."""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import signal
import threading
import time
from typing import Callable, Optional

from ..views.nodes import DirNode
from ..check.background import REQUESTS
from ..store.stopping import STOP, Stopped
from .fuse_dirents import BulkFill
from .fuse_ops import TdbfsOperations
from .fuse_readdir import _FILL_CALL_2, _FILL_CALL_3, _NO_FILL_FLAGS, _READDIR_PLUS, _fill_dir
from .fuse_setup import FuseOptions
from .libfuse import fuse_problem, mfusepy
from .shutdown import Shutdown
from .stop_signals import catch_stop_signals

log = logging.getLogger("tdbfs.fuse")


def copy_into(buf, data) -> int:
    """Copy any bytes-like `data` to the C buffer `buf`; its length.

    mfusepy's own read callback accepts only bytes, which would cost a decoded tile a second
    copy of every piece read (a slice of the cached tile) before the one into libfuse. A piece of a
    decoded tile (writable memory) is copied by C's memmove through ctypes, which lets go of the GIL
    meanwhile: the thread decoding ahead goes on with its own Python between frames."""
    n = len(data)
    if n:
        try:
            src = (ctypes.c_char * n).from_buffer(data)
        except TypeError:  # bytes, or a read-only view: copied under the GIL
            dest = (ctypes.c_ubyte * n).from_address(ctypes.cast(buf, ctypes.c_void_p).value)
            memoryview(dest).cast("B")[:] = data
        else:
            ctypes.memmove(buf, src, n)
    return n


@functools.lru_cache(maxsize=None)
def _fuse_class():
    # made on first mount: without libfuse, mfusepy is None and this module must still import
    class _Fuse(mfusepy.FUSE):
        """mfusepy's FUSE with a read callback that copies memoryviews without a bytes copy."""

        def read(self, path, buf, size, offset, fip):
            fh = fip.contents if self.raw_fi else fip.contents.fh
            data = self.operations.read(None if path is None else path.decode(self.encoding, self.errors),
                                        size, offset, fh)
            return copy_into(buf, data) if data else 0

        def _wrapper(self, func, *args, **kwargs):
            if not _CALLBACK_THREAD.keeps_state:
                _keep_thread_state()
            self.gate.enter()
            try:
                # after `enter`: a request let in after the mount went is no request under way to interrupt
                if STOP.is_set() and func.__name__ not in _WHILE_STOPPING:
                    return -errno.EINTR   # the mount is gone: no new work (shutdown.py)
                with REQUESTS:   # the background check waits while requests come (check/background.py)
                    return super()._wrapper(func, *args, **kwargs)
            finally:
                self.gate.leave()
                self.operations.callback_done()

        def destroy(self, private_data):
            self.shutdown.ended()   # before libfuse frees what fuse_exit would touch
            return super().destroy(private_data)

        def _init(self, conn, config):
            # the loop's handle for fuse_exit, from the one callback sure to run on a loop thread first
            self.shutdown.live(_libfuse(), _libfuse().fuse_get_context().contents.fuse)
            super()._init(conn, config)

        def readdir_fuse_2(self, path, buf, filler, offset, fip):
            fill = ctypes.cast(filler, _FILL_CALL_2)
            return _fill_dir(self.operations, path, fill, ctypes.c_void_p(buf), offset, fip.contents.fh)

        def readdir_fuse_3(self, path, buf, filler, offset, fip, flags):
            fill = ctypes.cast(filler, _FILL_CALL_3)
            plus = bool(flags & _READDIR_PLUS)
            # with readdir_ino, libfuse gives each name the inode it knows of it: no two records alike
            bulk = None if "readdir_ino" in self.operations.options.extra else BulkFill(buf, fip.contents.fh, plus)
            done = _fill_dir(self.operations, path, fill, ctypes.c_void_p(buf), offset, fip.contents.fh, _NO_FILL_FLAGS,
                             plus=plus, bulk=bulk)
            if bulk is not None and bulk.written and log.isEnabledFor(logging.DEBUG):
                log.debug("readdir of %s from %d: %d names written in bulk",
                          path.decode("utf-8", "replace") if path else "?", offset, bulk.written)
            return done

    return _Fuse


#: callbacks still run once the mount is gone: they free what an open took
_WHILE_STOPPING = frozenset({"release", "releasedir", "destroy", "forget", "flush"})


def _libfuse():
    return mfusepy._libfuse


class RequestGate:
    """At most `slots` request threads run Python at once; a request that has run for `patience_s` hands
    its slot to one that waits, and goes on beside it.

    A local array's requests are Python work under one lock (the GIL): more of them at work than one per
    core only wait for it, and hand it to each other at every system call (docs/performance.md §2). But a
    loop of that many threads is stopped by as many renders of seconds (the kernel sends two reads of one
    big file at once). So libfuse runs more threads than that, and the requests beyond `slots` wait here
    (asleep, without the GIL) for one to end, or to have run for `patience_s`: a render that takes long
    holds no other request up for longer than that, and quick requests queue as in a loop of `slots`."""

    def __init__(self, slots: Optional[int], patience_s: float = 0.05):
        self._free = threading.Semaphore(slots) if slots else None
        self.patience_s = patience_s
        self._lock = threading.Lock()
        self._holders: dict[int, float] = {}   # thread -> when it took its slot
        self._inside: dict[int, float] = {}    # the threads in a callback, with a slot or without -> since when

    def enter(self) -> None:
        """Wait for a slot: a free one, or that of a request that has run for `patience_s`."""
        me = threading.get_ident()
        if self._free is not None:
            while not self._free.acquire(timeout=self.patience_s):
                with self._lock:
                    now = time.monotonic()
                    long = next((t for t, since in self._holders.items() if now - since >= self.patience_s), None)
                    if long is not None:
                        del self._holders[long]   # its slot is ours now: it goes on without one
                        break
        with self._lock:
            self._inside[me] = now = time.monotonic()
            if self._free is not None:
                self._holders[me] = now

    def leave(self) -> None:
        me = threading.get_ident()
        with self._lock:
            self._inside.pop(me, None)
            held = self._holders.pop(me, None) is not None
        if held:
            self._free.release()

    def inside(self, since: float) -> list[int]:
        """The threads answering a request they took before `since` (time.monotonic)."""
        with self._lock:
            return [t for t, began in self._inside.items() if began < since]


class _CallbackThread(threading.local):
    keeps_state = False


_CALLBACK_THREAD = _CallbackThread()


def _keep_thread_state() -> None:
    """Keep this thread's Python thread state from one callback to the next.

    ctypes enters a callback with PyGILState_Ensure and leaves with PyGILState_Release, which on a
    thread Python did not start (libfuse's workers under `-o threads`) creates a thread state for
    every callback and frees it after: one more Ensure, never released, keeps it (11% of the time of
    16 readers under `-o threads`, docs/performance.md §2). libfuse joins its workers before the loop
    returns, so none is left running Python when the daemon exits; on the loop's own thread the state
    exists anyway."""
    ctypes.pythonapi.PyGILState_Ensure()
    _CALLBACK_THREAD.keeps_state = True
    log.debug("request thread %d keeps its Python thread state", threading.get_ident())


class MountError(RuntimeError):
    """libfuse could not mount (its own message is on stderr)."""


def serve(root: DirNode, mountpoint: str, options: Optional[FuseOptions] = None,
          on_init: Optional[Callable[[], None]] = None, perm_mask: int = 0o555,
          mask_at: Optional[Callable[[str], int]] = None) -> Optional[int]:
    """Mount `root` at `mountpoint` and answer requests until it is unmounted.

    Blocks (always in the foreground; backgrounding is the CLI's job). `on_init` runs
    once the mount is live. Returns the signal (SIGINT, SIGTERM, SIGHUP) that stopped it,
    or None when it was unmounted. Raises MountError if libfuse cannot mount, RuntimeError
    if FUSE is not usable here.
    """
    problem = fuse_problem()
    if problem:
        raise RuntimeError(problem)
    options = options or FuseOptions()
    options.foreground = True
    stopper = catch_stop_signals() if threading.current_thread() is threading.main_thread() else None

    def started():
        if stopper is not None:
            stopper.live.set()
        if options.read_ahead_kb:
            # from another thread: stat-ing the mount point needs this loop to answer
            threading.Thread(target=set_read_ahead, args=(mountpoint, options.read_ahead_kb),
                             name="tdbfs-read-ahead", daemon=True).start()
        if on_init is not None:
            on_init()

    ops = TdbfsOperations(root, options, on_init=started, perm_mask=perm_mask, mask_at=mask_at)
    shutdown = Shutdown(mountpoint)
    kwargs = options.fuse_kwargs()
    log.info("mounting on %s with libfuse %s.%s (%s): %s", mountpoint, mfusepy.fuse_version_major,
             mfusepy.fuse_version_minor, getattr(mfusepy, "_libfuse_path", "?"),
             ",".join(k if v is True else f"{k}={v}" for k, v in kwargs.items() if v is not False))
    try:
        if stopper is not None:
            stopper.mountpoint = mountpoint
            if stopper.signum is not None:  # stopped while starting: nothing to mount
                return stopper.signum
        fuse = _fuse_class().__new__(_fuse_class())   # mfusepy's __init__ runs the loop: set these before
        fuse.gate = RequestGate(options.python_slots if options.threads else None)
        fuse.shutdown = shutdown
        shutdown.prepare(fuse.gate)
        try:
            fuse.__init__(ops, mountpoint, raw_fi=True, **kwargs)
        except Stopped:   # interrupted outside fuse_ops' callbacks (shutdown.py), which mfusepy raises again
            pass
        except RuntimeError:
            if stopper is None or stopper.signum is None:
                raise MountError(f"libfuse could not mount {mountpoint}") from None
    finally:
        shutdown.finish()
        if stopper is not None:
            stopper.stop()
    signum = stopper.signum if stopper is not None else None
    if signum is not None:
        log.info("unmounted %s on %s", mountpoint, signal.Signals(signum).name)
    else:
        log.info("unmounted %s", mountpoint)
    return signum


def set_read_ahead(mountpoint: str, kb: int) -> bool:
    """Set the read-ahead of the mount at `mountpoint` to `kb` KiB; False (logged) where that is not
    allowed (only root may write /sys, and a container may mount /sys read-only)."""
    try:
        dev = os.stat(mountpoint).st_dev
        with open(f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb", "w") as f:
            f.write(str(kb))
    except OSError as exc:
        log.info("read-ahead of %s left as the kernel set it (%s KiB wanted): %s", mountpoint, kb,
                 exc.strerror or exc)
        return False
    log.info("read-ahead of %s set to %s KiB", mountpoint, kb)
    return True
