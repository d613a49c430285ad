"""BYTESHUFFLE and BITSHUFFLE (§3.3): pass-through filters with a part-length header."""

from __future__ import annotations

import numpy as np

from .common import Stage, check_parts_cover, part_list
from .records import summarise


def reverse_byteshuffle(spec, md, data, stage: Stage):
    lens, pos = part_list(md, "BYTESHUFFLE")
    check_parts_cover(lens, data, "BYTESHUFFLE")
    s = stage.datatype.size
    outs = []
    at = 0
    for ln in lens:
        part = np.frombuffer(data[at:at + ln], np.uint8)
        n = ln // s
        if s > 1 and n:
            # Bytes past the last whole element were copied unshuffled (blosc semantics).
            outs.append(part[:n * s].reshape(s, n).T.tobytes() + part[n * s:].tobytes())
        else:
            outs.append(part.tobytes())
        at += ln
    return md[pos:], memoryview(b"".join(outs)), {"parts": list(lens), "type_size": s}


# bitshuffle_filter.cc hands blosc2 blocks of this many bytes (kiyo-masui/bitshuffle's
# BSHUF_TARGET_BLOCK_SIZE_B); blocks are transposed independently.
BITSHUFFLE_BLOCK = 8192
_BATCH_BLOCKS = 128  # blocks unshuffled per numpy call (1 MiB): bounds the temporaries


def bitunshuffle(part: np.ndarray, s: int) -> np.ndarray:
    """Undo blosc2_bitshuffle on every 8192-byte block of `part` (a multiple of 8 and of s).

    In a block of m elements the first m - m%8 are stored as 8*s rows of m/8 bytes:
    row j*8+k holds bit k of byte j of every element, element e at bit e%8 of byte
    e//8; the last m%8 elements are copied as they were."""
    out = np.empty_like(part)
    nfull = len(part) // BITSHUFFLE_BLOCK
    for b0 in range(0, nfull, _BATCH_BLOCKS):
        b1 = min(nfull, b0 + _BATCH_BLOCKS)
        blk = part[b0 * BITSHUFFLE_BLOCK:b1 * BITSHUFFLE_BLOCK].reshape(b1 - b0, BITSHUFFLE_BLOCK)
        out[b0 * BITSHUFFLE_BLOCK:b1 * BITSHUFFLE_BLOCK] = _untranspose(blk, s).ravel()
    tail = part[nfull * BITSHUFFLE_BLOCK:]
    if len(tail):
        m = len(tail) // s
        mt = m - m % 8
        at = nfull * BITSHUFFLE_BLOCK
        if mt:
            out[at:at + mt * s] = _untranspose(tail[:mt * s].reshape(1, mt * s), s).ravel()
        out[at + mt * s:] = tail[mt * s:]
    return out


def _untranspose(blocks: np.ndarray, s: int) -> np.ndarray:
    """Blocks of m elements of s bytes, bit-transposed, back to elements.

    For byte j of the elements and the group g of elements 8g..8g+7, the 8 bytes
    rows[j*8+k][g] (k = 0..7) form an 8x8 bit matrix whose transpose is the bytes j
    of those 8 elements: one u64 bit-matrix transpose (bitshuffle's TRANS_BIT_8X8)
    per group, done for all groups at once."""
    nb, nbytes = blocks.shape
    m = nbytes // s
    groups = blocks.reshape(nb, s, 8, m // 8).transpose(0, 1, 3, 2)        # (nb, j, g, k)
    x = np.ascontiguousarray(groups).view("<u8")[..., 0]                     # (nb, j, g): byte k = row k
    t = (x ^ (x >> np.uint64(7))) & np.uint64(0x00AA00AA00AA00AA)
    x = x ^ t ^ (t << np.uint64(7))
    t = (x ^ (x >> np.uint64(14))) & np.uint64(0x0000CCCC0000CCCC)
    x = x ^ t ^ (t << np.uint64(14))
    t = (x ^ (x >> np.uint64(28))) & np.uint64(0x00000000F0F0F0F0)
    x = x ^ t ^ (t << np.uint64(28))
    out = x.view(np.uint8).reshape(nb, s, m // 8, 8)                        # (nb, j, g, i): byte j of element 8g+i
    return out.transpose(0, 2, 3, 1).reshape(nb, m * s)


def reverse_bitshuffle(spec, md, data, stage: Stage):
    """Header as BYTESHUFFLE's; the writer split every incoming part into a multiple of
    8 bytes and a remainder, and stored a part as is unless it is a multiple of 8 and
    of the type size."""
    lens, pos = part_list(md, "BITSHUFFLE")
    check_parts_cover(lens, data, "BITSHUFFLE")
    s = stage.datatype.size
    src = np.frombuffer(data, np.uint8)
    outs = []
    at = 0
    shuffled = 0
    for ln in lens:
        part = src[at:at + ln]
        if ln % s or ln % 8:
            outs.append(part.tobytes())
        else:
            outs.append(bitunshuffle(part, s).tobytes())
            shuffled += 1
        at += ln
    record = {"parts": list(lens[:65]), "type_size": s, "shuffled_parts": shuffled}
    summarise(record, "parts", len(lens))
    return md[pos:], memoryview(b"".join(outs)), record
