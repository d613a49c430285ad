"""The common tile, fast: a pipeline of ZSTD alone, each chunk one frame (docs/format.md §2.2-§2.3, §3.3).

TileDB's default pipeline writes every chunk as `u32 0, u32 1, u32 unfiltered, u32 filtered` then
one zstd frame. Such a tile is decoded here straight into one buffer of the tile's size: no
bytes object per chunk, no join (a full extra copy into fresh memory, which this VM pays dearly
for, docs/performance.md §1), no per-chunk trip through the filter registry. zstd releases the GIL,
so with a `pool` the second half of the chunks decodes on another thread meanwhile.

Anything else, and any chunk that does not decode cleanly, is left to `tile.unfilter_tile`'s
general path (this returns None), which decodes it again and words the error with file and offset:
the fast path never reports a problem of its own.
"""

from __future__ import annotations

import struct
import threading

ZSTD_ID = 2
#: a tile this big, of at least this many chunks, decodes on two threads when a pool is given
SPLIT_MIN_BYTES = 1 << 20
SPLIT_MIN_CHUNKS = 4

_PART_HEADER = struct.Struct("<4I")  # n_md_parts, n_data_parts, unfiltered, filtered
_local = threading.local()


def applies(pipeline, ctx) -> bool:
    """True for a pipeline of ZSTD alone on a stream whose filters embed nothing (var strings do)."""
    return len(pipeline.filters) == 1 and pipeline.filters[0].id == ZSTD_ID and not ctx.var_strings


def _decompressor():
    d = getattr(_local, "zstd", None)
    if d is None:
        import zstandard  # on first use: a mount's start-up imports no codec
        d = _local.zstd = zstandard.ZstdDecompressor()
    return d


def plan(data, headers, base: int):
    """(source view, output offset, size) per chunk, or None when a chunk is not one frame of one part."""
    view = memoryview(data)
    jobs = []
    at = 0
    for h in headers:
        u, f = h.unfiltered_size, h.filtered_size
        if h.metadata_size != _PART_HEADER.size or not u:
            return None
        n_md, n_data, pu, pf = _PART_HEADER.unpack_from(view, h.metadata_offset - base)
        if n_md or n_data != 1 or pu != u or pf != f:
            return None
        jobs.append((view[h.data_offset - base:h.end - base], at, u))
        at += u
    return jobs


def _run(jobs, out: memoryview) -> bool:
    """Decode each frame into its place in `out`; False as soon as one does not fill it exactly."""
    d = _decompressor()
    try:
        for src, at, u in jobs:
            reader = d.stream_reader(src)
            # read(1) past the end: a frame longer than its header says, or bytes after it
            if reader.readinto(out[at:at + u]) != u or reader.read(1):
                return False
    except Exception:  # noqa: BLE001 -- zstd's error, whatever its kind: the general path words it
        return False
    return True


def decode(data, headers, base: int, total: int, pool=None):
    """(bytearray of `total` decoded bytes, per-chunk stage records) of a ZSTD-only tile, or None."""
    jobs = plan(data, headers, base)
    if jobs is None:
        return None
    out = bytearray(total)
    view = memoryview(out)
    if pool is not None and total >= SPLIT_MIN_BYTES and len(jobs) >= SPLIT_MIN_CHUNKS:
        half = len(jobs) // 2
        other = pool.submit(_run, jobs[half:], view)
        mine = _run(jobs[:half], view)
        ok = other.result() and mine
    else:
        ok = _run(jobs, view)
    if not ok:
        return None
    records = [({"filter": "ZSTD", "position": 0, "metadata_parts": 0, "data_parts": 1,
                 "parts": [{"unfiltered": h.unfiltered_size, "filtered": h.filtered_size}]},) for h in headers]
    return out, records
