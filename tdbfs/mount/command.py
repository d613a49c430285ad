"""`tdbfs mount` and `tdbfs umount`."""

from __future__ import annotations

import os

from ..frontend.common import CliError, load_key, open_store
from .daemon import read_key_fd, run_daemon, spawn_daemon
from .mountpoints import check_mountpoint, mount_fstype, unmount
from ..frontend.remote_options import fuse_items, read_secrets, remote_items, settings
from ..location import Location


def cmd_mount(args) -> int:
    array = Location.parse(args.array)
    mnt = os.path.abspath(args.mountpoint)
    if args.foreground:
        from . import libfuse, stop_signals
        from .daemon import tune_malloc
        from .fuse_setup import default_fsname
        tune_malloc()   # before any thread starts: an arena a thread made before it would stay in use
        # before numpy or the store start threads that would otherwise take the signal
        stop_signals.catch_stop_signals()
        key = read_key_fd(args.key_fd) if args.key_fd is not None else None
        secrets = read_secrets(args.secrets_fd) if args.secrets_fd is not None else []
        options = fuse_options(args)
        if "fsname" not in option_keys(fuse_items(args.options)):
            options.fsname = array.path if array.remote else default_fsname(array.path)
        options.for_array(libfuse.libfuse_version(), remote=array.remote)
        # listings of an object store are trusted as long as the kernel keeps the names found in them;
        # a local array given no backend option never imports the backend (start-up time)
        items = remote_items(args.options) + secrets
        remote = settings(items, options.lookup_ttl(), args.cache_dir) if items or array.remote else None
        listings = prelisted(args.listing_fd) if args.listing_fd is not None else None
        # with direct_io the kernel keeps no page of what it was served: a decoded tile read to its end
        # must stay in the cache for the next reader
        store = open_store(array, args.cache_mb, args.key_file, key=key, remote=remote,
                           drop_served=options.page_cache(), listings=listings)
        if listings is not None:
            leave_listings(store, listings)
        check_mountpoint(mnt, array)  # a spawned daemon too: it starts before its parent has checked
        problem = libfuse.fuse_problem()
        if problem:
            raise CliError(f"FUSE is not available: {problem}")
        return run_daemon(args, store, mnt, options)

    # A background mount starts its daemon as soon as the mount point is known to be free:
    # the daemon's interpreter start-up and imports are most of the time to a live mount,
    # and the parent's other checks (options, FUSE) run meanwhile on the other core. Any
    # failure then stops the daemon. The array itself is checked by the daemon, whose error
    # becomes ours.
    def remote():   # made only where the store is opened here: it imports the store, which the daemon waits for
        return settings(remote_items(args.options), cache_dir=args.cache_dir)

    try:
        check_mountpoint(mnt, array)
    except CliError:
        open_store(array, args.cache_mb, args.key_file, remote=remote())  # an unusable array is reported first
        raise
    # read here, handed over through a pipe: the daemon's environment and argv, which
    # stay in /proc for the life of the mount, never hold the key or where it is
    key = load_key(args.key_file)

    def check():
        from .fuse_setup import setup_problem

        fuse_options(args)
        if remote_items(args.options):
            remote()   # a backend option that cannot be used is a usage error, here as in the daemon
        # without loading libfuse (fuse_setup.py); a libfuse that mfusepy cannot load is the
        # daemon's error, which becomes ours
        problem = setup_problem()
        if problem:
            open_store(array, args.cache_mb, key=key, remote=remote())
            raise CliError(f"FUSE is not available: {problem}")
    code = spawn_daemon(args, array.path, mnt, check=check, key=key,
                        listing=None if array.remote else lambda fd: list_fragments(array, fd))
    args.nothing_to_tear_down = True   # the daemon serves on its own (main.run)
    return code


def list_fragments(array: Location, fd: int) -> None:
    """The fragment folders of the local `array`, listed into the memfd `fd` for the daemon: it takes
    them on its first `ls fragments/` (mount/prelisted.py). Whatever cannot be listed is left to it."""
    from ..store.fragment_listing import LISTED_FOLDERS
    from .prelisted import write_listings
    from ..store.storage.opening import open_storage

    try:
        write_listings(fd, open_storage(array), LISTED_FOLDERS)  # opened as the daemon opens it
    except Exception:  # noqa: BLE001 - the daemon lists what this could not, and reports what it finds
        return


def prelisted(fd: int):
    """The listings the parent wrote to the memfd `fd` (list_fragments), for the store to take."""
    from ..store.base_store import MTIME_TICK_NS
    from ..store.fragment_listing import LISTED_FOLDERS
    from .prelisted import Prelisted

    return Prelisted(fd, LISTED_FOLDERS, MTIME_TICK_NS)


def leave_listings(store, listings) -> None:
    """Close the listings' memfd where the store did not take them (open_object): a group, or a
    TileDB 0.x array, lists for itself."""
    from ..store.array_store import ArrayStore

    if type(store) is not ArrayStore:
        listings.close()


def option_keys(option_strings) -> set:
    return {item.partition("=")[0].strip() for text in option_strings or () for item in text.split(",")}


def fuse_options(args):
    from .fuse_setup import FuseOptions
    try:
        return FuseOptions.parse(fuse_items(args.options), debug=False)
    except ValueError as exc:
        raise CliError(str(exc), code=2) from None


def cmd_umount(args) -> int:
    mnt = os.path.abspath(args.mountpoint)
    fstype = mount_fstype(mnt)
    if fstype is None:
        if not os.path.lexists(mnt):
            raise CliError(f"mount point not found: {mnt}")
        raise CliError(f"{mnt} is not mounted")
    if not fstype.startswith("fuse") and fstype != "?":
        raise CliError(f"{mnt} is not a tdbfs mount (it is {fstype})")
    ok, message = unmount(mnt, lazy=args.lazy)
    if not ok:
        hint = " (a process is using it; close it or use 'tdbfs umount -z')" if "busy" in message.lower() else ""
        raise CliError(f"cannot unmount {mnt}: {message}{hint}")
    return 0
