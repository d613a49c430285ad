"""The FUSE daemon: run in the foreground, or spawned in the background and watched until the mount answers."""

from __future__ import annotations

import gc
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time

from .. import __version__
from . import daemon_start
from ..frontend.common import BLAS_ENV, PROG, CliError
from .mountpoints import mount_fstype, unmount


#: glibc malloc tuning for the daemon (docs/performance.md §3: 0.4-0.6 -> 1.0-1.3 GB/s on the decode
#: path): the variable a user would set, mallopt's parameter for it (malloc.h) and our value. Without it
#: every request mapped and unmapped its buffers and trimmed the heap.
MALLOC_TUNING = {
    "MALLOC_MMAP_THRESHOLD_": (-3, 32 << 20),   # M_MMAP_THRESHOLD
    "MALLOC_TRIM_THRESHOLD_": (-1, 1 << 30),    # M_TRIM_THRESHOLD
    "MALLOC_TOP_PAD_": (-2, 64 << 20),          # M_TOP_PAD
    # One heap for every request thread: with the trim threshold above, each thread's own arena kept
    # what a big render freed, and a cells.csv read through 8 request threads held 3-5x its working set
    # (docs/performance.md §2). Python runs one thread at a time anyway.
    "MALLOC_ARENA_MAX": (-8, 1),                # M_ARENA_MAX
}


MOUNT_WAIT_S = 10.0
#: how long a mount waits for the folder listings it takes for its daemon (mount/prelisted.py):
#: 100,000 local fragments take about 0.15 s, as long as the daemon's start-up; a slower folder is
#: left to the daemon rather than hold up the mount
LISTING_WAIT_S = 1.0


def read_key_fd(fd: int):
    """The key the parent wrote to pipe `fd`; the pipe is closed once read."""
    from ..format.reversers.keys import BadKeyError, parse_key

    try:
        with os.fdopen(fd, "rb") as f:
            raw = f.read(4096)
    except OSError as exc:
        raise CliError(f"cannot read the key from the parent process: {exc.strerror}") from None
    try:
        return parse_key(raw, "the key handed over by 'tdbfs mount'")
    except BadKeyError as exc:
        raise CliError(str(exc)) from None


def _setup_logging(log_file: str | None, debug: bool) -> None:
    # logging is imported by the daemon alone: in `tdbfs mount` it would be ~6 ms before the daemon starts
    import logging

    if log_file:
        try:
            # names that are not UTF-8 reach the log escaped, never as a "Logging error"
            handler: logging.Handler = logging.FileHandler(log_file, encoding="utf-8", errors="backslashreplace")
        except OSError as exc:
            raise CliError(f"cannot write the log file {log_file}: {exc.strerror}") from None
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    if not debug:
        logging.getLogger("fuse").setLevel(logging.WARNING)  # mfusepy's per-call chatter
    # the object stores' SDKs log request headers and signed URLs at DEBUG: never in tdbfs's log, even --debug
    for sdk in ("botocore", "aiobotocore", "boto3", "s3fs", "fsspec", "gcsfs", "google", "adlfs", "azure",
                "aiohttp", "urllib3"):
        logging.getLogger(sdk).setLevel(logging.WARNING)


