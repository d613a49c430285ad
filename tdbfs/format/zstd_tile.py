"""The common tile, fast: a pipeline of ZSTD alone, each chunk one frame (docs/format.md §2.2-§2.3, §3.3).

TileDB's default pipeline writes every chunk as `u32 0, u32 1, u32 unfiltered, u32 filtered` then
one zstd frame. Such a tile is decoded here straight into one buffer of the tile's size: no
bytes object per chunk, no join (a full extra copy into fresh memory, which this VM pays dearly
for, docs/performance.md §1), no per-chunk trip through the filter registry. zstd releases the GIL,
so other threads can take chunks meanwhile (`SharedChunks`): a pool thread for a big tile, and a reader
that asks for the tile while it is being decoded.

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


class SharedChunks:
    """The chunks of one tile, each decoded into its place in one buffer by whichever thread takes it
    next: the thread that decodes the tile, a pool thread, or a reader that would otherwise wait for
    the tile (`share`). zstd releases the GIL, so each taker decodes on a core of its own."""

    def __init__(self, jobs, out: memoryview):
        self._jobs, self._out = jobs, out
        self._next = 0        # the first chunk nobody has taken
        self._running = 0     # chunks taken and not yet decoded
        self.ok = True        # False once a chunk did not fill its place exactly
        self._cond = threading.Condition()

    def work(self) -> None:
        """Decode chunks until none is left to take (or one failed); safe on any number of threads,
        and a no-op once the tile is done."""
        d = _decompressor()
        jobs, out, cond = self._jobs, self._out, self._cond
        while True:
            with cond:
                i = self._next
                if i >= len(jobs) or not self.ok:
                    return
                self._next = i + 1
                self._running += 1
            src, at, u = jobs[i]
            ok = _decode_frame(d, src, out[at:at + u])
            with cond:
                self._running -= 1
                self.ok = self.ok and ok
                if not self._running:
                    cond.notify_all()

    def wait(self) -> bool:
        """Until every chunk taken is decoded; True if all of them decoded cleanly."""
        with self._cond:
            while self._running:
                self._cond.wait()
            return self.ok and self._next >= len(self._jobs)


def _decode_frame(d, src, place: memoryview) -> bool:
    """Decode one frame into `place`; False unless it fills it exactly."""
    try:
        reader = d.stream_reader(src)
        # read(1) past the end: a frame longer than its header says, or bytes after it
        return reader.readinto(place) == len(place) and not reader.read(1)
    except Exception:  # noqa: BLE001 -- zstd's error, whatever its kind: the general path words it
        return False


def decode(data, headers, base: int, total: int, pool=None, share=None):
    """(bytearray of `total` decoded bytes, per-chunk stage records) of a ZSTD-only tile, or None.

    `share(work)`, when given, offers the chunks to a thread that asks for this tile meanwhile; with a
    `pool` (an Executor), a big tile also has a pool thread take chunks."""
    jobs = plan(data, headers, base)
    if jobs is None:
        return None
    out = bytearray(total)
    chunks = SharedChunks(jobs, memoryview(out))
    if share is not None and len(jobs) > 1:
        share(chunks.work)
    if pool is not None and total >= SPLIT_MIN_BYTES and len(jobs) >= SPLIT_MIN_CHUNKS:
        pool.submit(chunks.work)
    chunks.work()
    if not chunks.wait():
        return None
    records = [({"filter": "ZSTD", "position": 0, "metadata_parts": 0, "data_parts": 1,
                 "parts": [{"unfiltered": h.unfiltered_size, "filtered": h.filtered_size}]},) for h in headers]
    return out, records
