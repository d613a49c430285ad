"""`tdbfs check`: the fsck, printed as lines or one JSON document."""

from __future__ import annotations

import contextlib
import os
import sys

from ..frontend.common import CliError, load_key, open_store


def cmd_check(args) -> int:
    if args.jobs is not None and args.jobs > 1 and not args.dask:
        from ..check.pool import start_fork_server
        start_fork_server()   # its imports beside this process's own, and the array's opening

    import json
    import logging

    from ..check.check import check_array

    from ..frontend.remote_options import browse_settings
    from ..location import Location

    if args.dask and (args.jobs or 1) > 1:
        raise CliError("--dask and --jobs are exclusive: the cluster's workers do the work", code=2)
    location = Location.parse(args.array)
    remote = browse_settings(args)
    try:
        key = load_key(args.key_file)
        store = open_store(location, args.cache_mb, key=key, remote=remote)
    except CliError as exc:
        raise CliError(str(exc), code=2) from None
    tdbfs_log = logging.getLogger("tdbfs")
    if not tdbfs_log.handlers and not logging.getLogger().handlers:
        tdbfs_log.addHandler(logging.NullHandler())
    show_bar = not args.quiet and not args.json and sys.stderr.isatty()
    progress = _progress_bar(store.storage.counters) if show_bar else None
    try:
        jobs = args.jobs if args.jobs is not None else 1 if args.dask else _default_jobs(store)
        with contextlib.ExitStack() as stack:
            executor = spec = None
            if args.dask or jobs > 1:
                from ..check.work import MIN_WORKER_CACHE_MB, StoreSpec, new_run

                spec = StoreSpec(location.path, max(MIN_WORKER_CACHE_MB, args.cache_mb // jobs), remote,
                                 key.reveal() if key is not None else None, new_run())
                executor = stack.enter_context(_executor(args.dask, jobs, spec))
            result = check_array(store, progress, executor, spec)
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


#: what `--jobs 1` checks (stored bytes, ZSTD tiles) in the time worker processes take to start and open
#: the array, ~0.4 s on 2 cores (scripts/bench figure 7): below that, workers cannot win
WORKER_START_BYTES = 256 << 20


def _default_jobs(store) -> int:
    """Every core; but one, in this process, for an array too small for workers to pay for their start:
    N workers save (1 - 1/N) of the work, so they win past WORKER_START_BYTES * N / (N - 1) stored bytes."""
    from ..store.group_store import GroupStore

    cores = os.cpu_count() or 1
    if cores == 1 or isinstance(store, GroupStore) or store.legacy0x_layout == "workspace":
        return cores
    enough = WORKER_START_BYTES * cores // (cores - 1)
    size = 0
    for rel in store.fragment_paths():
        size += sum(e.size for e in store.entries(rel) if e.is_file)
        if size > enough:
            return cores
    return 1


def _executor(dask: str | None, jobs: int, spec):
    if dask:
        from ..check.dask_executor import DaskExecutor, require_distributed
        require_distributed()
        return DaskExecutor(dask, scheduler=_scheduler_address(dask), spec=spec)
    from ..check.pool import ProcessPool
    return ProcessPool(jobs, spec)   # its workers open the array while this process plans


def _scheduler_address(address: str) -> str:
    """The scheduler's address, read from `address` when it names a scheduler file (a path), else itself."""
    import json

    from ..check.dask_executor import _one_line

    if "://" in address or not os.path.isfile(address):
        return address
    try:
        with open(address, encoding="utf-8") as f:
            return str(json.load(f)["address"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CliError(f"not a Dask scheduler file: {address} ({_one_line(exc)})", code=2) from None


def _progress_bar(counters):
    """The progress callback: steps done (a parallel check: fragments done, with the tiles and bytes its
    workers checked), and for an object store the bytes read and requests sent so far."""
    def show(done: int, total: int, what: str, tally=None) -> None:
        width = 30
        filled = width * done // max(total, 1)
        c = counters.snapshot() if counters is not None else None
        if tally is None:
            traffic = f" {_mib(c.bytes_read)} in {c.requests} requests" if c is not None else ""
            line = f"{done}/{total}{traffic} {what[:40]}"
        else:
            requests = f" in {c.requests + tally.requests:,} requests" if c is not None else ""
            line = f"{done}/{total} fragments, {tally.tiles:,} tiles, {_mib(tally.bytes_read)}{requests}  {what[:40]}"
        sys.stderr.write(f"\r\033[K[{'#' * filled}{'.' * (width - filled)}] {line}")
        sys.stderr.flush()
    return show


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n / 1024:.1f} KiB"