def tune_malloc() -> dict[str, str]:
    """Apply MALLOC_TUNING to this process with mallopt, where the user's environment does not set the
    variable (glibc applied theirs when the process started: a user's setting wins). The daemon is often
    a fork of `tdbfs mount` (daemon_start.py), so the tuning cannot wait for a process start. The value
    of each variable now in effect, as its environment form: ours, the user's, or "not set" where
    mallopt refused or this C library has none."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        mallopt = None
    out = {}
    for name, (param, value) in MALLOC_TUNING.items():
        if name in os.environ:
            out[name] = os.environ[name]
        elif mallopt is not None and mallopt(param, value) == 1:
            out[name] = str(value)
        else:
            out[name] = "not set"
    return out


def _member_masks(store, perm_mask: int):
    """A group's members each show the bits of their own location (group_views.access_masks); None for
    anything else, whose every node shows `perm_mask`."""
    from ..store.array_store import ArrayStore
    if isinstance(store, ArrayStore) or store.legacy0x_layout:   # as build_root tells a group (views/tree.py)
        return None
    from ..views.group_views import access_masks
    return access_masks(store, perm_mask)


def run_daemon(args, store, mnt: str, options) -> int:
    """The daemon itself: serve until unmounted."""
    import logging

    from . import fuse_loop
    from .fuse_setup import access_mask
    from ..views.tree import build_root

    malloc = tune_malloc()   # before the first tile is decoded
    log_file = os.path.abspath(args.log) if args.log else None
    _setup_logging(log_file, args.debug)
    root = build_root(store)
    from ..check.background import BackgroundCheck, default_level
    checker = BackgroundCheck(store, options.check or default_level(store.path))   # started once live
    # Decoding a tile makes hundreds of small records; with the default thresholds the
    # collector ran every few tiles and rescanned every parsed object (~10% of the daemon's
    # time on a sequential read). What exists now lives as long as the daemon: freeze it.
    gc.freeze()
    gc.set_threshold(100_000, 50, 1000)
    # big ZSTD tiles decode on two threads (its thread starts on first use, after the signal mask is set)
    from ..store import decode_pool, digest_pool
    decode_pool.enable()
    # the summaries of many fragments on every core (store/digest_pool.py)
    digest_pool.enable(args.jobs or digest_pool.default_jobs())

    if not args.spawned:
        from .sd_notify import ready_once_answering
        on_init = ready_once_answering(mnt)  # systemd's Type=notify, for `tdbfs mount -f` (sd_notify.py)
    else:
        def on_init():
            # The mount is live: stop writing to the pipe the parent reads (it sees
            # EOF and knows startup is over); from now on stderr is the log or nothing.
            fd = os.open(log_file or os.devnull, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.dup2(fd, 2)
            os.close(fd)

    try:
        perm_mask = access_mask(store.path)
    except OSError:
        perm_mask = 0o500  # cannot tell who else may read the array: only its mounter
    log = logging.getLogger("tdbfs")
    log.info("tdbfs %s: serving %s on %s (cache %d MiB, pid %d, modes %s)",
             __version__, store.path, mnt, args.cache_mb, os.getpid(), oct(perm_mask))
    settings = {**malloc, **{k: os.environ.get(k, "not set") for k in BLAS_ENV}}
    log.info("environment: %s", " ".join(f"{k}={v}" for k, v in settings.items()))
    try:
        signum = fuse_loop.serve(root, mnt, options, on_init=checker.after(on_init), perm_mask=perm_mask,
                                 mask_at=_member_masks(store, perm_mask))
    except fuse_loop.MountError as exc:
        raise CliError(str(exc)) from None
    except RuntimeError as exc:
        raise CliError(f"FUSE is not available: {exc}") from None
    finally:
        checker.stop()
    # stopped by a signal: unmounted, so no error; Ctrl-C keeps the shell's 128+SIGINT
    return 130 if signum == signal.SIGINT else 0


def spawn_daemon(args, array: str, mnt: str, check=None, key=None, listing=None) -> int:
    """Start `tdbfs mount -f` in the background; return once the mount answers.

    `check()`, run once the daemon is started, may raise CliError: the daemon is then stopped.
    `key` (an EncryptionKey) reaches the daemon through a pipe it reads once (--key-fd).
    `listing(fd)`, run on a thread while the daemon starts, writes the folder listings it takes into
    the memfd `fd`, which the daemon reads on its first listing of them (--listing-fd;
    mount/prelisted.py); it is waited for LISTING_WAIT_S at most."""
    from ..frontend.remote_options import fuse_items, remote_items, write_secrets

    cmd = ["mount", "-f", "--spawned", "--cache-mb", str(args.cache_mb)]
    # the options that carry secrets go through a pipe: argv stays in /proc, readable by all (ps)
    for opt in fuse_items(args.options) + remote_items(args.options, secret=False):
        cmd += ["-o", opt]
    if getattr(args, "cache_dir", None):
        cmd += ["--cache-dir", os.path.abspath(args.cache_dir)]
    if args.log:
        cmd += ["--log", os.path.abspath(args.log)]
    if args.debug:
        cmd.append("--debug")
    if args.jobs:
        cmd += ["--jobs", str(args.jobs)]
    pass_fds: tuple = ()
    if key is not None:
        read_fd, write_fd = os.pipe()
        try:
            # the one place the key bytes leave an EncryptionKey on purpose; 32 bytes are
            # far below a pipe's buffer, so this never waits for the daemon
            os.write(write_fd, key.reveal())
        finally:
            os.close(write_fd)
        pass_fds = (read_fd,)
        cmd += ["--key-fd", str(read_fd)]
    secrets_fd = write_secrets(remote_items(args.options, secret=True))
    if secrets_fd is not None:
        pass_fds += (secrets_fd,)
        cmd += ["--secrets-fd", str(secrets_fd)]
    listing_fd = None
    if listing is not None and hasattr(os, "memfd_create"):
        listing_fd = os.memfd_create("tdbfs-listing", os.MFD_CLOEXEC)
        pass_fds += (listing_fd,)
        cmd += ["--listing-fd", str(listing_fd)]
    cmd += ["--", array, mnt]
    try:
        # a fork keeps this process's argv and environment in /proc: not where they hold a secret; and a
        # caller's other threads would leave the child locks that no thread of it will ever release
        run = getattr(args, "main", None)   # the command line's main, which a fork runs (main.py)
        fork = run is not None and key is None and secrets_fd is None and threading.active_count() == 1
        proc = daemon_start.start(cmd, pass_fds, fork=fork, run=run)
    finally:
        for fd in pass_fds:
            if fd != listing_fd:
                os.close(fd)
    lister = None
    if listing_fd is not None:
        # on a thread only to bound the wait: this thread waits for it idle (polling the mount meanwhile
        # would contend with it for the GIL). It starts before the checks: at 100,000 fragments the
        # listing ends after the daemon is live. The daemon holds its own descriptor of the memfd, and
        # one left half written (a thread still at it when this process exits) has no header: the
        # daemon lists for itself
        lister = threading.Thread(target=_list_into, args=(listing, listing_fd), name="tdbfs-prelist", daemon=True)
        lister.start()
    if check is not None:
        try:
            check()
        except BaseException:
            stop_daemon(proc, mnt)
            raise
    if lister is not None:
        lister.join(LISTING_WAIT_S)
    return _wait_for_mount(args, proc, mnt)


def _list_into(listing, fd: int) -> None:
    try:
        listing(fd)
    finally:
        os.close(fd)


def _wait_for_mount(args, proc, mnt: str) -> int:
    deadline = time.monotonic() + MOUNT_WAIT_S
    captured = bytearray()
    fd = proc.stderr.fileno()
    # 1. read the daemon's stderr until it closes it (mount live) or exits
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        ready, _, _ = select.select([fd], [], [], min(remaining, 0.5))
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            captured += chunk
        elif proc.poll() is not None:
            captured += _drain(fd)
            break
    # 2. wait until the mount answers
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if mount_fstype(mnt) is not None:
            try:
                os.listdir(mnt)
                proc.stderr.close()
                return 0
            except OSError:
                pass
        time.sleep(0.02)
    if proc.poll() is not None:
        proc.stderr.close()
        raise CliError(daemon_failure(bytes(captured), proc.returncode))
    stop_daemon(proc, mnt)  # still running but not answering: give up cleanly
    raise CliError(f"the daemon did not answer within {MOUNT_WAIT_S:.0f} s"
                   + (f" (see {args.log})" if args.log else " (retry with --log FILE --debug)"))


def stop_daemon(proc, mnt: str) -> None:
    """Stop a daemon the parent gave up on, and undo its mount if it got that far."""
    proc.terminate()
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.stderr.close()
    if mount_fstype(mnt) is not None:
        unmount(mnt, lazy=True)


def _drain(fd: int) -> bytes:
    out = bytearray()
    while select.select([fd], [], [], 0)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        out += chunk
    return bytes(out)


_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


def daemon_failure(stderr: bytes, returncode: int) -> str:
    """One line from what a daemon that died at startup wrote: its own error, and libfuse's."""
    lines = [ln.strip() for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    prefix = f"{PROG}: error: "
    ours = [ln[len(prefix):] for ln in lines if ln.startswith(prefix)]
    libfuse = [ln for ln in lines if not ln.startswith(prefix) and not _LOG_LINE.match(ln)
               and not ln.startswith(("Traceback", "File ", "  "))]
    if ours and libfuse and libfuse[-1] not in ours[-1]:
        return f"{ours[-1]}: {libfuse[-1]}"
    if ours:
        return ours[-1]
    if libfuse:
        return f"mount failed: {libfuse[-1]}"
    return f"mount failed: the daemon exited with status {returncode}"
