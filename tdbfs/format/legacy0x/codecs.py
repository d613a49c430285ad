"""Per-tile compression of 0.x data files (docs/format-0x.md, "Data files"): decompress, then undo the
pre-filter. Each tile is one independent stream: GZIP a zlib stream, ZSTD a frame, LZ4 a raw
block, RLE runs of `value + u16 big-endian length`, BLOSC a blosc frame; pre-filters (delta,
bitshuffle) ran before the compressor, so they are undone after it.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import lz4.block
from ...lazy import np
from ..errors import FormatError
from ..errors import safety_net
from ..reversers.common import StageError
from ..reversers.compressors import lz4_decompress, rle_decode, zstd_decompress
from .schema import Codec

BLOSC_IDS = (4, 5, 6, 7, 8, 9)


@dataclass(frozen=True)
class TileLayout:
    """How one stream's values were laid out when the writer compressed them."""
    dtype: np.dtype       # type the delta pre-filter works on (uint64 for var offsets)
    stride: int           # delta stride: cell_val_num, dim_num, or 1 for offsets
    rle_value_size: int   # bytes of one RLE value
    shuffle_size: int     # bitshuffle element size


@safety_net("tile", offset_arg="offset")
def decode_tile(raw: bytes, codec: Codec, layout: TileLayout, out_len: int, file: str, offset: int,
                structure: str) -> tuple[bytes, dict]:
    """(decoded bytes, record of what was undone). `offset` is where `raw` starts in `file`."""
    record = {"compressor": codec.compressor_name}
    try:
        data = _decompress(raw, codec.compressor, out_len, layout)
    except FormatError:
        raise
    except (StageError, zlib.error, lz4.block.LZ4BlockError, ValueError, OSError, EOFError, RuntimeError) as exc:
        raise FormatError(file, structure, offset, f"{codec.compressor_name} stream of {len(raw)} bytes "
                                                   f"does not decode: {exc}") from None
    except Exception as exc:  # zstandard.ZstdError and friends
        raise FormatError(file, structure, offset, f"{codec.compressor_name} stream of {len(raw)} bytes "
                                                   f"does not decode: {exc}") from None
    if len(data) != out_len:
        raise FormatError(file, structure, offset, f"{codec.compressor_name} stream decoded to {len(data)} bytes, "
                                                   f"the book-keeping says {out_len}")
    if codec.delta:
        data = undo_delta(data, layout.dtype, layout.stride)
        record["pre_filter"] = f"DELTA_ENCODE (stride {layout.stride}, {layout.dtype.name})"
    elif codec.bitshuffle:
        data = bitunshuffle(data, layout.shuffle_size)
        record["pre_filter"] = f"BIT_SHUFFLE (element size {layout.shuffle_size})"
    return data, record


def _decompress(raw: bytes, compressor: int, out_len: int, layout: TileLayout) -> bytes:
    if compressor == 0:
        return raw
    if not out_len:
        return b""
    if compressor == 1:
        d = zlib.decompressobj()
        out = d.decompress(raw, out_len + 1)  # one byte more shows a stream longer than the book-keeping says
        if not d.eof and len(out) <= out_len:
            raise StageError("the zlib stream is truncated (no end of stream)")
        return out
    if compressor == 2:
        return zstd_decompress(raw, out_len)
    if compressor == 3:
        return lz4_decompress(raw, out_len)
    if compressor == 10:
        return rle_decode(memoryview(raw), out_len, layout.rle_value_size)
    if compressor in BLOSC_IDS:
        return _blosc(raw, out_len)
    raise StageError(f"unknown compressor {compressor}")


def _blosc(raw: bytes, out_len: int) -> bytes:
    """A blosc frame carries its own codec and shuffle flags in its 16-byte header."""
    try:
        import blosc  # a dependency; only BLOSC tiles need it
    except ImportError:
        raise StageError("BLOSC tiles need the 'blosc' package") from None
    if len(raw) < 16:
        raise StageError(f"a blosc frame has a 16-byte header, the tile has {len(raw)} bytes")
    nbytes, _, cbytes = struct.unpack_from("<3I", raw, 4)
    if nbytes != out_len:
        raise StageError(f"the blosc header says {nbytes} bytes, the book-keeping says {out_len}")
    if cbytes != len(raw):
        raise StageError(f"the blosc header says the frame is {cbytes} bytes, the tile has {len(raw)}")
    return bytes(blosc.decompress(raw))


def undo_delta(data: bytes, dtype: np.dtype, stride: int) -> bytes:
    """`out[i] = in[i] - in[i-stride]` (mod 2^bits), the first `stride` stored as they are."""
    dt = np.dtype(dtype)
    n = len(data) // dt.itemsize
    if n * dt.itemsize != len(data):
        raise StageError(f"delta-encoded data of {len(data)} bytes is not a whole number of {dt.itemsize}-byte values")
    stride = max(1, stride)
    values = np.frombuffer(data, dt)
    # wraparound arithmetic in the unsigned type of the same width
    u = values.view(np.dtype(f"<u{dt.itemsize}"))
    whole = n - n % stride
    head = u[:whole].reshape(-1, stride).cumsum(axis=0, dtype=u.dtype).reshape(-1)
    if whole < n:  # a ragged tail continues its lanes
        last = head[-stride:] if whole else np.zeros(stride, u.dtype)
        tail = (last[: n - whole] + u[whole:]).astype(u.dtype)
        head = np.concatenate([head, tail])
    return head.astype(u.dtype).tobytes()


def default_block_size(elem_size: int) -> int:
    """bshuf_default_block_size: 8192 bytes of elements, a multiple of 8, at least 128."""
    block = (8192 // elem_size) // 8 * 8
    return max(block, 128)


def bitunshuffle(data: bytes, elem_size: int) -> bytes:
    """Inverse of bshuf_bitshuffle with the default block size: whole blocks, then the remainder
    rounded down to 8 elements as one block, then the last n % 8 elements copied."""
    if elem_size <= 0 or len(data) % elem_size:
        raise StageError(f"bit-shuffled data of {len(data)} bytes is not a whole number of {elem_size}-byte elements")
    n = len(data) // elem_size
    block = default_block_size(elem_size)
    buf = np.frombuffer(data, np.uint8)
    out = np.empty(len(data), np.uint8)
    pos = 0
    sizes = [block] * (n // block)
    rest = n % block
    if rest - rest % 8:
        sizes.append(rest - rest % 8)
    for m in sizes:
        nbytes = m * elem_size
        out[pos:pos + nbytes] = _unshuffle_block(buf[pos:pos + nbytes], m, elem_size)
        pos += nbytes
    out[pos:] = buf[pos:]
    return out.tobytes()


def _unshuffle_block(block: np.ndarray, m: int, s: int) -> np.ndarray:
    # Shuffled layout: for byte j of the element, for bit k, m/8 bytes holding bit k of byte j
    # of every element (element e at byte e//8, bit e%8).
    bits = np.unpackbits(block.reshape(s, 8, m // 8), axis=2, bitorder="little")  # (s, 8, m)
    return np.packbits(bits.transpose(2, 0, 1), axis=2, bitorder="little").reshape(-1)
