"""The digests of many fragments (fragment_digest.py) made in worker processes, one per core.

A digest costs ~0.6 ms of Python per fragment (listing, footer, stats, findings), so `array.yaml`,
`stats.csv` and `fragments.svg` of 100,000 fragments took a minute on one core (docs/performance.md
§5). Parsing footers holds the GIL, so threads do not help; processes do. The daemon enables this
(`enable`); a summary's loop calls `digests_ahead` first, and then finds the digests kept.

Only what the summary's own loop would keep comes from a worker: the digest of a committed fragment
that decodes whole and shows no finding. A fragment with anything to say is digested again in the
daemon, so its problems are found and recorded there exactly as without workers; and whatever goes
wrong with the workers themselves leaves the loop to do all the work, as it would have. Workers open the
array from its folder (local disks only: a worker on an object store would repeat its LISTs) in a fresh
store each time, so nothing they return predates the render that asked for it.
"""

from __future__ import annotations

import logging
import os
import posixpath
from concurrent.futures import as_completed

from .footers_ahead import footers_ahead
from .fragment_digest import DIGEST_COST, FIELD_COST, fragment_digest, interned

log = logging.getLogger("tdbfs.digests")

#: fewer fragments without a digest than this are digested in the daemon: a worker's start (~0.3 s, the
#: imports of the fork server) costs more than ~0.6 ms x this many saves on 2 cores
POOL_MIN_FRAGMENTS = 1000
#: fragments per task: small enough to keep every worker busy to the end, big enough that a result's
#: trip through the pipe is a small part of its cost
CHUNK = 500
#: each worker's store cache: a footer and its schema at a time
WORKER_CACHE_MB = 64
#: what a worker imports, once, in the fork server
PRELOAD = ["tdbfs.store.digest_pool", "tdbfs.store.open_array", "tdbfs.store.array_store", "tdbfs.store.fragment",
           "tdbfs.store.stats", "tdbfs.store.findings", "tdbfs.format.schema"]

#: workers a mount starts unless told (--jobs): each peaks at about 60 MiB (100,000 fragments, measured),
#: and a daemon that starts one per core of a big server for a `cat array.yaml` would surprise its host
DEFAULT_MAX_JOBS = 8

_jobs = 1


def default_jobs() -> int:
    """Every core, up to DEFAULT_MAX_JOBS."""
    return max(1, min(os.cpu_count() or 1, DEFAULT_MAX_JOBS))


def enable(jobs: int) -> None:
    """Digest with `jobs` worker processes from now on (1: in this process only)."""
    global _jobs
    _jobs = max(1, int(jobs))


def digests_ahead(store, rels) -> int:
    """Digest in worker processes the committed fragments of `rels` that have no digest kept, when there are
    enough of them, and keep the digests as `fragment_digest` would have; how many were kept. Call it within
    the summary's `store.one_pass()` and `store.digests.render()`. On an object store, the footers the loop
    will read are read ahead in parallel instead (footers_ahead.py)."""
    footers_ahead(store, rels)
    if _jobs < 2 or len(rels) < POOL_MIN_FRAGMENTS or not _workers_can_open(store):
        return 0
    names = store.kept_committed_fragment_names()
    missing = [rel for rel in rels
               if (names is None or posixpath.basename(rel) in names) and store.digests.get(rel) is None]
    if len(missing) < POOL_MIN_FRAGMENTS or (DIGEST_COST + FIELD_COST) * len(missing) > store.digests.capacity:
        return 0   # too few to pay, or too many to stay kept until the loop asks for them (--cache-mb)
    key = store.key.reveal() if store.key is not None else None
    chunks = [missing[i:i + CHUNK] for i in range(0, len(missing), CHUNK)]
    kept = 0
    try:
        with _process_pool(min(_jobs, len(chunks))) as pool:
            futures = [pool.submit(digest_chunk, store.storage.root, key, chunk) for chunk in chunks]
            for fut in as_completed(futures):
                for rel, digest, signature in fut.result():
                    # the folder's hash as this process hashes strings (each process seeds its own)
                    store.digests.put(rel, interned(digest, hash(signature)))
                    store.digests.note_seen(rel)
                    kept += 1
    except Exception as exc:  # noqa: BLE001 -- the summary's loop digests what is missing, as without workers
        log.warning("digesting %d fragments in worker processes failed (%s: %s); digesting them here",
                    len(missing), type(exc).__name__, exc)
    else:
        log.info("%d fragments digested in %d worker processes", kept, min(_jobs, len(chunks)))
    return kept


def _workers_can_open(store) -> bool:
    from .array_store import ArrayStore
    from .storage.local import LocalStorage
    return isinstance(store, ArrayStore) and isinstance(store.storage, LocalStorage)


def _process_pool(workers: int):
    # imported here, not at the top: multiprocessing and its process pool are ~8 ms of a mount's
    # start-up, and most mounts never start a worker
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("forkserver")   # the daemon holds threads: never a plain fork
    ctx.set_forkserver_preload(PRELOAD)
    return ProcessPoolExecutor(workers, mp_context=ctx)


def digest_chunk(root: str, key: bytes | None, rels: list) -> list:
    """(rel, digest, folder signature) of each fragment of `rels` whose digest the daemon would keep without
    finding anything to record; in a worker process, from a store of its own."""
    from ..format.reversers.keys import EncryptionKey
    from .open_array import open_array

    store = open_array(root, WORKER_CACHE_MB << 20, EncryptionKey(key) if key else None)
    from .pass_gc import fewer_collections

    out = []
    with store.one_pass(), store.digests.render(), fewer_collections():
        for rel in rels:
            d = fragment_digest(store, rel)
            if d.committed and d.shape_error is None and d.stats_error is None and not d.findings:
                out.append((rel, d, store.fragment(rel).signature()))
    return out
