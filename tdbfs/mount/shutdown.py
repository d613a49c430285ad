"""The daemon ends soon after its mount is gone, whatever it was doing.

Unmounting does not by itself end a FUSE daemon's work: `fusermount -u` aborts the connection, but a
request thread in the middle of a render of seconds (the cells of a tile of millions of cells, the
summaries of thousands of fragments) goes on to its end, and libfuse joins it before the loop returns;
a lazy unmount (`tdbfs umount -z`, and the stop signals, stop_signals.py) leaves the connection up for as
long as a reader holds a file open, and that reader's next reads are served, each a render again. So a
watcher thread follows the mount table (a poll of /proc/self/mountinfo wakes it at every change: proc(5))
and the connection (/dev/fuse, which polls POLLERR once the kernel has ended it: fs/fuse/dev.c
fuse_dev_poll) and, once the mount is gone from the one or the other ended:

- sets the store's `stopping.STOP`: a render under way gives up at its next piece (`Stopped`, answered
  EINTR by fuse_ops._guard), and every request that comes after is answered EINTR at once
  (fuse_loop._Fuse._wrapper);
- a request still under way `SETTLE_S` later (a render whose pieces do not go through the store's cache)
  gets `Stopped` raised in its thread (PyThreadState_SetAsyncExc), at its next bytecode;
- asks libfuse to leave its loop (`fuse_exit`), and wakes the loop's thread with `WAKE_SIGNAL` from a
  read of /dev/fuse that no request may ever end (a reader that holds a file open and reads no more).
  Python installs its handlers without SA_RESTART, so that read fails with EINTR, and libfuse then sees
  it is to exit; the multi-threaded loop cancels its other workers. The daemon then closes /dev/fuse,
  which ends the connection: a reader still holding a file gets ENOTCONN;
- should anything still hold libfuse's loop `GRACE_S` later (a C call that cannot be interrupted), ends
  the process (`os._exit`), saying so in the log.

The table alone cannot tell that the mount is gone: it names the mount by its device number, which the
kernel frees with the mount's super block (a plain `fusermount -u`, or a lazy unmount once the last file
is closed) and gives to the next mount of any kind, the lowest free first (fs/super.c get_anon_bdev). A
mount made by any process in the namespace before the watcher reads the table again kept it listed, and
the daemon served on for a render nobody waits for. Once the super block is gone the connection is ended,
so /dev/fuse says it; while it lives (a lazy unmount, a file still open) its number is no other mount's.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import signal
import threading
import time
from typing import Optional

from ..store.stopping import STOP, Stopped

log = logging.getLogger("tdbfs.fuse")

#: sent to the loop's thread to end a read of /dev/fuse (SIGUSR1: libfuse and tdbfs use it for nothing else)
WAKE_SIGNAL = signal.SIGUSR1
#: how long the loop may take to end by itself once the mount is gone (the kernel ends the connection when
#: no file of the mount is open) before it is told to (libfuse then tries to unmount again, and says it failed)
SETTLE_S = 0.2
#: how long the daemon may take to end once its mount is gone before the process is ended outright
GRACE_S = 5.0


class Shutdown:
    """Watches the mount at `mountpoint` and ends the daemon's work once it is gone (see the module)."""

    def __init__(self, mountpoint: str, exit_code: int = 0):
        self.mountpoint = mountpoint
        self.exit_code = exit_code   # what the process ends with if GRACE_S passes
        self._fuse: Optional[int] = None       # libfuse's struct fuse *, for fuse_exit
        self._libfuse = None
        self._loop_thread = threading.get_ident()   # the thread in libfuse's loop (or waiting for its workers)
        self._can_wake = False
        self._gate = None
        self._why: Optional[str] = None
        self._served = threading.Event()   # the loop has returned: nothing left to end outright
        self._lock = threading.Lock()
        self._loop_over = False   # libfuse's loop has ended: its struct fuse is about to be freed
        STOP.clear()   # a mount starts: whatever an earlier one of this process stopped is over

    def prepare(self, gate) -> None:
        """Before the loop starts, on the thread that runs it: the requests under way are `gate.inside()`;
        a handler for WAKE_SIGNAL, so that the signal interrupts that thread's wait instead of ending the
        process (only the main thread may set one)."""
        self._gate = gate
        if threading.current_thread() is threading.main_thread():
            signal.signal(WAKE_SIGNAL, _ignore)
            self._can_wake = True

    def live(self, libfuse, fuse_ptr: Optional[int]) -> None:
        """The mount is live (called from libfuse's INIT, on a loop thread): watch it from now on."""
        self._libfuse, self._fuse = libfuse, fuse_ptr
        device = _device_fd(libfuse, fuse_ptr)
        threading.Thread(target=self._watch, args=(device,), name="tdbfs-unmounted", daemon=True).start()

    def _watch(self, device: Optional[int] = None) -> None:
        try:
            dev = os.stat(self.mountpoint).st_dev   # answered by the loop: this thread is not one of its own
            f = open("/proc/self/mountinfo", "rb")
        except OSError as exc:
            log.warning("cannot watch the mount table (%s): an unmount waits for the request under way", exc)
            return
        wanted = f"{os.major(dev)}:{os.minor(dev)}".encode()
        poller = select.poll()
        poller.register(f, select.POLLPRI | select.POLLERR)
        if device is not None:
            # no events asked: poll reports POLLERR (the connection ended), POLLHUP or POLLNVAL all the same,
            # never the requests waiting there (libfuse's threads read those)
            poller.register(device, 0)
        with f:
            while _listed(f, wanted):
                # returns once the mount table changed (proc(5), /proc/pid/mounts) or the connection ended
                if any(fd == device for fd, _events in poller.poll()):
                    break   # its device number may be listed again, as another mount's (see the module)
        self.stop("the mount is gone")

    def stop(self, why: str) -> None:
        """End the daemon's work now (see the module); once only."""
        if STOP.is_set():
            return
        STOP.set()
        self._why = why
        log.info("%s: stopping the work under way", why)
        began = time.monotonic()
        if self._served.wait(SETTLE_S):
            return   # the loop ended by itself (the kernel ended the connection): nothing to wake
        with self._lock:   # never once libfuse is destroying the session (`ended`): fuse_exit would write freed memory
            if not self._loop_over:
                for thread in self._gate.inside(began) if self._gate is not None else ():
                    _interrupt(thread)
                if self._libfuse is not None and self._fuse:
                    self._libfuse.fuse_exit(ctypes.c_void_p(self._fuse))
                if self._can_wake:
                    with contextlib.suppress(OSError, ValueError):
                        signal.pthread_kill(self._loop_thread, WAKE_SIGNAL)
        threading.Thread(target=self._last_resort, name="tdbfs-exit", daemon=True).start()

    def ended(self) -> None:
        """libfuse's loop is over and the session is being destroyed (its `destroy` callback): from now
        on its handle must not be used."""
        with self._lock:
            self._loop_over = True

    def finish(self) -> None:
        """The loop has returned (the thread that ran it calls this): the process ends on its own from
        here. `STOP` stays set: any work still under way on other threads is as good as gone."""
        self._served.set()

    def _last_resort(self) -> None:
        if self._served.wait(GRACE_S):
            return
        log.error("still running %.0f s after %s: exiting now", GRACE_S, self._why)
        logging.shutdown()
        os._exit(self.exit_code)


