"""BIT_WIDTH_REDUCTION (docs/format.md §3.3): a pass-through filter with a window header.

Header: `u32 original_length, u32 n_windows`, then per window `T window_min,
u8 bits (8|16|32|64), u32 window_bytes`. A window is stored as is when `bits` is
the full width of T or its length is not whole values; otherwise as values of
`bits/8` bytes (signed if T is signed) to which window_min is added.
"""

from __future__ import annotations

import numpy as np

from ..datatypes import Datatype
from .common import Stage, StageError, read_u32s
from .deltas import type_name, unsigned, windowed_element
from .records import SHOW_ALL, summarise

# bit_width_reduction_filter.cc: only the 16/32/64-bit integers, and DATETIME/TIME as
# int64 in fragments of format >= 20; every other type passes through with no header.
_BWR_TYPES = {"INT16": "<i2", "UINT16": "<u2", "INT32": "<i4", "UINT32": "<u4", "INT64": "<i8", "UINT64": "<u8"}


def bit_width_element(dt: Datatype, version: int) -> np.dtype | None:
    return windowed_element(_BWR_TYPES, dt, version)


def reverse_bit_width(spec, md, data, stage: Stage):
    elem = bit_width_element(stage.datatype, stage.ctx.version)
    if elem is None:
        return md, data, {"applied": False,
                          "reason": f"{stage.datatype.name} at format {stage.ctx.version} is not reduced"}
    w = elem.itemsize
    (orig_len, nwin), pos = read_u32s(md, 0, 2, "BIT_WIDTH_REDUCTION header")
    rec_dt = np.dtype([("min", elem), ("bits", "u1"), ("bytes", "<u4")])
    if nwin * rec_dt.itemsize > len(md) - pos:
        raise StageError(f"BIT_WIDTH_REDUCTION claims {nwin} windows, more than its {len(md)} metadata bytes hold", 0)
    if orig_len > stage.limit:
        raise StageError(f"BIT_WIDTH_REDUCTION claims {orig_len} original bytes, more than the {stage.limit} "
                         "this chunk can hold", 0)
    win = np.frombuffer(md, rec_dt, nwin, pos)
    pos += nwin * rec_dt.itemsize
    nbytes = win["bytes"].astype(np.int64)
    bits = win["bits"].astype(np.int64)
    if int(nbytes.sum()) != orig_len:
        raise StageError(f"BIT_WIDTH_REDUCTION windows cover {int(nbytes.sum())} bytes, its header says {orig_len}", 0)
    raw = (bits >= 8 * w) | (nbytes % w != 0)
    bad = ~raw & ~np.isin(bits, (8, 16, 32))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise StageError(f"BIT_WIDTH_REDUCTION window {i} has bit width {int(bits[i])}, not 8, 16, 32 or 64", 0)
    width = np.where(raw, 0, bits // 8)          # bytes per stored value; 0 = stored as is
    counts = np.where(raw, 0, nbytes // w)       # values per reduced window
    stored = np.where(raw, nbytes, counts * width)
    if int(stored.sum()) != len(data):
        raise StageError(f"BIT_WIDTH_REDUCTION windows take {int(stored.sum())} stored bytes, the data holds {len(data)}", 0)

    src = np.frombuffer(data, np.uint8)
    u = unsigned(w)
    classes = np.unique(width)
    if len(classes) == 1 and classes[0] != 0:
        out = _widen(src, int(classes[0]), elem, u, win["min"], counts).view(np.uint8)
    elif len(classes) == 1:
        out = src
    else:
        # Windows of several widths: label every stored and every output byte with its
        # window's width, then decode each width in one go.
        out = np.empty(orig_len, np.uint8)
        in_label = np.repeat(width, stored)
        out_label = np.repeat(width, nbytes)
        for c in classes:
            c = int(c)
            if c == 0:
                out[out_label == 0] = src[in_label == 0]
            else:
                sel = width == c
                vals = _widen(src[in_label == c], c, elem, u, win["min"][sel], counts[sel])
                out[out_label == c] = vals.view(np.uint8)
    widths, n_of = np.unique(np.where(raw, 8 * w, bits), return_counts=True)
    record = {"element_type": type_name(elem), "original_length": orig_len, "window_count": nwin,
              "windows_by_bits": {int(b): int(k) for b, k in zip(widths, n_of)},
              "windows": [{"min": m.item(), "bits": int(b), "bytes": int(n)}
                          for m, b, n in zip(win["min"][:SHOW_ALL + 1], bits[:SHOW_ALL + 1], nbytes[:SHOW_ALL + 1])]}
    summarise(record, "windows", nwin)
    return md[pos:], memoryview(out.tobytes() if out is not src else bytes(data)), record


def _widen(stored: np.ndarray, width: int, elem: np.dtype, u: np.dtype, mins, counts) -> np.ndarray:
    """Values of `width` bytes (signed like T) widened to T plus their window's minimum, wrapping like C."""
    small = np.dtype(f"{'i' if elem.kind == 'i' else 'u'}{width}").newbyteorder("<")
    vals = stored.view(small).astype(elem).view(u)
    return vals + np.repeat(np.ascontiguousarray(mins).view(u), counts)
