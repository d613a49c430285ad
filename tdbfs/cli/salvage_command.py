"""`tdbfs salvage SRC DEST`: the surviving cells of an array, as a new array TileDB opens (salvage/)."""

from __future__ import annotations

import sys

from ..frontend.common import CliError, load_key, open_store


def cmd_salvage(args) -> int:
    import logging

    from ..frontend.remote_options import browse_settings
    from ..location import Location
    from ..salvaging import SalvageError, salvage_store

    if "://" in args.dest:
        raise CliError(f"DEST must be a local folder, not {args.dest}", code=2)
    import os
    if os.path.lexists(args.dest):
        raise CliError(f"{args.dest} exists: DEST must be a new folder", code=2)
    if "://" not in args.src:
        src, parent = os.path.realpath(args.src), os.path.realpath(os.path.dirname(os.path.abspath(args.dest)))
        if parent == src or parent.startswith(src + os.sep):
            raise CliError(f"{args.dest} is inside SRC, which salvage never writes", code=2)
    t = parse_time(args.as_of)
    location = Location.parse(args.src)
    key = load_key(args.key_file)
    store = open_store(location, args.cache_mb, key=key, remote=browse_settings(args))
    tdbfs_log = logging.getLogger("tdbfs")
    if not tdbfs_log.handlers and not logging.getLogger().handlers:
        tdbfs_log.addHandler(logging.NullHandler())
    from ..store.group_store import GroupStore
    if isinstance(store, GroupStore):
        raise CliError(f"{args.src} is a group: salvage its member arrays one by one")
    show = sys.stderr.isatty() and not args.quiet

    def progress(what: str) -> None:
        if show:
            sys.stderr.write(f"\r\033[K{what[:70]}")
            sys.stderr.flush()

    try:
        report = salvage_store(store, args.dest, t, progress)
    except SalvageError as exc:
        raise CliError(str(exc)) from None
    finally:
        if show:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
    print(report.summary())
    return report.exit_code


def parse_time(text: str | None) -> int | None:
    """--as-of: milliseconds since the epoch, as as_of/<T> takes them, or `now` (None)."""
    if text is None or text == "now":
        return None
    if not text.isdigit() or (len(text) > 1 and text[0] == "0") or int(text) >= 2 ** 64:
        raise CliError(f"--as-of takes milliseconds since the epoch (as as_of/<T>) or 'now', not {text!r}", code=2)
    return int(text)
