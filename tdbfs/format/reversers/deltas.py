"""DOUBLE_DELTA, DELTA and POSITIVE_DELTA (docs/format.md §3.3).

DOUBLE_DELTA and DELTA are compressors (absorbing: every metadata and data part
is coded on its own, behind the shared part-size header of compressors.py).
POSITIVE_DELTA is a pass-through filter with a window header.

All three only ever add, subtract and truncate to the element width, so their
inverses are computed in unsigned integers of that width (numpy wraps silently),
which gives TileDB's result for signed and unsigned types alike.
"""

from __future__ import annotations

import struct

import numpy as np

from ..datatypes import BY_NAME, Datatype
from .common import Stage, StageError, read_u32s
from .compressors import reverse_parts
from .records import SHOW_ALL, summarise

# Element types of DoubleDelta::/Delta::compress (dd_compressor.cc, delta_compressor.cc):
# one byte for INT8/CHAR/UINT8/BOOL/BLOB/GEOM/strings/ANY, the integer itself for
# 16/32/64-bit ints, int64 for every DATETIME/TIME; floats are refused.
_SIGNED = {"INT8": "i1", "CHAR": "i1", "INT16": "<i2", "INT32": "<i4", "INT64": "<i8"}
_UNSIGNED = {"UINT8": "u1", "UINT16": "<u2", "UINT32": "<u4", "UINT64": "<u8"}


def unsigned(size: int) -> np.dtype:
    return np.dtype({1: "u1", 2: "<u2", 4: "<u4", 8: "<u8"}[size])


def type_name(elem: np.dtype) -> str:
    """TileDB's name of the integer type a stage works in: INT8 .. UINT64."""
    return f"{'INT' if elem.kind == 'i' else 'UINT'}{8 * elem.itemsize}"


def codec_element(dt: Datatype) -> np.dtype:
    """The integer type DOUBLE_DELTA and DELTA work in for a stream of type `dt`."""
    if dt.is_float:
        raise StageError(f"{dt.name} data cannot be delta coded (TileDB refuses float types)")
    if dt.name in _SIGNED:
        return np.dtype(_SIGNED[dt.name])
    if dt.name in _UNSIGNED:
        return np.dtype(_UNSIGNED[dt.name])
    if dt.is_datetime:
        return np.dtype("<i8")
    if dt.size == 1 or dt.name in ("BLOB", "BOOL", "GEOM_WKB", "GEOM_WKT") or dt.is_string or dt.name == "ANY":
        # every string type, even UTF-16/32, is coded byte by byte
        return np.dtype("u1")
    raise StageError(f"no delta element type for {dt.name}")


def coded_type(spec, stage: Stage) -> Datatype:
    """The reinterpret type of DELTA/DOUBLE_DELTA when set (not ANY), else the stage's type."""
    name = spec.options.get("reinterpret_type")
    if name is None or name == "ANY":
        return stage.datatype
    dt = BY_NAME.get(name)
    if dt is None:
        raise StageError(f"{spec.name} reinterpret type {name} is not a TileDB datatype")
    return dt


# -- DOUBLE_DELTA -------------------------------------------------------------------

