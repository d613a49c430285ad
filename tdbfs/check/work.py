"""The unit of work of `tdbfs check`: one fragment, or one field's stream over a range of tiles, checked
in any process (a local pool, pool.py; a Dask worker, dask_executor.py) that opens the array itself.

The contract between check.py and every executor (keep it stable):

- `StoreSpec` (frozen, picklable): where the array is and how to open it (`spec.open()` -> a store, as
  `tdbfs check` opens it). Its `cache_mb` is the bound of that process's store cache; `run` is unique
  per check (`new_run()`), so no process reuses a store (and its logs) from an earlier check.
- `Task` (frozen, picklable): `index` is its place in the order `--jobs 1` checks in; `fragment` the
  fragment's folder (relative to the array); `part` is WHOLE (the fragment and every tile), HEAD (the
  fragment without its tiles) or TILES (tiles `tiles = (lo, hi)` of stream `stream` of field `field`).
- `plan(store, spec, split_bytes)` (in the parent) -> the tasks of the array's fragments, in order: a
  fragment whose files hold more than `split_bytes` is split into a HEAD and TILES tasks.
- `run_task(spec, task)` (in any process) -> `TaskResult`. It never raises for damage: what is wrong is in
  `fragment_problems` (the fragment's own log, in the order found) and `store_problems` (the store's log).
  Each process keeps one store (the last spec's) across tasks, so a fragment's metadata is decoded once
  per process.
- An executor is any object with `run(fn, spec, tasks) -> iterator of TaskResult` (any order): it calls
  `fn(spec, task)` (fn is `run_task`, a module-level function, so it pickles by reference) for each task,
  and for a task whose worker died yields `died(task, why)` instead. check.py restores the order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import pickle
import posixpath
import uuid
from dataclasses import dataclass

from ..problem import Problem
from ..store.fragment_interface import streams
from ..store.prefetch import SHARE_OF_CACHE, prefetch_tiles

WHOLE, HEAD, TILES = "whole", "head", "tiles"

#: a worker's store never gets less than this cache, whatever --cache-mb / --jobs (a fragment's metadata
#: and the tiles of one decode must fit)
MIN_WORKER_CACHE_MB = 32


@dataclass(frozen=True)
class StoreSpec:
    """How a process opens the array itself."""

    location: str           # local absolute path or URL
    cache_mb: int
    remote: object | None = None   # RemoteSettings (store/storage/remote.py), or None
    #: the encryption key's 32 bytes (EncryptionKey itself refuses to be pickled), or None: then the
    #: environment's, as the CLI reads it
    key: bytes | None = dataclasses.field(default=None, repr=False)
    #: one check's own: a process that checked the array before (a long-lived Dask worker) opens it afresh,
    #: since its logs already hold what that check found, and would not report it again
    run: str = ""

    def open(self):
        from ..format.reversers.keys import EncryptionKey
        from ..frontend.keys import key_from_environment
        from ..store.open_array import open_location
        key = EncryptionKey(self.key) if self.key else key_from_environment()
        return open_location(self.location, self.cache_mb << 20, key, self.remote)


@dataclass(frozen=True)
class Task:
    index: int
    fragment: str
    part: str = WHOLE
    field: int | None = None        # TILES: the field's index
    stem: str = ""                  # TILES: the field's file stem (a0, d1, __coords), for messages
    stream: str | None = None       # TILES: DATA, VAR or VALIDITY (fragment_interface.py)
    tiles: tuple[int, int] | None = None   # TILES: tiles lo..hi-1

    def label(self) -> str:
        if self.part == TILES:
            return f"tiles {self.tiles[0]}-{self.tiles[1] - 1} of {self.stem} ({self.stream}) in {self.fragment}"
        return self.fragment


@dataclass(frozen=True)
class TaskResult:
    index: int
    fragment_problems: tuple        # Problem, logged in the fragment's log while the task ran
    store_problems: tuple           # Problem, logged in the store's log while the task ran
    counts: dict                    # fragments, tiles, generic_tiles, files
    bytes_read: int                 # stored bytes the task checked (metadata file, tiles)
    requests: int = 0               # requests sent to an object store (0 for a local disk)


def new_run() -> str:
    """A fresh StoreSpec.run."""
    return uuid.uuid4().hex


def died(task: Task, why: str) -> TaskResult:
    """The result of a task whose worker died: one problem, where the fragment's would be."""
    p = Problem(task.fragment, "check", None, f"worker died while checking {task.label()}: {why}")
    return TaskResult(task.index, (p,), (), {}, 0)


# -- the parent ------------------------------------------------------------------------------------

def plan(store, spec: StoreSpec, split_bytes: int) -> list[Task]:
    """The tasks of every fragment of `store`, in check order. Only fragments bigger than `split_bytes`
    are decoded here (their tile counts), in a store of their own: the parent's logs hold nothing that
    the workers' results have not put there, in their order."""
    tasks: list[Task] = []
    planner = None
    for rel in store.fragment_paths():
        size = sum(e.size for e in store.entries(rel) if e.is_file)
        if size <= split_bytes:
            tasks.append(Task(len(tasks), rel))
            continue
        if planner is None:
            planner = dataclasses.replace(spec, cache_mb=MIN_WORKER_CACHE_MB).open()
        tasks += _split(planner, rel, split_bytes, len(tasks))
    return tasks


