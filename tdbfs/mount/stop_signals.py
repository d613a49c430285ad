"""Stop signals (SIGINT, SIGTERM, SIGHUP) turned into a lazy unmount, which ends the FUSE loop normally
instead of libfuse's handlers ending it with an error (which looked like a failed mount)."""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
from typing import Optional

from .fuse_setup import which

log = logging.getLogger("tdbfs.fuse")

#: signals that stop the daemon: it unmounts and returns instead of libfuse's handlers
#: ending the loop with an error (which looked like a failed mount)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


_stopper: Optional["_SignalStopper"] = None


def catch_stop_signals() -> "_SignalStopper":
    """From now on SIGINT/SIGTERM/SIGHUP stop this process's mount by unmounting it (main thread only).

    The signals are blocked, so threads started afterwards (numpy's, the store's, libfuse's)
    never run a handler, and one thread takes them with sigwait: call this before anything
    starts a thread. `serve` calls it too."""
    global _stopper
    if _stopper is None:
        _stopper = _SignalStopper()
    return _stopper


class _SignalStopper:
    """Turns a stop signal into a lazy unmount, which ends the FUSE loop normally."""

    def __init__(self):
        self.mountpoint: Optional[str] = None
        self.live = threading.Event()      # set once the kernel has answered FUSE_INIT
        self.signum: Optional[int] = None
        self._done = False
        self._old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        self._thread = threading.Thread(target=self._run, name="tdbfs-signals", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        signum = signal.sigwait(STOP_SIGNALS)
        if self._done:
            return
        self.signum = signum
        log.info("%s received: unmounting", signal.Signals(signum).name)
        # unmounting before the mount exists would leave it serving once it comes up: wait
        # for it (a mount that fails, or that serve() never starts, ends this wait)
        while not self.live.wait(0.1):
            if self._done:
                return
        ok, message = lazy_unmount(self.mountpoint)
        if not ok:
            log.error("cannot unmount %s: %s", self.mountpoint, message)

    def stop(self) -> None:
        global _stopper
        self._done = True
        if self._thread.is_alive() and self.signum is None:
            signal.pthread_kill(self._thread.ident, signal.SIGHUP)  # wake sigwait: nothing to do
        self._thread.join(timeout=5)
        signal.pthread_sigmask(signal.SIG_SETMASK, self._old_mask)
        if _stopper is self:
            _stopper = None


def lazy_unmount(mountpoint: str) -> tuple[bool, str]:
    """Detach `mountpoint` now (fusermount3 -u -z, fusermount -u -z, umount -l): (done, why not)."""
    message = "no unmount tool found (install fuse3: apt-get install fuse3)"
    for tool, args in (("fusermount3", ["-u", "-z"]), ("fusermount", ["-u", "-z"]), ("umount", ["-l"])):
        exe = which(tool)
        if not exe:
            continue
        try:
            res = subprocess.run([exe, *args, mountpoint], stdin=subprocess.DEVNULL, capture_output=True,
                                 text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            message = str(exc)
            continue
        if res.returncode == 0:
            return True, ""
        message = (res.stderr or res.stdout).strip() or f"{tool} exited with status {res.returncode}"
    return False, message