def _device_fd(libfuse, fuse_ptr: Optional[int]) -> Optional[int]:
    """The /dev/fuse descriptor of libfuse's session of `fuse_ptr` (libfuse 3: fuse_session_fd; libfuse 2:
    the fd of its one channel), or None where it cannot be had."""
    if libfuse is None or not fuse_ptr:
        return None
    try:
        libfuse.fuse_get_session.restype = ctypes.c_void_p
        libfuse.fuse_get_session.argtypes = [ctypes.c_void_p]
        session = libfuse.fuse_get_session(ctypes.c_void_p(fuse_ptr))
        if not session:
            return None
        if hasattr(libfuse, "fuse_session_fd"):
            libfuse.fuse_session_fd.restype = ctypes.c_int
            libfuse.fuse_session_fd.argtypes = [ctypes.c_void_p]
            fd = libfuse.fuse_session_fd(ctypes.c_void_p(session))
        else:
            libfuse.fuse_session_next_chan.restype = ctypes.c_void_p
            libfuse.fuse_session_next_chan.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            libfuse.fuse_chan_fd.restype = ctypes.c_int
            libfuse.fuse_chan_fd.argtypes = [ctypes.c_void_p]
            chan = libfuse.fuse_session_next_chan(ctypes.c_void_p(session), None)
            fd = libfuse.fuse_chan_fd(ctypes.c_void_p(chan)) if chan else -1
    except (AttributeError, OSError) as exc:
        log.info("cannot watch the FUSE connection (%s): the mount table alone says when it is gone", exc)
        return None
    return fd if fd >= 0 else None


def _interrupt(thread: int) -> None:
    """Raise Stopped in `thread` at its next bytecode: a render that asks no cache between its pieces (a
    Python loop over the rows of a tile) ends there, as a Ctrl-C ends a script. A long C call ends first."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(Stopped))


def _ignore(signum, frame) -> None:
    """WAKE_SIGNAL's handler: the signal is sent only to interrupt a wait (Shutdown.stop)."""


def _listed(f, dev: bytes) -> bool:
    """Whether a mount of device `dev` ("major:minor") is in the mount table `f` (/proc/self/mountinfo)."""
    f.seek(0)
    for line in f.read().splitlines():
        fields = line.split(b" ", 3)
        if len(fields) > 2 and fields[2] == dev:
            return True
    return False
