"""Absorbing filters with per-part headers: GZIP, ZSTD, LZ4, BZIP2 and classic RLE (§3.3)."""

from __future__ import annotations

import bz2
import threading
import zlib

import lz4.block
import zstandard

from ...lazy import np
from .common import Stage, StageError, read_u32s

_local = threading.local()


def _zstd() -> zstandard.ZstdDecompressor:
    d = getattr(_local, "zstd", None)
    if d is None:
        d = _local.zstd = zstandard.ZstdDecompressor()
    return d


#: An LZ4 block codes at most 255 output bytes per input byte (every extra length byte adds 255).
LZ4_MAX_RATIO = 255


def zstd_decompress(part, out_len: int) -> bytes:
    """One zstd frame of at most `out_len` bytes. The frame header's content size, when written,
    decides what python-zstandard allocates (not max_output_size), so it is checked first."""
    size = zstandard.frame_content_size(part)  # -1: not written; ZstdError on a broken header
    if size > out_len:
        raise StageError(f"the zstd frame says it holds {size} bytes, more than the {out_len} expected")
    return _zstd().decompress(part, max_output_size=out_len)


def lz4_decompress(part, out_len: int) -> bytes:
    """One LZ4 block of `out_len` bytes; lz4 allocates `out_len` up front, so it must be reachable."""
    if out_len > LZ4_MAX_RATIO * len(part) + 16:
        raise StageError(f"{len(part)} bytes of LZ4 cannot decode to the {out_len} bytes expected")
    return lz4.block.decompress(part, uncompressed_size=out_len)


def _gzip(part: memoryview, out_len: int) -> bytes:
    """One zlib stream of `out_len` bytes, read to its end: its Adler-32 trailer, which TileDB's inflate
    verifies (tiledb/sm/compressors/gzip_compressor.cc), is checked, so damaged deflate data that still
    inflates is found as TileDB finds it."""
    d = zlib.decompressobj()
    out = d.decompress(part, out_len)
    if not d.eof:
        extra = d.decompress(d.unconsumed_tail, 1)   # the trailer: zlib.error when its checksum fails
        if extra or not d.eof:
            raise StageError(f"the GZIP stream holds more than the {out_len} bytes expected, or does not end")
    return out


def _bzip2(part: memoryview, out_len: int) -> bytes:
    return bz2.BZ2Decompressor().decompress(bytes(part), max_length=out_len)


def rle_decode(part: memoryview, out_len: int, cell_size: int) -> bytes:
    """Classic RLE: runs of `value[cell_size]` then a big-endian u16 run length."""
    run = cell_size + 2
    if len(part) % run:
        raise StageError(f"RLE part of {len(part)} bytes is not a whole number of {run}-byte runs")
    runs = np.frombuffer(part, np.uint8).reshape(-1, run)
    lengths = runs[:, -2].astype(np.int64) * 256 + runs[:, -1]
    if int(lengths.sum()) * cell_size != out_len:
        raise StageError(f"RLE runs expand to {int(lengths.sum()) * cell_size} bytes, the part header says {out_len}")
    return np.repeat(runs[:, :cell_size], lengths, axis=0).tobytes()


def read_part_header(md: memoryview, what: str):
    """`u32 n_md_parts, u32 n_data_parts, (n_md+n_data) x {u32 unfiltered, u32 filtered}`."""
    (n_md, n_data), pos = read_u32s(md, 0, 2, f"{what} part counts")
    if n_md + n_data > len(md):
        raise StageError(f"{what} header claims {n_md}+{n_data} parts, more than its {len(md)} metadata bytes", 0)
    sizes, pos = read_u32s(md, pos, 2 * (n_md + n_data), f"{what} part sizes")
    return n_md, n_data, sizes[0::2], sizes[1::2], pos


def reverse_parts(spec, md: memoryview, data: memoryview, stage: Stage, decode):
    """Shared by every absorbing filter: decode each part with `decode(part, out_len)`."""
    n_md, n_data, unfiltered, filtered, _ = read_part_header(md, spec.name)
    if sum(filtered) != len(data):
        raise StageError(f"{spec.name} parts total {sum(filtered)} bytes but the chunk data holds {len(data)}", 0)
    if sum(unfiltered) > stage.limit:
        raise StageError(f"parts claim {sum(unfiltered)} decoded bytes, more than the {stage.limit} this chunk can hold", 0)
    outs = []
    at = 0
    for i, (u, f) in enumerate(zip(unfiltered, filtered)):
        try:
            out = decode(data[at:at + f], u)
        except StageError as exc:
            raise StageError(f"{spec.name} part {i} ({f} bytes at chunk data byte {at}): {exc}", 0) from None
        except (zstandard.ZstdError, zlib.error, OSError, ValueError, EOFError, lz4.block.LZ4BlockError) as exc:
            raise StageError(f"{spec.name} part {i} ({f} bytes at chunk data byte {at}) does not decode: {exc}", 0)
        if len(out) != u:
            raise StageError(f"{spec.name} part {i} decoded to {len(out)} bytes, its header says {u}", 0)
        outs.append(out)
        at += f
    record = {"metadata_parts": n_md, "data_parts": n_data,
              "parts": [{"unfiltered": u, "filtered": f} for u, f in zip(unfiltered, filtered)]}
    return memoryview(b"".join(outs[:n_md])), memoryview(b"".join(outs[n_md:])), record


def _codec(decompress):
    """A reverser for a codec `decompress(part, out_len)`; an empty part decodes to nothing unread."""
    def reverse(spec, md, data, stage: Stage):
        return reverse_parts(spec, md, data, stage, lambda part, u: decompress(part, u) if u else b"")
    return reverse


reverse_gzip = _codec(_gzip)
reverse_zstd = _codec(zstd_decompress)
reverse_lz4 = _codec(lz4_decompress)
reverse_bzip2 = _codec(_bzip2)


def reverse_rle(spec, md, data, stage: Stage):
    return reverse_parts(spec, md, data, stage, lambda part, u: rle_decode(part, u, stage.ctx.cell_size))
