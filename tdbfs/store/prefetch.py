"""`tdbfs check` on an object store: every tile of a fragment read ahead, in parallel, each byte once.

A check decodes tile after tile; one GET at a time would make it as slow as the store's latency
times the number of tiles. Before it starts on a fragment, the ranged reads of all the fragment's
tiles go to the storage's prefetcher (`Storage.prefetch`), which runs them in a bounded pool and
holds what came back until the check's own read of that exact range takes it: each byte is asked
for once. What is held never exceeds a quarter of the store's cache bound: further reads wait
until the check has taken earlier ones. Local disks have nothing to gain and prefetch nothing.
"""

from __future__ import annotations

from .fragment_interface import streams

#: the share of the store's cache bound the bytes read ahead may hold
SHARE_OF_CACHE = 4


def prefetch_tiles(store, frag, fields) -> None:
    """Start reading every tile of `fields` of the fragment `frag` (what check is about to decode)."""
    ranges = []
    for f in fields or ():
        try:
            ntiles = frag.tile_count(f.idx)
            for stream in streams(f):
                for k in range(ntiles):
                    loc = frag.location(f, k, stream)
                    if loc.persisted_size:
                        ranges.append((loc.file, loc.offset, loc.persisted_size))
        except Exception:  # noqa: BLE001 -- the check's own decoding reports what is wrong with this field
            continue
    store.storage.prefetch(ranges, store.cache.capacity // SHARE_OF_CACHE)
