"""The footers of many fragments of an object store read ahead, in parallel, for a summary's pass.

`array.yaml`, `stats.csv`, `timeline.csv` and `fragments.svg` each need every fragment's footer
(fragment_digest.py), and their exact sizes do too: `ls -l` of an array's root reads them all. One
GET after another, 2,000 fragments in S3 are 2,000 round trips. Before the pass, the ranged read
each footer costs (the tail of `__fragment_metadata.tdb`, exactly as `BaseStore.file_tail` will ask
for it; its size is in the listing of `__fragments/`, which lists every fragment's files at once)
goes to the storage's small-reads prefetcher (`Storage.prefetch_small`): a bounded pool of requests
in flight (RemoteSettings.requests) that holds at most a quarter of the store's cache bound until the
pass takes each range. A read that fails there is read again by the pass itself, which meets the
failure as its own: its problem names that fragment's file and byte range, and the rest go on.
Local disks have no latency to hide: nothing is read ahead there (`Storage.concurrency` is 1).
"""

from __future__ import annotations

from .fragment_listing import FRAGMENTS_DIR
from .prefetch import SHARE_OF_CACHE

#: the file whose tail holds a fragment's footer (docs/format.md §5.4)
METADATA_FILE = "__fragment_metadata.tdb"


def footers_ahead(store, rels) -> int:
    """Start reading the footer of each fragment of `rels` (in the order the pass will ask for them) that
    has no digest kept and whose footer is not in the cache; how many reads were planned."""
    storage = store.storage
    if storage.concurrency <= 1 or not rels:
        return 0
    from .fragment import FOOTER_TAIL

    ranges = []
    for rel in rels:
        if not rel.startswith(FRAGMENTS_DIR + "/") or store.digests.get(rel) is not None:
            continue   # a legacy fragment folder (formats 1-4 at the root) reads its metadata its own way
        md = f"{rel}/{METADATA_FILE}"
        entry = storage.entry(md)
        if entry is None or not entry.is_file or not entry.size:
            continue   # the pass reports what is wrong with it
        version = (entry.size, entry.mtime_ns)
        if entry.size <= FOOTER_TAIL:   # read whole (file_tail)
            if store.cache.get(("file", store.path, md, version)) is None:
                ranges.append((md, 0, entry.size))
        else:
            start = entry.size - FOOTER_TAIL
            if store.cache.get(("tail", store.path, md, version, start)) is None:
                ranges.append((md, start, FOOTER_TAIL))
    if ranges:
        storage.prefetch_small(ranges, store.cache.capacity // SHARE_OF_CACHE)
    return len(ranges)