def double_delta_decode(part: memoryview, out_len: int, elem: np.dtype) -> tuple[bytes, dict]:
    """One part: `u8 bitsize, u64 n`, then n raw values when bitsize >= 8*width-1, else
    `v0, v1` and (n-2) x {sign bit, bitsize magnitude bits} packed MSB-first into
    little-endian u64 words (the last word written whole)."""
    w = elem.itemsize
    if len(part) < 9:
        raise StageError(f"DOUBLE_DELTA part of {len(part)} bytes is shorter than its 9-byte header")
    bitsize, n = struct.unpack_from("<BQ", part, 0)
    info = {"bitsize": bitsize, "values": n}
    if n * w != out_len:
        raise StageError(f"DOUBLE_DELTA header says {n} values of {w} bytes, the part header says {out_len} bytes")
    body = part[9:]
    if n == 0:
        return b"", info
    if bitsize >= 8 * w - 1:
        if len(body) < out_len:
            raise StageError(f"DOUBLE_DELTA stores {n} raw values but only {len(body)} bytes follow its header")
        info["raw"] = True
        return bytes(body[:out_len]), info
    heads = min(n, 2)
    if len(body) < heads * w:
        raise StageError(f"DOUBLE_DELTA part ends inside its first values ({len(body)} bytes)")
    u = unsigned(w)
    first = np.frombuffer(body, elem, heads).astype(np.int64).view(np.uint64)
    if n <= 2:
        return first.astype(u).tobytes(), info
    nbits = (n - 2) * (bitsize + 1)
    nwords = -(-nbits // 64)
    stream = body[heads * w:]
    if len(stream) < 8 * nwords:
        raise StageError(f"DOUBLE_DELTA needs {nwords} words of double deltas for {n} values, "
                         f"{len(stream) // 8} follow")
    # Words are little-endian u64 filled from bit 63 down: bit 63 of word 0 is the
    # first bit of the stream. Value i takes bitsize+1 <= 63 bits from bit
    # i*(bitsize+1) on, within two words: shift both into one 64-bit window (the
    # second shift is split in two so that r == 0 shifts by 63+1, giving 0, rather
    # than by 64, which numpy leaves undefined), then split sign and magnitude.
    one = np.uint64(1)
    words = np.zeros(nwords + 1, np.uint64)
    words[:nwords] = np.frombuffer(stream, "<u8", nwords)
    pos = np.arange(n - 2, dtype=np.uint64) * np.uint64(bitsize + 1)
    q, r = (pos >> np.uint64(6)).astype(np.intp), pos & np.uint64(63)  # intp: fast fancy indexing
    window = (words[q] << r) | ((words[q + 1] >> one) >> (np.uint64(63) - r))
    sign = window >> np.uint64(63)
    mag = (window << one) >> np.uint64(64 - bitsize) if bitsize else np.zeros(n - 2, np.uint64)
    dd = (mag ^ (np.uint64(0) - sign)) + sign  # negated (two's complement) where the sign bit is 1
    deltas = (first[1:] - first[:1]) + np.cumsum(dd, dtype=np.uint64)
    values = np.empty(n, np.uint64)
    values[:2] = first
    values[2:] = first[1:] + np.cumsum(deltas, dtype=np.uint64)
    return values.astype(u).tobytes(), info


# -- DELTA ----------------------------------------------------------------------------

def delta_decode(part: memoryview, out_len: int, elem: np.dtype) -> tuple[bytes, dict]:
    """One part: `u64 n, v0, d1 .. d(n-1)` each of the element width; v_i = v_(i-1) + d_i."""
    w = elem.itemsize
    if len(part) < 8:
        raise StageError(f"DELTA part of {len(part)} bytes is shorter than its 8-byte count")
    (n,) = struct.unpack_from("<Q", part, 0)
    info = {"values": n}
    if n * w != out_len:
        raise StageError(f"DELTA header says {n} values of {w} bytes, the part header says {out_len} bytes")
    if len(part) - 8 < out_len:
        raise StageError(f"DELTA part holds {len(part) - 8} bytes of values, {out_len} expected")
    if n == 0:
        return b"", info
    u = unsigned(w)
    d = np.frombuffer(part, u, n, 8)
    info["first_value"] = np.frombuffer(part, elem, 1, 8)[0].item()
    return np.cumsum(d, dtype=u).tobytes(), info


def _reverse_coded(decode_part):
    """DOUBLE_DELTA and DELTA: absorbing filters whose every part is coded in the element type."""
    def reverse(spec, md, data, stage: Stage):
        dt = coded_type(spec, stage)
        elem = codec_element(dt)
        infos: list[dict] = []

        def decode(part, u):
            out, info = decode_part(part, u, elem)
            infos.append(info)
            return out

        md, data, record = reverse_parts(spec, md, data, stage, decode)
        _merge_part_infos(record, infos)
        record["element_type"] = dt.name
        return md, data, record
    return reverse


reverse_double_delta = _reverse_coded(double_delta_decode)
reverse_delta = _reverse_coded(delta_decode)


def _merge_part_infos(record: dict, infos: list[dict]) -> None:
    for part, info in zip(record["parts"], infos):
        part.update(info)
    summarise(record, "parts")


# -- POSITIVE_DELTA ---------------------------------------------------------------

# positive_delta_filter.cc: INT8, UINT8 (BLOB/GEOM/BOOL as uint8) and the 16/32/64-bit
# ints; DATETIME/TIME as int64 only in fragments of format >= 20. Every other type
# (floats, CHAR, strings, ANY) passes through with no header at all.
_PD_TYPES = {"INT8": "i1", "UINT8": "u1", "BLOB": "u1", "GEOM_WKB": "u1", "GEOM_WKT": "u1", "BOOL": "u1",
             "INT16": "<i2", "UINT16": "<u2", "INT32": "<i4", "UINT32": "<u4", "INT64": "<i8", "UINT64": "<u8"}


def windowed_element(table: dict, dt: Datatype, version: int) -> np.dtype | None:
    """The element a windowed filter (POSITIVE_DELTA, BIT_WIDTH_REDUCTION) codes `dt` as, or None
    where it passes the type through; DATETIME/TIME count as int64 only from format 20 on."""
    if dt.name in table:
        return np.dtype(table[dt.name])
    if dt.is_datetime and version >= 20:
        return np.dtype("<i8")
    return None


def positive_delta_element(dt: Datatype, version: int) -> np.dtype | None:
    return windowed_element(_PD_TYPES, dt, version)


def reverse_positive_delta(spec, md, data, stage: Stage):
    """`u32 n_windows, n_windows x {T first_value, u32 window_bytes}`; per window the
    deltas to the previous value (the first is 0): value = first_value + cumsum."""
    elem = positive_delta_element(stage.datatype, stage.ctx.version)
    if elem is None:
        return md, data, {"applied": False,
                          "reason": f"{stage.datatype.name} at format {stage.ctx.version} is not delta coded"}
    w = elem.itemsize
    (nwin,), pos = read_u32s(md, 0, 1, "POSITIVE_DELTA window count")
    rec_dt = np.dtype([("first", elem), ("bytes", "<u4")])
    if nwin * rec_dt.itemsize > len(md) - pos:
        raise StageError(f"POSITIVE_DELTA claims {nwin} windows, more than its {len(md)} metadata bytes hold", 0)
    win = np.frombuffer(md, rec_dt, nwin, pos)
    pos += nwin * rec_dt.itemsize
    nbytes = win["bytes"].astype(np.int64)
    total = int(nbytes.sum())
    if total != len(data):
        raise StageError(f"POSITIVE_DELTA windows cover {total} bytes but the data holds {len(data)}", 0)
    u = unsigned(w)
    src = np.frombuffer(data, np.uint8)
    aligned = nbytes % w == 0
    if aligned.all():
        counts = nbytes // w
        d = src.view(u)
        c = np.cumsum(d, dtype=u)
        ends = np.cumsum(counts)
        before = np.zeros(nwin, u)
        has_prev = (ends - counts) > 0
        before[has_prev] = c[(ends - counts)[has_prev] - 1]
        out = c + np.repeat(win["first"].view(u) - before, counts)
        result = out.tobytes()
    else:
        # A window that is not whole values was stored as is (only at the end of a
        # part that is not whole values): one pass per window.
        pieces = []
        at = 0
        for first, nb, ok in zip(win["first"].view(u), nbytes, aligned):
            chunk = src[at:at + nb]
            if ok:
                pieces.append((first + np.cumsum(chunk.view(u), dtype=u)).astype(u).tobytes())
            else:
                pieces.append(chunk.tobytes())
            at += nb
        result = b"".join(pieces)
    record = {"element_type": type_name(elem), "window_count": nwin,
              "windows": [{"first_value": f.item(), "bytes": int(b)}
                          for f, b in zip(win["first"][:SHOW_ALL + 1], nbytes[:SHOW_ALL + 1])]}
    summarise(record, "windows", nwin)
    return md[pos:], memoryview(result), record
