"""`tdbfs check`: the fsck, printed as lines or one JSON document."""

from __future__ import annotations

import logging
import sys

from .common import CliError, open_store


def cmd_check(args) -> int:
    import json
    from ..check import check_array

    from .remote_options import browse_settings, location

    try:
        store = open_store(location(args.array), args.cache_mb, args.key_file, remote=browse_settings(args))
    except CliError as exc:
        raise CliError(str(exc), code=2) from None
    tdbfs_log = logging.getLogger("tdbfs")
    if not tdbfs_log.handlers and not logging.getLogger().handlers:
        tdbfs_log.addHandler(logging.NullHandler())
    show_bar = not args.quiet and not args.json and sys.stderr.isatty()
    try:
        result = check_array(store, _progress_bar(store.storage.counters) if show_bar else None)
    except OSError as exc:   # the array itself unreadable (permissions, I/O): could not run
        raise CliError(f"cannot check {args.array}: {exc}", code=2) from None
    if show_bar:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()
    if args.json:
        print(json.dumps(result.to_dict(), indent=1, default=str))
    else:
        if not args.quiet:
            for p in result.problems:
                print(("warning: " if p.severity != "error" else "") + p.line())
        print(result.summary())
    return 0 if result.clean else 1


def _progress_bar(counters):
    """The progress callback: steps done, and for an object store the bytes read and requests sent so far."""
    def show(done: int, total: int, what: str) -> None:
        width = 30
        filled = width * done // max(total, 1)
        traffic = ""
        if counters is not None:
            c = counters.snapshot()
            traffic = f" {_mib(c.bytes_read)} in {c.requests} requests"
        sys.stderr.write(f"\r\033[K[{'#' * filled}{'.' * (width - filled)}] {done}/{total}{traffic} {what[:40]}")
        sys.stderr.flush()
    return show


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n / 1024:.1f} KiB"