def _split(planner, rel: str, split_bytes: int, first: int) -> list[Task]:
    frag = planner.fragment(rel)
    sizes = {e.name: e.size for e in planner.entries(rel) if e.is_file}
    out = [Task(first, rel, HEAD)]
    for f in frag.attempt(frag.stored_fields, rel, "fields") or ():
        ntiles = frag.attempt(lambda f=f: frag.tile_count(f.idx), rel, "tile offsets")
        for stream in streams(f):
            file = frag.attempt(lambda f=f, stream=stream: frag.location(f, 0, stream).file, rel, "tile 0") \
                if ntiles else None
            per_task = max(1, ntiles * split_bytes // max(sizes.get(posixpath.basename(file or ""), 0), 1)) \
                if ntiles else 1
            for lo in range(0, max(ntiles or 0, 1), per_task):
                out.append(Task(first + len(out), rel, TILES, f.idx, f.stem, stream,
                                (lo, min(lo + per_task, ntiles or 0))))
    return out


# -- any process -----------------------------------------------------------------------------------

_store: tuple[bytes, object] | None = None   # (pickled spec, its store): one per process


def _store_of(spec: StoreSpec):
    global _store
    key = pickle.dumps(spec)
    if _store is None or _store[0] != key:
        _store = None   # the last one's cache goes before the next is filled
        _store = (key, spec.open())
    return _store[1]


def open_store(spec: StoreSpec) -> None:
    """Open this process's store of `spec` ahead of its first task (pool.py starts its workers with it);
    a failure is left for run_task to report."""
    with contextlib.suppress(Exception):
        _store_of(spec)


def run_task(spec: StoreSpec, task: Task) -> TaskResult:
    """Check what `task` names in this process's store of `spec`; never raises for damage."""
    try:
        store = _store_of(spec)
    except Exception as exc:  # noqa: BLE001 -- the array vanished or cannot be reached from here
        return died(task, f"cannot open the array: {exc}")
    frag = store.fragment(task.fragment)
    frag_log, store_log = frag.problems, store.problems
    before = len(frag_log.items), len(store_log.items)
    counters = store.storage.counters
    requests = counters.snapshot().requests if counters is not None else 0
    counts = {"fragments": 0, "tiles": 0, "generic_tiles": 0, "files": 0}
    if task.part == WHOLE:
        nbytes = check_fragment(store, frag, counts)
    elif task.part == HEAD:
        nbytes = check_head(store, frag, counts)[1]
    else:
        md = f"{frag.rel}/{frag.METADATA_FILE}"   # the attempt of check_head: its failure is logged once
        f = next((f for f in frag.attempt(frag.stored_fields, md, "fields") or () if f.idx == task.field), None)
        nbytes = 0 if f is None else check_tiles(store, frag, f, task.stream, task.tiles, counts, prefetch=True)

    def new(log, n):
        # a log cleared meanwhile (the fragment's files changed) is new from its start
        return tuple(log.items[n:] if len(log.items) >= n else log.items)

    return TaskResult(task.index, new(frag_log, before[0]), new(store_log, before[1]),
                      {k: v for k, v in counts.items() if v}, nbytes,
                      (counters.snapshot().requests - requests) if counters is not None else 0)


# -- the checks themselves (check.py runs them in-process for --jobs 1) -----------------------------

def check_fragment(store, frag, counts: dict) -> int:
    """Every structure and every tile of one fragment; the stored bytes checked."""
    fields, nbytes = check_head(store, frag, counts)
    prefetch_tiles(store, frag, fields)   # an object store's GETs in parallel, each byte once
    for f in fields or ():
        for stream in streams(f):
            nbytes += check_tiles(store, frag, f, stream, None, counts)
    return nbytes


def check_head(store, frag, counts: dict) -> tuple[list | None, int]:
    """(fields, bytes checked): a fragment's name, listing and metadata, without its tiles."""
    counts["fragments"] += 1
    md = f"{frag.rel}/{frag.METADATA_FILE}"
    counts["files"] += len(frag.files())
    nbytes = 0
    with contextlib.suppress(OSError):
        # whole, before the footer is read from its tail: check reads each byte once (the decodes
        # below report what is wrong with the file)
        nbytes = len(store.read_file(md))
    store.fragment_findings(frag)
    frag.attempt(lambda: frag.parsed_name, frag.rel, "fragment name")
    counts["generic_tiles"] += frag.decode_metadata()
    return frag.attempt(frag.stored_fields, md, "fields"), nbytes


def check_tiles(store, frag, f, stream: str, tiles: tuple[int, int] | None, counts: dict,
                prefetch: bool = False) -> int:
    """Decode tiles lo..hi-1 (None: all) of one stream of field `f`; the stored bytes checked. The tile
    count is asked for first, as --jobs 1 does once per field (its failure is logged once)."""
    md = f"{frag.rel}/{frag.METADATA_FILE}"
    ntiles = frag.attempt(lambda: frag.tile_count(f.idx), md, f"tile offsets of {f.stem}") or 0
    lo, hi = tiles if tiles is not None else (0, ntiles)
    hi = min(hi, ntiles)
    if prefetch:
        _prefetch_range(store, frag, f, stream, lo, hi)
    nbytes = 0
    for k in range(lo, hi):
        if frag.attempt(lambda k=k: frag.tile(f, k, stream), f"{frag.rel}/{f.stem}", f"tile {k}") is not None:
            counts["tiles"] += 1
            with contextlib.suppress(Exception):   # offsets embedded in the var data have no location
                nbytes += frag.location(f, k, stream).persisted_size
    return nbytes


def _prefetch_range(store, frag, f, stream: str, lo: int, hi: int) -> None:
    ranges = []
    with contextlib.suppress(Exception):   # the decoding itself reports what is wrong
        for k in range(lo, hi):
            loc = frag.location(f, k, stream)
            if loc.persisted_size:
                ranges.append((loc.file, loc.offset, loc.persisted_size))
    store.storage.prefetch(ranges, store.cache.capacity // SHARE_OF_CACHE)
